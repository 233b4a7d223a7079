"""The transfer's timing stage: each arm's cost per training step at each rung, before the transfer's runs start.

Two methods (`TimingSpec.method`):

- `interleaved` (the default): `trials.steptime.interleaved_step_times` per rung, every arm of the rung (the control
  arms included) built side by side in one process at the rung's training shapes, run in short blocks of whole
  refresh periods in turn on the same batches, thread-CPU time by default with wall time beside it. Each round gives
  every arm one cost per step, so round i of two arms is a pair;
- `isolated` (the earlier stage): a short run of the real trial per arm, one after another, wall clock.

On N workers (`execution.workers_per_trial` N > 1, the transfer's or its sweep's) the interleaved method times the
N-rank trial's step on N local gloo ranks, one process and one thread each, with the trial's FSDP2 wrapping and
sharded optimizer (the arms' `ns_placement` included): each round's cost is the slowest rank's, so the ratios
include the communication and the replicated or distributed Newton-Schulz, and the CPU clock is each rank's process
CPU time (gloo's threads do the communication's work). The document records `workers` per rung, and each rung's
digest the worker count, every rank's cost and the bytes per rank per step. The isolated method stays one process.

Either way the stored document holds `seconds_per_step` (rung -> arm -> the median over rounds) and
`seconds_per_step_runs` (rung -> arm -> one cost per round, paired by round) on the clock the ratios use, which is
what the analysis reads (`scaling.median_step_times`, the paired ratios and the time saving are pure and live in
`scaling`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from scaling.rungs import median_step_times

from ..specs import SEARCH_PARAMS, SweepSpec
from ._plan import TransferPlan
from ._sections import TimingSpec
from ._state import now

__all__ = ["measure_interleaved", "measure_step_time_runs", "measure_step_times", "round_log_ratios", "step_timing",
           "timing_lines"]


def _where_timed(workers: Mapping[str, int]) -> str:
    """Where the interleaved timing runs each rung's step (rung -> ranks), for its progress line."""
    ranks = set(workers.values())
    if len(ranks) == 1:
        n = ranks.pop()
        return "in one process per rung" if n == 1 else f"on {n} gloo ranks per rung"
    return ", ".join(f"on {n} gloo ranks at {r}" if n > 1 else f"in one process at {r}" for r, n in workers.items())


