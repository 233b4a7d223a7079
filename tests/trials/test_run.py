"""One real trial end to end: training, FD at checkpoints, timing, MLflow, checkpoints, the command backend."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from pydantic import ValidationError

from trials import CommandConfig, TrialError, TrialResult, run_command_trial, run_trial

from ..conftest import tiny_trial

REPO = Path(__file__).resolve().parents[2]

_tiny = tiny_trial


@pytest.fixture
def tracking(store_uri: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """The session's MLflow store (tests/conftest.py: creating one costs seconds), an experiment per test."""
    return {"tracking_uri": store_uri, "experiment": f"run-{request.node.name}"}


def test_trial_scores_checkpoints_and_logs_everything_to_mlflow(tracking: dict[str, str]) -> None:
    records: list[dict[str, Any]] = []
    result = run_trial(_tiny(tracking=tracking), progress=records.append)

    assert result.status == "SUCCEEDED" and result.steps_done == 24
    assert sorted(result.fd) == [12, 24] and all(v > 0 for v in result.fd.values())
    assert result.metric_name == "fd_pixels"
    assert result.objective == pytest.approx(sum(result.fd.values()) / 2)
    assert result.best_fd == min(result.fd.values())
    assert result.endpoint_fd == result.fd[24]
    assert result.time_to_best_s == result.effective_time_s[result.best_step]
    assert 0 < result.effective_time_s[12] < result.effective_time_s[24] == result.total_effective_time_s
    assert 0 < result.optimizer_time_s < result.total_effective_time_s
    assert result.ns5_calls > 0 and result.rownorm_calls == 2 * result.ns5_calls  # periodic K=3 default
    assert [r["step"] for r in records] == [12, 24] and records[0]["metric_name"] == "fd_pixels"

    client = MlflowClient(tracking["tracking_uri"])
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["optimizer.name"] == "periodic" and run.data.params["rung"] == "cpu-xs"
    assert run.data.tags["fd.extractor"] == "pixels" and run.data.tags["fd.samples"] == "96"
    assert run.data.tags["fd.weights"] == "ema" and run.data.tags["scalesweep.status"] == "SUCCEEDED"
    assert run.data.tags["optimizer.rownorm_kernel"] == "native"  # fp32 on a CPU, the kernel built here
    fd_history = sorted((m.step, m.value) for m in client.get_metric_history(result.run_id, "fd"))
    assert fd_history == [(12, result.fd[12]), (24, result.fd[24])]
    assert [m.step for m in client.get_metric_history(result.run_id, "fd_pixels")] == [12, 24]
    for key in ("val_loss", "effective_time_s", "optimizer_time_s", "step_time_s", "ns5_calls", "loss"):
        assert client.get_metric_history(result.run_id, key), key
    artifacts = {a.path for a in client.list_artifacts(result.run_id)}
    assert {"samples", "trial_result.json"} <= artifacts
    samples = {a.path for a in client.list_artifacts(result.run_id, "samples")}
    assert samples == {"samples/step_0000012.png", "samples/step_0000024.png"}


def test_trial_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    a, b = run_trial(_tiny()), run_trial(_tiny())
    assert a.fd == b.fd and a.val_loss == b.val_loss
    c = run_trial(_tiny(seed=1))
    assert c.fd != a.fd
    # order_seed moves only the batch draws and the noise: its own seed's order is the seed's, another order gives
    # another run, and that run is not the other seed's (whose init differs too)
    assert run_trial(_tiny(order_seed=0)).fd == a.fd
    reordered = run_trial(_tiny(order_seed=1))
    assert reordered.fd != a.fd and reordered.fd != c.fd


def test_resume_from_checkpoint_gives_the_uninterrupted_result(tmp_path: Path) -> None:
    straight = run_trial(_tiny(steps=30, eval_steps=[10, 20, 30]))

    cfg = _tiny(steps=30, eval_steps=[10, 20, 30], checkpoint_dir=str(tmp_path / "ckpt"))

    def crash_after_20(record: dict[str, Any]) -> None:
        if record["step"] == 20:
            raise KeyboardInterrupt  # the process dies right after its second checkpoint

    with pytest.raises(KeyboardInterrupt):
        run_trial(cfg, progress=crash_after_20)
    steps_seen: list[int] = []
    resumed = run_trial(cfg, progress=lambda r: steps_seen.append(r["step"]))
    assert steps_seen == [30]  # only the missing checkpoint ran
    assert resumed.fd == straight.fd and resumed.val_loss == straight.val_loss

    with pytest.raises(TrialError, match="different trial config"):
        run_trial({**cfg, "seed": 5})


