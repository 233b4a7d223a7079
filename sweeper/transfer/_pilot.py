"""The transfer's pilot (target rule `pilot`): the reference arm trained longer than the transfer at one rung, on
seeds of its own, before any judged run; from its curves one target for every rung (`scaling.pilot_target`).

How it runs. The pilot is a sweep of its own in the transfer's folder (`pilot/`): the reference arm's carried
optimizer at the pilot rung as its one search point, `horizon_factor` x the rung's horizon, the pilot's seeds, the
transfer's trial section with `points` tracking evaluations from 0.1 of the horizon (the plateau must be visible),
through the sweeper's driver like every other run of the transfer (Ray Tune, retries, resume, MLflow). Its runs
carry the transfer's lineage tags except `scalesweep.transfer_id`, and `scalesweep.transfer.pilot_of` = the
transfer's id instead: the readers of a transfer's runs (its analysis, its run list) never see them as an arm.

Per rung (`target.per_rung`). The reference arm runs a pilot at every rung of the transfer, each at
`horizon_factor` x that rung's judged horizon (the transfer's `horizon` section: fixed, or `per_param`, growing
with size), all in the one pilot sweep (the first rung as its search point, the others as baselines at their own
rung and horizon), and each rung's target is (1 + slack) x its own plateau quality. The horizon rule is checked on
the pilot's own curves: at each rung `horizon_check` records the step where each pilot seed first reached the
rung's target and whether every seed did so within the judged horizon; a rung where one did not is flagged
("HORIZON SHORT"): its judged runs would be censored for want of steps, not for want of quality.

What is recorded, before the judged runs start. The plan's `pilot` section (`transfer.json`) gets `result`: the
pilot's run ids, its curves, each seed's plateau quality and plateau drop, the target and the plateau verdict
(`plateaued`); the transfer's sweep spec gets the tag `scalesweep.transfer.pilot` (the same, without the curves), so
the transfer's parent run carries it from its creation and every judged run too. A resumed transfer reads `result`
back and never derives the target again; a pilot that stopped before it finished resumes as a sweep does.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from scaling import ScalingInputError, TransferRun
from scaling.targets import pilot_target
from trials.record import LINEAGE

from ..specs import SweepSpec
from ._errors import TransferError
from ._plan import TransferPlan
from ._sections import PlateauSpec, TargetSpec

__all__ = ["PILOT_FOLDER", "PILOT_OF_TAG", "PILOT_TAG", "pilot_seeds", "plan_pilot", "run_pilot"]

PILOT_FOLDER = "pilot"  # the pilot sweep's work folder inside the transfer's
PILOT_OF_TAG = LINEAGE.PILOT_OF  # on each pilot run: the transfer's id
PILOT_TAG = LINEAGE.PILOT  # on the transfer's parent run and judged runs: the pilot's target (JSON)
# The pilot's first tracking point, as a fraction of its horizon: early enough that the curve shows the fall and
# the flattening, not only the last stretch the judged runs' tracking (from 1/3) covers.
PILOT_TRACK_FROM = 0.1


class _State(Protocol):
    """What the pilot reads and writes of a transfer's stored state (`_state.TransferState`)."""

    transfer_id: str
    plan: TransferPlan
    sweep_spec: SweepSpec
    pilot_sweep_spec: SweepSpec | None

    def write(self, path: Path) -> None: ...


def pilot_seeds(plan: TransferPlan) -> list[int]:
    """The pilot's seeds (none without a pilot): the seeds a round must not add."""
    return [int(s) for s in (plan.pilot or {}).get("seeds") or []]


