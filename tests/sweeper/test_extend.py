"""What an extension of a finished sweep may add, and the refusals that name what it may not change
(`sweeper.jobs.check_extension`)."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper import SweepError, SweepSpec
from sweeper.jobs import check_extension


def _spec(**fields: Any) -> SweepSpec:
    base: dict[str, Any] = {"name": "x", "rung": "cpu-xs", "horizon": 24, "seeds": [0, 1],
                            "search": {"space": {"K": [2, 3], "gamma": [0.15]}}, "baselines": ["adamw"]}
    for key, value in fields.items():
        if key == "search":
            base["search"] = {**base["search"], **value}
        else:
            base[key] = value
    return SweepSpec.model_validate(base)


def test_seeds_grid_values_and_baselines_are_additions_listed_in_words() -> None:
    old = _spec()
    assert check_extension(old, old) == []
    grown = _spec(seeds=[0, 1, 2, 3], search={"space": {"K": [2, 3, 4], "gamma": [0.15, 0.25]}},
                  baselines=["adamw", "muon"], execution={"concurrency": 2})
    assert check_extension(old, grown) == ["seeds [2, 3]", "K values [4]", "gamma values [0.25]",
                                           "baselines ['muon']"]


def test_a_search_is_extended_by_its_budget_only() -> None:
    old = _spec(search={"method": "tpe", "budget": 4, "space": {"K": [2, 3, 4], "gamma": {"low": 0.1, "high": 0.3}}})
    more = _spec(search={"method": "tpe", "budget": 8, "space": {"K": [2, 3, 4], "gamma": {"low": 0.1, "high": 0.3}}})
    assert check_extension(old, more) == ["budget 4 -> 8 points"]
    with pytest.raises(SweepError, match=r"search\.budget"):
        check_extension(more, old)
    wider = _spec(search={"method": "tpe", "budget": 8, "space": {"K": [2, 3, 4], "gamma": {"low": 0.1, "high": 0.5}}})
    with pytest.raises(SweepError, match=r"search\.space: a tpe search"):
        check_extension(old, wider)


@pytest.mark.parametrize(("change", "named"), [
    ({"horizon": 48}, "horizon"),
    ({"rung": "cpu-s"}, "rung"),
    ({"eval_steps": [8, 16, 24]}, "eval_steps"),
    ({"search": {"optimizer": {"lr": 0.05}}}, "search.optimizer.lr"),
    ({"selection": {"tie_break": "none"}}, "selection.tie_break"),
    ({"seeds": [1, 2]}, "seeds"),
    ({"search": {"space": {"K": [3, 4], "gamma": [0.15]}}}, "search.space.K"),
    ({"search": {"space": {"K": [2, 3], "gamma": [0.15], "lr": [0.02]}}}, "searched parameters"),
    ({"baselines": ["muon"]}, "baselines"),
])
def test_anything_else_changed_is_refused_naming_the_field(change: dict[str, Any], named: str) -> None:
    with pytest.raises(SweepError, match=named.replace(".", r"\.")):
        check_extension(_spec(), _spec(**change))


def test_a_confirmed_sweep_is_not_extended() -> None:
    with pytest.raises(SweepError, match=r"confirm\.top=2.*warm_start"):
        check_extension(_spec(confirm={"top": 2}), _spec(confirm={"top": 2}, seeds=[0, 1, 2]))


def test_the_example_extension_adds_a_seed_and_k4_to_the_tiny_sweep() -> None:
    from sweeper import load_spec

    old, new = load_spec("examples/sweep-tiny.yaml"), load_spec("examples/sweep-tiny-more-seeds.yaml")
    assert check_extension(old, new) == ["seeds [1]", "K values [4]"]


def test_an_extension_keeps_the_worker_count() -> None:
    """Issue 64, N10: an extension on 2 workers of a 1-worker sweep would mix the two in one selection."""
    with pytest.raises(SweepError, match=r"^execution.workers_per_trial: an extension keeps the sweep's 1 \(got 2\)"):
        check_extension(_spec(), _spec(execution={"workers_per_trial": 2}, seeds=[0, 1, 2]))
    assert check_extension(_spec(), _spec(execution={"num_cpus": 2}, seeds=[0, 1, 2])) == ["seeds [2]"]
