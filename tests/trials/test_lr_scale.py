"""HybridOptimizer.set_lr_scale: how a trial's warm-up sets the learning rate of both groups, before and after a
resume from a checkpoint."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from trials.optim import build_optimizer

CONFIG = {"name": "periodic", "lr": 0.02, "aux_lr": 3e-3, "refresh_every": 3, "gamma": 0.15, "weight_decay": 0.1}


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def _batches(n: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(16, 8, generator=gen) for _ in range(n)]


def _warmup(step: int, warmup_steps: int = 4) -> float:
    return min(1.0, step / warmup_steps)  # the trial's rule (trials/_run.py)


def _train(model: nn.Module, opt: object, batches: list[torch.Tensor], first_step: int) -> None:
    for i, x in enumerate(batches):
        opt.set_lr_scale(_warmup(first_step + i))  # type: ignore[attr-defined]
        model(x).square().mean().backward()
        opt.step()  # type: ignore[attr-defined]
        opt.zero_grad()  # type: ignore[attr-defined]


def _lrs(opt: object) -> list[float]:
    return [g["lr"] for g in opt.param_groups]  # type: ignore[attr-defined]


def test_the_scale_multiplies_each_groups_initial_lr_and_never_compounds() -> None:
    opt = build_optimizer(_Net(), CONFIG, block_prefixes=("blocks",))
    assert _lrs(opt) == [0.02, 3e-3]  # matrix group (Muon family), aux group (AdamW)
    opt.set_lr_scale(0.25)
    assert _lrs(opt) == pytest.approx([0.005, 7.5e-4], rel=1e-12)
    opt.set_lr_scale(0.25)  # relative to the initial lr, not to the current one
    assert _lrs(opt) == pytest.approx([0.005, 7.5e-4], rel=1e-12)
    opt.set_lr_scale(1.0)
    assert _lrs(opt) == [0.02, 3e-3]
    opt.set_lr_scale(0.0)
    assert _lrs(opt) == [0.0, 0.0]


def test_the_scaled_lr_is_the_one_a_step_uses() -> None:
    """Without weight decay a step's change is proportional to the lr: at scale 0.5 exactly half of scale 1's."""
    x = _batches(1)[0]
    deltas = {}
    for scale in (1.0, 0.5, 0.0):
        model = _Net()
        opt = build_optimizer(model, {**CONFIG, "weight_decay": 0.0}, block_prefixes=("blocks",))
        before = [p.detach().clone() for p in model.parameters()]
        opt.set_lr_scale(scale)
        model(x).square().mean().backward()
        opt.step()
        deltas[scale] = [p.detach() - b for p, b in zip(model.parameters(), before, strict=True)]
    matrix = 0  # blocks.0.weight: a Muon-family matrix; the head's weight is in the AdamW group
    torch.testing.assert_close(deltas[0.5][matrix], 0.5 * deltas[1.0][matrix], rtol=1e-5, atol=1e-7)  # float32 steps
    assert deltas[1.0][matrix].abs().max() > 1e-4
    assert all(torch.equal(d, torch.zeros_like(d)) for d in deltas[0.0])  # scale 0 (step 0 of the warm-up)


def test_a_resumed_warmup_sets_the_same_lrs_and_reproduces_the_run() -> None:
    batches = _batches(8)
    straight = _Net()
    opt = build_optimizer(straight, CONFIG, block_prefixes=("blocks",))
    _train(straight, opt, batches, 0)

    first = _Net()
    opt1 = build_optimizer(first, CONFIG, block_prefixes=("blocks",))
    _train(first, opt1, batches[:3], 0)  # stopped mid warm-up, at scale 0.5
    assert _lrs(opt1) == pytest.approx([0.01, 1.5e-3], rel=1e-12)
    buffer = io.BytesIO()
    torch.save({"model": first.state_dict(), "optimizer": opt1.state_dict()}, buffer)

    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)
    resumed = _Net()
    resumed.load_state_dict(saved["model"])
    opt2 = build_optimizer(resumed, CONFIG, block_prefixes=("blocks",))
    opt2.load_state_dict(saved["optimizer"])
    # The loaded groups keep the initial lr, so the schedule's scale still means the same lr after the resume.
    opt2.set_lr_scale(1.0)
    assert _lrs(opt2) == [0.02, 3e-3]
    _train(resumed, opt2, batches[3:], 3)
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)
    assert _lrs(opt2) == _lrs(opt) == [0.02, 3e-3]
