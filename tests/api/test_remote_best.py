"""`scalesweep remote best` prints what `GET /v1/sweeps/{id}/best` answered: P(best) as a probability only from 5
seeds, and a choice worse than every baseline warned of right under the chosen line. The service's answer is given
as the document it returns (the route itself is tested in test_sweeps.py)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from api.client.cli import _best
from scaling.claims import choice_warning


class _Answers:
    """The client's `sweep_best`, answering one document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    def sweep_best(self, sweep_id: str) -> dict[str, Any]:
        return self.doc


def _point(key: str, rank: int, objective: float, p_best: float, seeds: int) -> dict[str, Any]:
    return {"rank": rank, "point_key": key, "objective": objective, "seed_std": 1.0, "p_best": p_best,
            "status": "SUCCEEDED", "seed_objectives": {str(s): objective for s in range(seeds)}}


@pytest.mark.parametrize("seeds", [2, 3, 5])
def test_remote_best_withholds_p_best_below_five_seeds_and_warns_of_a_losing_choice(
        seeds: int, capsys: pytest.CaptureFixture[str]) -> None:
    warning = choice_warning("K=3,gamma=0.15", {0: 810.0, 1: 790.0},
                             {"adamw": {0: 100.0, 1: 98.0}, "muon": {0: 96.0, 1: 97.0}})
    assert warning is not None
    doc = {"state": "SUCCEEDED", "best": {"K": 3, "gamma": 0.15}, "choice_warning": warning.text(), "warnings": [],
           "points": [_point("K=3,gamma=0.15", 1, 800.0, 0.23, seeds), _point("K=2,gamma=0.15", 2, 810.0, 0.77, seeds)]}
    assert _best(_Answers(doc), argparse.Namespace(sweep_id="sw-1", json=False)) == 0  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "sw-1 SUCCEEDED: chosen K=3, gamma=0.15"
    assert lines[1].startswith("WARNING: the chosen K=3,gamma=0.15 is worse than adamw and muon on 2 of 2 seeds")
    row = next(line for line in lines if "K=2,gamma=0.15" in line)
    if seeds >= 5:
        assert "0.77" in row
    else:
        assert f"too few seeds (n={seeds})" in row and "0.77" not in row
