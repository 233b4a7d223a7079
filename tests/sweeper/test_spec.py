"""The sweep spec: the paper's defaults, loading from YAML/JSON, and refusals that name the field and the choices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sweeper import SweepError, SweepSpec, load_spec
from sweeper.specs import format_params

from .conftest import REPO, TINY_TRIAL


def test_defaults_are_the_papers_first_stage() -> None:
    spec = SweepSpec(name="paper")
    assert spec.rung == "cpu-xs" and spec.horizon == 1800
    assert spec.resolved_eval_steps == [1200, 1500, 1800]  # 2/3, 5/6, 6/6 of the horizon
    assert spec.search.method == "grid" and spec.search.grid_size == 12
    assert {format_params(p) for p in spec.search.grid_points()} >= {"K=3,gamma=0.15", "K=2,gamma=0.1",
                                                                       "K=4,gamma=0.35"}
    assert [b.name for b in spec.baselines] == ["adamw", "muon"]
    assert spec.seeds == [0] and spec.early_stopping.method == "none"
    assert spec.search.optimizer_for({"K": 3, "gamma": 0.15}) == {"name": "periodic", "refresh_every": 3,
                                                                  "gamma": 0.15}
    cfg = spec.trial_config({"name": "adamw"}, seed=2)
    assert cfg["steps"] == 1800 and cfg["eval_steps"] == [1200, 1500, 1800] and cfg["seed"] == 2
    assert cfg["threads"] == 1  # one torch thread per reserved CPU


def test_default_horizon_is_the_trials_default() -> None:
    # The sweep spec keeps its own literal (importing trials would pull in torch); the two must not drift apart.
    from trials import TrialConfig, default_eval_steps

    spec, trial = SweepSpec(name="paper"), TrialConfig()
    assert spec.horizon == trial.steps
    assert spec.resolved_eval_steps == default_eval_steps(trial.steps) == trial.resolved_eval_steps


def test_load_yaml_json_and_the_shipped_example(tmp_path: Path) -> None:
    data: dict[str, Any] = {"name": "s", "horizon": 30, "seeds": [0, 1], "trial": TINY_TRIAL,
                            "search": {"method": "tpe", "budget": 3,
                                       "space": {"K": [2, 3, 4], "lr": {"low": 0.005, "high": 0.05, "log": True}}}}
    (tmp_path / "s.json").write_text(json.dumps(data))
    import yaml

    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    a, b = load_spec(tmp_path / "s.json"), load_spec(tmp_path / "s.yaml")
    assert a == b and a.resolved_eval_steps == [20, 25, 30] and a.search.grid_size == float("inf")

    example = load_spec(REPO / "examples" / "sweep-tiny.yaml")
    assert example.search.grid_size == 4 and example.search.method == "grid"
    assert [b.name for b in example.baselines] == ["adamw", "muon"]

    with pytest.raises(FileNotFoundError):
        load_spec(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("name: [x\n")
    with pytest.raises(SweepError, match="not valid YAML"):
        load_spec(tmp_path / "broken.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(SweepError, match="a mapping of fields"):
        load_spec(tmp_path / "list.yaml")


def test_fingerprint_ignores_what_may_change_on_resume() -> None:
    a = SweepSpec(name="s")
    b = SweepSpec(name="s", execution={"concurrency": 7}, retries={"max_retries": 3})
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != SweepSpec(name="s", seeds=[0, 1]).fingerprint()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"search": {"method": "bayes"}}, "search.method\n  Input should be 'grid', 'tpe' or 'random'"),
        ({"search": {"method": "tpe"}}, "method 'tpe' needs a budget"),
        ({"search": {"method": "tpe", "budget": 13}}, "budget 13 exceeds the 12 distinct points"),
        ({"search": {"budget": 3}}, "method 'grid' runs every point exactly once and takes no budget"),
        ({"search": {"space": {"beta": [1.0]}}}, "unknown search parameter 'beta'; allowed: ['K', 'gamma', 'lr'"),
        ({"search": {"space": {"K": [2.5]}}}, "K takes integers"),
        ({"search": {"space": {"gamma": [-0.1]}}}, "search.space.gamma=-0.1: Input should be greater than 0"),
        ({"search": {"space": {"lr": {"low": 1e-3, "high": 1e-1}}}}, "method 'grid' needs a list of values"),
        ({"search": {"optimizer": {"name": "sgd"}}},
         "'adamw', 'muon', 'periodic', 'rownorm', 'muon_extra_ns' or 'muon_stretched'"),
        ({"search": {"optimizer": {"gamma": 0.2}}}, "search.optimizer sets ['gamma'], which the search space searches"),
        ({"baselines": ["sgd"]}, "baselines.0.arm\n  Input should be 'adamw', 'muon', 'periodic', 'rownorm', "
         "'muon_extra_ns' or 'muon_stretched'"),
        ({"baselines": ["adamw", "adamw"]}, "baseline names must be distinct"),
        ({"seeds": [0, 0]}, "seeds must be distinct"),
        ({"rung": "huge"}, "unknown rung 'huge'; allowed: ['cpu-3xs', 'cpu-2xs', 'cpu-xs1', 'cpu-xs'"),
        ({"eval_steps": [10, 5000]}, "eval_steps must be distinct steps in [1, horizon=1800]"),
        ({"trial": {"steps": 10}}, "trial.steps is set by the sweep (horizon)"),
        ({"trial": {"batch_size": 0}}, "trial.batch_size: Input should be greater than or equal to 1"),
        ({"trial": {"eval": {"extractor": "inception"}}}, "unknown eval.extractor 'inception'; allowed: ['dinov2'"),
        ({"backend": {"name": "slurm"}}, "does not match any of the expected tags: 'builtin', 'command'"),
        ({"backend": {"name": "command", "command": "train {beta}"}}, "unknown placeholder {beta}"),
        ({"early_stopping": {"method": "asha", "grace_evals": 3}}, "grace_evals (3) must be below the number"),
        ({"early_stopping": {"method": "hyperband"}}, "Input should be 'none' or 'asha'"),
        ({"selection": {"tie_break": "smaller_K"}}, "Input should be 'larger_K' or 'none'"),
        ({"name": "has space"}, "String should match pattern"),
        ({"bogus": 1}, "Extra inputs are not permitted"),
    ],
)
def test_invalid_specs_name_the_field_and_the_allowed_values(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        SweepSpec.model_validate({"name": "s", **fields})
    assert message in str(info.value)


def test_format_params_is_canonical() -> None:
    assert format_params({"gamma": 0.15, "K": 3}) == "K=3,gamma=0.15"
    assert format_params({"lr": 0.0200000001, "K": 2.0}) == "K=2,lr=0.02"
