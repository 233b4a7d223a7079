"""Image-quality metrics for one trial: Fréchet distance and the feature extractors it is computed on.

``frechet_distance(features_a, features_b)`` is the contract the train loop relies on. Which feature space
the number lives in is the extractor's ``metric_name``: only ``dinov2`` gives FD-DINO; ``shapes-cnn`` (the
embedded default, trained on the generated set's labels) and ``pixels`` are named as what they are.

The face below is what the train loop and the docs use: the distance, the extractors' registry and base class, the
errors. The extractors themselves and the label CNN's cache (``ShapesCNNExtractor``, ``Dinov2Extractor``,
``PixelExtractor``, ``train_label_cnn``, ...) are reached by name through the registry (``get_extractor``), not from
this face; every name loads its module (torch) on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core import lazy_face

if TYPE_CHECKING:
    from ._errors import (
        ExtractorUnavailableError,
        FeatureError,
        FrechetNumericalError,
        MetricsError,
        UnknownExtractorError,
    )
    from ._extractors import FeatureExtractor
    from ._frechet import (
        FDInfinityResult,
        FeatureStats,
        feature_statistics,
        frechet_distance,
        frechet_distance_from_stats,
        frechet_distance_infinity,
    )
    from ._registry import get_extractor, list_extractors, register_extractor
    from ._scenes_cnn import ALIGNMENT_ATTRIBUTES, ScenesCNNExtractor, scene_alignment

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