def plan_pilot(target: TargetSpec, *, rungs: Sequence[str], seeds: Sequence[int], horizons: Mapping[str, int],
               rows: Sequence[Mapping[str, Any]], study_trial: Mapping[str, Any],
               scaled_eval_steps: Callable[[int], list[int]]) -> dict[str, Any]:
    """The plan's `pilot` section (where, how long, on which seeds, with which optimizer), checked against the
    transfer as planned: the rung among its rungs, the seeds apart from its judged ones, runs that track."""
    from trials import TrialConfig

    spec = target.pilot
    if spec is None:
        raise TransferError("target.rule 'pilot' needs target.pilot")
    rung = spec.rung or rungs[0]
    if rung not in rungs:
        raise TransferError(f"target.pilot.rung must be one of the transfer's rungs {list(rungs)}, got {rung!r}")
    shared = sorted(set(spec.seeds) & set(seeds))
    if shared:
        raise TransferError(f"target.pilot.seeds must be disjoint from the transfer's judged seeds {sorted(seeds)}; "
                            f"{shared} are among them")
    if not TrialConfig.model_validate({**study_trial, "rung": rung}).eval.track_points:
        # The pilot's line is drawn on tracking FD; runs judged on full FD would read it on another scale.
        raise TransferError("target.rule 'pilot' needs runs that track (trial.eval.track_points >= 1, allowed 1 to "
                            "64): its target is read on the tracking FD curve")
    if target.per_rung:
        return _per_rung_plan(target, rungs, horizons, rows, scaled_eval_steps)
    row = next(r for r in rows if r["rung"] == rung and r["arm"] == target.arm)
    horizon = max(1, round(spec.horizon_factor * horizons[rung]))
    return {"arm": target.arm, "rung": rung, "horizon": horizon, "seeds": list(spec.seeds), "points": spec.points,
            "track_from": PILOT_TRACK_FROM, "eval_steps": scaled_eval_steps(horizon), "lr": row["lr"],
            "horizon_factor": spec.horizon_factor, "slack": target.slack, "curve": "fd_track", "result": None,
            "optimizer": dict(row["optimizer"])}


def _per_rung_plan(target: TargetSpec, rungs: Sequence[str], horizons: Mapping[str, int],
                   rows: Sequence[Mapping[str, Any]], scaled_eval_steps: Callable[[int], list[int]]) -> dict[str, Any]:
    """The plan's `pilot` section with a pilot at every rung: each at horizon_factor x the rung's judged horizon,
    with the reference arm's carried optimizer there; `rung`, `horizon`, `lr` and `optimizer` are the first rung's
    (the pilot sweep's search point)."""
    spec = target.pilot
    assert spec is not None  # plan_pilot checked it
    own = {r: max(1, round(spec.horizon_factor * horizons[r])) for r in rungs}
    optimizers = {r: dict(next(x for x in rows if x["rung"] == r and x["arm"] == target.arm)["optimizer"])
                  for r in rungs}
    first = rungs[0]
    return {"arm": target.arm, "per_rung": True, "rungs": list(rungs), "rung": first, "horizon": own[first],
            "horizons": own, "judged_horizons": {r: horizons[r] for r in rungs}, "seeds": list(spec.seeds),
            "points": spec.points, "track_from": PILOT_TRACK_FROM, "eval_steps": scaled_eval_steps(own[first]),
            "eval_steps_by_rung": {r: scaled_eval_steps(h) for r, h in own.items()},
            "lr": optimizers[first]["lr"], "horizon_factor": spec.horizon_factor, "slack": target.slack,
            "curve": "fd_track", "result": None, "optimizer": optimizers[first], "optimizers": optimizers,
            "horizon_rule": "each rung's pilot at horizon_factor x its judged horizon (the transfer's horizon "
                            "section); checked: every pilot seed reaches the rung's target within the judged horizon"}


