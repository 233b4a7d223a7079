"""Image-quality metrics for one trial: Fréchet distance and the feature extractors it is computed on.

``frechet_distance(features_a, features_b)`` is the contract the train loop relies on. Which feature space
the number lives in is the extractor's ``metric_name``: only ``dinov2`` gives FD-DINO; ``shapes-cnn`` (the
embedded default, trained on the generated set's labels) and ``pixels`` are named as what they are.
"""

from __future__ import annotations

from ._dinov2 import DINOV2_PATH_ENV, Dinov2Extractor
from ._errors import (
    ExtractorUnavailableError,
    FeatureError,
    FrechetNumericalError,
    MetricsError,
    UnknownExtractorError,
)
from ._extractors import FeatureExtractor, PixelExtractor
from ._frechet import (
    FDInfinityResult,
    FeatureStats,
    feature_statistics,
    frechet_distance,
    frechet_distance_from_stats,
    frechet_distance_infinity,
)
from ._label_cnn import (
    CACHE_DIR_ENV,
    LabelCNN,
    ShapesCNNExtractor,
    default_cache_dir,
    label_cnn_cache_key,
    load_or_train_label_cnn,
    train_label_cnn,
)
from ._registry import get_extractor, list_extractors, register_extractor

__all__ = [
    "CACHE_DIR_ENV",
    "DINOV2_PATH_ENV",
    "Dinov2Extractor",
    "ExtractorUnavailableError",
    "FDInfinityResult",
    "FeatureError",
    "FeatureExtractor",
    "FeatureStats",
    "FrechetNumericalError",
    "LabelCNN",
    "MetricsError",
    "PixelExtractor",
    "ShapesCNNExtractor",
    "UnknownExtractorError",
    "default_cache_dir",
    "feature_statistics",
    "frechet_distance",
    "frechet_distance_from_stats",
    "frechet_distance_infinity",
    "get_extractor",
    "label_cnn_cache_key",
    "list_extractors",
    "load_or_train_label_cnn",
    "register_extractor",
    "train_label_cnn",
]
