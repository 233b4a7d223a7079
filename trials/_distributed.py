"""One trial on N ranks: FSDP2 sharding of the MMDiT, the sharded EMA, the evaluation copy rank 0 scores, the
communication meter, and checkpoints through `torch.distributed.checkpoint`.

`run_trial` uses these when `TrialConfig.workers` > 1, inside a process group its caller started (the sweeper starts
one process per rank in a Ray placement group; `torchrun` works too: `examples/torchrun_trial.py`). Per rank:

- the model is built from the seed on every rank (the same initial weights), then each MMDiT block is
  `fully_shard`ed and the whole denoiser last, a learned text encoder as a unit of its own (`shard_model`):
  parameters become `Shard(0)` DTensors, all-gathered for forward and backward and reduce-scattered (averaged)
  after backward;
- block matrices take `ShardedPeriodicRowMuon` (`trials.optim.build_optimizer` picks it for DTensors; K = 1 is the
  sharded Muon baseline), everything else AdamW on its shards;
- the global batch (`batch_size`) is drawn whole on every rank from the trial's one data stream and each rank trains
  on its contiguous slice (so the data are those of the one-process trial); the flow-matching noise is per rank;
- the EMA is kept shard by shard (no communication per step); at an evaluation every rank all-gathers it and rank 0
  loads it into an unsharded copy of the model and evaluates FD and the validation loss alone (the evaluation is not
  sharded: at the CPU ladder's sizes it is a few percent of a trial), then tells the others whether it diverged;
- rank 0 alone logs the one MLflow run and calls `progress`; every rank writes its shards of a checkpoint.

Communication is metered per rank (`CommMeter`): every collective this process issues through `torch.distributed`
(FSDP2's all-gathers and reduce-scatters, the optimizer's, the loss all-reduce) adds its logical bytes (nccl-tests'
convention, `trials.optim.logical_bytes_sent`) and the wall time the rank spent in it (the call, and the wait on an
asynchronous one): the exposed communication time, not overlapped compute.

Every rank also keeps a beacon (`BEACON`: its training step, the collective it is in and since when) that a
heartbeat thread publishes in the trial's TCP store every second (`start_heartbeat`); the trial's stall watchdog
(`sweeper.search._workers`) reads them, so a rank that stops, or a group stuck in a collective, is named and ended
within `execution.stall_timeout_s` instead of waiting out the process group's timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .core.errors import TrialError
from .optim import logical_bytes_sent

__all__ = [
    "BEACON",
    "COMM_METRICS",
    "JOINED_KEY",
    "Beacon",
    "CommMeter",
    "ShardedCheckpoint",
    "current_ranks",
    "read_beat",
    "shard_model",
    "start_heartbeat",
    "trial_store",
    "watch_evaluations",
]

# What a distributed trial logs at each eval step (rank 0's run), per rank per training step, averaged over the
# steps trained so far: `*_rank{r}` for every rank, the plain name for rank 0.
COMM_METRICS = ("comm_bytes_per_step", "comm_time_s_per_step", "step_time_s", "optimizer_step_time_s")


def current_ranks(workers: int) -> tuple[int, int] | None:
    """(rank, world) of the process group a `workers`-rank trial runs in; None for a one-worker trial."""
    if workers == 1:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        raise TrialError(f"workers={workers}: a multi-worker trial runs inside a process group of {workers} ranks "
                         "(torch.distributed.init_process_group under torchrun, or the sweeper's workers_per_trial); "
                         "none is initialised in this process")
    if dist.get_world_size() != workers:
        raise TrialError(f"workers={workers} but the process group has {dist.get_world_size()} ranks")
    return dist.get_rank(), dist.get_world_size()


# --- the beacon a stall watchdog reads ---------------------------------------------------------------------------

# Keys in the trial's TCP store (beside torch's own, which sit under their group's prefix).
JOINED_KEY = "scalesweep/joined/{rank}"  # set by a rank once it reached the store: it joined the rendezvous
BEAT_KEY = "scalesweep/beat/{rank}"  # the rank's beacon, rewritten every HEARTBEAT_S
EVALUATED_KEY = "scalesweep/evaluated/{n}"  # set by rank 0 when its n-th evaluation is done
HEARTBEAT_S = 1.0  # a second between beats: a stall timeout is minutes, and a beat is one small store write


@dataclass
class Beacon:
    """What this rank is doing: training steps done in this attempt, and the collective it waits in (None while it
    computes). A heartbeat thread publishes it; a stopped process stops beating, a stuck one keeps `op` set."""

    step: int = 0
    op: str | None = None
    op_since: float = 0.0
    first_step_at: float = 0.0
    last_step_at: float = 0.0
    beats: int = 0

    def enter(self, op: str) -> None:
        self.op, self.op_since = op, time.monotonic()

    def leave(self) -> None:
        self.op = None

    def stepped(self) -> None:
        now = time.monotonic()
        if not self.step:
            self.first_step_at = now
        self.step, self.last_step_at = self.step + 1, now

    @contextlib.contextmanager
    def waiting(self, op: str) -> Iterator[None]:
        self.enter(op)
        try:
            yield
        finally:
            self.leave()

    def state(self, rank: int) -> dict[str, Any]:
        """The beat a watchdog reads: counters and durations only (no clock is compared across nodes)."""
        now = time.monotonic()
        step_s = ((self.last_step_at - self.first_step_at) / (self.step - 1)) if self.step > 1 else None
        return {"rank": rank, "beats": self.beats, "step": self.step, "op": self.op,
                "op_for_s": round(now - self.op_since, 3) if self.op else 0.0, "step_s": step_s,
                "pid": os.getpid(), "host": socket.gethostname()}


BEACON = Beacon()  # this process's rank (one rank per process)


def trial_store(addr: str, port: int, timeout_s: float, *, master: bool = False) -> Any:
    """A connection to the trial's TCP store at rank 0 (`master`: the store itself, waiting for nobody: the caller
    waits for the ranks' JOINED_KEY with its own checks)."""
    import datetime

    return dist.TCPStore(addr, port, is_master=master, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=timeout_s))


