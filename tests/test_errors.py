"""One error root for the project: every package's base error is a `ScalesweepError`, input errors are also
`ValueError`s, job errors also `RuntimeError`s (so older `except` clauses still catch them), and the CLI's one
dispatch words each kind in one line with its exit status."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, Field, ValidationError

import scalesweep_cli
from dashboards import DashboardError, DashboardInputError
from scaling import ScalingError, ScalingInputError
from sweeper import SweepError
from sweeper.errors import SweepFailedError
from sweeper.transfer import TransferError
from trials import InputError, JobError, JobFailedError, ScalesweepError, TrialError
from trials.core.errors import validation_error_message, validation_messages
from trials.data import DataError
from trials.metrics import FeatureError, MetricsError
from trials.models import ModelError
from trials.text import TextEncoderError


@pytest.mark.parametrize(
    ("error", "old_base", "kind"),
    [
        (SweepError, RuntimeError, JobError),
        (SweepFailedError, RuntimeError, JobFailedError),
        (TrialError, RuntimeError, JobError),
        (TransferError, Exception, JobError),
        (ScalingError, Exception, ScalesweepError),
        (ScalingInputError, ValueError, InputError),
        (ModelError, ValueError, InputError),
        (DataError, ValueError, InputError),
        (TextEncoderError, ValueError, InputError),
        (MetricsError, Exception, ScalesweepError),
        (FeatureError, ValueError, InputError),
        (DashboardError, Exception, ScalesweepError),
        (DashboardInputError, ValueError, InputError),
    ],
)
def test_every_package_error_derives_from_the_root_and_keeps_its_old_base(
    error: type[Exception], old_base: type[Exception], kind: type[Exception]
) -> None:
    assert issubclass(error, ScalesweepError) and issubclass(error, kind) and issubclass(error, old_base)


def test_input_errors_are_value_errors_and_job_errors_runtime_errors() -> None:
    assert issubclass(InputError, ValueError) and not issubclass(InputError, RuntimeError)
    assert issubclass(JobError, RuntimeError) and not issubclass(JobError, ValueError)


class _Model(BaseModel):
    gamma: float = Field(gt=0, le=1)
    name: str


def test_one_formatter_for_validation_errors() -> None:
    with pytest.raises(ValidationError) as info:
        _Model.model_validate({"gamma": 5, "name": 3})
    exc = info.value
    assert validation_messages(exc) == ("gamma: Input should be less than or equal to 1; "
                                        "name: Input should be a valid string")
    assert validation_messages(exc, "optimizer").startswith("optimizer.gamma: ")
    assert validation_messages(exc, "K[0]", with_field=False).startswith("K[0]: Input should be")
    assert validation_error_message(exc, "spec").startswith("invalid spec: gamma: ")
    assert validation_error_message(exc, field=lambda loc: f"X_{loc[0]}").startswith("invalid _Model: X_gamma: ")


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (SweepFailedError("driver died"), 1, "scalesweep x: error: driver died"),
        (SweepError("folder holds another sweep"), 2, "scalesweep x: error: folder holds another sweep"),
        (TransferError("no chosen point"), 2, "scalesweep x: error: no chosen point"),
        (ModelError("unknown rung 'huge'"), 2, "scalesweep x: error: unknown rung 'huge'"),
        (FileNotFoundError("no such file: a.yaml"), 2, "scalesweep x: error: no such file: a.yaml"),
        (RuntimeError("ray\nbroke"), 1, "scalesweep x: error: RuntimeError: ray broke"),
        # A driver's error is its log (driver.log, `ray job logs`): a URI it quotes keeps no user information.
        (RuntimeError("API request to http://alice:pw-Xq81@mlflow:5000/api/2.0/x failed"), 1,
         "scalesweep x: error: RuntimeError: API request to http://mlflow:5000/api/2.0/x failed"),
        (SweepError("cannot reach postgresql://bob:pw-Zz9@db/scalesweep"), 2,
         "scalesweep x: error: cannot reach postgresql://db/scalesweep"),
    ],
)
def test_the_cli_dispatch_words_each_kind_in_one_line(error: Exception, code: int, line: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    def command() -> int:
        raise error

    assert scalesweep_cli.dispatch("scalesweep x", command) == code
    assert capsys.readouterr().err.strip() == line


def test_a_corrupt_transfer_file_does_not_escape_live_status(tmp_path: Path) -> None:
    from api.service import Settings
    from api.service._jobs import JobRunner
    from api.service.db import TransferRecord, make_engine, make_sessionmaker

    folder = tmp_path / "transfer"
    folder.mkdir()
    (folder / "transfer.json").write_text("{ not json")
    settings = Settings(workdir=tmp_path, api_token="a-real-token-123")  # type: ignore[call-arg]
    runner = JobRunner(settings, make_sessionmaker(make_engine(settings.db_url)))
    assert runner.live_status(TransferRecord(id="t1", storage_path=str(folder))) == {}
