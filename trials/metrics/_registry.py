"""Feature extractors looked up by name: a run spec names one, and a team can register its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._dinov2 import Dinov2Extractor
from ._errors import FeatureError, UnknownExtractorError
from ._extractors import FeatureExtractor, PixelExtractor
from ._label_cnn import ShapesCNNExtractor

__all__ = ["get_extractor", "list_extractors", "register_extractor"]

ExtractorFactory = Callable[..., FeatureExtractor]


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


_REGISTRY: dict[str, ExtractorFactory] = {
    "dinov2": Dinov2Extractor,
    "pixels": PixelExtractor,
    "shapes-cnn": _shapes_cnn,
}


def register_extractor(name: str, factory: ExtractorFactory, *, overwrite: bool = False) -> None:
    """Make ``get_extractor(name, **kw)`` call ``factory(**kw)``."""
    if not name:
        raise FeatureError("extractor name must be a non-empty string")
    if name in _REGISTRY and not overwrite:
        raise FeatureError(f"an extractor named {name!r} is already registered (pass overwrite=True)")
    _REGISTRY[name] = factory


def list_extractors() -> list[str]:
    """Registered extractor names, sorted."""
    return sorted(_REGISTRY)


def get_extractor(name: str, **kwargs: Any) -> FeatureExtractor:
    """Build the extractor registered as ``name``; keyword arguments go to its constructor."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownExtractorError(
            f"unknown feature extractor {name!r}; valid names: {', '.join(list_extractors())}"
        ) from None
    return factory(**kwargs)