def step_timing(timing: TimingSpec, plan: TransferPlan, sweep: SweepSpec, out: IO[str] | None) -> dict[str, Any]:
    """Per-step cost of every arm (the control arms included) at every rung, measured before the transfer's runs
    start (so no other trial of the transfer shares the cores): the systems half of the time saving. `sweep` is the
    typed spec the transfer runs, read here as it is."""
    if timing.steps == 0:
        return {"measured": False, "reason": "timing.steps is 0"}
    if sweep.backend.name != "builtin":
        return {"measured": False, "reason": "the command backend's trainer cannot be timed in isolation here"}
    # a diagnostic costs as Muon does; a fixed arm as periodic at its own K
    timed_controls = {c["arm"] for c in [*(plan.controls or {}).values(), *(plan.get("fixed_arms") or {}).values()]}
    control_rows = [r for r in plan.control_runs if r.arm in timed_controls]
    rows = [(r.rung, r.arm, opt) for r in [*plan.runs, *control_rows]
            for opt in [_row_optimizer(sweep, r.rung, r.arm)] if opt is not None]
    # One thread per timed process, as before the spec was typed (the stored execution section never held a
    # `threads` key, so the timing always ran on one).
    threads = 1
    # each rung's N-rank step, as its runs train: its own workers, else the execution section's
    workers = {r.rung: sweep.workers_at(r.rung) for r in plan.runs}
    if timing.method == "interleaved":
        by_rung: dict[str, dict[str, Mapping[str, Any]]] = {}
        for rung, arm, opt in rows:
            by_rung.setdefault(rung, {})[arm] = opt
        if out is not None:
            print(f"timing {', '.join(next(iter(by_rung.values()), {}))} interleaved {_where_timed(workers)} "
                  f"({timing.rounds} rounds, {timing.clock} clock"
                  + (f", local batch {timing.local_batch}" if timing.local_batch else "") + ")",
                  file=out, flush=True)

        def show(rung: str, digest: dict[str, Any]) -> None:
            if out is not None:
                print("\n".join(timing_lines({"rungs": {rung: digest}})), file=out, flush=True)

        trial = dict(sweep.trial)
        if sweep.execution.gpus_per_trial > 0:
            trial.setdefault("device", "auto")  # as the sweeper runs a trial given a GPU
        doc = measure_interleaved(trial, by_rung, timing, threads=threads, progress=show, workers=workers)
        return {**doc, "measured_at": now()}
    if out is not None:
        rounds = f" in {timing.repeats} rounds" if timing.repeats > 1 else ""
        print(f"timing {timing.steps} steps per arm and rung, one at a time "
              f"({len(rows) * timing.repeats} short runs{rounds})", file=out, flush=True)
    runs = measure_step_time_runs(dict(sweep.trial), rows, timing, threads=threads)
    times = median_step_times(runs)
    if out is not None:
        for rung, per in times.items():
            print(f"  {rung:<10} " + ", ".join(
                f"{a} {1e3 * t:.1f} ms/step" + (f" (median of {len(runs[rung][a])})" if len(runs[rung][a]) > 1 else "")
                for a, t in per.items()), file=out, flush=True)
    return {"measured": True, "method": "isolated", "steps": timing.steps, "warmup": timing.warmup,
            "threads": threads, "repeats": timing.repeats, "seconds_per_step": times,
            "seconds_per_step_runs": runs, "measured_at": now()}


def _row_optimizer(sweep: SweepSpec, rung: str, arm: str) -> dict[str, Any] | None:
    """The optimizer a (rung, arm) of the plan runs with, as its sweep spec holds it (a control arm by its label:
    the negative control's optimizer is Muon's)."""
    for b in sweep.baselines:
        if b.label == f"{arm}.{rung}" or (b.arm == arm and b.label is None and (b.rung or sweep.rung) == rung):
            return {**b.optimizer, "name": b.arm}
    if rung == sweep.rung:
        point = {k: v[0] for k, v in sweep.search.space.items() if isinstance(v, list)}  # a one-value grid
        return {**sweep.search.optimizer, **{SEARCH_PARAMS[k][0]: v for k, v in point.items()}}  # it names its arm
    return None


