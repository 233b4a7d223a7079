"""The optimizer on a CUDA device (marked `gpu`: skipped with its reason where torch sees no CUDA device)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trials.optim import PeriodicRowMuon, build_optimizer, fast_ns_dtype

pytestmark = pytest.mark.gpu

SHAPES = [(48, 48), (32, 80), (96, 40)]  # square, wide, tall


def _steps(device: str, ns_dtype: torch.dtype, steps: int = 6) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(*s, generator=gen).mul_(0.1).to(device).requires_grad_() for s in SHAPES]
    grads = [[torch.randn(*s, generator=gen).to(device) for s in SHAPES] for _ in range(steps)]
    opt = PeriodicRowMuon(params, lr=0.02, refresh_every=3, gamma=0.15, ns_dtype=ns_dtype)
    for step_grads in grads:
        for p, g in zip(params, step_grads, strict=True):
            p.grad = g
        opt.step()
    assert opt.ns5_calls == 2 * len(SHAPES) and opt.rownorm_calls == 4 * len(SHAPES)
    return [p.detach().cpu() for p in params]


def test_periodic_row_muon_on_cuda_matches_the_cpu_in_fp32() -> None:
    for gpu, cpu in zip(_steps("cuda", torch.float32), _steps("cpu", torch.float32), strict=True):
        torch.testing.assert_close(gpu, cpu, rtol=1e-4, atol=1e-5)


def test_cuda_models_get_bf16_newton_schulz_and_torch_muon_for_the_muon_arm() -> None:
    assert fast_ns_dtype("cuda") == torch.bfloat16
    model = nn.Module()
    model.blocks = nn.Sequential(nn.Linear(32, 64), nn.Linear(64, 32))
    model.head = nn.Linear(32, 4)
    model = model.cuda()
    muon = build_optimizer(model, {"name": "muon"}, block_prefixes=("blocks",))
    periodic = build_optimizer(model, {"name": "periodic"}, block_prefixes=("blocks",))
    assert muon.ns_dtype == periodic.ns_dtype == torch.bfloat16
    assert type(muon.matrix) is torch.optim.Muon
    x = torch.randn(8, 32, device="cuda")
    model.head(model.blocks(x)).square().mean().backward()
    periodic.step()
    assert periodic.last_step_time_s > 0 and periodic.ns5_calls == 2
    assert all(p.is_cuda and torch.isfinite(p).all() for p in model.parameters())
