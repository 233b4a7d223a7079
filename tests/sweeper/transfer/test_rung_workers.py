"""A transfer's rungs on their own worker counts, without training: `rungs: {cpu-l: {workers: 2}}` is accepted
beside the plain list (whose fingerprint is unchanged), refused where a rung cannot run on its count (naming
`rungs.<rung>.workers` and the values allowed), and compiled into the one sweep that runs the transfer so that each
trial's config and Ray resources carry its rung's count. The same on a real transfer:
tests/scaling/test_transfer_run.py::test_a_transfer_with_one_rung_on_two_workers_times_each_rung_at_its_count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sweeper import SweepSpec
from sweeper.specs.checks import check_capacity
from sweeper.transfer import TransferError, TransferSpec

from ..conftest import TINY_TRIAL


def _sweep_folder(root: Path, *, batch: int = 12, workers: int | None = None) -> str:
    """A finished sweep's folder as far as the transfer spec reads it: its stored spec and status."""
    root.mkdir(parents=True, exist_ok=True)
    stored: dict[str, Any] = {"trial": {"batch_size": batch}, "search": {"space": {"K": [3], "gamma": [0.15]}},
                              "backend": {"name": "builtin"}}
    if workers is not None:
        stored["execution"] = {"workers_per_trial": workers}
    (root / "spec.json").write_text(json.dumps(stored))
    (root / "status.json").write_text(json.dumps({"state": "SUCCEEDED", "best": {"point_key": "K=3,gamma=0.15"}}))
    return str(root)


