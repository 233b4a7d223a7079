"""Baselines at their own rung and extra MLflow tags (what a transfer runs its rung x arm table with): the spec,
the planner's requests and the trial configs they become. No Ray."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from sweeper import SweepSpec
from sweeper.search import Planner

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


# Specs as users wrote them before baselines had a rung and tags, before registered trainers and before the
# selection's bootstrap options, with the fingerprints the sweeper of commit 67d9630 (2026-11-30, the first one)
# computed for them; the sweeper of 8b6ae9b computed the same. A sweep started then stores that digest in its
# sweep.json and resumes only if today's code computes it again. Pinned, not recomputed: a change of dump order,
# of a default or a new field left in the dump moves today's digest and this test fails.
OLD_SPECS = {
    "examples/sweep-tiny.yaml at 67d9630": ("""\
name: sweep-tiny
rung: cpu-xs                  # the smallest rung of the ladder
horizon: 60                   # training steps per trial
# eval_steps default: 2/3, 5/6 and 6/6 of the horizon -> [40, 50, 60]; the objective is their mean FD
search:
  method: grid                # Optuna's GridSampler: every point exactly once
  space:
    K: [2, 3]                 # refresh period (the paper's grid: [2, 3, 4])
    gamma: [0.15, 0.25]       # row-norm step ratio (the paper's grid: [0.10, 0.15, 0.25, 0.35])
  optimizer: {name: periodic} # lr etc. at trials' defaults
seeds: [0]
baselines: [adamw, muon]      # at the same rung, horizon and seeds
early_stopping: {method: none}
execution:
  concurrency: 2
  cpus_per_trial: 1           # torch threads per trial
retries: {max_retries: 1}
backend: {name: builtin, checkpoints: true}
selection: {tie_tolerance: 0.01, tie_break: larger_K}
trial:                        # any other TrialConfig field, the same for every trial
  batch_size: 16
  warmup_steps: 6
  log_every: 10
  text_encoder: learned       # no MiniLM download or cache needed
  eval:
    extractor: pixels
    extractor_options: {size: 4}
    fd_samples: 256
    reference_samples: 512
    sample_steps: 8
    val_samples: 64
tracking:
  tracking_uri: sqlite:///scalesweep-mlflow.db
  experiment: sweep-tiny
""", "ea6cdadb4f1c52a6"),
    "tpe + asha, seeds, baseline overrides, command backend": ("""\
name: fp-rich
rung: cpu-s
horizon: 300
eval_steps: [200, 250, 300]
search:
  method: tpe
  budget: 6
  space:
    K: [2, 3, 4]
    gamma: {low: 0.1, high: 0.35}
    lr: [0.01, 0.02]
  optimizer: {name: periodic, weight_decay: 0.05}
seeds: [0, 1, 2]
baselines: [adamw, {arm: muon, optimizer: {lr: 0.01}}]
early_stopping: {method: asha}
execution: {concurrency: 2, cpus_per_trial: 1}
retries: {max_retries: 2, retry_diverged: true}
backend: {name: command, command: ["python", "train.py", "--K", "{K}", "--gamma", "{gamma}"], timeout_s: 600}
selection: {tie_tolerance: 0.02, tie_break: larger_K}
trial: {batch_size: 16, text_encoder: learned}
tracking: {tracking_uri: "sqlite:///fp.db", experiment: fp-rich}
""", "4092684f660c31e0"),
}


@pytest.mark.parametrize("name", list(OLD_SPECS))
def test_fingerprint_of_a_spec_without_the_new_fields_is_unchanged(name: str) -> None:
    """Sweeps started before later fields existed must still resume: their fingerprint is the pinned one."""
    text, digest = OLD_SPECS[name]
    spec = SweepSpec.model_validate(yaml.safe_load(text))
    assert spec.fingerprint() == digest
    assert _spec(tags={"a": "b"}).fingerprint() != _spec().fingerprint()


def test_baselines_run_at_their_own_horizon_with_eval_steps_at_the_same_fractions() -> None:
    spec = _spec(baselines=[{"arm": "adamw", "label": "adamw.cpu-s", "rung": "cpu-s", "horizon": 30}, "muon"])
    assert spec.resolved_eval_steps == [8, 10, 12]
    assert spec.baseline_eval_steps(spec.baselines[0]) == [20, 25, 30]  # 2/3, 5/6, 6/6 of its own 30 steps
    planner = Planner(spec)
    requests = []
    while (req := planner.next()) is not None and not isinstance(req, str):
        requests.append(req)
    by_key = {r.trial_key: r for r in requests}
    adamw, muon = by_key["adamw.cpu-s,seed=0"], by_key["muon,seed=0"]
    assert (adamw.horizon, adamw.eval_steps) == (30, [20, 25, 30])
    assert (muon.horizon, muon.eval_steps) == (None, None)
    cfg = spec.trial_config(adamw.optimizer, 0, adamw.rung, horizon=adamw.horizon, eval_steps=adamw.eval_steps)
    assert (cfg["steps"], cfg["eval_steps"]) == (30, [20, 25, 30])
    cfg = spec.trial_config(muon.optimizer, 0, muon.rung, horizon=muon.horizon, eval_steps=muon.eval_steps)
    assert (cfg["steps"], cfg["eval_steps"]) == (12, [8, 10, 12])


def test_baseline_eval_steps_must_match_the_sweeps_count_and_horizon() -> None:
    with pytest.raises(ValidationError, match=r"baselines\[adamw\].eval_steps must be 3 distinct steps"):
        _spec(baselines=[{"arm": "adamw", "horizon": 30, "eval_steps": [20, 30]}])
    with pytest.raises(ValidationError, match=r"in \[1, horizon=30\]"):
        _spec(baselines=[{"arm": "adamw", "horizon": 30, "eval_steps": [20, 25, 40]}])
    with pytest.raises(ValidationError, match=r"eval_steps needs baselines\[adamw\].horizon"):
        _spec(baselines=[{"arm": "adamw", "eval_steps": [4, 6, 12]}])
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        _spec(baselines=[{"arm": "adamw", "horizon": 0}])
