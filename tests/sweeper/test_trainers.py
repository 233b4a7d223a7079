"""The trainer registry (`SCALESWEEP_TRAINERS`): loading, resolving a named trainer, and the local CLI's free-form
commands kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper import SweepError, SweepSpec
from sweeper.jobs._driver import _with_trainer
from sweeper.search import load_trainers, resolve_trainer

BASE = {"name": "t", "rung": "cpu-xs", "horizon": 12, "search": {"space": {"K": [3]}}, "baselines": []}


def _registry(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trainers.yaml"
    path.write_text(text)
    return path


def test_a_registry_loads_and_a_named_trainer_resolves(tmp_path: Path) -> None:
    path = _registry(tmp_path, "trainers:\n  mine:\n    command: train --K {K} --gamma {gamma}\n"
                               "    env: {A: b}\n    cwd: /opt\n    timeout_s: 100\n")
    trainers = load_trainers(path)
    assert list(trainers) == ["mine"] and trainers["mine"].command == ["train", "--K", "{K}", "--gamma", "{gamma}"]
    backend = resolve_trainer({"name": "command", "trainer": "mine", "timeout_s": 500}, trainers)
    assert backend["command"][0] == "train" and backend["env"] == {"A": "b"} and backend["cwd"] == "/opt"
    assert backend["timeout_s"] == 100  # a spec may lower the registry's timeout, never raise it
    assert resolve_trainer({"name": "command", "trainer": "mine", "timeout_s": 5}, trainers)["timeout_s"] == 5
    with pytest.raises(SweepError, match=r"no registered trainer 'other'; registered: \['mine'\]"):
        resolve_trainer({"name": "command", "trainer": "other"}, trainers)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mine: {command: [train, '{batch}']}", "mine.command: unknown placeholder {batch}"),
        ("mine: {command: [train], shell: true}", "mine.shell: Extra inputs are not permitted"),
        ("'bad name!': {command: [train]}", "trainer name 'bad name!' must match"),
        ("mine: [train", "not valid YAML/JSON"),
        ("[train]", "expected a trainer registry (trainer names -> {command, env, cwd, timeout_s}), got list"),
    ],
)
def test_a_bad_registry_is_one_line_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = _registry(tmp_path, text)
    with pytest.raises(SweepError) as err:
        load_trainers(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(SweepError, match="no trainer registry file there"):
        load_trainers(tmp_path / "missing.yaml")


def test_the_local_cli_resolves_a_named_trainer_and_keeps_free_form_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = SweepSpec.model_validate({**BASE, "backend": {"name": "command", "trainer": "mine"}})
    assert named.backend.command is None  # valid as data; the command comes from where it runs
    monkeypatch.delenv("SCALESWEEP_TRAINERS", raising=False)
    with pytest.raises(SweepError, match="none: the operator registers trainers with SCALESWEEP_TRAINERS"):
        _with_trainer(named)
    monkeypatch.setenv("SCALESWEEP_TRAINERS", str(_registry(tmp_path, "mine: {command: [train, '{K}']}")))
    assert _with_trainer(named).backend.command == ["train", "{K}"]
    free = SweepSpec.model_validate({**BASE, "backend": {"name": "command", "command": "sh -c 'train {K}'",
                                                         "env": {"X": "1"}}})
    assert _with_trainer(free) is free and free.backend.command == ["sh", "-c", "train {K}"]
    with pytest.raises(ValueError, match=r"give backend\.trainer"):
        SweepSpec.model_validate({**BASE, "backend": {"name": "command"}})

