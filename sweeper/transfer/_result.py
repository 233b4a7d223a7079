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
        lines = [f"transfer {self.name} ({self.transfer_id}): {self.state}; chosen {self.chosen}, "
                 f"{self.plan.horizon} steps"]
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
        lines += target_table(self.targets(), self.searched_arm)
        doc = self.verification_doc()
        if doc is not None:
            lines.append("\n" + verification_line(doc) + (f": {doc['reason']}" if doc.get("reason") else ""))
        if self.rounds_lines:
            lines += ["\nseeds added in rounds:", *(f"  {line}" for line in self.rounds_lines)]
        if self.seeds_note:
            lines.append(f"\nNOTE: {self.seeds_note}")
        return "\n".join(lines)
