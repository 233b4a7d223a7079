"""`trials.ensure_store`: every experiment the project creates opens on training runs in MLflow 3's UI."""

from __future__ import annotations

from pathlib import Path

from mlflow import MlflowClient

from trials import ensure_store

KIND = "mlflow.experimentKind"


def test_experiments_are_tagged_as_model_development(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    new = ensure_store(uri, "study")
    client = MlflowClient(tracking_uri=uri)
    assert client.get_experiment(new).tags[KIND] == "custom_model_development"
    older = client.create_experiment("made-before-the-tag")  # as an earlier version created them: no kind
    assert KIND not in client.get_experiment(older).tags
    assert ensure_store(uri, "made-before-the-tag") == older
    assert client.get_experiment(older).tags[KIND] == "custom_model_development"
    chosen = client.create_experiment("genai", tags={KIND: "genai_development"})  # a user's own choice stays
    ensure_store(uri, "genai")
    assert client.get_experiment(chosen).tags[KIND] == "genai_development"
