"""Baselines at their own rung and extra MLflow tags (what a transfer runs its rung x arm table with): the spec,
the planner's requests and the trial configs they become. No Ray."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from sweeper import Planner, SweepSpec

from .conftest import TINY_TRIAL


def _spec(**fields: object) -> SweepSpec:
    return SweepSpec.model_validate({"name": "s", "horizon": 12, "search": {"space": {"K": [3], "gamma": [0.15]}},
                                     "trial": dict(TINY_TRIAL), **fields})


def test_baselines_run_at_their_rung_with_their_tags() -> None:
    spec = _spec(baselines=[{"arm": "adamw", "label": "adamw.cpu-s", "rung": "cpu-s", "tags": {"lr.rule": "width"}},
                            "muon"],
                 search={"space": {"K": [3], "gamma": [0.15]}, "tags": {"lr.rule": "unchanged"}},
                 tags={"lineage": "t-1", "lr.rule": "none"}, seeds=[0, 1])
    planner = Planner(spec)
    requests = []
    while (req := planner.next()) is not None and not isinstance(req, str):
        requests.append(req)
    by_key = {r.trial_key: r for r in requests}
    assert set(by_key) == {"adamw.cpu-s,seed=0", "adamw.cpu-s,seed=1", "muon,seed=0", "muon,seed=1",
                           "K=3,gamma=0.15,seed=0", "K=3,gamma=0.15,seed=1"}
    adamw = by_key["adamw.cpu-s,seed=1"]
    assert adamw.rung == "cpu-s" and adamw.tags == {"lineage": "t-1", "lr.rule": "width"}  # the arm's tags win
    assert by_key["muon,seed=0"].rung is None and by_key["muon,seed=0"].tags == {"lineage": "t-1", "lr.rule": "none"}
    assert by_key["K=3,gamma=0.15,seed=0"].tags == {"lineage": "t-1", "lr.rule": "unchanged"}
    assert spec.trial_config(adamw.optimizer, adamw.seed, adamw.rung)["rung"] == "cpu-s"
    assert spec.trial_config({"name": "muon"}, 0)["rung"] == "cpu-xs"


def test_unknown_rungs_and_reserved_tags_are_refused() -> None:
    with pytest.raises(ValidationError, match="unknown rung 'cpu-xxl'"):
        _spec(baselines=[{"arm": "adamw", "rung": "cpu-xxl"}])
    for tags in ({"scalesweep.sweep_id": "x"}, {"mlflow.parentRunId": "x"}):
        with pytest.raises(ValidationError, match="set by the sweeper itself"):
            _spec(tags=tags)
        with pytest.raises(ValidationError, match="set by the sweeper itself"):
            _spec(baselines=[{"arm": "adamw", "tags": tags}])


def test_fingerprint_of_a_spec_without_the_new_fields_is_unchanged() -> None:
    """Sweeps started before baselines had a rung and tags must still resume: their fingerprint is the same."""
    spec = _spec(baselines=["adamw", {"arm": "muon", "optimizer": {"lr": 0.01}}])
    payload = spec.model_dump(mode="json", exclude={"execution", "retries", "tags"})
    payload["search"].pop("tags")
    for b in payload["baselines"]:
        b.pop("tags"), b.pop("rung")
    old = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    assert spec.fingerprint() == old
    assert _spec(tags={"a": "b"}).fingerprint() != _spec().fingerprint()