def _refused(spec: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    with pytest.raises(ValidationError) as err:
        TransferSpec.model_validate({"name": "t", **spec})
    return [(e["loc"], e["msg"].removeprefix("Value error, ")) for e in err.value.errors()]


def test_a_rungs_mapping_sets_each_rungs_workers_and_a_plain_list_is_read_and_fingerprinted_as_before() -> None:
    def spec(rungs: Any, **extra: Any) -> TransferSpec:
        return TransferSpec.model_validate({"name": "a", "sweep": "/nowhere", "rungs": rungs, **extra})

    plain = spec(["cpu-xs", "cpu-s"])
    assert plain.rungs == ["cpu-xs", "cpu-s"] and plain.rung_names == ["cpu-xs", "cpu-s"] and plain.rung_workers == {}
    # Computed by the code before per-rung workers: a transfer started then still resumes.
    assert plain.fingerprint() == "b675cf81fbed168c"
    # A mapping without counts (YAML's bare `cpu-xs:` is null) is the same study as the list.
    assert spec({"cpu-xs": None, "cpu-s": {}}).fingerprint() == "b675cf81fbed168c"
    two = spec({"cpu-xs": None, "cpu-s": {"workers": 2}})
    assert two.rung_names == ["cpu-xs", "cpu-s"] and two.rung_workers == {"cpu-s": 2}
    # The counts are part of the study (the timing is measured at them once): another count, another fingerprint.
    prints = {two.fingerprint(), spec({"cpu-xs": None, "cpu-s": {"workers": 4}}).fingerprint(),
              spec({"cpu-xs": {"workers": 2}, "cpu-s": None}).fingerprint(), plain.fingerprint()}
    assert len(prints) == 4
    # A stored spec reads back as written.
    assert TransferSpec.model_validate(two.model_dump(mode="json")) == two
    # The execution section's count still changes nothing in the fingerprint (it may change on resume).
    assert spec(["cpu-xs", "cpu-s"], execution={"workers_per_trial": 2}).fingerprint() == "b675cf81fbed168c"


def test_a_bad_rungs_mapping_is_refused_naming_the_field_and_the_allowed_values(tmp_path: Path) -> None:
    sweep = _sweep_folder(tmp_path / "sweep", batch=12)
    [(loc, msg)] = _refused({"sweep": sweep, "rungs": {"cpu-xs": None, "cpu-s": {"worker": 2}}})
    assert loc == ("rungs", "mapping", "cpu-s", "worker") and msg == "Extra inputs are not permitted"
    [(loc, msg)] = _refused({"sweep": sweep, "rungs": {"cpu-s": {"workers": 0}}})
    assert loc == ("rungs", "mapping", "cpu-s", "workers") and msg == "Input should be greater than or equal to 1"
    # pydantic's location holds the union's form; what a reader is told names the field as written (CLI and REST)
    from pydantic import ValidationError

    from trials.core import field_location, validation_error_message

    assert field_location(("body", *loc)) == ("body", "rungs", "cpu-s", "workers")
    with pytest.raises(ValidationError) as refused:
        TransferSpec.model_validate({"name": "t", "sweep": sweep, "rungs": {"cpu-s": {"workers": 0}}})
    assert "rungs.cpu-s.workers: Input should be greater" in validation_error_message(refused.value, "transfer spec")
    assert field_location(("mapping", "cpu-s")) == ("mapping", "cpu-s")  # only after the registered field
    [(loc, msg)] = _refused({"sweep": sweep, "rungs": "cpu-s"})
    assert loc == ("rungs",) and msg == ("rungs must be a list of rung names, e.g. [cpu-s, cpu-l], or a mapping rung "
                                         "-> options, e.g. {cpu-s: {}, cpu-l: {workers: 2}}")
    [(loc, msg)] = _refused({"sweep": sweep, "rungs": {}})
    assert loc == ("rungs",) and msg == "rungs must name at least one rung, got {}"
    [(loc, msg)] = _refused({"sweep": sweep, "rungs": {"cpu-q": {"workers": 2}}})
    assert loc == ("rungs",) and msg.startswith(
        "unknown rung 'cpu-q'; allowed: ['cpu-3xs', 'cpu-2xs', 'cpu-xs1', 'cpu-xs', 'cpu-s', 'cpu-m', 'cpu-l'")
    [(loc, msg)] = _refused({"sweep": sweep, "rungs": {"cpu-xs": None}, "rounds": {"rung": "cpu-s"}})
    assert msg == "rounds.rung 'cpu-s' must be one of rungs ['cpu-xs']"


def test_a_rung_on_n_workers_is_refused_where_it_cannot_run_naming_the_rung(tmp_path: Path) -> None:
    sweep = _sweep_folder(tmp_path / "sweep", batch=12)
    two = {"sweep": sweep, "rungs": {"cpu-xs": None, "cpu-s": {"workers": 2}}}
    [(loc, msg)] = _refused({**two, "rungs": {"cpu-xs": None, "cpu-s": {"workers": 5}}})
    assert loc == () and msg == ("rungs.cpu-s.workers 5 does not divide the training batch (trial.batch_size 12): "
                                 "each rank trains batch_size / workers samples; allowed worker counts: "
                                 "[1, 2, 3, 4, 6, 12]")
    assert TransferSpec.model_validate({"name": "t", **two, "rungs": {"cpu-s": {"workers": 5}},
                                        "trial": {"batch_size": 20}}).rung_workers == {"cpu-s": 5}
    # The arms and controls run at every rung: one rung on 2 workers is enough to refuse those with no sharded form.
    [(_, msg)] = _refused({**two, "arms": ["periodic", "adamw", "rownorm"]})
    assert msg == ("arms ['periodic', 'adamw', 'rownorm']: 'rownorm' has no sharded form, so it cannot run on "
                   "rungs.cpu-s.workers 2; allowed arms on several workers: adamw, muon, periodic")
    [(_, msg)] = _refused({**two, "arms": ["periodic", "muon", "adamw"], "controls": ["positive"]})
    assert "positive control (muon_extra_ns) runs in one process only; with rungs.cpu-s.workers 2 allowed: [], " \
           "['negative']" in msg
    [(_, msg)] = _refused({**two, "timing": {"method": "isolated"}})
    assert msg == ("timing.method 'isolated' times one process; with rungs.cpu-s.workers 2 the timing stage times "
                   "the N-rank step: allowed: 'interleaved'")
    [(_, msg)] = _refused({**two, "timing": {"local_batch": 6}})
    assert msg.startswith("timing.local_batch is the one-process stand-in for a rank's batch; with rungs.cpu-s.workers "
                          "2 each timing rank trains batch_size / 2 itself")
    # Every rung on 1 worker, whatever the execution section says: nothing runs sharded, rownorm is fine.
    ones = {"cpu-xs": {"workers": 1}, "cpu-s": {"workers": 1}}
    ok = TransferSpec.model_validate({"name": "t", "sweep": sweep, "rungs": ones, "execution": {"workers_per_trial": 2},
                                      "arms": ["periodic", "adamw", "rownorm"]})
    assert ok.rung_workers == {"cpu-xs": 1, "cpu-s": 1}
    # One rung left to the execution section's 2: refused, naming that section.
    [(_, msg)] = _refused({"sweep": sweep, "rungs": {"cpu-xs": {"workers": 1}, "cpu-s": None},
                           "execution": {"workers_per_trial": 2}, "arms": ["periodic", "adamw", "rownorm"]})
    assert "so it cannot run on execution.workers_per_trial 2" in msg
    # ... or the sweep's count, read from its folder, with the hint to change the batch.
    on_five = _sweep_folder(tmp_path / "five", batch=12, workers=5)
    [(_, msg)] = _refused({"sweep": on_five, "rungs": {"cpu-xs": None, "cpu-s": {"workers": 2}}})
    assert msg.startswith("the sweep's workers_per_trial 5 does not divide the training batch (trial.batch_size 12)")
    assert msg.endswith("; or set trial.batch_size to a multiple of 5")
    assert TransferSpec.model_validate({"name": "t", "sweep": on_five,
                                        "rungs": {"cpu-xs": {"workers": 2}, "cpu-s": {"workers": 3}}})


def _with(spec: TransferSpec, **fields: Any) -> TransferSpec:
    """`spec` with `fields` changed, validated (model_copy would not validate the rungs mapping)."""
    return TransferSpec.model_validate({**spec.model_dump(mode="json", exclude_unset=True), **fields})


def _source(**fields: Any) -> Any:
    from sweeper.transfer._planning import _Source

    spec = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0],
                                     "baselines": ["adamw", "muon"], "trial": dict(TINY_TRIAL), **fields})
    return _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:///x.db",
                   experiment="e", spec=spec, best={"K": 3, "gamma": 0.25}, objectives={}, searched_arm="periodic")


