"""DINOv2 features (the CLS token) from a local weights directory: the only extractor that yields FD-DINO."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..core.trial_settings import DINOV2_PATH_ENV, TrialSettings
from ._errors import ExtractorUnavailableError, FeatureError
from ._extractors import FeatureExtractor, _check_batch_size

__all__ = ["DINOV2_PATH_ENV", "Dinov2Extractor"]


# ImageNet statistics, as DINOv2's own preprocessing (and HF's BitImageProcessor for it) uses.
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)

_HOW_TO_PROVIDE = (
    f"pass get_extractor('dinov2', path=DIR) or set {DINOV2_PATH_ENV}=DIR, where DIR holds a Hugging Face "
    "DINOv2 checkpoint (config.json and model.safetensors), e.g. fetched on a machine with internet by "
    "`huggingface-cli download facebook/dinov2-large --local-dir DIR`. Nothing is downloaded here."
)


class Dinov2Extractor(FeatureExtractor):
    """DINOv2 CLS token after the final layer norm (FD-DINO, as in Stein et al. 2023, dgm-eval).

    Images in [-1, 1] -> [0, 1] -> bicubic resize to ``resolution`` (224, dgm-eval's input size for
    DINOv2 ViT-L/14; the position embeddings are interpolated by the model) -> clamp to [0, 1] (bicubic
    overshoots; a uint8 image pipeline would clip too) -> ImageNet mean/std. No centre crop: generated images
    are square and a crop would cut their content.

    ViT-L/14 costs 1.5-3.4 s per image on a laptop CPU (docs/design.md): use ``device="cuda"`` for real runs.
    """

    name = "dinov2"
    metric_name = "fd_dinov2"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        resolution: int = 224,
        batch_size: int = 32,
        device: str | torch.device = "cpu",
    ) -> None:
        raw = path if path is not None else TrialSettings.from_env().dinov2_path
        if not raw:
            raise ExtractorUnavailableError(f"no DINOv2 weights path given: {_HOW_TO_PROVIDE}")
        weights = Path(raw).expanduser()
        if not (weights / "config.json").is_file():
            raise ExtractorUnavailableError(
                f"DINOv2 weights directory {str(weights)!r} has no config.json: {_HOW_TO_PROVIDE}"
            )
        try:
            from transformers import Dinov2Model
        except ImportError as exc:  # transformers is optional: only this extractor needs it
            raise ExtractorUnavailableError(
                "the 'dinov2' extractor needs Hugging Face transformers: pip install 'transformers>=4.40' "
                "(timm is not an option here: it pulls torchvision, which replaces a CPU torch)"
            ) from exc
        if int(resolution) < 1:
            raise FeatureError(f"resolution must be >= 1, got {resolution}")
        self.path = weights
        self.resolution = int(resolution)
        self.batch_size = _check_batch_size(batch_size)
        self.device = torch.device(device)
        model = Dinov2Model.from_pretrained(str(weights), local_files_only=True)
        self.dim = int(model.config.hidden_size)
        self.model_type = str(getattr(model.config, "model_type", ""))
        module: torch.nn.Module = model  # typed as a plain Module: transformers' wrapped .to() confuses mypy
        self.model = module.to(self.device).eval()
        self._mean = torch.tensor(_IMAGENET_MEAN, device=self.device).view(1, 3, 1, 1)
        self._std = torch.tensor(_IMAGENET_STD, device=self.device).view(1, 3, 1, 1)

    def _features(self, batch: torch.Tensor) -> torch.Tensor:
        x = (batch + 1.0) * 0.5  # [-1, 1] -> [0, 1]
        if x.shape[-2:] != (self.resolution, self.resolution):
            x = F.interpolate(
                x,
                size=(self.resolution, self.resolution),
                mode="bicubic",
                align_corners=False,
                antialias=True,
            ).clamp(0.0, 1.0)
        x = (x - self._mean) / self._std
        # Dinov2Model applies the final layer norm to last_hidden_state; pooler_output is its token 0 (CLS).
        return self.model(pixel_values=x).pooler_output  # (B, hidden_size)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "weights": str(self.path),
            "resolution": self.resolution,
            "model_type": self.model_type,
        }
