"""Feature extractors looked up by name: a run spec names one, and a team can register its own."""

from __future__ import annotations

from typing import Any

from ..core.registry import Registry
from ._dinov2 import Dinov2Extractor
from ._errors import FeatureError, UnknownExtractorError
from ._extractors import FeatureExtractor, PixelExtractor
from ._label_cnn import ShapesCNNExtractor

__all__ = ["get_extractor", "list_extractors", "register_extractor"]



def _shapes_cnn(**kwargs: Any) -> ShapesCNNExtractor:
    """``network=`` wraps a trained LabelCNN; ``images=, labels=, cardinalities=`` (and optionally
    ``training={...}``, ``cache_dir=``) train one or load it from the cache."""
    if "network" in kwargs:
        return ShapesCNNExtractor(**kwargs)
    missing = {"images", "labels", "cardinalities"} - set(kwargs)
    if missing:
        raise FeatureError(
            "shapes-cnn needs network=<LabelCNN>, or images=, labels= and cardinalities= to train one "
            f"(missing {sorted(missing)})"
        )
    return ShapesCNNExtractor.from_training_data(**kwargs)


EXTRACTORS: Registry[FeatureExtractor] = Registry(
    lambda name, names: UnknownExtractorError(f"unknown feature extractor {name!r}; valid names: {', '.join(names)}"),
    {"dinov2": Dinov2Extractor, "pixels": PixelExtractor, "shapes-cnn": _shapes_cnn},
    guard=lambda message: FeatureError(f"extractor: {message}"),
)
register_extractor = EXTRACTORS.register  # get_extractor(name, **kw) then calls factory(**kw)
list_extractors = EXTRACTORS.names
get_extractor = EXTRACTORS.build  # keyword arguments go to the extractor's constructor