def _trials(sweep: SweepSpec) -> dict[str, dict[str, Any]]:
    """Each run setting's trial config, by label (the search point by its arm), as the driver builds them."""
    out = {"periodic.search": sweep.trial_config(sweep.search.optimizer_for({"K": 3, "gamma": 0.25}), 0)}
    for b in sweep.baselines:
        out[b.name] = sweep.trial_config(b.optimizer_config(), 0, b.rung, horizon=b.horizon, eval_steps=b.eval_steps)
    return out


def test_the_plan_gives_each_rungs_trials_their_workers_and_each_trial_reserves_as_many_bundles() -> None:
    from sweeper.search._workers import resources_by_config
    from sweeper.transfer._planning import _plan

    spec = TransferSpec(name="t", sweep="/w", rungs={"cpu-xs": None, "cpu-s": {"workers": 2}})  # type: ignore[arg-type]
    plan, sweep = _plan(spec, _source(), "t-1")
    assert sweep.workers_by_rung == {"cpu-s": 2} and plan["workers_by_rung"] == {"cpu-s": 2}
    trials = _trials(sweep)
    assert set(trials) == {"periodic.search", "periodic.cpu-s", "muon.cpu-xs", "muon.cpu-s", "adamw.cpu-xs",
                           "adamw.cpu-s"}
    # Only above 1 is `workers` written, as a sweep does: a one-worker trial's config is as before.
    assert {name: t.get("workers") for name, t in trials.items()} == {
        "periodic.search": None, "muon.cpu-xs": None, "adamw.cpu-xs": None,
        "periodic.cpu-s": 2, "muon.cpu-s": 2, "adamw.cpu-s": 2}
    resources = resources_by_config(sweep.execution)
    bundles = {name: resources({"job": {"trial": t}}).bundles for name, t in trials.items()}
    assert bundles["muon.cpu-xs"] == [{"CPU": 1.0}] and bundles["muon.cpu-s"] == [{"CPU": 1.0}, {"CPU": 1.0}]
    assert resources({"job": {"trial": trials["muon.cpu-s"]}}).strategy == "PACK"
    assert sweep.widest_trial == ("workers_by_rung.cpu-s", 2)

    # The sweep's own rung (the search point's) on 2 workers, the other on the execution section's 1.
    first, compiled = _plan(_with(spec, rungs={"cpu-xs": {"workers": 2}, "cpu-s": None}), _source(), "t-2")
    trials = _trials(compiled)
    assert trials["periodic.search"]["workers"] == 2 and trials["muon.cpu-xs"]["workers"] == 2
    assert "workers" not in trials["muon.cpu-s"] and first["workers_by_rung"] == {"cpu-xs": 2}
    # A plain list compiles as before: no per-rung counts anywhere.
    _, compiled = _plan(_with(spec, rungs=["cpu-xs", "cpu-s"]), _source(), "t-3")
    assert compiled.workers_by_rung == {} and not any("workers" in t for t in _trials(compiled).values())


