"""The transfer's verification stage: a small bracket around the transferred point at the largest rung (or a named
one), run beside the transfer's own runs on its seeds, and the verdict `verify_transfer` gives on it.

The bracket's runs are extra (rung, arm) settings of the transfer's one sweep, labelled `verify-<i>.<rung>` (their
knobs in the plan's `verification.points`); the transferred point itself is the searched arm's ordinary run at that
rung. They are kept apart from the transfer's analysis (savings, fits) and only feed the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scaling.verify import TransferVerdict, verification_design, verify_transfer
from trials.record import LINEAGE

from ._plan import _clean
from ._record import ResultRecord

__all__ = ["VerifySpec", "is_verification_run", "plan_verification", "verification_doc_of", "verification_line",
           "verification_verdict"]

_PREFIX = "verify-"
_FIELD = {"K": "refresh_every", "gamma": "gamma", "lr": "lr"}
Knob = Literal["K", "gamma", "lr"]
_KNOBS: tuple[Knob, ...] = ("K", "gamma", "lr")


class VerifySpec(BaseModel):
    """Bracket the transferred point at one rung and say whether the optimum moved there."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    rung: str | None = Field(None, description="Rung of the bracket; None = the transfer's largest rung.")
    knobs: list[Knob] = Field(
        default_factory=lambda: list(_KNOBS),
        min_length=1,
        description="Knobs moved one at a time: K one step either side, gamma and lr x0.5 and x2.",
    )
    tolerance: float = Field(
        0.02, ge=0, lt=1,
        description="'held' means no bracket point is better by more than this fraction of the transferred point's "
        "objective (0.02: the study's 'near best' tolerance).",
    )


def is_verification_run(run: Any) -> bool:
    return str(getattr(run, "trial_key", "")).startswith(_PREFIX)


def plan_verification(
    spec: VerifySpec,
    *,
    rungs: Sequence[str],
    searched_arm: str,
    rows: Sequence[Mapping[str, Any]],
    baselines: Sequence[Mapping[str, Any]],
    first: Mapping[str, Any],
    arm_tags: Callable[[Mapping[str, Any]], dict[str, str]],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the plan's `verification` section, the bracket's baseline entries) for the transfer's sweep."""
    rung = spec.rung or rungs[-1]
    if rung not in rungs:
        raise ValueError(f"verify.rung {rung!r} is not among the transfer's rungs {list(rungs)}")
    center_row = next(r for r in rows if r["rung"] == rung and r["arm"] == searched_arm)
    cfg = dict(center_row["optimizer"])
    center: dict[str, Any] = {k: cfg[f] for k, f in _FIELD.items() if k in spec.knobs and f in cfg}
    if "K" in center and searched_arm != "periodic":
        center.pop("K")  # only the periodic arm has a refresh period
    # Template: the center's own entry (a baseline at its rung, or the sweep's search point at the first rung), so
    # the bracket inherits its horizon, eval steps and tags.
    label = f"{searched_arm}.{rung}"
    template = next((dict(b) for b in baselines if b.get("label") == label), None)
    if template is None:
        template = {"arm": searched_arm, "label": label, "rung": rung, "optimizer": dict(first["optimizer"]),
                    "tags": arm_tags(first)}
    points: dict[str, dict[str, Any]] = {"center": dict(center)}
    entries = []
    for i, knobs in enumerate(verification_design(center)[1:], start=1):
        name = f"{_PREFIX}{i}.{rung}"
        points[name] = dict(knobs)
        optimizer = {**template["optimizer"], **{_FIELD[k]: v for k, v in knobs.items()}}
        entries.append({**template, "label": name, "optimizer": optimizer,
                        "tags": {**template.get("tags", {}), LINEAGE.VERIFY_POINT: name}})
    doc = {"rung": rung, "center_label": label, "center": center, "points": points, "tolerance": spec.tolerance}
    return doc, entries


def _objective(run: Any) -> float | None:
    """The run's objective: the mean FD over its eval checkpoints (None unless it succeeded with finite FDs)."""
    if run.state != "SUCCEEDED" or not run.checkpoints:
        return None
    fds = [f for _, _, f in run.checkpoints]
    return sum(fds) / len(fds) if all(math.isfinite(f) for f in fds) else None


def verification_verdict(plan: Mapping[str, Any], runs: Sequence[Any], searched_arm: str,
                         seeds: Sequence[int]) -> TransferVerdict | None:
    """The verdict from the bracket's runs (None when the transfer has no verification stage or nothing ran yet).
    Only seeds on which every bracket point succeeded are used (the comparison is paired)."""
    doc = plan.get("verification")
    if not doc:
        return None
    rung = doc["rung"]
    by_label: dict[str, dict[int, float]] = {}
    for run in runs:
        value = _objective(run)
        if value is None:
            continue
        if is_verification_run(run):
            by_label.setdefault(str(run.trial_key).split(",seed=")[0], {})[run.seed] = value
        elif run.rung == rung and run.arm == searched_arm:
            by_label.setdefault("center", {})[run.seed] = value
    common = [s for s in seeds if all(s in by_label.get(lab, {}) for lab in doc["points"])]
    if not common:
        return None
    objectives = {lab: [by_label[lab][s] for s in common] for lab in doc["points"]}
    return verify_transfer(objectives, "center", points=doc["points"], tolerance=float(doc["tolerance"]))



def verification_doc_of(result: ResultRecord) -> dict[str, Any] | None:
    """The verdict as data, {"verdict": "pending", ...} while its runs are missing, None without a stage."""
    plan = result.plan.verification
    if not plan:
        return None
    verdict = verification_verdict({"verification": plan}, [*result.runs, *result.verification_runs],
                                   result.searched_arm, result.plan.seeds)
    if verdict is None:
        return _clean({"verdict": "pending", "rung": plan["rung"], "points": plan["points"],
                       "reason": "the bracket's runs have not all succeeded on a common seed yet"})
    return _clean({"rung": plan["rung"], "points": plan["points"], **verdict.to_dict()})

def verification_line(doc: Mapping[str, Any], *, emphasise: bool = False) -> str:
    """One line for a verification document (`verification_verdict`'s): the rung, the verdict (upper-case with
    `emphasise`), n and the margin, then the move or the seeds that would settle it. The reason is not included."""
    verdict = str(doc["verdict"]).upper() if emphasise else str(doc["verdict"])
    margin = doc.get("margin")
    text = (f"verification at {doc.get('rung')}: {verdict} (n={doc.get('n')}, margin "
            f"{format(margin, '.3g') if isinstance(margin, (int, float)) else '-'})")
    if doc.get("move"):
        text += f"; move: {doc['move']}"
    if doc.get("seeds_needed"):
        text += f"; seeds that would settle it: {doc['seeds_needed']}"
    return text
