"""Bad input at the `scalesweep` entry point is one line naming the file or variable, exit 2, never a traceback:
every subcommand goes through the one dispatch in scalesweep_cli."""

from __future__ import annotations

from pathlib import Path

import pytest

import scalesweep_cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = scalesweep_cli.main(list(argv))
    out, err = capsys.readouterr()
    assert out == ""
    return code, err.strip()


def test_a_trial_config_with_a_yaml_syntax_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("optimizer:\n  name: periodic\n gamma: [0.15\n")
    code, err = _run(capsys, "trial", str(bad))
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"scalesweep trial: error: {bad}: not valid YAML/JSON (line ") and "Traceback" not in err


@pytest.mark.parametrize("argv", [["--server", "http://[::1", "status", "x"], ["status", "x", "--server", "http://[::1"],
                                  ["status", "x", "--server", "ftp://host"]])
def test_a_malformed_server_url(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(capsys, "remote", *argv)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("scalesweep remote status: error: Bad Server URL: --server / SCALESWEEP_SERVER")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SCALESWEEP_DATABASE_URL", "garbage", "SCALESWEEP_DATABASE_URL: not a SQLAlchemy URL"),
        ("SCALESWEEP_MLFLOW_TRACKING_URI", "ftp://x", "SCALESWEEP_MLFLOW_TRACKING_URI: MLflow cannot track to 'ftp://x'"),
        ("SCALESWEEP_TRAINERS", "/no/such/trainers.yaml", "SCALESWEEP_TRAINERS: /no/such/trainers.yaml: no trainer"),
    ],
)
def test_serve_with_a_bad_setting(variable: str, value: str, message: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALESWEEP_API_TOKEN", "a-real-token-123")
    monkeypatch.setenv("SCALESWEEP_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv(variable, value)
    code, err = _run(capsys, "serve", "--port", "1")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("scalesweep serve: error: invalid settings: ") and message in err, err


def test_serve_with_an_invalid_trainer_registry(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    registry = tmp_path / "trainers.yaml"
    registry.write_text("trainers:\n  mine:\n    command: [train, '{batch}']\n")
    monkeypatch.setenv("SCALESWEEP_API_TOKEN", "a-real-token-123")
    monkeypatch.setenv("SCALESWEEP_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("SCALESWEEP_TRAINERS", str(registry))
    code, err = _run(capsys, "serve", "--port", "1")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{registry}: mine.command" in err and "unknown placeholder {batch}" in err, err


def test_a_trial_config_that_does_not_validate(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(capsys, "trial", "--set", "optimizer.gamma=5", "--set", "optimizer.name=nosuch")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("scalesweep trial: error: invalid trial config: "), err
    assert "optimizer.name: Input should be " in err, err
    assert "Traceback" not in err


def test_a_trial_that_fails_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import trials
    from trials import TrialError

    def refuse(*args: object, **kwargs: object) -> None:
        raise TrialError("the command exited 3:\nsee its log")

    monkeypatch.setattr(trials, "run_trial", refuse)
    code, err = _run(capsys, "trial")
    assert (code, err) == (2, "scalesweep trial: error: the command exited 3: see its log")


def test_serve_when_the_app_cannot_start(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import api.service

    def refuse(settings: object) -> None:
        raise OSError("database is locked\nand more")

    monkeypatch.setenv("SCALESWEEP_API_TOKEN", "a-real-token-123")
    monkeypatch.setenv("SCALESWEEP_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setattr(api.service, "create_app", refuse)
    code, err = _run(capsys, "serve", "--port", "1")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("scalesweep serve: error: could not start the service (OSError: database is locked)"), err


@pytest.mark.parametrize(("sets", "words"), [
    (["data.options.kinds=[hexagon]"], ["data: options.kinds: unknown", "'hexagon'", "allowed: ['circle'"]),
    (["data.options.max_objects=20"], ["options.max_objects: 20 objects cannot fit", "allowed: 1 to 16"]),
    (["patch=5"], ["patch: data.image_size 32 does not divide", "allowed patches at this image_size"]),
    # an unknown attribute, as a value of one the set varies or as an option it does not have
    (["data.options.colours=[mauve]"], ["options.colours: unknown", "'mauve'", "allowed: ['red', 'green'"]),
    (["data.options.sizes=[huge]"], ["options.sizes: unknown", "'huge'", "allowed: ['small', 'large']"]),
    (["data.options.textures=[striped]"], ["options.textures: not an option of scenes", "allowed: ['kinds'"]),
    # a count past the field's own bound is said as the canvas says it, not as a bare number
    (["data.options.max_objects=100"], ["options.max_objects: 100 objects cannot fit on a 4x4 grid", "1 to 16"]),
    (["data.options.min_objects=5"], ["options.min_objects: 5 is above max_objects 3", "allowed: 1 to 3"]),
    (["data.image_size=30"], ["options.grid: 4 cells per side do not tile a 30-px image", "[2, 3, 5, 6]"]),
])
def test_a_scenes_set_that_cannot_be_drawn_is_one_line(sets: list[str], words: list[str],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["trial", "--set", "data.name=scenes", "--set", "data.image_size=32", "--set", "text_max_length=34"]
    code, err = _run(capsys, *argv, *(a for s in sets for a in ("--set", s)))
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("scalesweep trial: error: invalid trial config: "), err
    assert all(w in err for w in words), err


@pytest.mark.parametrize(("trial", "words"), [
    ("{patch: 4, data: {name: scenes, image_size: 32, options: {kinds: [hexagon]}}}",
     ["trial.data: options.kinds: unknown", "'hexagon'", "allowed: ['circle'"]),
    ("{patch: 4, data: {name: scenes, image_size: 32, options: {max_objects: 17}}}",
     ["options.max_objects: 17 objects cannot fit on a 4x4 grid", "allowed: 1 to 16"]),
    ("{patch: 5, data: {name: scenes, image_size: 32}}",
     ["patch: data.image_size 32 does not divide into 5-px patches", "[1, 2, 4, 8, 16, 32]"]),
])
def test_a_sweep_whose_scenes_trial_cannot_be_drawn_is_one_line(trial: str, words: list[str], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(f"name: s\nrung: cpu-xs\nhorizon: 20\ntrial: {trial}\n")
    code, err = _run(capsys, "sweep", "validate", str(spec))
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("scalesweep sweep validate: error: invalid sweep spec: trial: "), err
    assert all(w in err for w in words), err
