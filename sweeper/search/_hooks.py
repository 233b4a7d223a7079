"""What the Ray Tune adapters (`_tune`) may ask of a sweep driver: the seven calls they make, and the three facts
they read. The driver (`sweeper.jobs`' `_Driver`) implements it; the adapters know only this protocol, so the Tune side
can be read, and tested with a stub, without the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import threading

    from ..specs import EarlyStoppingSpec

__all__ = ["DriverHooks", "TuneHooks"]


class TuneHooks(Protocol):
    """One sweep run as the Tune searcher, scheduler, stopper and callback see it."""

    sweep_id: str
    n_evals: int  # eval steps per trial: ASHA's time axis

    @property
    def early_stopping(self) -> EarlyStoppingSpec: ...

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The next trial's config, None to wait, or `_planner.FINISHED` when the sweep has no more trials."""

    def on_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """A trial reported at an eval step."""

    def on_prune(self, trial_id: str, eval_index: int) -> None:
        """ASHA stops this trial before its last eval step."""

    def on_complete(self, trial_id: str, result: dict[str, Any] | None, error: bool) -> None:
        """A trial ended (finished, stopped or failed)."""

    def on_error(self, run_id: str, message: str) -> None:
        """Tune's error text for a failed trial's run."""

    def cancel_requested(self) -> bool:
        """Whether every trial should stop now."""

    def tick(self) -> None:
        """Tune finished a step of its loop: a chance to write the status and a progress line."""


class DriverHooks(TuneHooks, Protocol):
    """What the Tune stage (`_tune_stage`) asks of the driver besides the adapters' calls: the cancel (its event,
    and the request a signal makes), and how every trial ended once Tune has stopped."""

    cancel: threading.Event

    def request_cancel(self) -> None:
        """Stop gracefully, within the grace period."""

    def close_leftovers(self) -> None:
        """Trials Tune stopped without telling the searcher: CANCELLED, resumable."""

    def reconcile(self) -> None:
        """Re-apply how each trial ended."""