def start_heartbeat(addr: str, port: int, rank: int, timeout_s: float) -> threading.Event:
    """Publish this rank's beacon every HEARTBEAT_S in the trial's store, on a connection of its own (the main
    thread may be blocked in a collective meanwhile); set the returned event to stop."""
    stop = threading.Event()
    BEACON.beats = 0
    store = trial_store(addr, port, timeout_s)

    def beat() -> None:
        while not stop.is_set():
            BEACON.beats += 1
            with contextlib.suppress(Exception):  # the store goes with rank 0: the trial is ending anyway
                store.set(BEAT_KEY.format(rank=rank), json.dumps(BEACON.state(rank)))
            stop.wait(HEARTBEAT_S)

    threading.Thread(target=beat, name=f"scalesweep-heartbeat-{rank}", daemon=True).start()
    return stop


def read_beat(store: Any, rank: int) -> dict[str, Any] | None:
    """A rank's latest beat in the trial's store; None before its first."""
    key = BEAT_KEY.format(rank=rank)
    if not store.check([key]):
        return None
    return dict(json.loads(store.get(key)))


class _Watch:
    """The store and stall window the ranks above 0 wait on rank 0's evaluation with (set by `watch_evaluations`)."""

    store: Any = None
    stall_s: float = 0.0
    evaluations: int = 0


def watch_evaluations(store: Any, stall_s: float) -> None:
    """Before the all-gather that follows rank 0's lone evaluation, ranks above 0 wait for it on the store while
    rank 0 beats (`_wait_for_rank0`), not in a collective bounded by the process group's timeout: an evaluation
    may take longer than a rendezvous timeout, and a rank 0 that stops beating ends the wait within `stall_s`."""
    _Watch.store, _Watch.stall_s, _Watch.evaluations = store, stall_s, 0