def test_a_pilot_at_a_rung_on_two_workers_runs_on_two_and_one_elsewhere_on_one() -> None:
    from sweeper.transfer._pilot import pilot_sweep_spec
    from sweeper.transfer._planning import _plan

    def pilot_sweep(rung: str) -> SweepSpec:
        spec = TransferSpec.model_validate({"name": "t", "sweep": "/w",
                                            "rungs": {"cpu-xs": None, "cpu-s": {"workers": 2}},
                                            "target": {"rule": "pilot", "pilot": {"rung": rung, "seeds": [100]}}})
        plan, compiled = _plan(spec, _source(), "t-1")
        return SweepSpec.model_validate(pilot_sweep_spec(plan.pilot, compiled, name="t", transfer_id="t-1"))

    on_two = pilot_sweep("cpu-s")
    assert on_two.workers_by_rung == {"cpu-s": 2} and on_two.trial_config({"name": "adamw"}, 100)["workers"] == 2
    on_one = pilot_sweep("cpu-xs")
    assert on_one.workers_by_rung == {} and "workers" not in on_one.trial_config({"name": "adamw"}, 100)


def test_the_plan_refuses_the_isolated_timing_where_the_sweeps_count_is_read_only_then() -> None:
    """The spec could not read the sweep's folder (here: none), so the plan checks its count against the timing."""
    from sweeper.transfer._planning import _plan

    spec = TransferSpec(name="t", sweep="/w", rungs=["cpu-xs", "cpu-s"], timing={"method": "isolated"})  # type: ignore[arg-type]
    with pytest.raises(TransferError, match=r"^timing.method 'isolated' times one process; rungs \['cpu-s', "
                                            r"'cpu-xs'\] run on \[2\] workers, .* allowed: 'interleaved'$"):
        _plan(spec, _source(execution={"workers_per_trial": 2}), "t-1")
    one = _with(spec, rungs={"cpu-xs": {"workers": 1}, "cpu-s": {"workers": 1}})
    plan, _ = _plan(one, _source(execution={"workers_per_trial": 2}), "t-2")  # every rung on 1: the isolated method
    assert plan["workers_by_rung"] == {"cpu-xs": 1, "cpu-s": 1}