def pilot_sweep_spec(pilot: Mapping[str, Any], sweep: SweepSpec, *, name: str, transfer_id: str) -> dict[str, Any]:
    """The pilot's sweep: the reference arm's carried optimizer as the one search point (its lr a one-value grid), at
    the pilot's rung (on its workers), horizon, eval steps and seeds; the transfer's execution, retries, backend and
    store; its trial section with the pilot's tracking; the transfer's lineage with `pilot_of` in place of
    `transfer_id`. The document, for the caller to validate once."""
    sweep_spec = sweep.model_dump(mode="json")
    optimizer = {k: v for k, v in pilot["optimizer"].items() if k != "lr"}
    trial = dict(sweep_spec["trial"])
    trial["eval"] = {**dict(trial.get("eval") or {}), "track_points": pilot["points"],
                     "track_from": pilot["track_from"]}
    tags = {k: v for k, v in sweep_spec["tags"].items() if k not in (LINEAGE.TRANSFER_ID, PILOT_TAG)}
    spec: dict[str, Any] = {
        "name": f"{name[:57]}.pilot",  # the sweep name's pattern: at most 64 characters
        "rung": pilot["rung"], "horizon": pilot["horizon"], "eval_steps": pilot["eval_steps"],
        "search": {"method": "grid", "space": {"lr": [pilot["optimizer"]["lr"]]}, "optimizer": optimizer},
        "seeds": list(pilot["seeds"]), "baselines": [],
        "execution": sweep_spec["execution"], "retries": sweep_spec["retries"], "backend": sweep_spec["backend"],
        "trial": trial, "tracking": sweep_spec["tracking"],
        "tags": {**tags, PILOT_OF_TAG: transfer_id},
    }
    own = sweep_spec.get("workers_by_rung") or {}
    pilot_rungs = list(pilot.get("rungs") or [pilot["rung"]])
    if pilot.get("per_rung"):  # every other rung's pilot as a baseline at its own rung, horizon and eval steps
        spec["baselines"] = [{"arm": pilot["arm"], "label": f"{pilot['arm']}.{r}", "rung": r,
                              "optimizer": pilot["optimizers"][r], "horizon": pilot["horizons"][r],
                              "eval_steps": pilot["eval_steps_by_rung"][r]} for r in pilot_rungs[1:]]
    if any(r in own for r in pilot_rungs):  # the pilots' rungs on their own workers, as the transfer sets them
        spec["workers_by_rung"] = {r: own[r] for r in pilot_rungs if r in own}
    return spec


