"""A trial's checkpoint: `checkpoint_dir/last.pt` (the weights, the optimizer state, the random streams and the result
so far, written atomically at each eval step), or on several workers the same through `torch.distributed.checkpoint`
(each rank its shards); restored only by a trial with the same config. The trial and its shard are `trials._run`'s
(`_Trial`, `_Shard`), typed `Any` here so that the two modules do not import each other."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from ._config import TrialConfig, TrialResult
from ._distributed import ShardedCheckpoint, records_blob, records_from_blob
from .core.errors import TrialError

__all__ = ["Checkpoint", "config_fingerprint"]


def config_fingerprint(cfg: TrialConfig) -> str:
    """What a checkpoint must match to be resumed: everything but where it is logged or saved, and how the row-norm
    step is computed (its kernels give the same update up to float rounding)."""
    dumped = cfg.model_dump(exclude={"tracking": True, "checkpoint_dir": True, "threads": True,
                                     "optimizer": {"rownorm_kernel"}})
    for key, default in (("precision", "fp32"), ("workers", 1), ("patch", None)):  # added later: old ones resume
        if dumped[key] == default:
            dumped.pop(key)
    return json.dumps(dumped, sort_keys=True, default=str)


def _save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
        tmp = Path(handle.name)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)  # atomic: a crash mid-save leaves the previous checkpoint intact
    finally:
        tmp.unlink(missing_ok=True)


# What a checkpoint holds of the result: everything measured per step so far (`alignment`: step -> share per name,
# with the scenes-cnn extractor; a checkpoint written before it was kept resumes with none).
_RECORDS = ("fd", "val_loss", "effective_time_s", "fd_infinity", "fd_track", "track_effective_time_s", "alignment")


class Checkpoint:
    """`checkpoint_dir/last.pt`: the weights, optimizer state, random streams and the result so far, written
    atomically at each eval step; restored only by a trial with the same config (nothing to do without a dir).
    A multi-worker trial writes the same through `torch.distributed.checkpoint` instead, each rank its shards
    (`trials._distributed.ShardedCheckpoint`)."""

    def __init__(self, cfg: TrialConfig, shard: Any = None) -> None:
        self.path = Path(cfg.checkpoint_dir) / "last.pt" if cfg.checkpoint_dir else None
        self.fingerprint = config_fingerprint(cfg)
        self.sharded = (ShardedCheckpoint(Path(cfg.checkpoint_dir), shard.rank)
                        if cfg.checkpoint_dir and shard is not None else None)

    def restore(self, trial: Any, result: TrialResult) -> None:
        if self.sharded is not None:
            self._restore_sharded(trial, result)
            return
        if self.path is None or not self.path.is_file():
            return
        saved = torch.load(self.path, map_location=trial.cond.device, weights_only=False)
        if saved["fingerprint"] != self.fingerprint:
            raise TrialError(f"checkpoint {self.path} was written by a different trial config; refusing to resume")
        trial.module.load_state_dict(saved["module"])
        if trial.ema is not None:
            trial.ema.load_state_dict(saved["ema"])
        trial.optimizer.load_state_dict(saved["optimizer"])
        trial.train_gen.set_state(saved["train_gen"])
        trial.noise_gen.set_state(saved["noise_gen"])
        trial.step, trial.effective = saved["step"], saved["effective"]
        for name in _RECORDS:
            getattr(result, name).update(saved["records"].get(name, {}))

    def save(self, trial: Any, result: TrialResult, step: int) -> None:
        if self.sharded is not None:
            self.sharded.save(step, self._sharded_state(trial, result, step))
            return
        if self.path is None:
            return
        _save_checkpoint(self.path, {
            "fingerprint": self.fingerprint,
            "step": step,
            "effective": trial.effective,
            "module": trial.module.state_dict(),
            "ema": trial.ema.state_dict() if trial.ema is not None else None,
            "optimizer": trial.optimizer.state_dict(),
            "train_gen": trial.train_gen.get_state(),
            "noise_gen": trial.noise_gen.get_state(),
            "records": {name: getattr(result, name) for name in _RECORDS},
        })

    def _sharded_state(self, trial: Any, result: TrialResult, step: int) -> dict[str, Any]:
        """What every rank writes: the model and optimizer state as DTensors (torch's `get_state_dict`, which
        first fills an empty optimizer's state with a zero step, so a fresh trial can load in place), the EMA
        shards, and under this rank's own key what differs per rank (its noise stream, the counters, and on
        rank 0 the records)."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        assert trial.shard is not None  # only built for a multi-worker trial
        optimizer = trial.optimizer
        model_state, optim_state = get_state_dict(trial.module, optimizer.optimizers)
        own = {
            "noise_gen": trial.noise_gen.get_state(),
            "meta": json.dumps({
                "fingerprint": self.fingerprint, "step": step, "effective": trial.effective,
                "counters": optimizer.state_dict()["counters"],
            }),
            "records": records_blob({name: getattr(result, name) for name in _RECORDS}),
        }
        return {
            "model": model_state,
            "optim": optim_state,
            "ema": {str(i): t for i, t in enumerate(trial.shard.ema_shards)},
            "train_gen": trial.train_gen.get_state(),
            f"rank{trial.shard.rank}": own,
        }

    def _restore_sharded(self, trial: Any, result: TrialResult) -> None:
        from torch.distributed.checkpoint.state_dict import set_state_dict

        assert self.sharded is not None and trial.shard is not None
        if not self.sharded.available():  # before `_sharded_state`, whose zero step a fresh run must not take
            return
        state = self._sharded_state(trial, result, 0)
        own = state[f"rank{trial.shard.rank}"]
        own["meta"], own["records"] = "", ""
        self.sharded.load(state)
        own = state[f"rank{trial.shard.rank}"]
        meta = json.loads(own["meta"])
        if meta["fingerprint"] != self.fingerprint:
            raise TrialError(f"checkpoint in {self.sharded.root} was written by a different trial config; refusing "
                             "to resume")
        optimizer = trial.optimizer
        set_state_dict(trial.module, optimizer.optimizers, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        counters = meta["counters"]
        optimizer.steps, optimizer.total_step_time_s = int(counters["steps"]), float(counters["total_step_time_s"])
        optimizer.matrix.ns5_calls = int(counters["ns5_calls"])
        optimizer.matrix.rownorm_calls = int(counters["rownorm_calls"])
        trial.train_gen.set_state(state["train_gen"])
        trial.noise_gen.set_state(own["noise_gen"])
        trial.step, trial.effective = int(meta["step"]), float(meta["effective"])
        for name, values in records_from_blob(own["records"]).items():
            getattr(result, name).update(values)