def test_a_sweeps_workers_by_rung_is_checked_and_the_widest_trial_must_fit_the_cluster() -> None:
    base = {"name": "s", "baselines": ["adamw", {"arm": "muon", "rung": "cpu-s"}], "trial": {"batch_size": 12}}
    # Empty by default and then out of the fingerprint: sweeps started before it resume (computed before it).
    assert SweepSpec.model_validate({"name": "s", "baselines": ["adamw", {"arm": "muon", "rung": "cpu-s"}]}
                                    ).fingerprint() == "2601da08eb626670"
    assert SweepSpec(name="s").fingerprint() == "6d59b6b953d43938"
    with pytest.raises(ValidationError, match=r"workers_by_rung names rung 'cpu-m', which this sweep does not run; "
                                              r"allowed: \['cpu-xs', 'cpu-s'\]"):
        SweepSpec.model_validate({**base, "workers_by_rung": {"cpu-m": 2}})
    with pytest.raises(ValidationError, match=r"workers_by_rung.cpu-s 5 does not divide the global batch "
                                              r"\(trial.batch_size 12\)"):
        SweepSpec.model_validate({**base, "workers_by_rung": {"cpu-s": 5}})
    with pytest.raises(ValidationError, match=r"unknown rung 'cpu-q'"):
        SweepSpec.model_validate({**base, "workers_by_rung": {"cpu-q": 2}})
    spec = SweepSpec.model_validate({**base, "workers_by_rung": {"cpu-s": 4},
                                     "execution": {"workers_per_trial": 2, "cpus_per_trial": 2}})
    assert (spec.workers_at("cpu-xs"), spec.workers_at("cpu-s")) == (2, 4)
    assert spec.widest_trial == ("workers_by_rung.cpu-s", 4)
    check_capacity(spec, cluster_cpus=8)  # 4 workers x 2 CPUs: fits exactly
    with pytest.raises(ValueError, match=r"^workers_by_rung.cpu-s 4 needs 8 CPUs \(2 CPUs per worker\); the cluster "
                                         r"has 6 CPUs: at most 3 workers per trial at these resources$"):
        check_capacity(spec, cluster_cpus=6)
    # Every rung named: the execution section's count is nobody's, so neither its batch split nor its size matters
    # (a transfer on a sweep of 5 workers per trial whose every rung sets its own).
    assert SweepSpec.model_validate({**base, "workers_by_rung": {"cpu-xs": 2, "cpu-s": 3},
                                     "execution": {"workers_per_trial": 5}}).workers_at("cpu-s") == 3
    with pytest.raises(ValidationError, match=r"execution.workers_per_trial 5 does not divide the global batch"):
        SweepSpec.model_validate({**base, "workers_by_rung": {"cpu-s": 3}, "execution": {"workers_per_trial": 5}})
    narrow = SweepSpec.model_validate({**base, "workers_by_rung": {"cpu-xs": 1, "cpu-s": 1},
                                       "execution": {"workers_per_trial": 4}})
    assert narrow.widest_trial == ("workers_by_rung.cpu-xs", 1)
    check_capacity(narrow, cluster_cpus=1)


def test_over_rest_a_rung_too_wide_for_the_cluster_is_a_422_naming_that_rungs_field() -> None:
    from fastapi.exceptions import RequestValidationError

    from api.service.routers.sweeps import _demand
    from api.service.security import check_capacity_at_submission

    spec = SweepSpec.model_validate({"name": "s", "baselines": ["adamw", {"arm": "muon", "rung": "cpu-s"}],
                                     "trial": {"batch_size": 12}, "workers_by_rung": {"cpu-s": 4}})
    check_capacity_at_submission(_demand(spec), 4, 0)  # 4 workers x 1 CPU: fits exactly
    with pytest.raises(RequestValidationError) as err:
        check_capacity_at_submission(_demand(spec), 3, 0)
    [e] = err.value.errors()
    assert e["loc"] == ("body", "workers_by_rung", "cpu-s")
    assert e["msg"] == ("workers_by_rung.cpu-s 4 needs 4 CPUs (1 CPUs per worker); the cluster has 3 CPUs: at most 3 "
                        "workers per trial at these resources")
    # Without per-rung counts the field is the execution section's, as before.
    with pytest.raises(RequestValidationError) as err:
        check_capacity_at_submission(_demand(SweepSpec.model_validate(
            {"name": "s", "trial": {"batch_size": 12}, "execution": {"workers_per_trial": 4}})), 3, 0)
    assert err.value.errors()[0]["loc"] == ("body", "execution", "workers_per_trial")
