from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor

from trials.flow import (
    flow_loss,
    flow_targets,
    interpolate,
    logit_normal_quantiles,
    sample_euler,
    sample_logit_normal,
    sampling_timesteps,
    validation_loss,
)
from trials.models import MMDiT, build_model


def _point_velocity(x_star: Tensor):
    """The exact velocity field when the data is the single point x_star: v = (x_t - x_star) / t."""

    def model(x: Tensor, t: Tensor, context: Tensor, pooled: Tensor) -> Tensor:
        return (x - x_star) / t.reshape(-1, 1, 1, 1)

    return model


def _small_model(final_std: float) -> MMDiT:
    """A seeded cpu-xs model on 8x8 images whose output layer is not zero (so its velocity depends on the input)."""
    torch.manual_seed(0)
    model = build_model("cpu-xs", context_dim=8, pooled_dim=8, image_size=8)
    with torch.no_grad():
        model.final_layer.linear.weight.normal_(0, final_std)
    return model


def _cond(batch: int, length: int = 4, dim: int = 8, seed: int = 0) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, length, dim, generator=g), torch.randn(batch, dim, generator=g)


def test_interpolation_endpoints_and_target() -> None:
    x0, noise = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
    assert torch.equal(interpolate(x0, noise, torch.zeros(2)), x0)  # t = 0 is data
    assert torch.equal(interpolate(x0, noise, torch.ones(2)), noise)  # t = 1 is noise
    mid = interpolate(x0, noise, torch.tensor([0.25, 0.75]))
    assert torch.allclose(mid[1], 0.25 * x0[1] + 0.75 * noise[1])
    # the target is the time derivative of the path
    h = 1e-3
    t = torch.full((2,), 0.4, dtype=torch.float64)
    x0d, nd = x0.double(), noise.double()
    slope = (interpolate(x0d, nd, t + h) - interpolate(x0d, nd, t - h)) / (2 * h)
    assert torch.allclose(slope, flow_targets(x0d, nd))


def test_flow_loss_of_the_exact_velocity_is_zero() -> None:
    x_star = torch.randn(1, 3, 8, 8).expand(6, -1, -1, -1)
    context, pooled = _cond(6)
    loss = flow_loss(_point_velocity(x_star), x_star, context, pooled, torch.Generator().manual_seed(0))
    assert loss.item() < 1e-10
    assert validation_loss(_point_velocity(x_star), x_star, context, pooled) < 1e-10
    # and a zero model's loss is mean|eps - x0|^2 over the very noise it drew (noise is its first draw)
    zero = flow_loss(lambda x, t, c, p: torch.zeros_like(x), x_star, context, pooled, torch.Generator().manual_seed(3))
    noise = torch.randn(x_star.shape, generator=torch.Generator().manual_seed(3))
    assert zero.item() == pytest.approx((noise - x_star).square().mean().item(), rel=1e-6)


def test_logit_normal_matches_sd3_defaults() -> None:
    t = sample_logit_normal(200_000, torch.Generator().manual_seed(0))
    logits = torch.log(t / (1 - t))
    assert logits.mean().item() == pytest.approx(0.0, abs=0.01)
    assert logits.std().item() == pytest.approx(1.0, abs=0.01)
    assert 0 < t.min() and t.max() < 1
    q = logit_normal_quantiles(101)
    assert torch.all(q[1:] > q[:-1]) and q[50].item() == pytest.approx(0.5, abs=1e-6)
    assert torch.allclose(q, 1 - q.flip(0), atol=1e-6)  # symmetric around 1/2
    assert q[-1].item() == pytest.approx(1 / (1 + math.exp(-2.5758)), abs=1e-3)  # 99.5% normal quantile


def test_flow_loss_is_a_function_of_the_generator() -> None:
    model = _small_model(final_std=0.02)
    x0 = torch.randn(4, 3, 8, 8)
    context, pooled = _cond(4)

    def loss(seed: int, **kw: float) -> float:
        return flow_loss(model, x0, context, pooled, torch.Generator().manual_seed(seed), **kw).item()

    assert loss(1) == loss(1)
    assert loss(1) != loss(2)
    assert loss(1, cond_dropout=0.5) == loss(1, cond_dropout=0.5)
    with pytest.raises(ValueError, match="cond_dropout"):
        loss(1, cond_dropout=1.5)


