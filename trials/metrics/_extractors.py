"""Feature extractors for FD: the common base class and the pixel baseline."""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._errors import FeatureError

__all__ = ["FeatureExtractor", "PixelExtractor", "as_image_batch"]


def as_image_batch(images: Any) -> torch.Tensor:
    """(N, 3, H, W) float images in [-1, 1] (numpy or torch) -> float32 CPU tensor, clamped to [-1, 1].

    Clamped rather than rejected: samples from an undertrained diffusion model overshoot [-1, 1], and every
    image pipeline clips them before display or quantisation anyway.
    """
    tensor = images if isinstance(images, torch.Tensor) else torch.as_tensor(np.asarray(images))
    if tensor.ndim != 4 or tensor.shape[1] != 3:
        raise FeatureError(f"images must be (N, 3, H, W), got shape {tuple(tensor.shape)}")
    if not tensor.is_floating_point():
        raise FeatureError(f"images must be floating point in [-1, 1], got dtype {tensor.dtype}")
    if tensor.shape[0] == 0:
        raise FeatureError("images is empty (N = 0)")
    if not torch.isfinite(tensor).all():
        raise FeatureError("images contain NaN or infinite values (diverged model?)")
    return tensor.detach().to(device="cpu", dtype=torch.float32).clamp(-1.0, 1.0)


class FeatureExtractor(abc.ABC):
    """Maps (N, 3, H, W) images in [-1, 1], any resolution, to (N, dim) float64 features.

    ``name`` is the registry name; ``metric_name`` is what the FD computed on these features should be
    logged as, so that FD on a stand-in network is never reported as FD-DINO.
    """

    name: str
    metric_name: str
    dim: int
    batch_size: int
    device: torch.device

    @abc.abstractmethod
    def _features(self, batch: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) float32 in [-1, 1] on ``self.device`` -> (B, dim)."""

    def extract(self, images: Any) -> np.ndarray:
        """Features of ``images``, computed in batches of ``batch_size`` under ``torch.no_grad()``."""
        tensor = as_image_batch(images)
        chunks = []
        with torch.no_grad():
            for start in range(0, tensor.shape[0], self.batch_size):
                batch = tensor[start : start + self.batch_size].to(self.device)
                chunks.append(self._features(batch).to(device="cpu", dtype=torch.float64))
        features = torch.cat(chunks).numpy()
        if features.shape[1] != self.dim:  # a programming error in a subclass, reported as such
            raise FeatureError(f"{self.name} returned {features.shape[1]} features, declared dim={self.dim}")
        return features

    def describe(self) -> dict[str, Any]:
        """Provenance to record with a run: enough to tell which feature space an FD number lives in."""
        return {"extractor": self.name, "metric_name": self.metric_name, "dim": self.dim}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim}, metric_name={self.metric_name!r})"


def _check_batch_size(batch_size: int) -> int:
    if int(batch_size) < 1:
        raise FeatureError(f"batch_size must be >= 1, got {batch_size}")
    return int(batch_size)


class PixelExtractor(FeatureExtractor):
    """Raw pixels, average-pooled to ``size`` x ``size`` and flattened: a weak baseline, needs nothing.

    Default size 8 (192 features): FD's covariance needs N >> d, and at the usual 1024 samples a
    16x16x3 = 768-d covariance is barely full rank. docs/design.md: pixel FD ranked runs like the CNN
    features but with a much weaker spread.
    """

    name = "pixels"
    metric_name = "fd_pixels"

    def __init__(self, size: int = 8, *, batch_size: int = 1024, device: str | torch.device = "cpu") -> None:
        if int(size) < 1:
            raise FeatureError(f"size must be >= 1, got {size}")
        self.size = int(size)
        self.dim = 3 * self.size * self.size
        self.batch_size = _check_batch_size(batch_size)
        self.device = torch.device(device)

    def _features(self, batch: torch.Tensor) -> torch.Tensor:
        # (B, 3, size, size): the exact area mean when H is a multiple of size
        pooled = F.adaptive_avg_pool2d(batch, self.size)
        return pooled.flatten(1)  # (B, 3 * size * size)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "size": self.size}
