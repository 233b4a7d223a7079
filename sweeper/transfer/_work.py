"""The total work of a transfer, in training-step units (`sweeper.specs.trial_work`): what `SCALESWEEP_MAX_WORK`
caps, counted from the transfer's plan before anything runs."""

from __future__ import annotations

from ..demand import trial_work
from ..specs import SweepSpec
from ._pilot import PILOT_TRACK_FROM
from ._plan import _rung_shape
from ._planning import _deep_merge, _default_rungs, _scaled_eval_steps
from ._sections import rung_horizon
from ._spec import TransferSpec

__all__ = ["transfer_work"]


def transfer_work(spec: TransferSpec, base: SweepSpec) -> int:
    """A transfer of sweep `base` (`sweeper.TransferSpec`): every rung x arm x seed at that rung's horizon and eval
    steps (as the transfer's plan sets them), the control arms' runs likewise, the pilot (target rule `pilot`) and
    the verification bracket (two settings per knob) at its rung."""
    rungs = list(spec.rung_names or _default_rungs(base.rung))
    trial = _deep_merge(base.trial, spec.trial)
    fixed = spec.steps or max(1, round(spec.horizon_factor * base.horizon))
    seeds = len(spec.seeds or base.seeds)
    per_rung = {}
    for rung in rungs:
        steps = rung_horizon(spec.horizon, _rung_shape(rung, trial)[1], int(trial.get("batch_size", 32)), fixed)
        eval_steps = _scaled_eval_steps(base.resolved_eval_steps, base.horizon, steps)
        per_rung[rung] = trial_work({**trial, "rung": rung, "steps": steps, "eval_steps": eval_steps})
    arms = (len(spec.arms) + len(spec.controls) + len(spec.diagnostics) + len(spec.fixed_arms)
            + sum(len(factors) - 1 for factors in spec.lr_brackets.values()))
    total = sum(arms * seeds * work for work in per_rung.values())
    pilot = spec.target.pilot
    if spec.target.rule == "pilot" and pilot is not None:  # the reference arm, longer, on the pilot's seeds
        # at every rung with per_rung, else at the pilot's one rung
        pilot_rungs = rungs if spec.target.per_rung else [pilot.rung or min(rungs, key=_rung_order().index)]
        for rung in pilot_rungs:
            steps = max(1, round(pilot.horizon_factor * rung_horizon(
                spec.horizon, _rung_shape(rung, trial)[1], int(trial.get("batch_size", 32)), fixed)))
            eval_steps = _scaled_eval_steps(base.resolved_eval_steps, base.horizon, steps)
            total += len(pilot.seeds) * trial_work({**trial, "rung": rung, "steps": steps, "eval_steps": eval_steps,
                                                    "eval": {**trial.get("eval", {}), "track_points": pilot.points,
                                                             "track_from": PILOT_TRACK_FROM}})
    if spec.verify is not None:
        rung = spec.verify.rung or rungs[-1]
        total += 2 * len(spec.verify.knobs) * seeds * per_rung.get(rung, max(per_rung.values()))
    return total


def _rung_order() -> list[str]:
    from trials.models import list_rungs

    return list_rungs()
