"""Synthetic trial records with known answers: a K x γ sweep and a three-arm transfer over four model sizes."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import matplotlib
import pytest

# Tests never open a window: pin the non-interactive backend before anything could pick a GUI one.
os.environ.setdefault("MPLBACKEND", "Agg")
matplotlib.use("Agg")

SWEEP_KS = (2, 3, 4)
SWEEP_GAMMAS = (0.10, 0.15, 0.25, 0.35)
SWEEP_STEPS = (800, 1000, 1200)
METRIC = "fd_shapes_cnn"


def sweep_fd(k: int, gamma: float, step: int, seed: int) -> float:
    """Lowest at K=3, γ=0.15 at every step; falls with the step; seeds differ by 0.1."""
    return 30.0 + 10.0 * (k - 3) ** 2 + 100.0 * (gamma - 0.15) ** 2 + 20.0 * (1200 / step - 1) + 0.1 * seed


def _trial(k: int, gamma: float, seed: int, status: str = "SUCCEEDED") -> dict[str, Any]:
    fd = {s: sweep_fd(k, gamma, s, seed) for s in SWEEP_STEPS}
    record: dict[str, Any] = {
        "run_id": f"k{k}-g{gamma:g}-s{seed}",
        "arm": "periodic",
        "rung": "cpu-xs",
        "K": k,
        "gamma": gamma,
        "seed": seed,
        "status": status,
        "metric_name": METRIC,
        "fd_samples": 256,
        "parameters": 380_000,
        "effective_time_s": {s: 0.5 * s for s in SWEEP_STEPS},
    }
    if status == "SUCCEEDED":
        record["fd"] = fd
        record["objective"] = sum(fd.values()) / len(fd)
    elif status == "DIVERGED":
        record["fd"] = {800: fd[800], 1000: float("nan")}
    return record


@pytest.fixture
def sweep_records() -> list[dict[str, Any]]:
    """12-cell grid minus one cell never run (K=2, γ=0.35), one cell where both seeds FAILED (K=4, γ=0.35), one cell
    where seed 1 DIVERGED (K=4, γ=0.25); plus AdamW and Muon baselines."""
    out = []
    for k in SWEEP_KS:
        for g in SWEEP_GAMMAS:
            if (k, g) == (2, 0.35):
                continue
            for seed in (0, 1):
                if (k, g) == (4, 0.35):
                    status = "FAILED"
                elif (k, g, seed) == (4, 0.25, 1):
                    status = "DIVERGED"
                else:
                    status = "SUCCEEDED"
                out.append(_trial(k, g, seed, status))
    for arm, objective in (("adamw", 50.0), ("muon", 29.0)):
        out.append(
            {
                "run_id": f"{arm}-s0",
                "arm": arm,
                "rung": "cpu-xs",
                "seed": 0,
                "objective": objective,
                "fd": {s: objective for s in SWEEP_STEPS},
                "metric_name": METRIC,
                "fd_samples": 256,
            }
        )
    return out


# Transfer: three arms, four sizes, three seeds. Per-step loss: muon < periodic < adamw; per-second (slower
# muon steps): periodic < adamw < muon at the common budget.
SIZES = {"xs": 1e6, "s": 4e6, "m": 1.6e7, "l": 6.4e7}
LOSS_C = {"adamw": 0.30, "muon": 0.20, "periodic": 0.22}
STEP_S = {"adamw": 0.5, "muon": 1.0, "periodic": 0.6}  # effective seconds per step at the smallest rung
OPT_S = {"adamw": 0.01, "muon": 0.3, "periodic": 0.1}  # optimizer seconds per step at the smallest rung
FD_E = {"adamw": 20.0, "muon": 12.0, "periodic": 13.0}
EVAL_STEPS = (400, 800, 1200)


def transfer_fd(arm: str, size: float, step: int, seed: int) -> float:
    best = FD_E[arm] + 4000.0 * size**-0.5 * (1 + 0.01 * (seed - 1))
    return best * (1 + 0.5 * (1200 / step - 1))  # best at the last eval step


def transfer_record(arm: str, rung: str, seed: int) -> dict[str, Any]:
    size = SIZES[rung]
    scale = (size / 1e6) ** 0.25  # bigger models step slower
    step_s = STEP_S[arm] * scale * (1 + 0.02 * seed)
    return {
        "run_id": f"{arm}-{rung}-s{seed}",
        "arm": arm,
        "rung": rung,
        "seed": seed,
        "K": 3 if arm == "periodic" else None,
        "gamma": 0.15 if arm == "periodic" else None,
        "parameters": int(size),
        "metric_name": METRIC,
        "fd_samples": 256,
        "fd": {s: transfer_fd(arm, size, s, seed) for s in EVAL_STEPS},
        "effective_time_s": {s: step_s * s for s in EVAL_STEPS},
        "val_loss": {s: 1.0 + LOSS_C[arm] * 1000 / s + 0.01 for s in EVAL_STEPS},
        "loss": {s: 1.0 + LOSS_C[arm] * 1000 / s + 0.001 * seed for s in range(100, 1201, 100)},
        "optimizer_time_s": {s: OPT_S[arm] * scale * s for s in EVAL_STEPS},
        "optimizer_step_time_s": {s: OPT_S[arm] * scale for s in EVAL_STEPS},
        "step_time_s": {s: step_s for s in EVAL_STEPS},
    }


@pytest.fixture
def transfer_records() -> list[dict[str, Any]]:
    return [transfer_record(arm, rung, seed) for arm in LOSS_C for rung in SIZES for seed in range(3)]


@pytest.fixture(scope="session")
def synth() -> SimpleNamespace:
    """The constants and generators above, for tests (conftest is not importable under --import-mode=importlib)."""
    return SimpleNamespace(
        SWEEP_KS=SWEEP_KS,
        SWEEP_GAMMAS=SWEEP_GAMMAS,
        SWEEP_STEPS=SWEEP_STEPS,
        METRIC=METRIC,
        SIZES=SIZES,
        LOSS_C=LOSS_C,
        STEP_S=STEP_S,
        OPT_S=OPT_S,
        FD_E=FD_E,
        EVAL_STEPS=EVAL_STEPS,
        sweep_fd=sweep_fd,
        transfer_fd=transfer_fd,
        transfer_record=transfer_record,
    )
