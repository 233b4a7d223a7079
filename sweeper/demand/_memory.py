"""What one trial holds in memory, estimated from its spec alone: what `SCALESWEEP_MAX_TRIAL_MEMORY_GB` caps.

`SCALESWEEP_MAX_WORK` counts steps, so a spec of one step at the 15-billion-parameter rung, or at the smallest
rung with 4096-pixel images in batches of 65,536, passed it while no worker could hold it (issue 53, H2). The
estimate is a pure function of the trial's config, in bytes, at fp32 (4 bytes a value: the trainer's dtype):

- parameters: `trials.models.count_parameters` of the rung (built on the meta device, no memory);
- per parameter: the weights, their gradients, the optimizer's state (AdamW's two moments, the most any arm
  keeps: Muon keeps one momentum) and the EMA copy when `eval.ema_decay` is set: 16 or 20 bytes;
- training activations kept for the backward pass: batch x tokens x width x depth x 48 values. Tokens are the
  image's patches, (image_size / patch)^2, plus the caption's `text_max_length`. What autograd keeps a token and
  a block (q, k, v, the attention output, the adaLN modulations and norms, the MLP's 4 x width hidden layer and
  its activation, the residual sums) measured 35 values: a cpu-m trial at batch 128 and 32 px peaked at 2,858 MiB
  of resident memory (docs/load.md); 48 keeps a margin over it. Attention goes through torch's fused kernel,
  which keeps no tokens x tokens matrix;
- sampling at `eval.batch_size` (no gradients: one block's activations at a time, 8 values a token), and the
  evaluation's image sets held whole (generated and its noise, the reference set, the validation set);
- a fixed overhead for the interpreter, torch and the text encoder (`TRAINER_OVERHEAD_BYTES`).

It over-counts on purpose (a refusal at submission is cheap, a worker killed by the kernel's OOM killer mid-sweep
is not); the measured peaks of a tiny trial and of the cpu-m trial above sit under it (docs/load.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ..specs import SweepSpec

__all__ = ["TRAINER_OVERHEAD_BYTES", "TrialMemory", "sweep_memory", "trial_memory", "trial_memory_bytes"]

FLOAT_BYTES = 4  # fp32, the trainer's dtype
# Python, torch's libraries and the frozen MiniLM text encoder (22.7 M parameters) in a trainer before it builds
# the model: 0.5 GiB rounds up what a trainer process holds at start-up on the CPU rungs.
TRAINER_OVERHEAD_BYTES = 512 * 1024**2
TRAIN_VALUES_PER_TOKEN = 48  # per block and width unit: measured 35 (module docstring)
SAMPLE_VALUES_PER_TOKEN = 8  # no gradients: one block's q, k, v, attention and MLP hidden layer at a time


class TrialMemory(NamedTuple):
    """A trial's estimated memory, in bytes, by part (`total` is what the service compares with its limit)."""

    parameters: int  # the parameter count
    state: int  # weights, gradients, optimizer state and EMA
    activations: int  # the training step's, or sampling's when larger
    images: int  # the evaluation's image sets
    total: int


@lru_cache(maxsize=32)
def _parameters(rung: str) -> int:
    from trials.models import build_model, count_parameters

    return count_parameters(build_model(rung, device="meta")).total


def trial_memory(trial: Mapping[str, Any]) -> TrialMemory:
    """The estimate of one trial from a TrialConfig mapping (validated here, as `trial_work` does)."""
    from trials import TrialConfig
    from trials.models import get_rung

    cfg = TrialConfig.model_validate(dict(trial))
    model = get_rung(cfg.rung).config
    params = _parameters(cfg.rung)
    per_param = 4 + 4 + 8 + (4 if cfg.eval.ema_decay is not None else 0)  # weights, grads, AdamW moments, EMA
    state = params * per_param
    side = cfg.data.image_size // cfg.resolved_patch  # the trial may set its own patch
    tokens = side * side + cfg.text_max_length
    train = cfg.batch_size * tokens * model.width * model.depth * TRAIN_VALUES_PER_TOKEN * FLOAT_BYTES
    sample = cfg.eval.batch_size * tokens * model.width * SAMPLE_VALUES_PER_TOKEN * FLOAT_BYTES
    image = model.in_channels * cfg.data.image_size**2 * FLOAT_BYTES
    images = image * (2 * cfg.eval.fd_samples + cfg.eval.reference_samples + cfg.eval.val_samples)
    activations = max(train, sample)
    return TrialMemory(params, state, activations, images, TRAINER_OVERHEAD_BYTES + state + activations + images)


def trial_memory_bytes(trial: Mapping[str, Any]) -> int:
    """`trial_memory(trial).total`: one trial's estimated peak memory in bytes."""
    return trial_memory(trial).total


def sweep_memory(spec: SweepSpec) -> dict[tuple[str | int, ...], TrialMemory]:
    """Each rung's trial of a sweep, by the location of the field that names its rung: `("rung",)` for the
    searched arm, `("baselines", i, "rung")` for a baseline at a rung of its own."""
    seed = spec.seeds[0]
    found: dict[tuple[str | int, ...], TrialMemory] = {
        ("rung",): trial_memory(spec.trial_config({"name": spec.search.arm}, seed))}
    for i, b in enumerate(spec.baselines):
        if b.rung and b.rung != spec.rung:
            found[("baselines", i, "rung")] = trial_memory(spec.trial_config({"name": b.arm}, seed, b.rung))
    return found