def test_a_diverged_run_stops_with_a_status_not_a_crash(tracking: dict[str, str]) -> None:
    cfg = _tiny(
        optimizer={"name": "adamw", "lr": 1e6, "aux_lr": 1e6}, grad_clip=None, warmup_steps=0,
        tracking=tracking,
    )
    result = run_trial(cfg)
    # Step 1 trains from the initial weights, so its loss is finite; AdamW at lr 1e6 then moves every weight by
    # about 1e6 a step and the loss overflows a step or two later (step 3 on the machines this was written on).
    assert result.status == "DIVERGED" and 2 <= result.diverged_at <= 4, result.diverged_at
    assert result.objective is None and result.best_fd is None
    run = MlflowClient(tracking["tracking_uri"]).get_run(result.run_id)
    assert run.info.status == "FAILED" and run.data.tags["scalesweep.status"] == "DIVERGED"


def test_default_extractor_and_frozen_text_encoder(tmp_path: Path) -> None:
    cfg = _tiny(text_encoder="minilm", eval={"extractor": "shapes-cnn", "extractor_options": {}})
    result = run_trial(cfg)
    assert result.status == "SUCCEEDED" and result.metric_name == "fd_shapes_cnn"
    assert all(v > 0 for v in result.fd.values())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rung": "huge"}, "unknown rung 'huge'; allowed: ['cpu-3xs', 'cpu-2xs', 'cpu-xs1', 'cpu-xs'"),
        ({"eval_steps": [10, 99]}, "eval_steps must be a non-empty list of steps in [1, steps=24]"),
        ({"eval": {"extractor": "inception"}}, "unknown eval.extractor 'inception'; allowed: ['dinov2'"),
        ({"optimizer": {"name": "sgd"}},
         "'adamw', 'muon', 'periodic', 'rownorm', 'muon_extra_ns' or 'muon_stretched'"),
        ({"text_encoder": "t5"}, "'minilm' or 'learned'"),
        ({"bogus": 1}, "Extra inputs are not permitted"),
        ({"order_seed": -1}, "order_seed\n  Input should be greater than or equal to 0"),
        ({"order_seed": 2**31}, "order_seed\n  Input should be less than or equal to 2147483647"),
    ],
)
def test_bad_trial_configs_name_the_field_and_the_allowed_values(overrides: dict, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        run_trial(_tiny(**overrides))
    assert message in str(info.value)


# --- the command backend ----------------------------------------------------------------------------------------

TRAINER = [
    sys.executable, str(REPO / "examples" / "command_trainer.py"),
    "--optimizer", "{optimizer}", "--K", "{K}", "--gamma", "{gamma}", "--lr", "{lr}", "--rung", "{rung}",
    "--steps", "{steps}", "--seed", "{seed}", "--eval-steps", "{eval_steps}", "--progress", "{progress_file}",
    "--fd-samples", "96", "--extractor", "pixels",
    # the tiny trial's sizes, not the defaults (batch 32, MiniLM captions, 12 tracking evaluations): 25 s of a run
    "--batch-size", "16", "--text-encoder", "learned", "--track-points", "0",
]


def test_command_backend_runs_the_example_trainer_and_logs_its_progress(tracking: dict[str, str]) -> None:
    cfg = _tiny(steps=20, eval_steps=[10, 20], tracking=tracking, optimizer={"refresh_every": 2})
    seen: list[int] = []
    result = run_command_trial(cfg, {"command": TRAINER, "poll_s": 0.2}, progress=lambda r: seen.append(r["step"]))
    assert result.status == "SUCCEEDED" and sorted(result.fd) == [10, 20] and seen == [10, 20]
    assert result.metric_name == "fd_pixels"
    assert result.time_to_best_s == result.effective_time_s[result.best_step] > 0
    client = MlflowClient(tracking["tracking_uri"])
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["scalesweep.backend"] == "command"
    assert "--K 2 " in run.data.params["command"]  # the hyperparameters were substituted
    assert sorted(m.step for m in client.get_metric_history(result.run_id, "fd")) == [10, 20]


def test_command_backend_reports_failures(tracking: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match=r"unknown placeholder \{beta\}"):
        CommandConfig(command=["train", "--beta", "{beta}"])
    failing = {"command": [sys.executable, "-c", "import sys; sys.exit('out of memory on rank 3')"]}
    cfg = _tiny(tracking=tracking)
    with pytest.raises(TrialError, match="exited with 1: out of memory on rank 3"):
        run_command_trial(cfg, failing)
    client = MlflowClient(tracking["tracking_uri"])
    runs = client.search_runs([client.get_experiment_by_name(tracking["experiment"]).experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]
    silent = {"command": [sys.executable, "-c", "pass"]}
    with pytest.raises(TrialError, match="without reporting any 'fd'"):
        run_command_trial(_tiny(), silent)


@pytest.fixture(scope="module")
def untracked() -> TrialResult:
    """The tiny trial without tracking evaluations, run once for the module: the tracking test compares its own
    tracked run with it and the FD-bias test reads its FD-infinity (one run each before)."""
    return run_trial(_tiny(eval={"track_points": 0}))


def test_cpu_rungs_default_the_aux_lr_to_the_adamw_arm_lr_unless_set() -> None:
    from trials import CPU_AUX_LR, TrialConfig

    assert TrialConfig().optimizer.aux_lr == CPU_AUX_LR == 3e-3
    assert TrialConfig(optimizer={"name": "muon"}).optimizer.aux_lr == CPU_AUX_LR
    assert TrialConfig(optimizer={"aux_lr": 1e-4}).optimizer.aux_lr == 1e-4  # an explicit value is kept
    assert TrialConfig(rung="paper-1.3b").optimizer.aux_lr == 1e-4  # the paper's value at paper scale


def test_dense_tracking_evaluations_are_logged_beside_the_deciding_ones(tracking: dict[str, str],
                                                                        untracked: TrialResult) -> None:
    cfg = _tiny(tracking=tracking, eval={"track_points": 4, "track_from": 1 / 3, "track_sample_steps": 8})
    result = run_trial(cfg)
    # linspace(8, 24, 4) -> 8, 13, 19, 24, plus the eval step 12: the tracking curve holds the deciding steps.
    assert sorted(result.fd_track) == [8, 12, 13, 19, 24] == sorted(result.track_effective_time_s)
    times = [result.track_effective_time_s[s] for s in sorted(result.track_effective_time_s)]
    assert times == sorted(set(times))  # strictly increasing
    assert result.track_effective_time_s[12] == result.effective_time_s[12]
    assert result.track_effective_time_s[24] == result.effective_time_s[24]
    assert result.track_samples == 96 and result.track_sample_steps == 8  # capped at fd_samples
    assert result.track_eval_time_s > 0 and result.eval_time_s > 0
    assert sorted(result.fd) == [12, 24]  # the objective's checkpoints are unchanged
    assert result.objective == pytest.approx((result.fd[12] + result.fd[24]) / 2)

    client = MlflowClient(tracking["tracking_uri"])
    history = sorted((m.step, m.value) for m in client.get_metric_history(result.run_id, "fd_track"))
    assert history == sorted(result.fd_track.items())
    assert [m.step for m in client.get_metric_history(result.run_id, "fd")] == [12, 24]
    tags = client.get_run(result.run_id).data.tags
    assert tags["fd.track_samples"] == "96" and tags["fd.track_sample_steps"] == "8"

    off = untracked
    assert off.fd_track == {} and off.track_samples == 0
    assert off.fd == pytest.approx(result.fd)  # tracking never changes the training or the full FD


@pytest.fixture
def tracked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the tracking evaluations that sample images (trials._run._track calls); cleared by the test at will."""
    import trials._run as run_module

    calls: list[int] = []
    track = run_module._track

    def counting(*args: Any) -> float:
        calls.append(len(calls))
        return track(*args)

    monkeypatch.setattr(run_module, "_track", counting)
    return calls


def test_tracking_at_full_precision_reproduces_the_full_fd(tracked: list[int]) -> None:
    # Same images, same sampler steps, same weights: the tracking FD at a deciding step is the full FD, taken from
    # the full evaluation rather than sampled a second time (tracking then samples only between eval steps).
    cfg = _tiny(eval={"track_points": 3, "track_samples": 96, "track_sample_steps": 4})
    result = run_trial(cfg)
    assert sorted(result.fd_track) == [8, 12, 16, 24]  # linspace(8, 24, 3) plus the eval steps 12 and 24
    assert result.fd_track[12] == pytest.approx(result.fd[12], rel=1e-9)
    assert result.fd_track[24] == pytest.approx(result.fd[24], rel=1e-9)
    assert len(tracked) == 2  # at steps 8 and 16 only


def test_fd_bias_is_estimated_only_where_fd_infinity_is_valid(tracking: dict[str, str], untracked: TrialResult) -> None:
    # Pooled pixels at size 4: d = 48 features. 96 samples = 2d: no valid FD-infinity grid, no estimate.
    assert untracked.fd_infinity == {}
    big = run_trial(_tiny(tracking=tracking, eval={"track_points": 0, "fd_samples": 160}))
    assert sorted(big.fd_infinity) == [12, 24]
    client = MlflowClient(tracking["tracking_uri"])
    bias = {m.step: m.value for m in client.get_metric_history(big.run_id, "fd_bias")}
    assert bias == pytest.approx({s: big.fd[s] - big.fd_infinity[s] for s in (12, 24)})
    # Asked for explicitly below 2d, FD-infinity refuses rather than return a wrong number.
    from trials.metrics import FeatureError

    reported: list[dict[str, Any]] = []
    with pytest.raises(FeatureError, match="at least 2d = 96 samples"):
        run_trial(_tiny(eval={"track_points": 0, "fd_infinity": True}), progress=reported.append)
    assert reported == []  # refused before the first training step, not at the first evaluation


def test_tracking_at_an_eval_step_reuses_the_full_evaluations_first_images(
    tracked: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fewer tracking images than the full FD, same sampler steps: the tracking FD at a deciding step is the FD of
    # the first track_samples of the full evaluation's features, the same number sampling them again would give.
    cfg = _tiny(eval={"track_points": 3, "track_samples": 48, "track_sample_steps": 4})
    reused = run_trial(cfg)
    assert len(tracked) == 2 and sorted(reused.fd_track) == [8, 12, 16, 24]  # sampled at 8 and 16 only
    assert reused.fd_track[12] != pytest.approx(reused.fd[12], rel=1e-3)  # 48 images, not the full FD's 96

    tracked.clear()
    import trials._run as run_module

    monkeypatch.setattr(run_module._Trial, "track_from_full", property(lambda self: False))
    sampled = run_trial(cfg)
    assert len(tracked) == 4  # every tracking point sampled
    assert sampled.fd == pytest.approx(reused.fd, rel=1e-9)
    for step in (8, 12, 16, 24):
        assert reused.fd_track[step] == pytest.approx(sampled.fd_track[step], rel=1e-5)


def test_a_checkpoint_resumes_under_another_row_norm_kernel_but_not_another_gamma() -> None:
    """The kernels compute the same update up to float rounding, so a checkpoint made before the compiled kernel
    became the default (or with another kernel) still resumes; a change to the update itself does not."""
    from trials import TrialConfig
    from trials._checkpoint import config_fingerprint as _config_fingerprint

    def fingerprint(**optimizer: Any) -> str:
        return _config_fingerprint(TrialConfig.model_validate(tiny_trial(optimizer={"name": "periodic", **optimizer})))

    assert fingerprint(rownorm_kernel="streamed") == fingerprint() == fingerprint(rownorm_kernel="unfused")
    assert fingerprint(gamma=0.3) != fingerprint()


def test_the_stretched_muon_control_walks_muons_curve_relabelled() -> None:
    # The steps control: a null step after every `stretch` steps (no batch, no noise, no update, warm-up and EMA on
    # the update count), so what Muon shows at update r the stretched run shows at step r + (r - 1) // stretch.
    # With stretch 2 every third step is null: steps 3, 6, 9, 12 follow updates 2, 4, 6, 8.
    muon = run_trial(_tiny(steps=8, eval_steps=[2, 4, 6, 8], optimizer={"name": "muon"}))
    stretched = run_trial(_tiny(steps=12, eval_steps=[3, 6, 9, 12],
                                optimizer={"name": "muon_stretched", "stretch": 2}))
    assert stretched.status == muon.status == "SUCCEEDED"
    relabel = {3: 2, 6: 4, 9: 6, 12: 8}
    assert {relabel[s]: v for s, v in stretched.fd.items()} == muon.fd  # bit for bit, step for step
    assert {relabel[s]: v for s, v in stretched.val_loss.items()} == muon.val_loss
    assert stretched.ns5_calls == muon.ns5_calls  # the null steps ran no optimizer step
    # a non-null evaluation point shows the update count too: step 8 of the stretched run is Muon's update 6
    eight = run_trial(_tiny(steps=8, eval_steps=[8], optimizer={"name": "muon_stretched", "stretch": 2}))
    assert eight.fd[8] == muon.fd[6]


@pytest.mark.parametrize(("optimizer", "field", "says"), [
    ({"name": "muon_stretched", "stretch": 8.5}, "stretch", "integer"),
    ({"name": "muon_stretched", "stretch": "8"}, "stretch", "integer"),
    ({"name": "muon_stretched", "stretch": 0}, "stretch", "greater than or equal to 1"),
    ({"name": "muon", "stretch": 8}, "stretch", "muon_stretched only"),
])
def test_a_bad_stretch_is_refused_naming_the_field(optimizer: dict[str, Any], field: str, says: str) -> None:
    from trials import TrialConfig

    with pytest.raises(ValidationError) as info:
        TrialConfig.model_validate(_tiny(optimizer=optimizer))
    assert field in str(info.value) and says in str(info.value)


def _tiny_scenes(**overrides: Any) -> dict[str, Any]:
    """A tiny scenes trial: 32 x 32 / patch 4 with its own feature network, trained briefly (the numbers are not the
    point; one network per test session, shared by every test that asks for the same options)."""
    return _tiny(patch=4, text_max_length=34, data={"name": "scenes", "image_size": 32},
                 eval={"extractor": "scenes-cnn", "fd_samples": 64, "reference_samples": 128,
                       "extractor_options": {"training_images": 256, "training": {"epochs": 1}}}, **overrides)


def test_a_scenes_trial_logs_alignment_beside_fd_at_every_eval_step(tracking: dict[str, str]) -> None:
    # That alignment is measured and logged at every eval step under the record's names.
    result = run_trial(_tiny_scenes(tracking=tracking))
    assert result.status == "SUCCEEDED" and result.metric_name == "fd_scenes_cnn"
    assert sorted(result.alignment) == [12, 24]
    names = {"alignment", *(f"alignment.{a}" for a in ("count", "position", "kind", "colour", "size", "relation"))}
    assert set(result.alignment[24]) == names and all(0 <= v <= 1 for v in result.alignment[24].values())
    client = MlflowClient(tracking["tracking_uri"])
    for name in (*names, "fd_scenes_cnn", "val_loss"):
        history = {m.step: m.value for m in client.get_metric_history(result.run_id, name)}
        assert sorted(history) == [12, 24], name
        if name.startswith("alignment"):
            assert history[24] == pytest.approx(result.alignment[24][name])


def test_a_resumed_scenes_trial_keeps_its_alignment(tmp_path: Path) -> None:
    # The checkpoint carries the alignment shares measured before the crash: the resumed result has the alignment
    # of the uninterrupted one at every eval step, not only at the steps it ran after resuming.
    straight = run_trial(_tiny_scenes(steps=12, eval_steps=[6, 12]))
    cfg = _tiny_scenes(steps=12, eval_steps=[6, 12], checkpoint_dir=str(tmp_path / "ckpt"))

    def crash_after_6(record: dict[str, Any]) -> None:
        if record["step"] == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_trial(cfg, progress=crash_after_6)
    steps_seen: list[int] = []
    resumed = run_trial(cfg, progress=lambda r: steps_seen.append(r["step"]))
    assert steps_seen == [12]
    assert sorted(straight.alignment) == [6, 12] and len(straight.alignment[6]) == 7
    assert resumed.alignment == straight.alignment and resumed.fd == straight.fd


def test_the_sharded_checkpoint_blob_carries_alignment() -> None:
    # A multi-worker trial keeps its records as one JSON blob: the alignment's step -> name -> share reads back.
    from trials._distributed import records_blob, records_from_blob

    records = {"fd": {6: 3.5}, "alignment": {6: {"alignment": 0.25, "alignment.colour": 0.75}}}
    assert records_from_blob(records_blob(records)) == records
