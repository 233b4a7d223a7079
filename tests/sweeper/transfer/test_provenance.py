"""Provenance served to open reads (fits, exports) names the tracking store without its credentials."""

from __future__ import annotations

from sweeper.transfer._planning import _without_credentials


def test_a_tracking_uri_loses_its_password_and_keeps_the_rest() -> None:
    assert _without_credentials("postgresql+psycopg://mlflow:s3cret@postgres:5432/mlflow") == \
        "postgresql+psycopg://postgres:5432/mlflow"
    assert _without_credentials("https://user:token@mlflow.example.org/") == "https://mlflow.example.org/"
    for plain in ("http://mlflow:5000", "sqlite:////data/work/mlflow.db", "file:///tmp/mlruns"):
        assert _without_credentials(plain) == plain
