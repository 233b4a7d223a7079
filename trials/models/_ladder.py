"""The named size ladder (DiT's `DiT_models`, as rungs), model construction and parameter counting.

Paper rungs: SD3's family, width = 64 * depth, head dim 64, at depth 21 / 30 / 40 / 47 (1.36B / 3.96B /
9.39B / 15.24B parameters here; the paper quotes 1.3B / 4B / 9B / 15B), on 16-channel VAE latents of 128 x 128
(1024 px images) with patch 2, T5-XXL tokens (4096-d) as context and CLIP-L + CLIP-G (768 + 1280 = 2048-d) as
the pooled vector. They are for GPU clusters; here they are built on the meta device to count parameters.

CPU rungs: width = 32 * depth (head dim 32), 16 x 16 RGB pixels with patch 2 (64 image tokens), MiniLM text
(384-d tokens and pooled vector). Depths 2 / 3 / 4 / 5 mirror the paper's 21 / 30 / 40 / 47: parameter ratios
1 : 3.1 : 7.2 : 14.0 against the paper's 1 : 2.9 : 6.9 : 11.2. Integer depths cannot track closer while
staying minutes-on-a-CPU: 4 / 6 / 8 / 9 would give 1 : 3.3 : 7.9 : 11.3, at up to 26M parameters.

    name         width  depth  heads      params   block 2-D share (the Muon group)
    cpu-3xs         32      1      1      61,132   0.369
    cpu-2xs         32      2      1      99,084   0.599
    cpu-xs          64      2      2     324,908   0.731
    cpu-s           96      3      3   1,012,492   0.856
    cpu-m          128      4      4   2,345,068   0.908
    cpu-l          160      5      5   4,543,820   0.935
    paper-1.3b    1344     21     21    1.357e9    0.988
    paper-4b      1920     30     30    3.959e9    0.993
    paper-9b      2560     40     40    9.391e9    0.995
    paper-15b     3008     47     47   15.243e9    0.996

cpu-xs has the lowest block share of the four that mirror the paper: at width 64 the MiniLM input projection and the
conditioning MLPs (all AdamW) are a quarter of the model.

Below them, cpu-3xs and cpu-2xs (head dim 32 as the family; cpu-2xs keeps depth 2 at width 32 with one head) stand
for no paper model; nor does cpu-xs1, cpu-xs's width 64 at depth 1. Muon-group (block 2-D) parameters, the N of a
scaling fit, which do not depend on the image size or patch:

    cpu-3xs 22,528   cpu-2xs 59,392   cpu-xs1 90,112   cpu-xs 237,568   cpu-s 866,304   cpu-m 2,129,920
    cpu-l 4,249,600

The scenes set's headroom ladder is cpu-xs1 .. cpu-l: 5 rungs over 1.67 decades. Width 32 does not learn that
set: cpu-3xs and cpu-2xs stay at a validation loss near 0.45 with FD near 25,000 and no image right (2026-12-07,
Muon, 600 and 770 steps, one seed each; cpu-3xs still 0.42 after 3,000), where cpu-xs reaches 0.028 and FD 358 in
1,090 steps and cpu-xs1 0.038 and FD 625 in 1,000. A likely reason, not tested apart: at 32 x 32 with patch 4 a
token carries 48 pixel values, more than a width-32 model's hidden size. On 16 x 16 with patch 2 (12 values a
token) they train as the rest of the family. Cost of a training step at the scenes set's 32 x 32, patch 4, batch
32, Muon, one thread: cpu-3xs 0.03 s, cpu-xs 0.12 s, cpu-m 0.63 s, cpu-l 1.24 s (2026-12-07, a 2-core AMX-BF16
Xeon, 30-step runs, one each; `benchmarks/headroom.py costs` measures them interleaved).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn

from ._mmdit import MMDiT, MMDiTConfig, ModelError

__all__ = ["RUNGS", "ParameterCount", "Rung", "build_model", "count_parameters", "get_rung", "list_rungs"]


@dataclass(frozen=True)
class Rung:
    """A named model size: its config, and which paper model it stands in for."""

    name: str
    config: MMDiTConfig
    mirrors: str  # the paper model this rung stands in for, e.g. "1.3B"
    note: str = ""


def _family(width_per_depth: int, in_channels: int, image_size: int, context_dim: int, pooled_dim: int,
            data: str) -> Callable[..., Rung]:
    """A rung family: width and heads grow with depth (one head per block), everything else is the family's."""

    def rung(name: str, depth: int, mirrors: str, width: int | None = None, heads: int | None = None) -> Rung:
        config = MMDiTConfig(width=width or width_per_depth * depth, depth=depth, heads=heads or depth, patch=2,
                             in_channels=in_channels, image_size=image_size, context_dim=context_dim,
                             pooled_dim=pooled_dim)
        return Rung(name, config, mirrors, data)

    return rung


