"""The exported non-matrix AdamW lr is what it says it is: the paper's 1e-4 at the paper's sizes, and the CPU
ladder's 3e-3 labelled as that wherever it is carried."""

from __future__ import annotations

from scaling.export import build_export
from trials import CPU_AUX_LR

ARMS = {"periodic": {"name": "periodic", "refresh_every": 3, "gamma": 0.15, "aux_lr": CPU_AUX_LR},
        "adamw": {"name": "adamw", "lr": 3e-3, "aux_lr": CPU_AUX_LR}}


def _export(rung: str, arms: dict = ARMS) -> dict:
    return build_export(arms, base_width=64, target_width=128,
                        target={"rung": rung, "base_rung": "cpu-xs"}).to_dict()["arms"]


def test_paper_rungs_get_the_papers_aux_lr() -> None:
    for arm in _export("paper-15b").values():
        assert arm["optimizer"]["aux_lr"] == 1e-4
        assert arm["rules"]["aux_lr"].startswith("the paper's AdamW lr for non-matrix parameters (0.0001)")
        assert "0.003" in arm["rules"]["aux_lr"] and "not carried to paper-15b" in arm["rules"]["aux_lr"]


def test_cpu_rungs_keep_the_cpu_value_labelled_as_such() -> None:
    for arm in _export("cpu-m").values():
        assert arm["optimizer"]["aux_lr"] == CPU_AUX_LR
        assert "CPU ladder's default" in arm["rules"]["aux_lr"] and "the paper's AdamW lr" not in arm["rules"]["aux_lr"]


def test_a_value_the_sweep_set_is_carried_and_said_so() -> None:
    own = {"periodic": {**ARMS["periodic"], "aux_lr": 5e-4}}
    arm = _export("paper-4b", own)["periodic"]
    assert arm["optimizer"]["aux_lr"] == 5e-4 and arm["rules"]["aux_lr"].startswith("unchanged: 0.0005, as the sweep")
