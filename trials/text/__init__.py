"""Text encoders for captions, behind a registry.

from trials.text import get_text_encoder
encoder = get_text_encoder("minilm")                    # frozen all-MiniLM-L6-v2, offline, cached
encoder = get_text_encoder("learned", captions=data.captions())  # trainable fallback, no download
context, pooled = encoder.encode(batch.captions)        # (B, L, context_dim), (B, pooled_dim)
"""

from __future__ import annotations

from ._base import (
    TextEncoder,
    TextEncoderError,
    TextEncoderUnavailableError,
    get_text_encoder,
    list_text_encoders,
    register_text_encoder,
)
from ._learned import LearnedTextEncoder, caption_words
from ._minilm import CacheInfo, MiniLMEncoder

register_text_encoder("minilm", MiniLMEncoder)
register_text_encoder("learned", LearnedTextEncoder)

__all__ = [
    "CacheInfo",
    "LearnedTextEncoder",
    "MiniLMEncoder",
    "TextEncoder",
    "TextEncoderError",
    "TextEncoderUnavailableError",
    "caption_words",
    "get_text_encoder",
    "list_text_encoders",
    "register_text_encoder",
]