# SD3's width = 64 * depth, halved on the CPU rungs so the ladder trains in minutes on a CPU.
_cpu = _family(32, 3, 16, 384, 384, "16x16 RGB, patch 2, MiniLM text (384-d)")
_paper = _family(64, 16, 128, 4096, 2048,
                 "SD3 family: 16-ch 128x128 latents, patch 2, T5-XXL tokens (4096-d), CLIP-L+G pooled (2048-d)")


RUNGS: dict[str, Rung] = {
    rung.name: rung
    for rung in (
        _cpu("cpu-3xs", 1, "none"),
        _cpu("cpu-2xs", 2, "none", width=32, heads=1),
        _cpu("cpu-xs1", 1, "none", width=64, heads=2),
        _cpu("cpu-xs", 2, "1.3B"),
        _cpu("cpu-s", 3, "4B"),
        _cpu("cpu-m", 4, "9B"),
        _cpu("cpu-l", 5, "15B"),
        _paper("paper-1.3b", 21, "1.3B"),
        _paper("paper-4b", 30, "4B"),
        _paper("paper-9b", 40, "9B"),
        _paper("paper-15b", 47, "15B"),
    )
}


def list_rungs(prefix: str = "") -> list[str]:
    """Rung names, smallest first within each family; `prefix="cpu"` or `"paper"` selects one family."""
    return [name for name in RUNGS if name.startswith(prefix)]


def check_rung(name: str) -> str:
    """`name` if it is a rung; else a `ModelError` (a ValueError) listing them, for config validators."""
    if name not in RUNGS:
        raise ModelError(f"unknown rung {name!r}; allowed: {list_rungs()}")
    return name


def get_rung(name: str) -> Rung:
    """The rung called `name`; an unknown name raises `ModelError` listing the valid ones."""
    try:
        return RUNGS[name]
    except KeyError:
        raise ModelError(f"unknown model rung {name!r}; valid rungs: {list(RUNGS)}") from None


def build_model(
    name_or_config: str | MMDiTConfig,
    *,
    device: torch.device | str | None = None,
    **overrides: Any,
) -> MMDiT:
    """An initialised MMDiT from a rung name or a config, with config fields overridden by keyword.

    `device="meta"` builds the model without allocating memory (for counting the paper rungs' parameters).
    """
    config = get_rung(name_or_config).config if isinstance(name_or_config, str) else name_or_config
    if overrides:
        config = MMDiTConfig(**{**config.model_dump(), **overrides})  # validated again, unknown keys rejected
    if device is None:
        return MMDiT(config)
    with torch.device(device):
        return MMDiT(config)


class ParameterCount(NamedTuple):
    """Parameter totals; `block_matrix` is what goes to Muon (2-D weights inside `model.blocks`)."""

    total: int
    block_matrix: int

    @property
    def block_matrix_share(self) -> float:
        return self.block_matrix / self.total if self.total else 0.0


def count_parameters(model: nn.Module, *, trainable_only: bool = True) -> ParameterCount:
    """Total parameters, and those in 2-D weights inside `model.blocks` (the Muon group; no embeddings)."""
    total = block_matrix = 0
    blocks = getattr(model, "blocks", None)
    in_blocks: set[int] = set()
    if isinstance(blocks, nn.Module):
        in_blocks = {
            id(p)
            for module in blocks.modules()
            if not isinstance(module, nn.Embedding)
            for p in module.parameters(recurse=False)
            if p.ndim == 2
        }
    for p in model.parameters():
        if trainable_only and not p.requires_grad:
            continue
        total += p.numel()
        if id(p) in in_blocks:
            block_matrix += p.numel()
    return ParameterCount(total, block_matrix)
