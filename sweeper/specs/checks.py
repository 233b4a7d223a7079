"""The checks every job spec shares (a sweep's, its confirmation's, a transfer's): the caps on what a spec may ask
for, the shape and numbers of free-form data, seeds, and the `trial` section, each refusal naming the field.

Generic JSON-shape checks (`check_shape`, `check_numbers`) walk plain data of the caller's choosing before anything
serialises it; the field types (`Seeds`, `TrialSection`) carry the rules on the field, so a spec states them once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError

__all__ = [
    "MAX_HORIZON",
    "MAX_SEEDS",
    "MIN_CROSSING_POINTS",
    "Rung",
    "Seeds",
    "Step",
    "TrialSection",
    "Workers",
    "check_batch_split",
    "check_capacity",
    "check_numbers",
    "check_seeds",
    "check_shape",
    "check_trial_section",
]

# Upper bounds on what a spec may ask for. Each sits far above any real study (the paper: 60k steps, 3 seeds,
# 12 grid points) and far below what would tie up a cluster for years or overflow a counter: a typo or a
# hostile value is refused with the field's name instead of being queued.
MAX_HORIZON = 10_000_000
MAX_SEED = 2**31 - 1
MAX_SEEDS = 100
MAX_POINTS = 10_000
MAX_BASELINES = 64
# Ranks one trial may take (the execution section's, or a rung's own count in a transfer).
MAX_WORKERS = 1024
# Checkpoints a curve needs before a crossing of a quality target is worth locating (`selection.objective:
# steps_to_target`): 6 spaced over the tracked span put neighbours at most 2/15 of the horizon apart at the default
# track_from of 1/3; the three default deciding checkpoints are 1/6 apart, and a crossing before the first of them
# (at 2/3) is only an upper bound.
MIN_CROSSING_POINTS = 6


def _known_rung(name: str) -> str:
    from trials.models import check_rung  # torch-free, but the models package loads only when a spec names a rung

    return check_rung(name)


# A model rung's name, checked against the ladder (`trials.models.list_rungs()`): the one rung check every spec uses.
Rung = Annotated[str, AfterValidator(_known_rung)]

# TrialConfig fields the sweep sets itself; a `trial` section may not override them.
_OWNED_TRIAL_FIELDS = {
    "rung": "rung",
    "steps": "horizon",
    "eval_steps": "eval_steps",
    "optimizer": "search.optimizer / baselines",
    "seed": "seeds",
    "tracking": "tracking",
    "checkpoint_dir": "backend.checkpoints",
    "threads": "execution.cpus_per_trial",
    "workers": "execution.workers_per_trial",
}

# `trial` section values (dotted TrialConfig paths): sample counts beyond a million cost days of evaluation.
_TRIAL_MAX: dict[str, float] = {
    "batch_size": 65_536, "warmup_steps": MAX_HORIZON, "log_every": MAX_HORIZON, "data.image_size": 4096,
    "text_max_length": 4096, "eval.fd_samples": 1_000_000, "eval.reference_samples": 1_000_000,
    "eval.val_samples": 1_000_000, "eval.sample_steps": 10_000, "eval.batch_size": 65_536,
    "eval.track_samples": 1_000_000, "eval.track_sample_steps": 10_000,
}
# Counts are integers only (strict): `true` or "2" is refused naming the field, never read as 1 or 2 (issue 64, N7).
Seed = Annotated[int, Field(ge=0, le=MAX_SEED, strict=True)]
Step = Annotated[int, Field(ge=1, le=MAX_HORIZON, strict=True)]
Workers = Annotated[int, Field(ge=1, le=MAX_WORKERS, strict=True)]
_ANY_NUMBER_MAX = 2**53  # beyond this JSON numbers lose integer precision; nothing in a trial config needs more


# Free-form sections (`trial`, optimizer overrides, dataset and extractor options) are plain data of the caller's
# choosing: their shape is bounded before anything walks or serialises them (Python's JSON and pydantic give up
# near 255 levels, as a 500). A real trial section is 3 levels deep with a few dozen keys.
MAX_DEPTH = 16
MAX_KEYS = 256  # per mapping (and items per list)
MAX_NODES = 10_000  # values in one section, all levels together
MAX_TEXT = 65_536  # characters of keys and strings in one section


def check_shape(value: Any, where: str) -> None:
    """Refuse free-form data nested deeper than MAX_DEPTH, with a mapping or list over MAX_KEYS entries, over
    MAX_NODES values or MAX_TEXT characters in all, naming the path (iterative: any depth is safe to check)."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    nodes = text = 0
    while stack:
        v, path, depth = stack.pop()
        nodes += 1
        if isinstance(v, str):
            text += len(v)
        if nodes > MAX_NODES or text > MAX_TEXT:
            raise ValueError(f"{where}: more than {MAX_NODES:,} values or {MAX_TEXT:,} characters of text; a "
                             "spec section is small plain data")
        if isinstance(v, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                raise ValueError(f"{path}: nested more than {MAX_DEPTH} levels deep")
            if len(v) > MAX_KEYS:
                raise ValueError(f"{path}: {len(v):,} entries; at most {MAX_KEYS} in one mapping or list")
            if isinstance(v, Mapping):
                text += sum(len(str(k)) for k in v)
                stack.extend((item, f"{path}.{k}", depth + 1) for k, item in v.items())
            else:
                stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(v))


