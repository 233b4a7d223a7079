"""A transfer's result (`TransferResult`): one class over one record (its identity, plan and runs, read back),
with every answer a method. The work behind each answer is a function of the module that owns its concept:

    _savings       time to best per run, savings per rung and baseline, common targets
    _targets       the report against the declared target, the comparisons, claims, controls, diagnostics
    _fits          scaling fits per metric (fitted once per form), predictions, fits as documents
    _export        the analysis document, the report's target section, the export for a rung
    _verification  the verification stage's verdict

Running a transfer, its status, its cancel and reading its runs from MLflow are the transfer job beside it
(`_job`, `_state`, `_reading`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from scaling import ScalingError
from scaling.claims import ENDPOINTS
from scaling.export import Export
from scaling.fits import ScalingFit, TargetLevelFits
from scaling.rungs import target_table
from scaling.targets import CommonTarget, Savings, TimeToBest

from ._export import analysis_of, export_of, target_summary_of
from ._fits import (
    FIT_METRICS,
    fit_data_of,
    fit_metrics_of,
    fits_of,
    fits_or_errors_of,
    level_fits_of,
    predict_of,
    rung_targets_of,
    targets_differ_of,
    undertrained_fitted_of,
)
from ._fits import _fit_doc as _fit_doc  # re-exported: readers import it from here
from ._plan import PlanBase, PlanRow, TransferPlan, size_basis
from ._plan import _clean as _clean
from ._plan import _rung_shape as _rung_shape
from ._record import ResultRecord
from ._savings import common_targets_of, savings_of, time_to_best_of
from ._targets import (
    claims_of,
    controls_of,
    diagnostics_of,
    fixed_arms_of,
    targets_of,
    tuning_budgets_of,
    undertrained_rungs_of,
)
from ._verification import verification_doc_of, verification_line, verification_verdict

__all__ = ["FIT_METRICS", "PlanBase", "PlanRow", "TransferPlan", "TransferResult", "size_basis"]


class TransferResult(ResultRecord):
    """A transfer's runs, read from MLflow (or from its records), and what follows from them: time to best per run,
    savings of the searched arm against each baseline per rung, the target report, the claims, the controls, scaling
    fits per metric, predictions, the verification verdict and exports.

    One class over one record (`ResultRecord`: identity, plan, runs): each answer is one method here, worked out by
    a function of the module that owns its concept (`_savings`, `_targets`, `_fits`, `_export`, `_verification`)
    from the record. What several answers share (the per-rung report, the comparisons, the claims, the fits) is
    worked out once per result and kept on it. No Ray, no MLflow: every number is one of `scaling`'s pure functions
    over the runs."""

    # ------------------------------------------------------------------------------------------------------
    # What the transfer saved (`_savings`)

    def time_to_best(self, **kwargs: Any) -> dict[str, TimeToBest]:
        """Run id -> `time_to_best` of its checkpoints, for runs that succeeded or diverged part-way (keyword
        arguments go to `time_to_best`: tol, volatility_tol)."""
        return time_to_best_of(self, **kwargs)

    def savings(self, *, robust: bool = False) -> dict[str, dict[str, Savings]]:
        """Rung -> baseline arm -> time to best saved by the searched arm, in % of the baseline's (positive:
        faster), seeds paired, with the seed spread. Rungs or baselines without a common seed are left out."""
        return savings_of(self, robust=robust)

    def common_targets(self) -> dict[str, dict[int, CommonTarget]]:
        """Rung -> seed -> each arm's time to reach the worst arm's smoothed best FD x 1.02 (time_to_common_target),
        for seeds where at least two arms succeeded."""
        return common_targets_of(self)

    # ------------------------------------------------------------------------------------------------------
    # Against the declared target (`_targets`)

    def targets(self) -> dict[str, Any]:
        """The per-rung report against the target declared in the spec (`scaling.rung_report`): target
        value and its source, fraction of seeds reaching it per arm, steps and time to target, the paired
        steps-to-target ratio, the per-step time ratio measured in isolation and the time saving, time to best
        (the paper's definition) beside them, and the plateau flag per rung; each comparison also at the `first`
        crossing, in `steps_above` the target (the two a claim needs) and at the `sustained` crossing (reported, not
        judged): restricted-mean steps ratio over every seed with its censoring counts, the time saving on it, and
        how to read a null: interpretable only when the positive control's saving was detected. Computed once per
        result (the analysis, the export and the fits each ask for it); callers get their own top-level copy."""
        return targets_of(self)

    def claims(self) -> dict[str, Any]:
        """The study's claims in one alpha budget (`_targets.claims_of`: worked out once per result, read by its table
        and its analysis alike)."""
        return claims_of(self)

    def controls(self) -> dict[str, Any] | None:
        """The analysis' `controls` section (`scaling.controls_section`, judged at the first crossing): per control
        its outcome per rung and `passed`, the comparisons behind them at every endpoint, the verdict lines the
        report prints first, and rungs that could not be judged; None for a transfer without controls."""
        return controls_of(self)

    def diagnostics(self) -> dict[str, Any] | None:
        """The diagnostics' section (None without): effective_step per rung: the searched arm against Muon and
        against Muon at the searched arm's mean update size, at the first crossing, and the verdict."""
        return diagnostics_of(self)

    def fixed_arms(self) -> dict[str, Any] | None:
        """The fixed arms' section (None without): paper_default (periodic at K=3, gamma=0.15) against every arm
        per rung at the first crossing, reported beside the claims."""
        return fixed_arms_of(self)

    def tuning_budgets(self) -> dict[str, Any]:
        """Per arm, the settings tried before the transfer carried one and the settings and runs per rung in the
        transfer, with whether they are equal across the arms."""
        return tuning_budgets_of(self)

    def undertrained_rungs(self) -> list[str]:
        """Rungs whose runs are mostly still improving fast at their end (the plateau check)."""
        return undertrained_rungs_of(self)

    # ------------------------------------------------------------------------------------------------------
    # Scaling fits (`_fits`)

    def fit_metrics(self) -> tuple[str, ...]:
        """The metrics these runs can be fitted on: `FIT_METRICS`, without `alignment` where no run carries it."""
        return fit_metrics_of(self)

    def fit_data(self, metric: str = "time_to_best") -> dict[str, tuple[list[float], list[float]]]:
        """Arm -> (sizes, values): one entry per succeeded run (sizes repeat over seeds), arms with fewer than two
        rungs left out (`_fits.fit_data_of`)."""
        return fit_data_of(self, metric)

    def fits(self, metric: str = "time_to_best", form: str | None = None, share: Sequence[str] = (),
             **kwargs: Any) -> ScalingFit:
        """`fit_scaling` over the arms for `metric` against parameter count. Default form: `A*N^-alpha` for time to
        best (with alpha in (-3, 3): it grows with size), `E+A*N^-alpha` for FD and for `alignment`, which is fitted
        on 1 - alignment at each run's last eval step (refused where no run carries alignment). Other keyword
        arguments go to `fit_scaling` (n_boot, seed, allow_extrapolation, ...). Fitted once per result and
        settings."""
        return fits_of(self, metric, form, share, **kwargs)

    def level_fits(self, form: str | None = None, share: Sequence[str] = (), **kwargs: Any) -> TargetLevelFits:
        """Steps to target fitted per declared level across rungs (`scaling.fits.fit_target_levels`), at the first
        and sustained crossing; other keyword arguments go to `fit_scaling`. Fitted once per result and settings."""
        return level_fits_of(self, form, share, **kwargs)

    def predict(self, arm: str, size: float | int | str, metric: str = "time_to_best",
                **kwargs: Any) -> tuple[float, float, float]:
        """(point, lo, hi) of `metric` for `arm` at `size` (a parameter count or a rung name), from `fits(metric)`;
        raises `ExtrapolationRefused` with the reason beyond the fit's limit."""
        return predict_of(self, arm, size, metric, **kwargs)

    def fits_or_errors(self, metrics: Sequence[str], n_boot: int | None = None) -> dict[str, ScalingFit | ScalingError]:
        """metric -> its default fit, or the error that stopped it."""
        return fits_or_errors_of(self, metrics, n_boot)

    def rung_targets(self) -> dict[str, float | None]:
        """Rung -> the target it declared (the target report's value; None where it has none)."""
        return rung_targets_of(self)

    def targets_differ(self) -> bool:
        """Whether the rungs that declared a target declared more than one level."""
        return targets_differ_of(self)

    def undertrained_fitted(self, fit: ScalingFit, undertrained: Sequence[str] | None = None) -> list[str]:
        """The undertrained rungs (default: `undertrained_rungs()`) among the sizes `fit` was fitted on."""
        return undertrained_fitted_of(self, fit, undertrained)

    # ------------------------------------------------------------------------------------------------------
    # The verification stage's verdict (`_verification`)

    def verification(self) -> Any:
        """The verification stage's verdict (`scaling.TransferVerdict`), or None without one or before its runs."""
        return verification_verdict({"verification": self.plan.verification},
                                    [*self.runs, *self.verification_runs], self.searched_arm, self.plan.seeds)

    def verification_doc(self) -> dict[str, Any] | None:
        """The verdict as data, {"verdict": "pending", ...} while its runs are missing, None without a stage."""
        return verification_doc_of(self)

    # ------------------------------------------------------------------------------------------------------
    # Documents (`_export`) and the table

    def analysis(self, *, n_boot: int | None = None) -> dict[str, Any]:
        """Everything as JSON-able data: per-run time to best, the savings table, and fits per metric (params,
        intervals, flags, leave-one-rung-out errors) with the chosen pair, FD metric name and sample count."""
        return analysis_of(self, n_boot=n_boot)

    def target_summary(self, *, n_boot: int | None = None) -> dict[str, Any]:
        """The target report (without its per-run rows), the fits of steps and time to target, the undertrained
        rungs and the searched arm: what the HTML report's target section shows."""
        return target_summary_of(self, n_boot=n_boot)

    def export(self, target_rung: str, *, lr_rules: Mapping[str, str] | None = None,
               allow_losing: bool = False) -> Export:
        """The transferred hyperparameters for `target_rung` (any rung: verified only where this transfer ran
        that arm there and it succeeded), with the rule behind each value and provenance. Refused when the
        source sweep's choice is worse than a baseline with confidence, unless `allow_losing`."""
        return export_of(self, target_rung, lr_rules=lr_rules, allow_losing=allow_losing)

    def table(self) -> str:
        """Time to best per rung and arm (mean over seeds), and the savings, as text."""
        controls = self.controls()
        # A target from a pilot that had not plateaued first, then the controls: whether the line and the instrument
        # can be trusted decides how the rest reads.
        pilot = self.targets().get("pilot") or {}
        flags = [pilot[k] for k in ("flag", "horizon_flag") if pilot.get(k)]
        lines = [*flags, ""] if flags else []
        lines += [*controls["summary"], ""] if controls else []
        for doc in (self.diagnostics() or {}).values():
            lines += [*doc["lines"], ""]
        lines.append(f"transfer {self.name} ({self.transfer_id}): {self.state}; chosen {self.chosen}, "
                     f"{self.plan.horizon} steps")
        ttb = self.time_to_best()
        header = f"{'rung':<10} {'params':>10} {'arm':<9} {'seeds':>5} {'best FD':>9} {'time to best s':>15}"
        lines += [header, "-" * len(header)]
        for rung in self.plan.rungs:
            for arm in self.plan.arms:
                done = [ttb[r.run_id] for r in self.runs
                        if r.rung == rung and r.arm == arm and r.state == "SUCCEEDED" and r.run_id in ttb]
                fd = f"{statistics.fmean(t.best_fd for t in done):.4g}" if done else "-"
                tt = f"{statistics.fmean(t.best_time_s for t in done):.4g}" if done else "-"
                lines.append(f"{rung:<10} {self.parameters(rung):>10} {arm:<9} {len(done):>5} {fd:>9} {tt:>15}")
        sav = self.savings()
        if sav:
            lines.append(f"\ntime to best saved by {self.searched_arm} (% of the baseline's; + = faster):")
            for rung, per in sav.items():
                for b, s in per.items():
                    spread = f" ± {s.std_pct:.1f}" if s.std_pct is not None else ""
                    lines.append(f"  {rung:<10} vs {b:<8} {s.mean_pct:+.1f}%{spread} (n={s.n})")
        lines.append(budget_line(self.tuning_budgets()))
        for doc in (self.fixed_arms() or {}).values():
            lines += [f"  {line}" for line in doc["lines"]]
        for rung, choices in self.lr_choices.items():
            for arm, choice in choices.items():
                tried = ", ".join(f"x{f} {d['mean_final']:.4g}" if d["mean_final"] is not None else f"x{f} -"
                                  for f, d in choice["multiples"].items())
                lines.append(f"  {rung:<10} {arm:<8} judged at lr x{choice['chosen']:g} (mean final quality: "
                             f"{tried})")
        report = self.targets()
        lines += target_table(report, self.searched_arm)
        lines += crossing_lines(report, self.searched_arm)
        lines += claim_lines(self.claims())
        doc = self.verification_doc()
        if doc is not None:
            lines.append("\n" + verification_line(doc) + (f": {doc['reason']}" if doc.get("reason") else ""))
        if self.rounds_lines:
            lines += ["\nseeds added in rounds:", *(f"  {line}" for line in self.rounds_lines)]
        if self.extension_lines:
            lines += ["\nseeds added after the transfer ended:", *(f"  {line}" for line in self.extension_lines)]
        if self.seeds_note:
            lines.append(f"\nNOTE: {self.seeds_note}")
        return "\n".join(lines)



