"""A transfer's results, analysed (`TransferResult`), over runs already read (`TransferRun`) and the transfer's
typed plan (`TransferPlan`, in `_plan`). No Ray, no MLflow: every number is one of `scaling`'s pure functions over
those runs. The answers live by what they answer, each a class `TransferResult` is made of:

    _record        the data: identity, plan, runs; the searched arm, the chosen pair, parameter counts
    _savings       time to best per run, savings per rung and baseline, common targets
    _targets       the report against the declared target, the undertrained rungs
    _fits          scaling fits per metric (fitted once per form), predictions, fits as documents
    _verdict       the verification stage's verdict
    _export        the analysis document, the report's target section, the export for a rung

Running a transfer, its status, its cancel and reading its runs from MLflow are the transfer job beside it
(`_job`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from scaling.claims import ENDPOINTS
from scaling.rungs import target_table

from ._export import ExportAnswers
from ._fits import FIT_METRICS
from ._fits import _fit_doc as _fit_doc  # re-exported: readers import it from here
from ._plan import PlanBase, PlanRow, TransferPlan, size_basis
from ._plan import _clean as _clean
from ._plan import _rung_shape as _rung_shape
from ._verification import verification_line

__all__ = ["FIT_METRICS", "PlanBase", "PlanRow", "TransferPlan", "TransferResult", "size_basis"]


class TransferResult(ExportAnswers):
    """A transfer's runs, read from MLflow, and what follows from them: time to best per run, savings of the
    searched arm against each baseline per rung, the target report, scaling fits per metric, predictions, the
    verification verdict and exports."""

    def table(self) -> str:
        """Time to best per rung and arm (mean over seeds), and the savings, as text."""
        controls = self.controls()
        # A target from a pilot that had not plateaued first, then the controls: whether the line and the instrument
        # can be trusted decides how the rest reads.
        flag = (self.targets().get("pilot") or {}).get("flag")
        lines = [flag, ""] if flag else []
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
    """The tuning budget per arm in one line: settings tried in the sweep and runs per rung in the transfer."""
    arms = "; ".join(f"{arm} {b['sweep_settings'] if b['sweep_settings'] is not None else '?'} in the sweep, "
                     f"{b['transfer_settings_per_rung']} x {b['runs_per_rung'] // b['transfer_settings_per_rung']} "
                     "runs per rung" for arm, b in budgets["arms"].items())
    words = {True: "equal", False: "NOT equal", None: "not known"}
    return (f"tuning budget per arm (settings tried in the sweep; settings x seeds per rung here): {arms} (sweep "
            f"{words[budgets['equal_in_sweep']]}, transfer {words[budgets['equal_in_transfer']]})")


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