def check_numbers(value: Any, where: str, limits: Mapping[str, float] | None = None) -> None:
    """Refuse non-finite numbers anywhere in free-form spec data (JSON's Infinity and NaN parse in Python), and
    numbers above `limits` (dotted path below `where` -> largest allowed value), naming the path; first its shape
    (`check_shape`)."""
    check_shape(value, where)

    def walk(v: Any, path: str) -> None:
        if isinstance(v, bool):
            return
        if isinstance(v, int | float):
            label = f"{where}.{path}" if path else where
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{label}: {v} is not a finite number")
            cap = (limits or {}).get(path)
            if cap is not None and v > cap:
                raise ValueError(f"{label}: {v:g} is above the largest allowed value {cap:g}")
            if abs(v) > _ANY_NUMBER_MAX:
                raise ValueError(f"{label}: {v:g} is out of range (|value| <= 2**53)")
        elif isinstance(v, Mapping):
            for k, item in v.items():
                walk(item, f"{path}.{k}" if path else str(k))
        elif isinstance(v, list | tuple):
            for i, item in enumerate(v):
                walk(item, f"{path}[{i}]")

    walk(value, "")


def check_trial_section(trial: Mapping[str, Any], where: str = "trial") -> None:
    """The rules every `trial` section follows (a sweep's, a transfer's): no field the sweep sets itself, finite
    numbers within the caps, and only TrialConfig's own fields with valid values (a probe trial on the default
    rung), each refusal naming the field."""
    owned = {k: v for k, v in _OWNED_TRIAL_FIELDS.items() if k in trial}
    if owned:
        raise ValueError("; ".join(f"{where}.{k} is set by the sweep ({v})" for k, v in owned.items()))
    check_numbers(dict(trial), where, _TRIAL_MAX)
    from trials import TrialConfig

    try:
        TrialConfig.model_validate(json.loads(json.dumps(dict(trial))))
    except ValidationError as exc:
        raise ValueError(_nested_errors(exc, where)) from None


def check_batch_split(workers: int, trial: Mapping[str, Any], field: str = "execution.workers_per_trial") -> None:
    """Refuse a worker count (set by `field`) that does not divide the trial section's global batch (TrialConfig's
    default when it sets none): every rank trains on batch_size / workers samples."""
    from trials import TrialConfig

    batch = trial.get("batch_size", TrialConfig.model_fields["batch_size"].default)
    if isinstance(batch, int) and not isinstance(batch, bool) and batch % workers:
        raise ValueError(f"{field} {workers} does not divide the global batch (trial.batch_size {batch}): each rank "
                         f"trains on batch_size / workers_per_trial samples; use a worker count that divides {batch}")


def check_capacity(spec: Any, cluster_cpus: float, cluster_gpus: float = 0.0, local_ray: bool = False) -> None:
    """Refuse a spec (a sweep's or a transfer's: anything with an `execution` section) whose one trial needs more
    than the cluster has: `workers_per_trial` x `cpus_per_trial` CPUs (and GPUs), reserved together as one
    placement group, would never be scheduled and the job would wait forever. Where rungs run on their own worker
    counts the widest trial is checked (the spec's `widest_trial`: the field that sets it and its count). Raises
    ValueError naming the field and what the cluster has; the service answers it with a 422.

    With `local_ray` (the job starts a Ray of its own, sized by `execution.num_cpus` when set) the cluster is that
    instance: a spec asking 2 workers of 1 CPU on `num_cpus: 1` would wait forever (issue 64, N3)."""
    execution = getattr(spec, "execution", None)
    if execution is None:  # a transfer without its own execution section runs with its sweep's (checked there)
        return
    field, workers = getattr(spec, "widest_trial", None) or ("execution.workers_per_trial",
                                                             execution.workers_per_trial)
    cpus, gpus = execution.cpus_per_trial, execution.gpus_per_trial
    sized = ""
    if local_ray and execution.num_cpus is not None and execution.num_cpus < cluster_cpus:
        cluster_cpus, sized = float(execution.num_cpus), " (execution.num_cpus: the Ray this job starts)"
    if workers * cpus > cluster_cpus or workers * gpus > cluster_gpus:
        fit = int(min(cluster_cpus // cpus, cluster_gpus // gpus if gpus else math.inf))
        raise ValueError(
            f"{field} {workers} needs {workers * cpus:g} CPUs"
            + (f" and {workers * gpus:g} GPUs" if gpus else "")
            + f" ({cpus:g} CPUs" + (f", {gpus:g} GPUs" if gpus else "") + " per worker); the cluster has "
            + f"{cluster_cpus:g} CPUs{sized}" + (f" and {cluster_gpus:g} GPUs" if gpus else "")
            + f": at most {fit} workers per trial at these resources"
        )


def check_seeds(seeds: list[int]) -> list[int]:
    """The one rule every list of seeds follows (a sweep's, its confirmation's, a transfer's)."""
    if len(set(seeds)) != len(seeds) or any(not 0 <= s <= MAX_SEED for s in seeds):
        raise ValueError(f"seeds must be distinct non-negative integers (at most {MAX_SEED}), got {seeds}")
    return seeds


def _checked_trial(trial: dict[str, Any]) -> dict[str, Any]:
    check_trial_section(trial)
    return trial


# The field types that carry those rules, so that each spec states them once, on the field, and a refusal names
# the field (`seeds`, `trial`) rather than the whole spec.
Seeds = Annotated[list[Seed], AfterValidator(check_seeds)]
TrialSection = Annotated[dict[str, Any], AfterValidator(_checked_trial)]


def _nested_errors(exc: ValidationError, prefix: str, *, with_field: bool = True) -> str:
    """A nested model's errors as 'prefix.field: message' (pydantic's own prefix 'Value error, ' dropped)."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (prefix, *(err["loc"] if with_field else ())) if p != "")
        parts.append(f"{loc}: {str(err['msg']).removeprefix('Value error, ')}")
    return "; ".join(parts)