def measure_interleaved(
    trial: Mapping[str, Any], arms_by_rung: Mapping[str, Mapping[str, Mapping[str, Any]]], timing: TimingSpec, *,
    threads: int = 1, reference: str | None = None, progress: Callable[[str, dict[str, Any]], None] | None = None,
    workers: int | Mapping[str, int] = 1,
) -> dict[str, Any]:
    """Per rung, `arms_by_rung[rung]` (arm label -> optimizer config; two labels may name one optimizer, the
    negative control) timed by `trials.steptime.interleaved_step_times` at `trial`'s shapes (rung, batch, data,
    text encoder) with `timing`'s options, against `reference` (default: muon when timed, else the first arm).
    `threads` is the trials' thread count; the thread clock needs 1 and gets it (the study's setting).

    Returns the stage's document: `seconds_per_step` and `seconds_per_step_runs` on `timing.clock`, the same on wall
    time (`wall_seconds_per_step_runs`), and per rung (`rungs`) the measurement's digest (`StepTimes.summary`: per
    arm and clock the cost per step and per phase, Muon's optimizer share, the ratio to the reference with its
    interval) and, for an arm with redundant work (the positive control), `expected_step_time_ratio`: reference /
    that arm as the redundant work's own clock predicts it, the known answer the analysis checks against.
    `progress(rung, digest)` is called after each rung. `workers` (one count, or rung -> count, 1 where a rung is
    not named) is the ranks each rung's trials run on: above 1 the step timed is the N-rank trial's (the module
    docstring), and the document's `workers` says so per rung."""
    from trials.steptime import StepTimingConfig, interleaved_step_times

    config = StepTimingConfig(local_batch=timing.local_batch, clock=timing.clock, block_steps=timing.block_steps,
                              warmup_rounds=timing.warmup_rounds, rounds=timing.rounds,
                              target_halfwidth=timing.target_halfwidth, max_rounds=timing.max_rounds)
    clock_note = None
    if timing.clock == "thread" and "clock" not in timing.model_fields_set and _on_accelerator(trial):
        # The default clock cannot see an accelerator's work: wall time there, said so (asked for, it is refused).
        config = config.model_copy(update={"clock": "wall"})
        clock_note = "the trials run on an accelerator: wall clock (thread-CPU time does not see its work)"
    threads = 1 if config.clock == "thread" else threads
    base = {k: v for k, v in trial.items() if k not in ("tracking", "checkpoint_dir")}
    runs: dict[str, dict[str, list[float]]] = {}
    wall: dict[str, dict[str, list[float]]] = {}
    rungs: dict[str, Any] = {}
    ranks = {rung: int(workers.get(rung, 1)) if isinstance(workers, Mapping) else int(workers)
             for rung in arms_by_rung}
    for rung, arms in arms_by_rung.items():
        ref = reference if reference in arms else ("muon" if "muon" in arms else next(iter(arms)))
        # On N ranks each rank trains batch / N itself: the one-process stand-in for it (local_batch) does not apply
        rung_config = config.model_copy(update={"local_batch": None}) if ranks[rung] > 1 else config
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            st = interleaved_step_times({**base, "rung": rung, "seed": 0, "threads": threads, "workers": ranks[rung]},
                                        arms, rung_config, reference=ref)
        runs[rung] = {arm: st.step(arm) for arm in st.arms}
        wall[rung] = {arm: st.step(arm, "wall") for arm in st.arms}
        digest = st.summary()
        expected = {arm: 1.0 / e for arm in st.redundant if (e := st.expected_ratio(arm)) is not None}
        if expected:
            digest["expected_step_time_ratio"] = expected
        digest["optimizer_share"] = {arm: st.optimizer_share(arm) for arm in st.arms}
        rungs[rung] = digest
        if progress is not None:
            progress(rung, digest)
    return {"measured": True, "method": "interleaved", "clock": config.clock, "clock_note": clock_note,
            "threads": threads, "workers": ranks,
            "local_batch": timing.local_batch, "seconds_per_step": median_step_times(runs),
            "seconds_per_step_runs": runs, "wall_seconds_per_step_runs": wall, "rungs": rungs}


def _on_accelerator(trial: Mapping[str, Any]) -> bool:
    """Whether the trials' device resolves to an accelerator (`trial.device`: cpu, cuda, or auto: CUDA when
    available)."""
    device = str(trial.get("device", "cpu"))
    if device == "auto":
        import torch

        return bool(torch.cuda.is_available())
    return device != "cpu"