def test_condition_dropout_replaces_condition_by_zeros() -> None:
    seen: list[tuple[Tensor, Tensor]] = []

    def spy(x: Tensor, t: Tensor, context: Tensor, pooled: Tensor) -> Tensor:
        seen.append((context, pooled))
        return torch.zeros_like(x)

    x0 = torch.randn(64, 3, 4, 4)
    context, pooled = _cond(64)
    for p, dropped in ((0.0, 0), (1.0, 64)):
        seen.clear()
        flow_loss(spy, x0, context, pooled, torch.Generator().manual_seed(0), cond_dropout=p)
        ctx, pool = seen[0]
        null = (pool == 0).all(dim=1) & (ctx == 0).flatten(1).all(dim=1)
        assert int(null.sum()) == dropped
    seen.clear()
    flow_loss(spy, x0, context, pooled, torch.Generator().manual_seed(0), cond_dropout=0.5)
    ctx, pool = seen[0]
    null = (pool == 0).all(dim=1)
    assert 16 <= int(null.sum()) <= 48
    kept = ~null
    assert torch.equal(ctx[kept], context[kept]) and torch.equal(pool[kept], pooled[kept])


def test_validation_loss_is_fixed_and_restores_mode() -> None:
    model = _small_model(final_std=0.02)
    x0 = torch.randn(8, 3, 8, 8)
    context, pooled = _cond(8)
    model.train()
    a = validation_loss(model, x0, context, pooled)
    assert model.training
    assert a == validation_loss(model, x0, context, pooled)
    assert a != validation_loss(model, x0, context, pooled, seed=1)


def test_euler_with_the_true_velocity_maps_noise_to_the_point() -> None:
    x_star = torch.randn(1, 3, 8, 8)
    context, pooled = _cond(5)
    target = x_star.expand(5, -1, -1, -1)
    # a few steps or many; guidance does not change a field that ignores the condition
    cases: tuple[dict[str, Any], ...] = ({"steps": 1}, {"steps": 20}, {"guidance_scale": 4.0, "shift": 3.0})
    for options in cases:
        out = sample_euler(
            _point_velocity(x_star),
            context,
            pooled,
            shape=(3, 8, 8),
            generator=torch.Generator().manual_seed(0),
            **options,
        )
        assert torch.allclose(out, target, atol=1e-5)


def test_euler_is_deterministic_by_generator() -> None:
    model = _small_model(final_std=0.05)
    context, pooled = _cond(3)

    def run(seed: int) -> Tensor:
        return sample_euler(
            model, context, pooled, shape=(3, 8, 8), generator=torch.Generator().manual_seed(seed), steps=4
        )

    assert torch.equal(run(0), run(0))
    assert not torch.equal(run(0), run(1))
    noise = torch.randn(3, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(sample_euler(model, context, pooled, noise=noise, steps=4), run(0))


def test_guidance_mixes_conditional_and_null_velocities() -> None:
    # v = mean(pooled) everywhere: v_cond = a, v_null = 0, so one guided step moves x by -scale * a
    def model(x: Tensor, t: Tensor, context: Tensor, pooled: Tensor) -> Tensor:
        return pooled.mean(1).reshape(-1, 1, 1, 1).expand_as(x)

    context, pooled = _cond(2)
    noise = torch.zeros(2, 1, 2, 2)
    a = pooled.mean(1).reshape(-1, 1, 1, 1)
    for scale in (1.0, 3.0):
        out = sample_euler(model, context, pooled, noise=noise, steps=1, guidance_scale=scale)
        assert torch.allclose(out, -scale * a.expand_as(noise))


def test_sampling_timesteps() -> None:
    ts = sampling_timesteps(4)
    assert torch.allclose(ts, torch.tensor([1.0, 0.75, 0.5, 0.25, 0.0]))
    shifted = sampling_timesteps(4, shift=3.0)
    assert shifted[0] == 1 and shifted[-1] == 0 and torch.all(shifted[1:-1] > ts[1:-1])
    with pytest.raises(ValueError):
        sampling_timesteps(0)
    with pytest.raises(ValueError, match="noise, or shape"):
        sample_euler(lambda *a: a[0], *_cond(1))


def test_tiny_overfit_reduces_flow_loss() -> None:
    """cpu-xs, AdamW, one fixed batch, 150 steps: the fixed validation loss falls well below its start."""
    torch.manual_seed(0)
    model = build_model("cpu-xs", context_dim=8, pooled_dim=8)
    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(8, 3, 16, 16, generator=g) * 0.2 - 0.6  # dark backgrounds ...
    x0[:, :, 4:10, 4:10] = torch.rand(8, 3, 1, 1, generator=g) * 2 - 1  # ... with a coloured square
    context, pooled = _cond(8)
    before = validation_loss(model, x0, context, pooled)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    train_gen = torch.Generator().manual_seed(1)
    for _ in range(150):
        loss = flow_loss(model, x0, context, pooled, train_gen)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    after = validation_loss(model, x0, context, pooled)
    assert after < 0.2 * before, (before, after)  # measured: 1.30 -> 0.037