def crossing_lines(report: Mapping[str, Any], searched_arm: str) -> list[str]:
    """Each comparison at the first crossing and in steps above the target (co-primary) and at the sustained
    crossing (reported, not judged): the restricted-mean steps ratio over every seed (censored seeds counted, not
    dropped), the time saving on it and how a null reads."""
    lines = [f"\n{searched_arm} against each baseline, every seed kept (restricted mean steps to target, or steps "
             "above it up to the horizon; a seed that does not reach, does not stay below, or stopped early, is "
             "censored there); first and steps_above are co-primary, sustained is reported, not judged (its "
             "interval covers about 89 % where a faster arm hovers near the target):"]
    for rung, e in report["rungs"].items():
        for base, c in e["comparisons"].items():
            for endpoint in ENDPOINTS:
                doc = c.get(endpoint) or {}
                if "error" in doc or not doc:
                    lines.append(f"  {rung:<10} vs {base:<8} {endpoint:<11} -: {doc.get('error', 'not computed')}")
                    continue
                r = doc["steps_to_target_ratio"]
                ci = f" [{r['lo']:.3g}, {r['hi']:.3g}]" if r.get("lo") is not None else ""
                censored = ", ".join(f"{arm} {n['right_censored']}" for arm, n in doc["censoring"].items())
                text = (f"  {rung:<10} vs {base:<8} {endpoint:<11} steps ratio {r['mean']:.3g}{ci} (n={r['n']}; "
                        f"censored {censored})")
                saving = doc.get("time_saving_pct")
                if saving:
                    sci = f" [{saving['lo']:+.1f}, {saving['hi']:+.1f}]" if saving.get("lo") is not None else ""
                    text += f", time saving {saving['mean']:+.1f}{sci} %: {doc.get('reading', '')}"
                lines.append(text)
    return lines