def timing_lines(doc: Mapping[str, Any]) -> list[str]:
    """The interleaved timing per rung as text: each arm's ms per step, Muon's optimizer share (the paper's: 44 %
    at 15B per rank), and each ratio to the reference with its interval and rounds."""
    lines = []
    for rung, d in (doc.get("rungs") or {}).items():
        clock = d["clock"]
        batch = f"local batch {d['local_batch']} of {d['batch_size']}" if d["local_batch"] != d["batch_size"] else (
            f"batch {d['batch_size']}")
        workers = d.get("workers", 1)
        where = (f", {workers} gloo ranks (the slowest rank's step, communication included; CPU clock: each rank's "
                 f"{d.get('cpu_clock', 'thread')} time)") if workers > 1 else ""
        lines.append(f"  {rung:<10} {d['rounds']} rounds of {d['block_steps']}-step blocks, {clock} clock, {batch}"
                     f"{where}")
        for arm, per in d["arms"].items():
            c = per[clock]
            ratio = c.get("ratio")
            text = (f"; / {d['reference']} {ratio['mean']:.3f} [{ratio['lo']:.3f}, {ratio['hi']:.3f}]"
                    if ratio else "")
            sent = (d.get("comm_bytes_per_step") or {}).get(arm)
            comm = f", {sent / 1e6:.2f} MB sent per rank per step" if sent is not None else ""
            lines.append(f"    {arm:<14} {1e3 * c['step_s']:.2f} ms/step, optimizer {100 * c['optimizer_share']:.0f} "
                         f"% of the step{comm}{text}")
        for arm, e in (d.get("expected_step_time_ratio") or {}).items():
            lines.append(f"    expected {d['reference']} / {arm} from its redundant work's own clock: {e:.3f}")
    return lines


def measure_step_times(
    trial: Mapping[str, Any], rows: Sequence[tuple[str, str, Mapping[str, Any]]], timing: TimingSpec, threads: int = 1
) -> dict[str, dict[str, float]]:
    """Rung -> arm -> seconds per training step: the median of `measure_step_time_runs`."""
    return median_step_times(measure_step_time_runs(trial, rows, timing, threads=threads))


def measure_step_time_runs(
    trial: Mapping[str, Any], rows: Sequence[tuple[str, str, Mapping[str, Any]]], timing: TimingSpec, threads: int = 1
) -> dict[str, dict[str, list[float]]]:
    """The isolated method: rung -> arm -> seconds per training step of each timing round, each from a short run of
    its own, one after another: `timing.repeats` rounds over every (rung, arm), the order within a rung rotated by
    one arm each round so no arm is always first (a drifting machine then moves every arm alike, and round i of two
    arms is a pair).

    Each is the built-in trial (`trial` as the transfer's runs get it) for `warmup + steps` steps; its effective
    time between the two tiny evaluations at `warmup` and `warmup + steps` divided by `steps`. Evaluation is
    shrunk to nothing (pooled pixels, 16 images, one sampler step): it is outside the timed window anyway.
    """
    from trials import run_trial

    out: dict[str, dict[str, list[float]]] = {}
    by_rung: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for rung, arm, optimizer in rows:
        by_rung.setdefault(rung, []).append((arm, optimizer))
    for round_ in range(timing.repeats):
        for rung, arms in by_rung.items():
            shift = round_ % len(arms)
            for arm, optimizer in arms[shift:] + arms[:shift]:
                cfg = {k: v for k, v in trial.items() if k not in ("tracking", "checkpoint_dir")}
                cfg.update(rung=rung, optimizer=dict(optimizer), seed=0, steps=timing.warmup + timing.steps,
                           eval_steps=[timing.warmup, timing.warmup + timing.steps], threads=threads)
                cfg["eval"] = {"extractor": "pixels", "extractor_options": {"size": 4}, "fd_samples": 16,
                               "reference_samples": 16, "sample_steps": 1, "val_samples": 1, "track_points": 0}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # 16 samples give a singular covariance: that FD is never read
                    result = run_trial(cfg)
                clock = result.effective_time_s
                if timing.warmup in clock and timing.warmup + timing.steps in clock:
                    per_step = (clock[timing.warmup + timing.steps] - clock[timing.warmup]) / timing.steps
                    out.setdefault(rung, {}).setdefault(arm, []).append(per_step)
    return out


def round_log_ratios(runs: Mapping[str, Sequence[float]], ours: str, base: str) -> list[float] | None:
    """log(ours / base) per timing round, paired by round; None when either arm has no timing or the rounds do not
    pair up."""
    a, b = runs.get(ours) or [], runs.get(base) or []
    if not a or len(a) != len(b) or min(*a, *b) <= 0:
        return None
    return [math.log(x / y) for x, y in zip(a, b, strict=True)]
