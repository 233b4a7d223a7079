"""Did the optimum move? A verdict on a transferred point from a small bracket around it at the target size.

The bracket (`verification_design`) is one-at-a-time, not the full product: the transferred point itself, K one
step either side, gamma x0.5 and x2, lr x0.5 and x2 (7 points; the full 3 x 3 x 3 product would be 27 runs per
seed). Every point runs on the same seeds, so each is compared with the transferred point per seed (paired).

The verdict (`verify_transfer`), for each bracket point p, from the paired difference d_p = p - center (lower is
better, a Student-t interval at `level`):
- `moved`: some point is better than the center with the family-wise error held at 1 - `level` across the bracket:
  its paired t test rejects d_p = 0 after Holm's step-down correction over all the bracket's comparisons, with
  d_p < 0. Uncorrected (any one of six intervals below zero), a bracket with no true move read "moved" 10-12 % of
  the time at n=3; corrected, at most 1 - level (tests/scaling/test_verify.py simulates it). The move reported is
  the best such point: which knob changed and how (direction), d_p with its interval (size) and its
  Holm-adjusted p-value.
- `held`: no point is better by more than the margin with confidence: every interval's lower end is above
  -margin, where margin = `tolerance` x the center's mean (default 2 %, the study's 'near best' tolerance). A point
  may still look slightly better on average; the data exclude that it is better by more than the margin.
- `inconclusive`: neither; `seeds_needed` is the seed count at which, with the observed paired sd and mean, the
  least settled point would settle one way or the other (the smaller of the two counts, the larger over points).
Beside it, the same paired bootstrap as the sweep's selection (`scaling.stats`) gives every bracket point's
probability of being best.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ScalingInputError
from .stats import (
    bootstrap_p_best,
    check_n_boot,
    holm_rejections,
    paired_difference,
    seed_matrix,
    t_p_value,
    t_quantile,
)

__all__ = ["TransferVerdict", "verification_design", "verify_transfer"]

Verdict = Literal["held", "moved", "inconclusive"]
_MAX_SEEDS = 10_000


def verification_design(center: Mapping[str, float | int], *, k_step: int = 1,
                        factors: Sequence[float] = (0.5, 2.0)) -> list[dict[str, float | int]]:
    """The bracket around `center` ({K, gamma, lr}, any subset): the center first, then each knob moved alone
    (K +-k_step, kept >= 1; gamma and lr times each factor)."""
    if not center:
        raise ScalingInputError("center: give the transferred point, e.g. {'K': 3, 'gamma': 0.15, 'lr': 0.02}")
    unknown = sorted(set(center) - {"K", "gamma", "lr"})
    if unknown:
        raise ScalingInputError(f"center: unknown knobs {unknown}; allowed: ['K', 'gamma', 'lr']")
    points: list[dict[str, float | int]] = [dict(center)]
    if "K" in center:
        for k in (int(center["K"]) - k_step, int(center["K"]) + k_step):
            if k >= 1:
                points.append({**center, "K": k})
    for knob in ("gamma", "lr"):
        if knob in center:
            for f in factors:
                points.append({**center, knob: float(f"{float(center[knob]) * f:.6g}")})
    return points


@dataclass(frozen=True)
class TransferVerdict:
    """The verdict and the evidence behind it (JSON-able through `to_dict`)."""

    verdict: Verdict
    center: dict[str, Any]
    n: int
    margin: float
    level: float
    move: dict[str, Any] | None  # moved: {"point", "change", "diff"}
    seeds_needed: int | None  # inconclusive: seeds that would settle it (None: not reachable / one seed)
    diffs: dict[str, dict[str, Any]]  # point label -> paired difference to the center
    p_best: dict[str, float]
    reason: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "center": self.center, "n": self.n, "margin": self.margin,
                "level": self.level, "move": self.move, "seeds_needed": self.seeds_needed, "diffs": self.diffs,
                "p_best": self.p_best, "reason": self.reason, "notes": list(self.notes)}


def _label(point: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={point[k]:g}" if isinstance(point[k], float) else f"{k}={point[k]}" for k in sorted(point))


def _change(center: Mapping[str, Any], point: Mapping[str, Any]) -> dict[str, str]:
    """Which knobs differ and how: {'K': '+1'}, {'lr': 'x2'}."""
    out = {}
    for k in point:
        a, b = center.get(k), point[k]
        if a == b:
            continue
        if k == "K" and a is not None:
            out[k] = f"{int(b) - int(a):+d}"
        else:
            out[k] = f"x{float(b) / float(a):.3g}" if a else f"{a} -> {b}"
    return out


def _seeds_to(half_width_target: float, sd: float, level: float) -> int | None:
    """The smallest n with t(level, n-1) x sd / sqrt(n) below `half_width_target` (None if unreachable)."""
    if half_width_target <= 0:
        return None
    if sd == 0:
        return 2
    # z-based first guess, then walk up with the t quantile (a few steps).
    n = max(2, math.ceil((1.96 * sd / half_width_target) ** 2))
    while n <= _MAX_SEEDS:
        if t_quantile(level, n - 1) * sd / math.sqrt(n) < half_width_target:
            # walk back down in case the guess overshot
            while n > 2 and t_quantile(level, n - 2) * sd / math.sqrt(n - 1) < half_width_target:
                n -= 1
            return n
        n += max(1, n // 20)
    return None


def verify_transfer(
    objectives: Mapping[str, Sequence[float]],
    center: str,
    *,
    points: Mapping[str, Mapping[str, Any]] | None = None,
    tolerance: float = 0.02,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> TransferVerdict:
    """`held`, `moved` or `inconclusive` for the transferred point `center`, from per-seed objectives of the bracket
    (`objectives[label]`, index i the same seed for every point; lower is better). `points[label]` gives each
    label's knobs (for the direction of a move; default: none). `tolerance` sets the held margin relative to the
    center's mean. Raises ScalingInputError for bad input (unknown center, unequal seeds, non-finite values)."""
    if center not in objectives:
        raise ScalingInputError(f"center {center!r} is not among the bracket's points {sorted(objectives)}")
    if len(objectives) < 2:
        raise ScalingInputError("the bracket needs the center and at least one other point")
    if not 0 <= tolerance < 1:
        raise ScalingInputError(f"tolerance must be in [0, 1), got {tolerance}")
    try:
        check_n_boot(n_boot)
        keys, values = seed_matrix(objectives)
        diffs = {k: paired_difference(objectives[k], objectives[center], level=level)
                 for k in objectives if k != center}
    except ValueError as exc:
        raise ScalingInputError(str(exc)) from None
    p_best = {key: float(p) for key, p in zip(keys, bootstrap_p_best(values, n_boot=n_boot, seed=seed), strict=True)}
    n = int(values.shape[1])
    c_mean = float(values[keys.index(center)].mean())
    margin = tolerance * abs(c_mean)
    knobs = {k: dict((points or {}).get(k, {})) for k in objectives}
    rejected, p_holm = holm_rejections({k: t_p_value(d) for k, d in diffs.items()}, 1 - level)
    docs = {k: {**d.to_dict(), "p_holm": p_holm[k]} for k, d in diffs.items()}
    notes: list[str] = []
    if n < 2:
        return TransferVerdict("inconclusive", knobs[center] or {"label": center}, n, margin, level, None, None, docs,
                               p_best, "one seed: no spread to judge the differences by; run at least two", notes)
    better = {k: d for k, d in diffs.items() if k in rejected and d.mean < 0}
    if better:
        k = min(better, key=lambda x: better[x].mean)
        move = {"point": k, "knobs": knobs[k], "change": _change(knobs[center], knobs[k]),
                "diff": docs[k]}
        reason = (f"{k} is better than the transferred point by {-better[k].mean:.4g} "
                  f"({level:.0%} CI of the difference [{better[k].interval[0]:.4g}, {better[k].interval[1]:.4g}], "  # type: ignore[index]
                  f"n={n}; Holm-adjusted p={p_holm[k]:.3g} over the bracket's {len(diffs)} comparisons)")
        return TransferVerdict("moved", knobs[center] or {"label": center}, n, margin, level, move, None, docs,
                               p_best, reason, notes)
    # Held needs every point's interval above -margin (an intersection-union test: each must hold, so no
    # correction is needed for it to keep its level).
    unsettled = {k: d for k, d in diffs.items() if d.interval is not None and d.interval[0] <= -margin}
    if not unsettled:
        reason = (f"no bracket point is better than the transferred point by more than {margin:.4g} "
                  f"({tolerance:.0%} of its mean) at {level:.0%} confidence, n={n}")
        return TransferVerdict("held", knobs[center] or {"label": center}, n, margin, level, None, None, docs,
                               p_best, reason, notes)
    needed: list[int | None] = []
    for d in unsettled.values():
        sd = float(d.sd or 0.0)
        to_move = _seeds_to(-d.mean, sd, level) if d.mean < 0 else None
        to_hold = _seeds_to(d.mean + margin, sd, level) if d.mean > -margin else None
        options = [x for x in (to_move, to_hold) if x is not None]
        needed.append(min(options) if options else None)
    seeds_needed = None if any(x is None for x in needed) else max(x for x in needed if x is not None)
    worst = min(unsettled, key=lambda x: unsettled[x].interval[0])  # type: ignore[index]
    reason = (f"{len(unsettled)} bracket point(s) could still be better by more than {margin:.4g} (e.g. {worst}: "
              f"difference {unsettled[worst].mean:+.4g}, {level:.0%} CI [{unsettled[worst].interval[0]:.4g}, "  # type: ignore[index]
              f"{unsettled[worst].interval[1]:.4g}]) and none is better with confidence, n={n}")  # type: ignore[index]
    if seeds_needed is None:
        notes.append("a point sits exactly at the margin: no seed count settles it")
    return TransferVerdict("inconclusive", knobs[center] or {"label": center}, n, margin, level, None, seeds_needed,
                           docs, p_best, reason, notes)
