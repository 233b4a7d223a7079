"""Every number a sweep, a transfer or a trial takes has a documented range: read from the JSON schemas, each
numeric field has a lower and an upper bound (the optimizer's fields: the sweeper's caps), and the total work of a
submission is capped (`SCALESWEEP_MAX_WORK`; tests/api/test_security.py)."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper import SweepSpec, TransferSpec
from trials import TrialConfig

# OptimizerConfig (trials.optim) is capped by the sweeper where a spec sets it (`sweeper.specs._values._PARAM_MAX`).
OPTIMIZER = "OptimizerConfig"


def _numeric(schema: dict[str, Any]) -> bool:
    return schema.get("type") in ("integer", "number")


def _bounded(schema: dict[str, Any]) -> bool:
    low = "minimum" in schema or "exclusiveMinimum" in schema
    high = "maximum" in schema or "exclusiveMaximum" in schema
    return low and high


def _unbounded(schema: dict[str, Any], where: str, defs: dict[str, Any], seen: set[str]) -> list[str]:
    """Paths of numeric values in `schema` without both bounds (following $refs once each)."""
    out: list[str] = []
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen or name == OPTIMIZER:
            return out
        return _unbounded(defs[name], where, defs, seen | {name})
    if _numeric(schema) and not _bounded(schema):
        out.append(where)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key, [])):
            out += _unbounded(sub, where if key != "prefixItems" else f"{where}[{i}]", defs, seen)
    if isinstance(schema.get("items"), dict):
        out += _unbounded(schema["items"], f"{where}[]", defs, seen)
    if isinstance(schema.get("additionalProperties"), dict):
        out += _unbounded(schema["additionalProperties"], f"{where}.*", defs, seen)
    for name, sub in schema.get("properties", {}).items():
        out += _unbounded(sub, f"{where}.{name}" if where else name, defs, seen)
    return out


@pytest.mark.parametrize("model", [SweepSpec, TransferSpec, TrialConfig], ids=lambda m: m.__name__)
def test_every_numeric_field_has_a_range(model: Any) -> None:
    schema = model.model_json_schema()
    assert _unbounded(schema, "", schema.get("$defs", {}), set()) == []


def test_every_numeric_optimizer_field_is_capped_by_the_sweeper() -> None:
    from sweeper.specs._values import _PARAM_MAX
    from trials.optim import OptimizerConfig

    schema = OptimizerConfig.model_json_schema()
    for name, sub in schema["properties"].items():
        numeric = [s for s in [sub, *sub.get("anyOf", []), *sub.get("prefixItems", [])] if _numeric(s)]
        if numeric and not all(_bounded(s) for s in numeric):
            assert name in _PARAM_MAX or any(k.startswith(f"{name}[") for k in _PARAM_MAX), name


@pytest.mark.parametrize(("field", "value"), [
    ("data.image_size", 10**6), ("eval.track_samples", 10**9), ("eval.track_sample_steps", 10**7),
    ("seed", 2**40), ("eval.guidance_scale", 1e9), ("threads", 10**6),
])
def test_trial_fields_beyond_their_range_are_refused_by_a_sweep_and_a_transfer(field: str, value: Any) -> None:
    head, _, tail = field.partition(".")
    trial: dict[str, Any] = {head: {tail: value}} if tail else {head: value}
    if field == "seed":  # owned by the sweep: data.seed is the trial section's seed
        trial = {"data": {"seed": value}}
    with pytest.raises(ValueError, match=r"trial"):
        SweepSpec.model_validate({"name": "b", "trial": trial})
    with pytest.raises(ValueError, match=r"trial"):
        TransferSpec.model_validate({"name": "t", "sweep": "x", "trial": trial})
