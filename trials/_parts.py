"""What a trial is built from, shared with the step timing (`trials._steptime`): its dataset, the feature extractor
and its reference statistics (cached per process: Ray reuses actors), the text conditioning and the trained modules."""

from __future__ import annotations

import json
from typing import Any

import torch
from torch import Tensor, nn

from ._config import TrialConfig
from .core.errors import TrialError
from .data import ImageTextDataset, get_dataset, stream_generator
from .metrics import FeatureExtractor, FeatureStats, feature_statistics, get_extractor
from .text import LearnedTextEncoder, get_text_encoder

__all__ = ["Conditioner", "TextToImage", "dataset_of", "encode", "extractor_of", "reference_stats"]

# Images the label CNN behind the "shapes-cnn" (default) and "scenes-cnn" extractors is trained on (once, then cached
# by content hash).
_FEATURE_NET_IMAGES = {"shapes-cnn": 8192, "scenes-cnn": 8192}

class TextToImage(nn.Module):
    """The trained modules: the denoiser and, with the learned fallback, its text encoder (trained with it)."""

    def __init__(self, denoiser: nn.Module, text: LearnedTextEncoder | None) -> None:
        super().__init__()
        self.denoiser = denoiser
        self.text = text


def dataset_of(cfg: TrialConfig) -> ImageTextDataset:
    return get_dataset(cfg.data.name, image_size=cfg.data.image_size, seed=cfg.data.seed, **cfg.data.options)


# Extractors and reference statistics are reused across trials of one process (Ray reuses actors): both depend only
# on the dataset and the extractor settings, never on the trial.
_EXTRACTORS: dict[str, FeatureExtractor] = {}
_REFERENCE: dict[str, FeatureStats] = {}
_FROZEN_ENCODERS: dict[tuple[int, str], Any] = {}


def _extractor_key(cfg: TrialConfig) -> str:
    return json.dumps(
        {"data": cfg.data.model_dump(), "name": cfg.eval.extractor, "options": cfg.eval.extractor_options},
        sort_keys=True,
        default=str,
    )


def extractor_of(cfg: TrialConfig, dataset: ImageTextDataset) -> FeatureExtractor:
    key = _extractor_key(cfg)
    if key in _EXTRACTORS:
        return _EXTRACTORS[key]
    options = dict(cfg.eval.extractor_options)
    if cfg.eval.extractor in _FEATURE_NET_IMAGES and "network" not in options:
        cards = dataset.label_cardinalities()
        if not cards:
            raise TrialError(
                f"extractor {cfg.eval.extractor!r} trains on dataset labels, and dataset {cfg.data.name!r} has none; "
                "use eval.extractor 'dinov2' (with a local weights path) or 'pixels'"
            )
        count = int(options.pop("training_images", _FEATURE_NET_IMAGES[cfg.eval.extractor]))  # fewer: smoke runs
        train = dataset.sample(count, stream_generator(cfg.data.seed, "feature-net"))
        options = {
            "images": train.images,
            "labels": train.labels,
            "cardinalities": cards,
            "training": {"seed": cfg.data.seed, **options.pop("training", {})},
            **options,
        }
    extractor = get_extractor(cfg.eval.extractor, **options)
    _EXTRACTORS[key] = extractor
    return extractor


def reference_stats(cfg: TrialConfig, dataset: ImageTextDataset, extractor: FeatureExtractor) -> FeatureStats:
    key = _extractor_key(cfg) + f"|{cfg.eval.reference_samples}"
    if key not in _REFERENCE:
        reference = dataset.reference_set(cfg.eval.reference_samples)
        _REFERENCE[key] = feature_statistics(extractor.extract(reference.images), extractor=extractor.name)
    return _REFERENCE[key]


class Conditioner:
    """Captions -> (context, pooled): the frozen encoder's cache, or the learned encoder with grad."""

    def __init__(self, cfg: TrialConfig, dataset: ImageTextDataset, device: torch.device) -> None:
        self.device = device
        self.frozen: Any = None
        self.learned: LearnedTextEncoder | None = None
        if cfg.text_encoder == "minilm":
            key = (cfg.text_max_length, str(device))
            if key not in _FROZEN_ENCODERS:  # loading MiniLM takes seconds; its caption cache is worth keeping
                _FROZEN_ENCODERS[key] = get_text_encoder("minilm", max_length=cfg.text_max_length, device=device)
            self.frozen = _FROZEN_ENCODERS[key]
            self.context_dim, self.pooled_dim = int(self.frozen.context_dim), int(self.frozen.pooled_dim)
        else:
            self.learned = LearnedTextEncoder(
                max_length=cfg.text_max_length, captions=dataset.captions(), seed=cfg.seed
            ).to(device)
            self.context_dim, self.pooled_dim = self.learned.context_dim, self.learned.pooled_dim

    def frozen_embeddings(self, captions: list[str]) -> tuple[Tensor, Tensor] | None:
        if self.frozen is None:
            return None
        with torch.no_grad():
            context, pooled = self.frozen.encode(captions)
        return context.to(self.device), pooled.to(self.device)


def encode(module: TextToImage, cond: Conditioner, captions: list[str], cached: tuple[Tensor, Tensor] | None):
    if cached is not None:
        return cached
    if module.text is None:
        raise TrialError("no text embeddings: neither a frozen encoder nor a learned one is configured")
    return module.text.encode(captions)
