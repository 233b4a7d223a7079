"""`scalesweep demo`: the spec it submits, its summary, and the whole pipeline through a real service (smoke
profile: real Ray, MLflow, torch and uvicorn, tiny sizes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from api.demo._demo import PROFILES, _summary, demo_sweep_spec
from scaling.export import Export
from sweeper import SweepSpec

ROOT = Path(__file__).resolve().parents[2]


def test_demo_sweep_is_the_papers_grid_with_both_baselines() -> None:
    spec = SweepSpec.model_validate(demo_sweep_spec(PROFILES["quick"], "demo-x"))
    assert spec.rung == "cpu-xs"
    assert sorted(spec.search.space["K"]) == [2, 3, 4]
    assert sorted(spec.search.space["gamma"]) == [0.10, 0.15, 0.25, 0.35]
    assert sorted(b.arm for b in spec.baselines) == ["adamw", "muon"]
    # quick transfers to three rungs (cpu-l's runs cost a third of its 15-minute budget); full sweeps at cpu-xs1 and
    # transfers to cpu-xs1..cpu-m
    full, quick = PROFILES["full"], PROFILES["quick"]
    assert quick.rungs == ("cpu-xs", "cpu-s", "cpu-m") and full.rungs == ("cpu-xs1", "cpu-xs", "cpu-s", "cpu-m")
    assert full.seeds == (0, 1, 2) and full.horizon > quick.horizon
    # quick's evaluations are what it saves on: no tracking in the sweep, 4 tracking points in the transfer
    assert spec.trial["eval"]["track_points"] == 0 and quick.transfer == {"trial": {"eval": {"track_points": 4}}}


@pytest.mark.parametrize("name", ["full", "evidence"])
def test_the_full_and_evidence_profiles_run_the_scenes_set(name: str) -> None:
    from sweeper import TransferSpec
    from trials import TrialConfig
    from trials.models import list_rungs

    p = PROFILES[name]
    sweep = SweepSpec.model_validate(demo_sweep_spec(p, f"demo-{name}"))
    trial = sweep.trial
    assert trial["data"] == {"name": "scenes", "image_size": 32} and trial["patch"] == 4
    assert trial["text_max_length"] == 34 and trial["eval"]["extractor"] == "scenes-cnn"
    # scenes' captions are nearly all new: the learned encoder, not MiniLM's one forward pass per caption
    assert trial["text_encoder"] == "learned"
    cpu = [r for r in list_rungs() if r.startswith("cpu-")]
    assert set(p.rungs) <= set(cpu) and p.rungs[0] in ("cpu-xs1", "cpu-xs") and sweep.rung == p.rungs[0]
    spec = TransferSpec.model_validate({"name": name, "sweep": "x", "rungs": list(p.rungs), **p.transfer})
    # every FD above scenes-cnn's 256-d features (at 256 samples the covariance is singular), the sweep's and the
    # transfer's; each trial a valid config at every rung (the caption fits its tokens, the patch tiles the image)
    judged = {**trial, **spec.trial, "eval": {**trial["eval"], **spec.trial.get("eval", {})}}
    for cfg in (trial, judged):
        assert cfg["eval"]["fd_samples"] > 256 and cfg["eval"].get("track_samples", 256) > 256
        for rung in p.rungs:
            assert TrialConfig.model_validate({**cfg, "rung": rung, "steps": p.horizon}).resolved_patch == 4


def test_quick_stays_on_shapes_and_says_its_fits_are_a_smoke_test() -> None:
    quick = PROFILES["quick"]
    assert "data" not in quick.trial and quick.trial["eval"].get("extractor", "shapes-cnn") == "shapes-cnn"
    assert "smoke test" in quick.about and "smoke test" in quick.fits_note
    doc = {"fits": {"best_fd": {"form": "E+A*N^-alpha", "flags": []}}}
    lines = _summary({"K": 3, "gamma": 0.15}, doc, fits_note=quick.fits_note)
    note = lines.index(f"  NOTE: {quick.fits_note}")
    assert lines[note - 1].startswith("\nscaling fits") and lines[note + 1].startswith("  best_fd")
    assert not any("NOTE" in line for line in _summary(None, doc, fits_note=PROFILES["full"].fits_note))


def test_the_demo_prints_each_stages_time() -> None:
    from api.demo._demo import _stage_times

    text = _stage_times([("1/4 service", 0.0), ("2/4 sweep", 30.0), ("3/4 transfer", 210.0)], 570.0)
    assert text.splitlines() == ["time per stage:", "    0.5 min  1/4 service", "    3.0 min  2/4 sweep",
                                 "    6.0 min  3/4 transfer", "    9.5 min  in all"]


def test_evidence_profile_decides_with_uncertainty_and_declares_its_target() -> None:
    from sweeper import TransferSpec
    from sweeper.transfer._plan import _rung_shape
    from sweeper.transfer._sections import rung_horizon

    p = PROFILES["evidence"]
    sweep = SweepSpec.model_validate(demo_sweep_spec(p, "demo-e"))
    # every arm tuned alike at the sweep: 9 settings each (periodic: K x its lr at the paper's gamma; each baseline:
    # 9 lr multiples), the top two confirmed on fresh seeds
    assert sweep.search.space == {"K": [2, 3, 4], "gamma": [0.15], "lr": [0.02, 0.03, 0.046]}
    assert sweep.seeds == [0, 1, 2] and sweep.search.grid_size == 9
    assert sweep.confirm.top == 2 and sweep.confirm_seeds == [3, 4, 5]
    assert [len(list(b.variants())) for b in sweep.baselines] == [9, 9]
    # periodic's lr at x1, x1.5 and x2.3 of Muon's default: x2.3 is Muon's mean update size at K=3, gamma=0.15
    assert [round(lr / 0.02, 1) for lr in sweep.search.space["lr"]] == [1.0, 1.5, 2.3]
    # examples/sweep-evidence.yaml is this sweep; the guide's figures come from the 2026-12-03 one, whose cpu-s twin
    # differs from it only by the rung, the name and what it leaves out
    example = SweepSpec.model_validate(yaml.safe_load((ROOT / "examples/sweep-evidence.yaml").read_text()))
    assert example == SweepSpec.model_validate(demo_sweep_spec(p, "sweep-evidence"))
    dated = yaml.safe_load((ROOT / "examples/sweep-evidence-2026-12-03.yaml").read_text())
    twin = yaml.safe_load((ROOT / "examples/sweep-evidence-cpu-s.yaml").read_text())
    same = {k: v for k, v in dated.items() if k not in ("baselines", "confirm", "name", "rung", "tracking")}
    made = SweepSpec.model_validate({**same, "name": twin["name"], "rung": "cpu-s", "tracking": twin["tracking"]})
    assert made == SweepSpec.model_validate(twin)
    spec = TransferSpec.model_validate({"name": "e", "sweep": "x", "rungs": list(p.rungs),
                                        "seeds": list(p.transfer_seeds or ()), **p.transfer})
    # judged on seeds that neither chose nor confirmed, against one target fixed before the runs (from a pilot on
    # other seeds), five seeds and no second round (a second round of six arms would not fit a session)
    assert spec.seeds == [6, 7, 8, 9, 10, 11, 12, 13, 14] and not set(spec.seeds) & {*sweep.seeds, *sweep.confirm_seeds}
    assert spec.target.rule == "pilot" and spec.target.pilot is not None
    # a target crossed in the descent, not in the noise at the floor: 1.3 x Muon's plateau, the pilot trained
    # longer than the judged runs (480 steps against 320)
    assert (spec.target.arm, spec.target.slack, spec.target.pilot.horizon_factor) == ("muon", 0.3, 1.5)
    assert not set(spec.target.pilot.seeds) & {*spec.seeds, *sweep.seeds, *sweep.confirm_seeds}
    assert spec.rounds is None
    # the instrument calibrated, the arms tuned alike (at the sweep only), the per-step cost interleaved to +-2 %
    assert spec.timing.method == "interleaved" and spec.timing.clock == "thread"
    assert spec.timing.target_halfwidth == 0.02 and spec.timing.max_rounds >= spec.timing.rounds >= 9
    assert list(spec.controls) == ["negative", "positive"] and list(spec.diagnostics) == ["effective_step"]
    assert spec.control_data_order == "other"  # the controls' steps ratio carries a real comparison's spread
    assert spec.lr_brackets == {}
    assert spec.verify is None  # the bracket would add ~35 min on 2 cores; a transfer spec can ask for it
    # 320 steps at every rung: past Muon's and periodic's floor (about step 250-300 in the 480-step run)
    assert spec.horizon.mode == "fixed" and round(p.horizon * p.horizon_factor) == 320
    assert {rung_horizon(spec.horizon, _rung_shape(r)[1], p.trial["batch_size"], 320) for r in p.rungs} == {320}
    # Three sizes: A*N^-alpha per arm leaves 1 residual degree of freedom (flagged); alpha shared by the 3 arms
    # leaves 3 - 1 - 1/3 = 1.67 (not flagged), the alternative the fit offers.
    assert p.rungs == ("cpu-xs", "cpu-s", "cpu-m")
    # the transfer's deciding FDs carry a bias estimate (> 2d samples; scenes-cnn: 256-d), tracking finds the target
    assert spec.trial["eval"]["fd_samples"] > 2 * 256 and spec.trial["eval"]["track_points"] >= 6
    # the descent, where the crossings are, sampled from step 80 every 27 steps
    from trials import TrialConfig

    judged = TrialConfig.model_validate({**p.trial, **spec.trial, "eval": {**p.trial["eval"], **spec.trial["eval"]},
                                         "steps": 320})
    assert judged.resolved_track_steps[:4] == [80, 107, 133, 160]


def test_summary_states_the_decisions_with_their_uncertainty() -> None:
    selection = {
        "selection": {
            "point": {"point_key": "K=3,gamma=0.15"},
            "uncertainty": {"chosen": "K=2,gamma=0.15", "p_best": {"K=3,gamma=0.15": 0.3, "K=2,gamma=0.15": 0.7},
                            "n": 5},
            "confirmation": {"seeds": [3, 4, 5], "final": True, "chosen": "K=3,gamma=0.15",
                             "points": {"K=3,gamma=0.15": {"selected_objective": 100.0, "confirmed_objective": 112.5,
                                                           "winners_curse": 12.5}},
                             "p_best": {"K=3,gamma=0.15": 0.9, "K=2,gamma=0.15": 0.1}},
        },
        "budgets": {"periodic": {"settings": 6, "trials": 24}, "adamw": {"settings": 3, "trials": 9}},
    }
    fits = {"verification": {"rung": "cpu-s", "verdict": "inconclusive", "n": 3, "margin": 2.0, "seeds_needed": 8,
                             "reason": "2 bracket point(s) could still be better"}}
    text = "\n".join(_summary({"K": 3, "gamma": 0.15}, fits, selection))
    assert "P(best), paired bootstrap over 5 seeds: K=2,gamma=0.15 0.70, K=3,gamma=0.15 0.30" in text
    # 3 fresh seeds: 10 distinct bootstrap resamples, no probability printed
    assert "P(best) on the fresh seeds (what made the choice final): too few seeds (n=3)" in text
    assert "0.90" not in text
    assert "winner's curse +12.5" in text and "adamw 3 setting(s), 9 trials" in text
    assert "verification at cpu-s: INCONCLUSIVE (n=3, margin 2)" in text and "settle it: 8" in text


def test_summary_opens_with_the_controls_and_warns_of_a_losing_choice_with_p_best_withheld() -> None:
    from scaling.claims import choice_warning

    warning = choice_warning("K=3,gamma=0.15", {0: 810.0, 1: 790.0},
                             {"adamw": {0: 100.0, 1: 98.0}, "muon": {0: 96.0, 1: 97.0}})
    assert warning is not None
    # what GET /v1/sweeps/{id}/best answers for issue 51's grid at lr 8: 2 seeds, every point worse than both
    best = {"seeds": [0, 1], "choice_warning": warning.text(), "selection": {
        "point": {"point_key": "K=3,gamma=0.15"}, "rule": "r",
        "uncertainty": {"chosen": "K=3,gamma=0.15", "p_best": {"K=3,gamma=0.15": 0.23, "K=2,gamma=0.15": 0.77},
                        "n": 2}}}
    controls = {"summary": ["POSITIVE CONTROL FAILED: a known per-step saving was not detected at every rung, so "
                            "no null in this study is evidence of no saving (the study finished; its numbers follow)",
                            "negative control (muon_twin against muon): came out as it must at every rung"]}
    diagnostics = {"effective_step": {"lines": ["cpu-xs: effective step: steps ratio 1.2 [1.19, 1.2] against Muon: "
                                                "the step size"]}}
    lines = _summary({"K": 3, "gamma": 0.15}, {"controls": controls, "diagnostics": diagnostics,
                                               "savings": {"cpu-s": {"muon": {"mean_pct": -21.0, "std_pct": 2.0}}}},
                     best)
    assert lines[:3] == [*controls["summary"], ""]
    text = "\n".join(lines)
    assert text.index("POSITIVE CONTROL FAILED") < text.index("chosen pair") < text.index("vs muon -21")
    assert "choice: K=3,gamma=0.15 (P(best) too few seeds (n=2) on the sweep's seeds)" in text
    assert "0.23" not in text and "0.77" not in text
    assert "WARNING: the chosen K=3,gamma=0.15 is worse than adamw and muon on 2 of 2 seeds (mean 800" in text
    assert "cpu-xs: effective step: steps ratio 1.2 [1.19, 1.2] against Muon: the step size" in text
    no_controls = _summary(None, {})
    assert no_controls[0].startswith("no controls ran: a null below cannot be told from an instrument")


def test_summary_reports_table_savings_and_flags() -> None:
    doc = {
        "metric_name": "fd_pixels", "fd_samples": 64,
        "runs": [{"rung": "cpu-s", "parameters": 1000, "arm": "muon", "seed": 0, "state": "SUCCEEDED",
                  "best_fd": 12.5, "endpoint_fd": 13.0, "time_to_best_s": 4.25}],
        "savings": {"cpu-s": {"muon": {"mean_pct": 21.0, "std_pct": None}}},
        "fits": {"time_to_best": {"form": "A*N^-alpha", "flags": ["non_identifiable"]},
                 "best_fd": {"error": "needs two sizes"}},
        "rounds": {"looks": [{"seeds": [6, 7, 8], "rung": "cpu-m", "against": "muon", "measure": "time_saving_pct",
                              "mean": 4.0, "lo": -9.0, "hi": 15.0, "n": 3, "p_value": 0.4, "looks_planned": 2,
                              "alpha_per_look": 0.025, "stop": False, "reason": "not shown yet (p 0.4 >= 0.025)"}]},
    }
    text = "\n".join(_summary({"K": 3, "gamma": 0.15}, doc))
    assert ("round 1 of at most 2 (3 seeds): time_saving_pct vs muon at cpu-m +4 [-9, +15] (95 %), n=3; tested at "
            "0.025 -> not shown yet (p 0.4 >= 0.025)") in text
    assert "chosen pair: K=3, gamma=0.15" in text
    assert "| cpu-s | 1000 | muon | 0 | SUCCEEDED | 12.5 | 13 | 4.25 |" in text
    assert "vs muon 21 +- -" in text
    assert "non_identifiable" in text and "not fitted (needs two sizes)" in text
    assert "alignment" not in text  # FD-only runs: no column, no word of it
    # scenes runs: the endpoint alignment beside FD, and the alignment fit named for what it is fitted on
    doc["runs"][0]["endpoint_alignment"] = 0.125
    doc["fits"]["alignment"] = {"form": "E+A*N^-alpha", "flags": [], "fitted_on": "1 - alignment (...)"}
    text = "\n".join(_summary({"K": 3, "gamma": 0.15}, doc))
    assert "| best FD | endpoint FD | endpoint alignment | time to best s |" in text
    assert "| cpu-s | 1000 | muon | 0 | SUCCEEDED | 12.5 | 13 | 0.125 | 4.25 |" in text
    assert "  alignment (fitted on 1 - alignment) (E+A*N^-alpha" in text


# Stays long (minutes): the whole demo through a real service, sized by the product's smoke profile
# (api/demo.py), which is what users run; a test-only smaller profile would stop testing that.
@pytest.mark.integration
def test_demo_pipeline_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "scalesweep_cli", "demo", "--profile", "smoke", "--no-wait", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "chosen pair: K=" in proc.stdout
    # no controls in the smoke profile: said before the chosen pair; one seed: no P(best) as a probability
    assert proc.stdout.index("no controls ran: a null below") < proc.stdout.index("chosen pair: K=")
    assert "P(best) too few seeds (n=1) on the sweep's seeds" in proc.stdout
    assert "against the target declared before the runs" in proc.stdout  # the per-rung target table
    # the export builds every arm's optimizer and names the target rung
    export = Export.from_text((out / "export.yaml").read_text())
    assert set(export.arms) == {"periodic", "muon", "adamw"}
    assert json.loads((out / "export.json").read_text())["target"]["rung"] == "cpu-s"
    # fits were computed over both rungs from real runs
    fits = json.loads((out / "fits.json").read_text())
    assert {r["rung"] for r in fits["runs"]} == {"cpu-xs", "cpu-s"}
    assert all(r["state"] == "SUCCEEDED" for r in fits["runs"])
    assert fits["horizon"] == 2 * PROFILES["smoke"].horizon
    # the target declared before the runs, over REST: the rule, a per-rung report, timing, fits of the new quantities
    assert fits["targets"]["rule"]["rule"] == "final_mean" and set(fits["targets"]["rungs"]) == {"cpu-xs", "cpu-s"}
    assert fits["step_timing"]["measured"] and {"steps_to_target", "time_to_target"} <= set(fits["fits"])
    report = (out / "report.html").read_text()
    assert report.count("<img") >= 4 and "fd_pixels" in report
    assert "Time to the declared target" in report
    # the page opens with the controls (here: that none ran), then the analysis' claims and budgets
    assert report.index("No controls ran in this transfer") < report.index('<section id="controls">') < report.index(
        '<section id="targets">') < report.index('<section id="claims">') < report.index('<section id="budgets">')
    assert 'alt="heatmap"' in report and 'alt="scaling"' in report  # the sweep's grid beside the transfer's fits
    # each driver logged its figures to its MLflow parent run
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    parents = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
               if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 2
    for run in parents:
        names = {f.path for f in client.list_artifacts(run.info.run_id, "figures")}
        assert {"figures/fd_curves.png", "figures/heatmap.png"} <= names, names
    assert yaml.safe_load((out / "export.yaml").read_text())
    # the raw records: the analysis read back from them without the store gives the fits' runs and targets again
    from sweeper.transfer import read_transfer_records

    again = read_transfer_records(out / "records")
    assert {(r.rung, r.arm, r.seed) for r in again.runs} == {(r["rung"], r["arm"], r["seed"]) for r in fits["runs"]}
    assert {r: e["target"] for r, e in again.targets()["rungs"].items()} == {
        r: e["target"] for r, e in fits["targets"]["rungs"].items()}


def _marked(mark: str) -> dict[int, str]:
    """pid -> command line of the live processes whose environment carries `mark` (zombies read empty)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
    return found


