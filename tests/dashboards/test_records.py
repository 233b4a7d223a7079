"""Records from dicts, the honest name of the FD, and the sweep objective of one record."""

from __future__ import annotations

import math

import pytest

from dashboards import DashboardInputError, RunRecord, as_records
from dashboards._records import FDInfo, describe_fd, fd_label


def test_dicts_become_records_with_integer_steps() -> None:
    (r,) = as_records(
        [{"K": "3", "gamma": "0.15", "seed": 2, "fd": {"800": "41.5", 1000: 40.0}, "status": "succeeded"}]
    )
    assert r.K == 3 and r.gamma == 0.15 and r.seed == 2
    assert r.fd == {800: 41.5, 1000: 40.0}
    assert r.status == "SUCCEEDED" and r.succeeded
    assert r.label == "periodic K=3 γ=0.15"
    assert RunRecord(arm="muon").label == "muon"


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ({"k": 3}, "unknown keys \\['k'\\]"),
        ({"fd": [1.0, 2.0]}, "fd must map step -> value"),
        ({"fd": {"late": 1.0}}, "non-numeric entry"),
        ({"fd": {-5: 1.0}}, "whole numbers >= 0"),
        ({"K": 2.5}, "K must be a whole number"),
        ({"gamma": True}, "gamma must be a number"),
    ],
)
def test_malformed_records_are_refused_with_the_reason(item: dict[str, object], match: str) -> None:
    with pytest.raises(DashboardInputError, match=match):
        as_records([item])


def test_objective_prefers_the_logged_value_and_never_averages_past_a_divergence() -> None:
    assert RunRecord(objective=30.0, fd={1: 10.0}).objective_value() == 30.0
    assert RunRecord(fd={1: 10.0, 2: 20.0}).objective_value() == 15.0
    assert RunRecord(fd={1: 10.0, 2: math.nan}).objective_value() is None
    assert RunRecord().objective_value() is None


def test_fd_is_named_after_its_features() -> None:
    assert fd_label("fd_dinov2") == "FD-DINOv2"
    assert fd_label("fd_shapes_cnn") == "FD on shapes_cnn features"
    assert "DINO" not in fd_label("fd_shapes_cnn")
    stand_in = FDInfo(metric_names=("fd_shapes_cnn",), samples=(256,))
    assert "not FD-DINO" in stand_in.description and "256 generated samples" in stand_in.description
    dino = FDInfo(metric_names=("fd_dinov2",), samples=(1024,))
    assert dino.description.startswith("FD-DINOv2")
    mixed = describe_fd(
        [
            RunRecord(fd={1: 1.0}, metric_name="fd_dinov2", fd_samples=1024),
            RunRecord(fd={1: 1.0}, metric_name="fd_pixels", fd_samples=256),
            RunRecord(metric_name="fd_ignored"),
        ]  # no FD: does not count
    )
    assert mixed.metric_names == ("fd_dinov2", "fd_pixels") and not mixed.consistent
    assert "must not be compared" in mixed.description and "not comparable" in mixed.description


def test_records_built_by_hand_are_put_in_step_order() -> None:
    (r,) = as_records([RunRecord(fd={1200: 30.0, 800: 40.0})])
    assert list(r.fd) == [800, 1200]


def test_fd_is_kept_at_the_declared_eval_steps_only() -> None:
    (r,) = as_records([{"eval_steps": [1000, 800], "fd": {800: 40.0, 900: 1.0, 1000: 30.0, 5000: 0.1}}])
    assert r.fd == {800: 40.0, 1000: 30.0} and r.eval_steps == (800, 1000)
    assert r.objective_value() == 35.0  # the stray steps do not pull the mean down
    table = as_records([RunRecord(fd={900: 1.0, 800: 2.0})])
    assert list(table[0].fd) == [800, 900] and len(table) == 1  # nothing declared: every step kept
    assert as_records(table) is table  # a table is taken as it is
    with pytest.raises(DashboardInputError, match="eval_steps must be a list"):
        as_records([{"eval_steps": "800,1000"}])
