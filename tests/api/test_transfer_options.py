"""The transfer's decision options over REST: the weight-decay rule and the verification bracket reach the spec,
and a bad value is a 422 naming the field."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fastapi.exceptions import RequestValidationError

from api.schemas import TransferCreate
from api.service.routers.transfers import _spec


def test_weight_decay_rule_and_verify_reach_the_transfer_spec() -> None:
    sweep = SimpleNamespace(name="s", storage_path="/tmp/nowhere")
    body = TransferCreate(sweep_id="sw-1", rungs=["cpu-xs", "cpu-s"], weight_decay_rule="keep_wd",
                          verify={"rung": "cpu-s", "tolerance": 0.05})
    spec = _spec(body, sweep)  # type: ignore[arg-type]
    assert spec.weight_decay_rule == "keep_wd" and spec.verify is not None
    assert spec.verify.rung == "cpu-s" and spec.verify.tolerance == 0.05
    assert _spec(TransferCreate(sweep_id="sw-1", rungs=["cpu-s"]), sweep).verify is None  # type: ignore[arg-type]
    with pytest.raises(RequestValidationError) as err:
        _spec(TransferCreate(sweep_id="sw-1", rungs=["cpu-s"], weight_decay_rule="scale"), sweep)  # type: ignore[arg-type]
    assert err.value.errors()[0]["loc"] == ("body", "weight_decay_rule")
    with pytest.raises(RequestValidationError) as err:
        _spec(TransferCreate(sweep_id="sw-1", rungs=["cpu-s"], verify={"colour": 1}), sweep)  # type: ignore[arg-type]
    assert err.value.errors()[0]["loc"][:2] == ("body", "verify")


def test_controls_diagnostics_and_lr_brackets_reach_the_transfer_spec() -> None:
    sweep = SimpleNamespace(name="s", storage_path="/tmp/nowhere")
    body = TransferCreate(sweep_id="sw-1", rungs=["cpu-xs", "cpu-s"], controls=["negative", "positive"],
                          diagnostics=["effective_step"], lr_brackets={"periodic": [1, 1.5, 2.3]},
                          timing={"local_batch": 4, "clock": "thread"})
    spec = _spec(body, sweep)  # type: ignore[arg-type]
    assert list(spec.controls) == ["negative", "positive"] and list(spec.diagnostics) == ["effective_step"]
    assert spec.lr_brackets == {"periodic": [1, 1.5, 2.3]}
    assert spec.timing.local_batch == 4 and spec.timing.clock == "thread"
    with pytest.raises(RequestValidationError) as err:  # the transfer spec's own bounds, named over REST
        _spec(TransferCreate(sweep_id="sw-1", rungs=["cpu-s"], timing={"local_batch": 0}), sweep)  # type: ignore[arg-type]
    assert err.value.errors()[0]["loc"][:2] == ("body", "timing")


def test_an_unknown_control_is_refused_naming_the_field() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        TransferCreate(sweep_id="sw-1", rungs=["cpu-s"], controls=["bogus"])  # type: ignore[list-item]
    assert err.value.errors()[0]["loc"][0] == "controls"