def budget_line(budgets: Mapping[str, Any]) -> str:
    """The tuning budget per arm in one line: settings tried in the sweep and runs per rung in the transfer; then,
    where the sweep recorded it, what it tuned on, the selection's standard error and the winner's curse."""
    arms = "; ".join(f"{arm} {b['sweep_settings'] if b['sweep_settings'] is not None else '?'} in the sweep"
                     + (f" ({b['sweep_trials']} trials)" if b.get("sweep_trials") else "") + ", "
                     f"{b['transfer_settings_per_rung']} x {b['runs_per_rung'] // b['transfer_settings_per_rung']} "
                     "runs per rung" for arm, b in budgets["arms"].items())
    words = {True: "equal", False: "NOT equal", None: "not known"}
    line = (f"tuning budget per arm (settings tried in the sweep; settings x seeds per rung here): {arms} (sweep "
            f"{words[budgets['equal_in_sweep']]}, transfer {words[budgets['equal_in_transfer']]})")
    sel = budgets.get("selection")
    if sel:
        on = ("the judged quantity" if sel.get("on_judged_quantity") else
              "NOT the judged quantity (the transfer judges steps to target)")
        se = f"{sel['selection_se']:.4g}" if sel.get("selection_se") is not None else "none (one seed)"
        curse = sel.get("winners_curse")
        cursed = (f"{curse['winners_curse']:+.4g} (confirmed - selected"
                  + (f"; {100 * curse['controlled_curse']:+.1f} % against the controls' shift)"
                     if curse.get("controlled_curse") is not None else ")")
                  if curse and curse.get("winners_curse") is not None else sel.get("winners_curse_note", "-"))
        line += (f"\n  the sweep tuned on {sel.get('objective')}: {on}; selection standard error {se}; winner's "
                 f"curse {cursed}")
    return line


def claim_lines(claims: Mapping[str, Any]) -> list[str]:
    """Each comparison's claim in the study's alpha budget, and its power at the level the strongest claim must
    pass: the claim's (both co-primary endpoints, bounds), then the first crossing's alone."""
    lines = [f"\nclaims of a time saving, in one budget ({claims['budget_text']}); a claim stands only where the first "
             "crossing and the steps above the target both show it (the sustained crossing reported, not judged):"]
    for key, stands in (claims.get("stands") or {}).items():
        p = {e: claims["p_holm"][e].get(key) for e in ENDPOINTS}
        state = f"stands ({claims['direction'][key]})" if stands else "does not stand"
        power = (claims.get("power") or {}).get(key)
        pair = (claims.get("power_co_primary") or {}).get(key)
        lines.append(f"  {key:<22} {state}; Holm p first {p['first']:.3g}, steps above {p['steps_above']:.3g} "
                     f"(sustained {p['sustained']:.3g}, reported)" + (f"; {pair['text']}" if pair else "")
                     + (f"; first crossing alone {power['text']}" if power else ""))
    lines += [f"  {key:<22} not judged (no comparison)" for key in claims.get("not_judged") or []]
    return lines
