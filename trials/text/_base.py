"""The text-encoder interface, its errors and its registry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from torch import Tensor

from ..core.errors import InputError
from ..core.registry import Registry

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


ENCODERS: Registry[TextEncoder] = Registry(
    lambda name, names: TextEncoderError(f"unknown text encoder {name!r}; valid encoders: {names}"))
register_text_encoder = ENCODERS.register  # get_text_encoder(name, **kw) then calls factory(**kw)
list_text_encoders = ENCODERS.names
get_text_encoder = ENCODERS.build  # an unknown name raises TextEncoderError listing the valid ones