def _wait_for_rank0() -> None:
    store, n = _Watch.store, _Watch.evaluations
    _Watch.evaluations += 1
    if store is None:
        return
    key = EVALUATED_KEY.format(n=n)
    if dist.get_rank() == 0:
        store.set(key, "1")
        return
    with BEACON.waiting("rank 0's evaluation"):
        seen, seen_at = None, time.monotonic()
        while not store.check([key]):
            beat = read_beat(store, 0)
            beats = beat["beats"] if beat else None
            if beats != seen:
                seen, seen_at = beats, time.monotonic()
            elif time.monotonic() - seen_at > _Watch.stall_s:
                raise TrialError(f"rank 0 sent no heartbeat for {_Watch.stall_s:g} s during its evaluation "
                                 "(execution.stall_timeout_s)")
            time.sleep(0.2)


def shard_model(denoiser: nn.Module, text: nn.Module | None) -> None:
    """FSDP2: each MMDiT block its own unit (all-gathered in turn), then the rest of the denoiser, and a learned
    text encoder as one unit whose `encode` (not `forward`) is what the trial calls."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    for block in denoiser.blocks:  # type: ignore[union-attr]  # the MMDiT's ModuleList
        fully_shard(block)
    fully_shard(denoiser)
    if text is not None:
        fully_shard(text)
        register_fsdp_forward_method(text, "encode")


# --- communication meter ----------------------------------------------------------------------------------------

# torch.distributed entry points that FSDP2 and the sharded optimizer call (looked up on the module at call time,
# so wrapping them here sees every call), and how each one's buffer is measured: (kind, argument index of the
# buffer whose size `logical_bytes_sent` takes).
_COLLECTIVES: dict[str, tuple[str, int]] = {
    "all_gather_single": ("all_gather", 0),  # output: the gathered buffer
    "all_gather_into_tensor": ("all_gather", 0),
    "reduce_scatter_single": ("all_gather", 1),  # input: the full buffer; a reduce-scatter sends as an all-gather
    "reduce_scatter_tensor": ("all_gather", 1),
    "all_reduce": ("all_reduce", 0),
    "all_to_all_single": ("all_to_all", 1),  # input: what this rank sends (its own part counted: an upper bound)
}


@dataclass
class CommMeter:
    """Logical bytes sent and wall time spent in collectives by this rank, since `start` (cumulative)."""

    world: int
    bytes_sent: float = 0.0
    time_s: float = 0.0
    calls: int = 0
    steps: int = 0  # training steps counted
    step_time_s: float = 0.0  # their wall time (the trial adds it)
    active: bool = False
    _saved: dict[str, Callable[..., Any]] = field(default_factory=dict)

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        """Count the collectives of one training step (evaluation gathers and checkpoint I/O are left out)."""
        self.active = True
        try:
            yield
        finally:
            self.active = False
            self.steps += 1
            BEACON.stepped()

    @contextlib.contextmanager
    def installed(self) -> Iterator[CommMeter]:
        """Count every collective issued while the context is open."""
        for name, (kind, index) in _COLLECTIVES.items():
            original = getattr(dist, name, None)
            if original is not None and name not in self._saved:
                self._saved[name] = original
                setattr(dist, name, self._wrap(original, kind, index))
        try:
            yield self
        finally:
            for name, original in self._saved.items():
                setattr(dist, name, original)
            self._saved.clear()

    def _wrap(self, fn: Callable[..., Any], kind: str, index: int) -> Callable[..., Any]:
        meter, name = self, getattr(fn, "__name__", kind)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if not meter.active:
                with BEACON.waiting(name):
                    return fn(*args, **kwargs)
            buffer = args[index] if len(args) > index else next(iter(kwargs.values()))
            start = time.perf_counter()
            with BEACON.waiting(name):
                work = fn(*args, **kwargs)
            meter.time_s += time.perf_counter() - start
            meter.calls += 1
            if isinstance(buffer, Tensor):
                meter.bytes_sent += logical_bytes_sent(kind, buffer.numel() * buffer.element_size(), meter.world)
            if work is not None and hasattr(work, "wait"):
                wait = work.wait

                def timed_wait(*a: Any, **k: Any) -> Any:  # the wait may come after the step: counted then too
                    t0 = time.perf_counter()
                    try:
                        with BEACON.waiting(f"{name} (wait)"):
                            return wait(*a, **k)
                    finally:
                        meter.time_s += time.perf_counter() - t0

                with contextlib.suppress(AttributeError, TypeError):  # a C++ Work may refuse attributes
                    work.wait = timed_wait
            return work

        return timed


def gather_rank_metrics(values: dict[str, float]) -> list[dict[str, float]]:
    """Every rank's `values`, on every rank (an all-gather of small objects, outside the meter's count)."""
    _wait_for_rank0()  # called right after rank 0's lone evaluation: the others wait for it on the store
    out: list[Any] = [None] * dist.get_world_size()
    with BEACON.waiting("all_gather_object (rank metrics)"):
        dist.all_gather_object(out, values)
    return out


def broadcast_flag(flag: bool) -> bool:
    """Rank 0's `flag`, on every rank."""
    box = [flag]
    with BEACON.waiting("broadcast_object_list (rank 0's flag)"):
        dist.broadcast_object_list(box, src=0)
    return bool(box[0])


