"""The transfer spec's `timing:` section (`sweeper.transfer.TimingSpec`) and what the timing stage runs
(`trials.steptime.StepTimingConfig`) take each interleaved option's bounds and meaning from one declaration."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sweeper.transfer import TimingSpec
from trials.steptime import StepTimingConfig

# Field -> (bounds, the transfer's default, the timing stage's default).
SHARED = {
    "local_batch": ({"minimum": 1, "maximum": 65_536}, None, None),
    "clock": ({}, "thread", "thread"),
    "block_steps": ({"minimum": 1, "maximum": 1_000}, None, None),
    "warmup_rounds": ({"minimum": 0, "maximum": 100}, 2, 2),
    "rounds": ({"minimum": 2, "maximum": 10_000}, 12, 10),
    "target_halfwidth": ({"exclusiveMinimum": 0, "exclusiveMaximum": 1}, None, None),
    "max_rounds": ({"minimum": 2, "maximum": 10_000}, 60, 200),
}
BOUND_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _bounds(prop: dict) -> dict:
    """The bounds of a JSON-schema property, an optional one's (`anyOf` [number, null]) included."""
    parts = prop.get("anyOf", [prop])
    return {k: v for part in parts for k, v in part.items() if k in BOUND_KEYS}


def test_each_shared_option_has_one_description_and_one_set_of_bounds() -> None:
    spec = TimingSpec.model_json_schema()["properties"]
    stage = StepTimingConfig.model_json_schema()["properties"]
    for field, (bounds, spec_default, stage_default) in SHARED.items():
        assert spec[field]["description"] == stage[field]["description"], field
        assert spec[field]["default"] == spec_default and stage[field]["default"] == stage_default, field
        # The transfer holds all its runs until timing ends: it caps rounds at 1000, the stage at 10000.
        assert _bounds(stage[field]) == bounds, field
        assert _bounds(spec[field]) == ({**bounds, "maximum": 1_000} if field == "rounds" else bounds), field
    assert set(SHARED) <= set(TimingSpec.model_fields) and set(SHARED) <= set(StepTimingConfig.model_fields)


@pytest.mark.parametrize(("field", "bad", "message"), [
    ("local_batch", 0, "greater than or equal to 1"),
    ("local_batch", 65_537, "less than or equal to 65536"),
    ("block_steps", 1_001, "less than or equal to 1000"),
    ("warmup_rounds", 101, "less than or equal to 100"),
    ("rounds", 1, "greater than or equal to 2"),
    ("target_halfwidth", 1.0, "less than 1"),
    ("max_rounds", 10_001, "less than or equal to 10000"),
    ("clock", "cpu", "'thread' or 'wall'"),
])
def test_both_refuse_a_bad_value_alike_naming_the_field(field: str, bad: object, message: str) -> None:
    for model in (TimingSpec, StepTimingConfig):
        with pytest.raises(ValidationError) as caught:
            model.model_validate({field: bad})
        (error,) = caught.value.errors()
        assert error["loc"] == (field,) and message in error["msg"], (model.__name__, error)


def test_the_transfer_caps_rounds_lower() -> None:
    assert StepTimingConfig(rounds=1_001, max_rounds=2_000).rounds == 1_001
    with pytest.raises(ValidationError, match="less than or equal to 1000"):
        TimingSpec(rounds=1_001, max_rounds=2_000)
