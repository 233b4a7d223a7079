"""What the transfer's verification stage concluded: the verdict over its bracket's runs, or why there is none."""

from __future__ import annotations

from typing import Any

from ._plan import _clean
from ._record import ResultRecord
from ._verification import verification_verdict

__all__ = ["VerificationAnswers"]


class VerificationAnswers(ResultRecord):
    """The verification stage's verdict."""

    def verification(self) -> Any:
        """The verification stage's verdict (`scaling.TransferVerdict`), or None without one or before its runs."""
        return verification_verdict({"verification": self.plan.verification},
                                    [*self.runs, *self.verification_runs], self.searched_arm, self.plan.seeds)

    def verification_doc(self) -> dict[str, Any] | None:
        """The verdict as data, {"verdict": "pending", ...} while its runs are missing, None without a stage."""
        plan = self.plan.verification
        if not plan:
            return None
        verdict = self.verification()
        if verdict is None:
            return _clean({"verdict": "pending", "rung": plan["rung"], "points": plan["points"],
                           "reason": "the bracket's runs have not all succeeded on a common seed yet"})
        return _clean({"rung": plan["rung"], "points": plan["points"], **verdict.to_dict()})