def derive(pilot: Mapping[str, Any], runs: Sequence[TransferRun], plateau_spec: PlateauSpec) -> dict[str, Any]:
    """The pilot's `result` from its finished runs: `scaling.pilot_target` over their tracking curves, with the
    run ids and the curves it was read from; per rung (`per_rung`), one such result per rung under `rungs`."""
    if pilot.get("per_rung"):
        return _derive_per_rung(pilot, runs, plateau_spec)
    done = {r.seed: r for r in runs if r.state == "SUCCEEDED" and r.track}
    missing = sorted(set(pilot["seeds"]) - set(done))
    if missing:
        raise TransferError(f"the pilot has no finished run with a tracking curve on seeds {missing}: no target can "
                            f"be derived (its runs: {[(r.seed, r.state) for r in runs]})")
    curves = {seed: ([s for s, _, _ in r.track], [f for _, _, f in r.track]) for seed, r in sorted(done.items())}
    try:
        target = pilot_target(curves, horizon=pilot["horizon"], slack=pilot["slack"], window=plateau_spec.window,
                              max_drop=plateau_spec.max_drop)
    except ScalingInputError as exc:
        raise TransferError(f"the pilot's curves give no target: {exc}") from None
    return {**target.to_dict(), "curve": pilot["curve"], "run_ids": [done[s].run_id for s in sorted(done)],
            "curves": {str(s): [[step, fd] for step, _, fd in done[s].track] for s in sorted(done)},
            "derived_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


def _derive_per_rung(pilot: Mapping[str, Any], runs: Sequence[TransferRun],
                     plateau_spec: PlateauSpec) -> dict[str, Any]:
    """Each rung's pilot result (`derive` over its runs at its own horizon), each rung's target, and the horizon
    check: the step where each pilot seed first reached the rung's target, against the judged horizon."""
    per: dict[str, dict[str, Any]] = {}
    check: dict[str, dict[str, Any]] = {}
    for rung in pilot["rungs"]:
        one = {**pilot, "per_rung": False, "rung": rung, "horizon": pilot["horizons"][rung]}
        per[rung] = derive(one, [r for r in runs if r.rung == rung], plateau_spec)
        value, judged = per[rung]["value"], int(pilot["judged_horizons"][rung])
        reached = {s: next((step for step, fd in curve if fd <= value), None)
                   for s, curve in per[rung]["curves"].items()}
        within = all(step is not None and step <= judged for step in reached.values())
        check[rung] = {"reached_at": reached, "judged_horizon": judged, "within_horizon": within}
    first = per[pilot["rungs"][0]]
    return {"per_rung": True, "rungs": per, "values": {r: d["value"] for r, d in per.items()},
            "plateaued": all(d["plateaued"] for d in per.values()),
            "drops": {r: d["drops"] for r, d in per.items()}, "window": first["window"],
            "max_drop": first["max_drop"], "curve": pilot["curve"], "horizon_check": check,
            "horizon_short": [r for r, c in check.items() if not c["within_horizon"]],
            "run_ids": [rid for d in per.values() for rid in d["run_ids"]],
            "derived_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


def tag_value(pilot: Mapping[str, Any]) -> str:
    """The parent run's tag: the pilot's target, plateau verdict, run ids and curve summary, compact JSON (a tag
    holds at most 1000 characters: the curves stay in the plan)."""
    r = pilot["result"]
    if r.get("per_rung"):
        return json.dumps({"values": r["values"], "plateaued": r["plateaued"], "horizon_short": r["horizon_short"],
                           "run_ids": r["run_ids"], "arm": pilot["arm"], "horizons": pilot["horizons"],
                           "curve": r["curve"], "per_rung": True}, sort_keys=True, separators=(",", ":"))
    return json.dumps({"value": r["value"], "quality": r["quality"], "plateaued": r["plateaued"],
                       "run_ids": r["run_ids"], "per_seed": r["per_seed"], "drops": r["drops"], "arm": pilot["arm"],
                       "rung": pilot["rung"], "horizon": pilot["horizon"], "curve": r["curve"]},
                      sort_keys=True, separators=(",", ":"))


def run_pilot(state: _State, path: Path, *, run_sweep: Callable[[SweepSpec, Path], str],
              read: Callable[[], list[TransferRun]], plateau_spec: PlateauSpec, out: IO[str] | None) -> str:
    """Run the pilot to its end (or reuse its stored result) and record its target before the judged runs: returns
    how the pilot ended ("SUCCEEDED" once its target is recorded, else the pilot sweep's state)."""
    pilot = dict(state.plan.pilot or {})
    if pilot.get("result"):
        return "SUCCEEDED"  # recorded before a restart: the target stays the one the judged runs started under
    if state.pilot_sweep_spec is None:
        raise TransferError(f"{path} plans a pilot but holds no pilot sweep spec")
    if out is not None:
        where = (", ".join(f"{r} for {h} steps" for r, h in pilot["horizons"].items()) if pilot.get("per_rung")
                 else f"{pilot['rung']} for {pilot['horizon']} steps")
        print(f"pilot: {pilot['arm']} at {where} on seeds {pilot['seeds']} (the target, before any judged run)",
              file=out, flush=True)
    ended = run_sweep(state.pilot_sweep_spec, path / PILOT_FOLDER)
    if ended != "SUCCEEDED":
        return ended
    pilot["result"] = derive(pilot, read(), plateau_spec)
    state.plan = state.plan.model_copy(update={"pilot": pilot})
    # The tag is ours and bounded (`tag_value`), so the stored spec takes it without another validation.
    tags = {**state.sweep_spec.tags, PILOT_TAG: tag_value(pilot)}
    state.sweep_spec = state.sweep_spec.model_copy(update={"tags": tags})
    state.write(path)  # before the judged runs: their parent run is created with the tag
    if out is not None:
        r = pilot["result"]
        if r.get("per_rung"):
            for rung, d in r["rungs"].items():
                print(f"pilot at {rung}: plateau quality {d['quality']:.4g} -> target {d['value']:.4g}"
                      + ("" if d["plateaued"] else " (NOT at a plateau: see the report)")
                      + (" (HORIZON SHORT: see the report)" if rung in r["horizon_short"] else ""),
                      file=out, flush=True)
        else:
            print(f"pilot: plateau quality {r['quality']:.4g} -> target {r['value']:.4g} at every rung"
                  + ("" if r["plateaued"] else " (NOT at a plateau: see the report)"), file=out, flush=True)
    return "SUCCEEDED"
