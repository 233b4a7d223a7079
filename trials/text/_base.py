"""The text-encoder interface, its errors and its registry."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from .._errors import InputError

__all__ = [
    "TextEncoder",
    "TextEncoderError",
    "TextEncoderUnavailableError",
    "get_text_encoder",
    "list_text_encoders",
    "register_text_encoder",
]


class TextEncoderError(InputError):  # a ValueError, as before
    """Base error of `trials.text`: an unknown encoder name or a bad argument."""


class TextEncoderUnavailableError(TextEncoderError, ImportError):
    """The encoder's optional dependency is not installed; the message says what to install."""


@runtime_checkable
class TextEncoder(Protocol):
    """Captions -> (context (B, max_length, context_dim), pooled (B, pooled_dim)), float32.

    Padding positions of `context` are zeros, so an all-zeros condition is the natural null condition.
    `trainable` encoders are `nn.Module`s whose parameters belong in the optimizer's AdamW group.
    """

    name: str
    context_dim: int
    pooled_dim: int
    max_length: int
    trainable: bool

    def encode(self, captions: Sequence[str]) -> tuple[Tensor, Tensor]: ...


TextEncoderFactory = Callable[..., TextEncoder]
_REGISTRY: dict[str, TextEncoderFactory] = {}


def register_text_encoder(name: str, factory: TextEncoderFactory) -> None:
    """Make `get_text_encoder(name, **kwargs)` call `factory(**kwargs)`."""
    _REGISTRY[name] = factory


def list_text_encoders() -> list[str]:
    return sorted(_REGISTRY)


def get_text_encoder(name: str, **kwargs: Any) -> TextEncoder:
    """The encoder called `name`; an unknown name raises `TextEncoderError` listing the valid ones."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise TextEncoderError(
            f"unknown text encoder {name!r}; valid encoders: {list_text_encoders()}"
        ) from None
    return factory(**kwargs)
