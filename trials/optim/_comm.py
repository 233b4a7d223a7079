"""Communication accounting for the sharded optimizers, and the few `torch.distributed` touch points they share.

"Logical bytes" follow the convention of nccl-tests' bus bandwidth: the bytes one rank must send under a
bandwidth-optimal (ring) algorithm, whatever algorithm the backend really runs. For a collective over W ranks on a
buffer of S bytes (the gathered output for an all-gather, the reduced buffer for an all-reduce):

    all_gather   (W - 1) / W * S        each rank sends its shard to the W - 1 others
    all_reduce   2 (W - 1) / W * S      a reduce-scatter then an all-gather of the result
    all_to_all   S                      S is what this rank sends to the other ranks (its own part stays local)

Padding added to even out uneven shards is sent, so it counts. At W = 2 the first two equal the size of the rank's
own input buffer (its shard for an all-gather, the whole buffer for an all-reduce). An all-to-all has no ring
factor: each rank sends each other rank its part directly, and the parts differ between ranks, so S is counted per
rank from its own send sizes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from torch import Tensor

if TYPE_CHECKING:
    from torch.distributed.tensor import DTensor

__all__ = ["COLLECTIVES", "CommStats", "is_dtensor", "local_tensor", "logical_bytes_sent"]

# The collective kinds the sharded optimizer issues, in the order they are reported.
COLLECTIVES: tuple[str, ...] = ("all_gather", "all_to_all", "all_reduce")


def logical_bytes_sent(kind: str, buffer_bytes: int, world_size: int) -> float:
    """Bytes one rank sends for one collective of `kind` on a buffer of `buffer_bytes` (see the module docstring).

    `buffer_bytes` is the gathered output of an all-gather (all ranks' shards, padding included), the reduced
    buffer of an all-reduce, or the bytes this rank sends to other ranks in an all-to-all. A single rank sends
    nothing.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if buffer_bytes < 0:
        raise ValueError(f"buffer_bytes must be >= 0, got {buffer_bytes}")
    share = (world_size - 1) / world_size * buffer_bytes
    if kind == "all_gather":
        return share
    if kind == "all_reduce":
        return 2.0 * share
    if kind == "all_to_all":
        return float(buffer_bytes) if world_size > 1 else 0.0
    raise ValueError(f"unknown collective {kind!r}; allowed: {list(COLLECTIVES)}")


def _zeros() -> dict[str, float]:
    return dict.fromkeys(COLLECTIVES, 0.0)


def _zero_calls() -> dict[str, int]:
    return dict.fromkeys(COLLECTIVES, 0)


@dataclass
class CommStats:
    """Logical bytes sent and collectives issued by one rank's optimizer, for the last step and cumulatively.

    Bytes are logical bytes sent (module docstring: nccl-tests' bus convention, padding included), keyed by
    collective kind (`COLLECTIVES`). `step_*` hold the last `step()` call; `total_*` everything since construction
    or `reset()`. The counters live in the process, not in the optimizer's state dict: a resumed run starts them
    at zero (and `torch.distributed.checkpoint`'s loader runs one zero-lr step on a fresh optimizer, which counts;
    call `reset()` after loading for clean counters).
    """

    world_size: int = 1
    steps: int = 0
    step_bytes: dict[str, float] = field(default_factory=_zeros)
    step_calls: dict[str, int] = field(default_factory=_zero_calls)
    total_bytes: dict[str, float] = field(default_factory=_zeros)
    total_calls: dict[str, int] = field(default_factory=_zero_calls)

    @property
    def step_bytes_sent(self) -> float:
        """Logical bytes sent in the last step, all collectives together."""
        return sum(self.step_bytes.values())

    @property
    def total_bytes_sent(self) -> float:
        return sum(self.total_bytes.values())

    def begin_step(self) -> None:
        """Start a new step: the per-step counters go back to zero."""
        self.steps += 1
        self.step_bytes = _zeros()
        self.step_calls = _zero_calls()

    def record(self, kind: str, buffer_bytes: int) -> None:
        """Account one collective of `kind` on a buffer of `buffer_bytes` (module docstring)."""
        sent = logical_bytes_sent(kind, buffer_bytes, self.world_size)
        self.step_bytes[kind] += sent
        self.total_bytes[kind] += sent
        self.step_calls[kind] += 1
        self.total_calls[kind] += 1

    def reset(self) -> None:
        """Zero every counter (the world size stays)."""
        self.steps = 0
        self.step_bytes, self.step_calls = _zeros(), _zero_calls()
        self.total_bytes, self.total_calls = _zeros(), _zero_calls()

    def as_metrics(self, prefix: str = "comm/") -> dict[str, float]:
        """Flat metrics for a tracker (e.g. `mlflow.log_metrics(opt.comm_stats.as_metrics(), step=step)`)."""
        out: dict[str, float] = {}
        for kind in COLLECTIVES:
            out[f"{prefix}{kind}_bytes_per_step"] = self.step_bytes[kind]
            out[f"{prefix}{kind}_calls_per_step"] = float(self.step_calls[kind])
        out[f"{prefix}bytes_per_step"] = self.step_bytes_sent
        out[f"{prefix}bytes_total"] = self.total_bytes_sent
        out[f"{prefix}mean_bytes_per_step"] = self.total_bytes_sent / self.steps if self.steps else 0.0
        return out


def is_dtensor(t: Any) -> bool:
    """Whether `t` is a DTensor, without importing `torch.distributed.tensor` (about 0.6 s) when nothing has:
    no DTensor can exist before that module is imported."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(t, module.DTensor)


def local_tensor(t: Tensor) -> Tensor:
    """This rank's part of `t`: the DTensor's local shard (an alias, so in-place updates land in it), else `t`."""
    return cast("DTensor", t).to_local() if is_dtensor(t) else t