# --- the sharded EMA and the evaluation copy -------------------------------------------------------------------


def full_weights(tensors: list[Tensor]) -> list[Tensor]:
    """The whole tensors of DTensor shards (an all-gather on every rank; plain tensors pass through)."""
    from torch.distributed.tensor import DTensor

    return [t.full_tensor() if isinstance(t, DTensor) else t for t in tensors]


def load_weights(target: nn.Module, weights: list[Tensor]) -> None:
    """Copy whole weights into the unsharded evaluation copy (same parameter order as the trained model)."""
    with torch.no_grad():
        for p, w in zip(target.parameters(), weights, strict=True):
            p.copy_(w.to(p.device))


def local_tensors(tensors: Sequence[Tensor]) -> list[Tensor]:
    """Each DTensor's local shard (the same storage: updating it updates the DTensor)."""
    from torch.distributed.tensor import DTensor

    return [t.to_local() if isinstance(t, DTensor) else t for t in tensors]


# --- checkpoints through torch.distributed.checkpoint -----------------------------------------------------------


@dataclass
class ShardedCheckpoint:
    """`checkpoint_dir/dcp-<step>/`: every rank writes its shards of the model, the EMA and the optimizer state
    (`torch.distributed.checkpoint`: one file per rank and a metadata file written last, so a folder without
    `.metadata` is an interrupted save and is ignored), rank 0 the records; `latest` names the newest complete one.
    A resumed trial must have as many workers (the fingerprint includes them)."""

    root: Path
    rank: int

    def latest(self) -> Path | None:
        pointer = self.root / "latest"
        if not pointer.is_file():
            return None
        path = self.root / pointer.read_text().strip()
        return path if (path / ".metadata").is_file() else None

    def save(self, step: int, state: dict[str, Any]) -> None:
        import torch.distributed.checkpoint as dcp

        path = self.root / f"dcp-{step:09d}"
        dcp.save(state, checkpoint_id=str(path))
        dist.barrier()
        if self.rank == 0:
            previous = self.latest()
            tmp = self.root / "latest.tmp"
            tmp.write_text(path.name)
            os.replace(tmp, self.root / "latest")
            if previous is not None and previous != path:
                import shutil

                shutil.rmtree(previous, ignore_errors=True)

    def available(self) -> bool:
        """Whether a complete checkpoint exists, as rank 0 sees it (every rank takes part)."""
        return broadcast_flag(self.latest() is not None)

    def load(self, state: dict[str, Any]) -> None:
        """Load the newest complete checkpoint into `state` in place (`available` said there is one)."""
        import torch.distributed.checkpoint as dcp

        dcp.load(state, checkpoint_id=str(self.root / (self.root / "latest").read_text().strip()))


def records_blob(records: dict[str, Any]) -> str:
    """The result's per-step records as one string (a leaf `torch.distributed.checkpoint` stores as bytes)."""
    return json.dumps({k: {str(s): v for s, v in d.items()} for k, d in records.items()})


def records_from_blob(blob: str) -> dict[str, dict[int, Any]]:
    """`records_blob` read back: step -> a number, or step -> name -> a number (the alignment shares)."""
    def value(v: Any) -> Any:
        return {name: float(x) for name, x in v.items()} if isinstance(v, dict) else float(v)

    return {k: {int(s): value(v) for s, v in d.items()} for k, d in json.loads(blob).items()} if blob else {}
