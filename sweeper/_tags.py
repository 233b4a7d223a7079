"""The sweeper's MLflow tag names, on their own so that the spec (which refuses user tags that would overwrite
them) and the ledger (which writes and reads them) share them without importing each other. The layout of the
runs that carry them is described in `sweeper._ledger`."""

from __future__ import annotations

__all__ = ["TAG"]


class TAG:
    """Tag names; which runs carry them, and with what values, is laid out in `sweeper._ledger`."""

    KIND = "scalesweep.kind"
    SWEEP_ID = "scalesweep.sweep_id"
    SWEEP_NAME = "scalesweep.sweep_name"
    FINGERPRINT = "scalesweep.fingerprint"
    STATUS = "scalesweep.status"
    WORKDIR = "scalesweep.workdir"
    DRIVER_HOST = "scalesweep.driver_host"
    DRIVER_PID = "scalesweep.driver_pid"
    TRIAL_KEY = "scalesweep.trial_key"
    POINT_KEY = "scalesweep.point_key"
    ROLE = "scalesweep.role"
    ARM = "scalesweep.arm"
    SEED = "scalesweep.seed"
    ATTEMPT = "scalesweep.attempt"
    PARAMS = "scalesweep.params"
    STEPS_DONE = "scalesweep.steps_done"
    ERROR = "scalesweep.error"
    STOP_REASON = "scalesweep.stop_reason"
    BEST = "scalesweep.best."
