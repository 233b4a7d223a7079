"""Steps-to-target fits per target level: when a study's rungs declare different targets (each rung's from its own
reference arm, say), one exponent fitted across them mixes model size with the target's difficulty. Here every
run's crossing of one level is computed from its recorded curve, for each declared level in turn, and the size fit
is made across rungs at that one level (`censored_fit_data`: the restricted mean over every seed, a run that never
reaches the level right-censored there, never dropped), at the first and at the sustained crossing.

The headline level is the declared level (among those with a fit) at which the fewest runs of the fitted arms are
censored at the first crossing (right-censored: not reached by the horizon; left-censored: already below at the
first point, an upper bound), ties going to the loosest level (the highest value of a lower-is-better metric):
the level whose fit rests most on measured crossings. The other levels are listed beside it with their own fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ScalingError, ScalingInputError
from ..records import TransferRun
from ..survival import CensoredFitData, Endpoint, censored_fit_data
from ..targets import target_value
from ._fit import ScalingFit, fit_scaling

__all__ = ["HEADLINE_RULE", "LevelFit", "TargetLevelFits", "fit_target_levels", "target_levels"]

ENDPOINTS: tuple[Endpoint, ...] = ("first", "sustained")
STEPS_ALPHA_BOUNDS = (-3.0, 3.0)
HEADLINE_RULE = ("among the declared levels with a fit, the one with the fewest censored runs (right and left) of the "
                 "fitted arms at the first crossing; ties: the loosest (highest) level")


def target_levels(targets: Mapping[str, float | None], *, rtol: float = 1e-9) -> tuple[float, ...]:
    """The distinct declared target values of rung -> target, loosest (highest) first; values within `rtol` of
    each other are one level. Refuses a rung without a target (it has no level to be fitted at)."""
    missing = sorted(r for r, v in targets.items() if v is None)
    if missing or not targets:
        raise ScalingInputError(f"no target at rungs {missing or '(none given)'}: fits per target level need a "
                                "declared target at every rung")
    levels: list[float] = []
    for value in sorted((target_value(v) for v in targets.values() if v is not None), reverse=True):
        if not levels or abs(levels[-1] - value) > rtol * max(abs(value), 1.0):
            levels.append(value)
    return tuple(levels)


@dataclass(frozen=True)
class LevelFit:
    """The size fit at one level and endpoint: its data (restricted means per arm and rung, censoring counts,
    refused cells) and the fit, or why there is none."""

    level: float
    endpoint: str
    data: CensoredFitData
    fit: ScalingFit | None
    error: str | None = None

    @property
    def censored(self) -> int:
        """Runs censored (right or left) over the fitted arms' cells at this level."""
        return sum(c["right_censored"] + c["left_censored"] for cells in self.data.cells.values()
                   for c in cells.values())


@dataclass(frozen=True)
class TargetLevelFits:
    """Steps-to-target fits at each declared level (`levels`, loosest first) and endpoint, the headline level
    chosen by `HEADLINE_RULE`. `rung_targets` is what each rung declared."""

    rung_targets: dict[str, float]
    levels: tuple[float, ...]
    headline: float
    fits: dict[float, dict[str, LevelFit]]
    headline_rule: str = HEADLINE_RULE

    def at(self, level: float | None = None, endpoint: str = "first") -> LevelFit:
        """The fit at `level` (default: the headline) and `endpoint`."""
        key = self.headline if level is None else target_value(level)
        if key not in self.fits or endpoint not in self.fits[key]:
            raise ScalingInputError(f"no fit at level {level!r}, endpoint {endpoint!r}; levels: {list(self.levels)}, "
                                    f"endpoints: {list(ENDPOINTS)}")
        return self.fits[key][endpoint]

    def to_dict(self, fit_doc: Any = None) -> dict[str, Any]:
        """The levels as a document: per level and endpoint the censored fit data and the fit rendered by
        `fit_doc(fit)` (default: form, exponent per arm and flags), or its error."""
        def render(f: ScalingFit) -> dict[str, Any]:
            return {"form": f.form, "flags": sorted(f.flags),
                    "alpha": {arm: f.params[arm].get("alpha") for arm in f.arms}}

        doc_of = fit_doc or render
        return {
            "rung_targets": dict(self.rung_targets), "levels": list(self.levels), "headline": self.headline,
            "headline_rule": self.headline_rule,
            "fits": {f"{level:g}": {ep: {**lf.data.to_dict(), "censored": lf.censored,
                                         "fit": doc_of(lf.fit) if lf.fit is not None else {"error": lf.error}}
                                    for ep, lf in per.items()}
                     for level, per in self.fits.items()},
        }


def fit_target_levels(runs: Sequence[TransferRun], targets: Mapping[str, float | None], *,
                      arms: Sequence[str] | None = None, form: str = "A*N^-alpha", max_censored: float = 0.5,
                      **fit_kwargs: Any) -> TargetLevelFits:
    """`fit_scaling` of steps to each declared level against size (module docstring), for the runs of `arms`
    (default: every arm) at the rungs in `targets`, at the first and the sustained crossing; `fit_kwargs` go to
    `fit_scaling` (n_boot, share, alpha_bounds: default (-3, 3), an exponent of either sign, ...). A level with no
    arm left to fit (every cell censored at `max_censored` or more, or fewer than two rungs) carries the reason
    instead of a fit."""
    levels = target_levels(targets)
    # Steps to a fixed level grow with size at a fixed horizon, as time to best does: the exponent may be negative.
    fit_kwargs.setdefault("alpha_bounds", STEPS_ALPHA_BOUNDS)
    chosen = [r for r in runs if r.rung in targets and (arms is None or r.arm in arms)]
    fits: dict[float, dict[str, LevelFit]] = {}
    for level in levels:
        per: dict[str, LevelFit] = {}
        for endpoint in ENDPOINTS:
            data = censored_fit_data(chosen, target=level, endpoint=endpoint, max_censored=max_censored)
            fit, error = None, None
            if not data.data:
                error = (f"no arm has two rungs or more left to fit at {level:g} ({endpoint}): "
                         f"{len(data.refused)} refused (listed in refused)" if data.refused else "no runs")
            else:
                try:
                    fit = fit_scaling(data.data, form=form, **fit_kwargs)
                except ScalingError as exc:
                    error = str(exc)
            per[endpoint] = LevelFit(level=level, endpoint=endpoint, data=data, fit=fit, error=error)
        fits[level] = per
    # Fewest censored runs at the first crossing; ties (min is stable, levels are loosest first) to the loosest.
    headline = min(levels, key=lambda lv: (fits[lv]["first"].fit is None, fits[lv]["first"].censored))
    return TargetLevelFits(rung_targets={r: target_value(v) for r, v in targets.items() if v is not None},
                           levels=levels, headline=headline, fits=fits)