# Runs the demo as its child, in a session of its own, and is the child subreaper of everything below it: whatever
# the demo leaves alive when it exits is re-parented here, whatever it did to its own processes (a new session, a
# dead parent, a title written over its environment). When the demo has exited it records those processes, and the
# ones carrying the test's variable, then kills them. argv: report path, the variable, the demo's command.
_WITNESS = r"""
import contextlib, ctypes, json, os, signal, subprocess, sys
from pathlib import Path
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0, "PR_SET_CHILD_SUBREAPER refused"
report, mark = Path(sys.argv[1]), sys.argv[2].encode()
demo = subprocess.Popen(sys.argv[3:], start_new_session=True)
report.with_suffix(".pid").write_text(str(demo.pid))
code = demo.wait()
table = {}
for entry in Path("/proc").iterdir():
    with contextlib.suppress(OSError, IndexError, ValueError):
        stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        table[int(entry.name)] = (int(stat[1]), stat[0], (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(),
                                  mark in (entry / "environ").read_bytes().split(b"\0"))
below, todo = set(), [os.getpid()]
while todo:
    parent = todo.pop()
    for pid, (ppid, *_) in table.items():
        if ppid == parent and pid not in below:
            below.add(pid)
            todo.append(pid)
left = {pid: cmd for pid, (_, state, cmd, marked) in table.items()
        if state != "Z" and (pid in below or marked) and pid != os.getpid()}
report.write_text(json.dumps({"code": code, "left": left}))
for pid in left:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
with contextlib.suppress(ChildProcessError):
    while os.waitpid(-1, 0)[0]:
        pass
"""


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/self/environ").is_file(), reason="reads the process table in /proc")
def test_a_demo_stopped_by_sigterm_ends_everything_it_started(tmp_path: Path) -> None:
    # The demo's processes are found two ways an operator could not use: a variable only this test sets, which
    # every process the demo starts inherits, and a witness process (_WITNESS) that adopts whatever the demo leaves.
    mark = f"SCALESWEEP_TEST_DEMO_MARK={tmp_path.name}-{time.time_ns()}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    report = tmp_path / "witness.json"
    witness = subprocess.Popen(
        [sys.executable, "-c", _WITNESS, str(report), mark, sys.executable, "-m", "scalesweep_cli", "demo",
         "--profile", "smoke", "--no-wait", "--out", str(tmp_path / "demo")], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not any("raylet" in cmd for cmd in _marked(mark).values()):  # the sweep's driver has started Ray
            assert witness.poll() is None and time.monotonic() < deadline, witness.communicate(timeout=60)
            time.sleep(1)
        started = _marked(mark)
        assert any("scalesweep_cli serve" in c for c in started.values()) and any(
            "mlflow" in c for c in started.values()), started
        os.kill(int(report.with_suffix(".pid").read_text()), signal.SIGTERM)  # to the demo alone, as `kill PID`
        out, err = witness.communicate(timeout=180)
    finally:
        if witness.poll() is None:
            os.killpg(witness.pid, signal.SIGKILL)
        for pid in _marked(mark):  # a failing demo's orphans are not left to the next test
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert witness.returncode == 0, err.decode()[-2000:]
    seen = json.loads(report.read_text())
    # the service, the MLflow UI, the driver and every Ray process (agents and workers included): all gone
    assert seen["left"] == {}, seen["left"]
    assert seen["code"] == 128 + signal.SIGTERM, out.decode()[-2000:] + err.decode()[-2000:]
    assert b"stopped by SIGTERM" in err


# In a process of its own (a subreaper adopts orphans for the rest of its life: not the test session's): a child
# starts two grandchildren with an empty environment, so without the demo's variable, and exits; both are adopted.
_ADOPTION = r"""
import json, os, subprocess, time
from api.demo import _demo as demo
from trials.core.proctree import adopt_orphans, process_table, reap_children
assert adopt_orphans()
subprocess.run(["sh", "-c", "env -i sleep 30 & env -i sleep 0.2 & exit 0"], check=True)
time.sleep(1.5)  # the short one has ended: a zombie of this process until it is reaped
me = os.getpid()
def mine(state=None):
    return sorted(p for p, (pp, st) in process_table().items() if pp == me and state in (None, st))
adopted, zombies, found = mine(), mine("Z"), demo._started_by("no-such-run")
reap_children()
reaped = mine("Z")
demo._end_everything_started("no-such-run", grace_s=5, kill_s=5)
print(json.dumps({"adopted": adopted, "zombies": zombies, "found": found, "zombies_after_reap": reaped,
                  "left": demo._started_by("no-such-run"), "children_left": mine()}))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads the process table in /proc")
def test_the_demo_finds_adopted_orphans_without_its_variable_and_reaps_them() -> None:
    ran = subprocess.run([sys.executable, "-c", _ADOPTION], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-2000:]
    seen = json.loads(ran.stdout)
    assert len(seen["adopted"]) == 2 and len(seen["zombies"]) == 1  # both grandchildren, one already ended
    assert seen["found"] == sorted(set(seen["adopted"]) - set(seen["zombies"]))  # the live one, by the tree alone
    assert seen["zombies_after_reap"] == []
    assert seen["left"] == [] and seen["children_left"] == []  # ended, and its exit status collected


@pytest.mark.parametrize("argv", [["--profile", "huge"]])
def test_demo_rejects_unknown_profile(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "scalesweep_cli", "demo", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "invalid choice: 'huge'" in proc.stderr and "Traceback" not in proc.stderr
