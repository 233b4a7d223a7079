"""Feature extractors looked up by name: a run spec names one, and a team can register its own."""

from __future__ import annotations

from typing import Any

from ..core.registry import Registry
from ._dinov2 import Dinov2Extractor
from ._errors import FeatureError, UnknownExtractorError
from ._extractors import FeatureExtractor, PixelExtractor
from ._label_cnn import ShapesCNNExtractor
from ._scenes_cnn import SCENES_CNN_TRAINING, ScenesCNNExtractor

__all__ = ["get_extractor", "list_extractors", "register_extractor"]



def _label_cnn(cls: type[ShapesCNNExtractor], defaults: dict[str, Any], **kwargs: Any) -> ShapesCNNExtractor:
    """``network=`` wraps a trained LabelCNN; ``images=, labels=, cardinalities=`` (and optionally
    ``training={...}`` over the extractor's defaults, ``cache_dir=``) train one or load it from the cache."""
    if "network" in kwargs:
        return cls(**kwargs)
    missing = {"images", "labels", "cardinalities"} - set(kwargs)
    if missing:
        raise FeatureError(
            f"{cls.name} needs network=<LabelCNN>, or images=, labels= and cardinalities= to train one "
            f"(missing {sorted(missing)})"
        )
    return cls.from_training_data(**{**kwargs, "training": {**defaults, **dict(kwargs.get("training") or {})}})


def _shapes_cnn(**kwargs: Any) -> ShapesCNNExtractor:
    return _label_cnn(ShapesCNNExtractor, {}, **kwargs)


def _scenes_cnn(**kwargs: Any) -> ShapesCNNExtractor:
    return _label_cnn(ScenesCNNExtractor, SCENES_CNN_TRAINING, **kwargs)


EXTRACTORS: Registry[FeatureExtractor] = Registry(
    lambda name, names: UnknownExtractorError(f"unknown feature extractor {name!r}; valid names: {', '.join(names)}"),
    {"dinov2": Dinov2Extractor, "pixels": PixelExtractor, "scenes-cnn": _scenes_cnn, "shapes-cnn": _shapes_cnn},
    guard=lambda message: FeatureError(f"extractor: {message}"),
)
register_extractor = EXTRACTORS.register  # get_extractor(name, **kw) then calls factory(**kw)
list_extractors = EXTRACTORS.names
get_extractor = EXTRACTORS.build  # keyword arguments go to the extractor's constructor
