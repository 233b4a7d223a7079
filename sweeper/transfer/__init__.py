"""The transfer, in one place: carry a finished sweep's chosen pair, unchanged, to larger rungs beside the baseline
arms, and read what happened.

- `_spec`: `TransferSpec` (validated; `load_transfer_spec`, `default_transfer_workdir`), and `_sections`, the
  sections that say how its runs are judged and timed (`TargetSpec` with its `PilotSpec`, `HorizonSpec`,
  `TimingSpec`, `PlateauSpec`); `_errors`: `TransferError`;
- `_plan`: the typed plan (`TransferPlan`, `PlanRow`, `size_basis`);
- `_result`: `TransferResult`, one class over one record (the transfer's runs and plan), each answer a method
  whose work is a function of the module owning its concept (`_savings`, `_targets`, `_fits`, `_export`), computed
  with `scaling`'s pure functions; `_record`: which runs an lr bracket judges;
- `_planning`: the finished sweep read once (`_Source`), and the plan with the one typed sweep spec that runs it;
- `_state`: `transfer.json` (`TransferHead` for readers, `TransferState` with the typed sweep spec for the
  driver) and `transfer_status`;
- `_job`: the job: `run_transfer` (plan, timing, one multi-rung sweep as an inner job of the sweeper's runner) and
  `cancel_transfer`;
- `_reading`: the reader of its runs (`load_transfer_result`, `read_runs`) and `export_from_sweep`;
- `_pilot`: the pilot of target rule `pilot` (the reference arm trained to a plateau before the judged runs, at one
  rung or at every rung with `per_rung`);
- `_time_ratio`: the fits' `time_ratio` section (the time ratio at equal quality per rung against size, the largest
  rung held out, the extrapolation to the paper's rungs);
- `_timing`: the timing stage (short runs of the real trial per rung and arm);
- `_extend`: more seeds for a finished transfer (`extend_transfer`), each extension one more look;
- `_verification`: the verification stage (the bracket it plans, the verdict over its runs);
- `_records`: a transfer's raw records as plain files, and the transfer read back from them
  (`write_transfer_records`, `read_transfer_records`: what a study keeps in a repository);
- `_work`: what a transfer asks of the cluster, in training-step units (`transfer_work`); `_estimate`: the transfer
  priced on this machine before it runs (`transfer_estimate`, `prior_spread`: `scalesweep transfer plan`);
- `cli`: `scalesweep transfer run|plan|status|cancel|extend|records|fits`, `scalesweep fit` and `scalesweep export`.

Why here: a transfer is one multi-rung sweep, run by the sweeper's driver with its lock, state, ledger, resume and
cancel (docs/design.md, "Package map"). The public names are also `sweeper`'s (`sweeper.run_transfer`, ...), loaded
on first use so that `import sweeper` stays light.
"""

from __future__ import annotations

from ._errors import TransferError
from ._estimate import prior_spread, transfer_estimate
from ._extend import apply_transfer_extension, extend_transfer
from ._job import cancel_transfer, run_transfer
from ._reading import export_from_sweep, load_transfer_result
from ._records import read_transfer_records, write_transfer_records
from ._result import TransferPlan, TransferResult, size_basis
from ._sections import TimingSpec
from ._spec import TransferSpec, load_transfer_spec
from ._state import transfer_status
from ._verification import verification_line
from ._work import transfer_work

__all__ = [
    "TimingSpec",
    "TransferError",
    "TransferPlan",
    "TransferResult",
    "TransferSpec",
    "apply_transfer_extension",
    "cancel_transfer",
    "export_from_sweep",
    "extend_transfer",
    "load_transfer_result",
    "load_transfer_spec",
    "prior_spread",
    "read_transfer_records",
    "run_transfer",
    "size_basis",
    "transfer_estimate",
    "transfer_status",
    "transfer_work",
    "verification_line",
    "write_transfer_records",
]
