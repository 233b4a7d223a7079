"""A learned caption encoder: word embeddings plus positions, trained with the model (no download needed).

Words are lower-cased runs of letters and digits. With `captions` given (e.g. `dataset.captions()`), each word
of those captions gets its own embedding row and any other word maps to a shared unknown row; without them,
words are hashed (CRC-32, stable across processes) into `num_buckets` rows, where distinct words can collide.

It is trainable, so it is an `nn.Module`: put its parameters in the optimizer's AdamW group (embedding tables
are never Muon matrices).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ._base import TextEncoderError

__all__ = ["LearnedTextEncoder", "caption_words"]

_PAD, _UNKNOWN = 0, 1
_WORD = re.compile(r"[a-z0-9]+")


def caption_words(caption: str) -> list[str]:
    """The word tokens of a caption: lower-cased runs of letters and digits."""
    return _WORD.findall(caption.lower())


class LearnedTextEncoder(nn.Module):
    """Captions -> (context: word + position embeddings (B, max_length, dim), pooled: mean word embedding)."""

    name = "learned"
    trainable = True

    def __init__(
        self,
        dim: int = 64,
        max_length: int = 16,
        *,
        captions: Sequence[str] | None = None,
        num_buckets: int = 4096,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if dim < 1 or max_length < 1 or num_buckets < 1:
            raise TextEncoderError(
                f"dim, max_length and num_buckets must be >= 1, got {dim}, {max_length}, {num_buckets}"
            )
        self.context_dim = self.pooled_dim = dim
        self.max_length = max_length
        self.num_buckets = num_buckets
        self.vocabulary: dict[str, int] | None = None
        if captions is not None:
            words = sorted({w for c in captions for w in caption_words(c)})
            self.vocabulary = {w: i + 2 for i, w in enumerate(words)}  # 0: padding, 1: unknown word
        rows = 2 + (len(self.vocabulary) if self.vocabulary is not None else num_buckets)
        self.token_embedding = nn.Embedding(rows, dim, padding_idx=_PAD)
        self.position_embedding = nn.Parameter(torch.empty(max_length, dim))
        generator = torch.Generator().manual_seed(seed)  # the encoder's init is a function of its seed alone
        with torch.no_grad():
            self.token_embedding.weight.normal_(
                0.0, 1.0, generator=generator
            )  # unit scale, like nn.Embedding
            self.token_embedding.weight[_PAD].zero_()
            self.position_embedding.normal_(0.0, 0.02, generator=generator)  # small: word identity dominates

    def token_ids(self, captions: Sequence[str]) -> Tensor:
        """(B, max_length) word ids, 0 at padding; words past max_length are dropped."""
        ids = torch.zeros(len(captions), self.max_length, dtype=torch.long)
        for row, caption in enumerate(captions):
            words = caption_words(caption)[: self.max_length]
            if self.vocabulary is not None:
                values = [self.vocabulary.get(w, _UNKNOWN) for w in words]
            else:
                values = [2 + zlib.crc32(w.encode()) % self.num_buckets for w in words]
            ids[row, : len(values)] = torch.tensor(values, dtype=torch.long)
        return ids

    def encode(self, captions: Sequence[str]) -> tuple[Tensor, Tensor]:
        """(context (B, max_length, dim), pooled (B, dim)) on the module's device, with grad."""
        if isinstance(captions, str):
            raise TextEncoderError("encode takes a sequence of captions, not one string")
        device = self.token_embedding.weight.device
        ids = self.token_ids(captions).to(device)  # (B, L)
        mask = (ids != _PAD).unsqueeze(-1).to(self.token_embedding.weight.dtype)  # (B, L, 1)
        words = self.token_embedding(ids)  # (B, L, dim); zeros at padding
        context = (words + self.position_embedding) * mask  # (B, L, dim); zeros at padding
        pooled = words.sum(1) / mask.sum(1).clamp(min=1)  # (B, dim)
        return context, pooled

    def forward(self, captions: Sequence[str]) -> tuple[Tensor, Tensor]:
        return self.encode(captions)
