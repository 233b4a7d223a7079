"""Rectified flow (SD3's objective): the training loss, a fixed validation loss, and an Euler sampler.

Convention (SD3's, and diffusers' FlowMatchEulerDiscreteScheduler): t = 0 is data, t = 1 is noise,

    x_t = (1 - t) * x0 + t * eps,        eps ~ N(0, I)
    v   = dx_t / dt = eps - x0           (the model's regression target)

Training samples t from the logit-normal distribution, t = sigmoid(m + s * n) with n ~ N(0, 1) and
(m, s) = (0, 1), SD3's best setting: it puts more weight on the middle of the path, where the velocity is
hardest to predict.
Sampling integrates dx/dt = v from t = 1 (noise) down to t = 0 (data) with Euler steps.

Classifier-free guidance: the null condition is all-zeros `context` and `pooled`; training drops the condition
per sample with probability `cond_dropout`, and sampling mixes v = v_null + scale * (v_cond - v_null).

Every random draw comes from an explicit `torch.Generator`, so a loss or a sample is a function of its seed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "VelocityModel",
    "flow_loss",
    "flow_targets",
    "interpolate",
    "logit_normal_quantiles",
    "sample_euler",
    "sample_logit_normal",
    "sampling_timesteps",
    "validation_loss",
]

VelocityModel = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
"""`model(x_t (B, C, H, W), t (B,), context (B, L, d), pooled (B, d)) -> velocity (B, C, H, W)`."""


def _randn(shape: tuple[int, ...], generator: torch.Generator, like: Tensor) -> Tensor:
    # draw on the generator's device, then move: results do not depend on where the model runs
    return torch.randn(shape, generator=generator, device=generator.device).to(like.device, like.dtype)


def _rand(shape: tuple[int, ...], generator: torch.Generator, like: Tensor) -> Tensor:
    return torch.rand(shape, generator=generator, device=generator.device).to(like.device, like.dtype)


def interpolate(x0: Tensor, noise: Tensor, t: Tensor) -> Tensor:
    """x_t = (1 - t) x0 + t noise, with t (B,) broadcast over the other dims."""
    t = t.reshape(-1, *([1] * (x0.ndim - 1)))  # (B, 1, 1, 1)
    return (1 - t) * x0 + t * noise


def flow_targets(x0: Tensor, noise: Tensor) -> Tensor:
    """The velocity target eps - x0 (constant along each straight path)."""
    return noise - x0


def sample_logit_normal(
    n: int, generator: torch.Generator, *, mean: float = 0.0, std: float = 1.0, like: Tensor | None = None
) -> Tensor:
    """n flow times t = sigmoid(mean + std * N(0, 1)); SD3's default (mean, std) = (0, 1)."""
    like = like if like is not None else torch.empty(0)
    return torch.sigmoid(mean + std * _randn((n,), generator, like))


def logit_normal_quantiles(n: int, *, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """n evenly spaced quantiles (i + 0.5) / n of the logit-normal: a fixed, stratified set of flow times."""
    u = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    normal = math.sqrt(2.0) * torch.erfinv(2 * u - 1)  # standard normal quantiles
    return torch.sigmoid(mean + std * normal).float()


def _drop_condition(
    context: Tensor, pooled: Tensor, p: float, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Replace each sample's condition by the null condition (zeros) with probability p."""
    keep = (_rand((context.shape[0],), generator, pooled) >= p).to(pooled.dtype)  # (B,)
    return context * keep[:, None, None], pooled * keep[:, None]


def flow_loss(
    model: VelocityModel,
    x0: Tensor,
    context: Tensor,
    pooled: Tensor,
    generator: torch.Generator,
    *,
    cond_dropout: float = 0.0,
    logit_mean: float = 0.0,
    logit_std: float = 1.0,
) -> Tensor:
    """Mean squared error between the model's velocity and eps - x0 at logit-normal t; a scalar with grad.

    `cond_dropout` is the probability of training a sample on the null condition (for classifier-free
    guidance; SD3 used 0.1 per text encoder). Draws, in order: noise, t, then the dropout mask when
    `cond_dropout > 0`.
    """
    if not 0.0 <= cond_dropout <= 1.0:
        raise ValueError(f"cond_dropout must be in [0, 1], got {cond_dropout}")
    B = x0.shape[0]
    noise = _randn(tuple(x0.shape), generator, x0)
    t = sample_logit_normal(B, generator, mean=logit_mean, std=logit_std, like=x0)  # (B,)
    if cond_dropout > 0.0:
        context, pooled = _drop_condition(context, pooled, cond_dropout, generator)
    v = model(interpolate(x0, noise, t), t, context, pooled)
    return F.mse_loss(v.float(), flow_targets(x0, noise).float())


@torch.no_grad()
def validation_loss(
    model: VelocityModel,
    x0: Tensor,
    context: Tensor,
    pooled: Tensor,
    *,
    seed: int = 0,
    logit_mean: float = 0.0,
    logit_std: float = 1.0,
) -> float:
    """Flow loss at fixed noise (from `seed`) and fixed t (stratified logit-normal quantiles, one per sample).

    The same inputs give the same number at every checkpoint, so changes measure the model alone; the
    stratified t make it a low-variance estimate of the training objective. Switches a `nn.Module` to eval
    mode and back.
    """
    generator = torch.Generator().manual_seed(seed)
    noise = _randn(tuple(x0.shape), generator, x0)
    t = logit_normal_quantiles(x0.shape[0], mean=logit_mean, std=logit_std).to(x0.device, x0.dtype)
    was_training = getattr(model, "training", None)
    if was_training is not None:
        model.eval()  # type: ignore[attr-defined]
    try:
        v = model(interpolate(x0, noise, t), t, context, pooled)
    finally:
        if was_training:
            model.train()  # type: ignore[attr-defined]
    return F.mse_loss(v.float(), flow_targets(x0, noise).float()).item()


def sampling_timesteps(steps: int, *, shift: float = 1.0) -> Tensor:
    """steps + 1 times from 1 down to 0; `shift` > 1 spends more steps near noise (SD3: 3.0 at 1024 px)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if shift <= 0:
        raise ValueError(f"shift must be > 0, got {shift}")
    t = torch.linspace(1.0, 0.0, steps + 1, dtype=torch.float64)
    return (shift * t / (1 + (shift - 1) * t)).float()


@torch.no_grad()
def sample_euler(
    model: VelocityModel,
    context: Tensor,
    pooled: Tensor,
    *,
    shape: tuple[int, ...] | None = None,
    noise: Tensor | None = None,
    generator: torch.Generator | None = None,
    steps: int = 20,
    guidance_scale: float = 1.0,
    shift: float = 1.0,
) -> Tensor:
    """Images from noise by Euler steps of dx/dt = v from t = 1 to t = 0; (B, C, H, W), unclipped.

    Give either `noise` (B, C, H, W) or `shape` (C, H, W) with a `generator` (fixed seed, fixed samples).
    `guidance_scale` 1.0 is plain conditional sampling (one forward per step); any other value runs the
    conditional and null (zeros) conditions in one batch and mixes v_null + scale * (v_cond - v_null).
    20 steps by default: at 16 x 16 sample quality saturates well before that (SD3 used 28-50).
    """
    B = context.shape[0]
    if noise is None:
        if shape is None or generator is None:
            raise ValueError("give either noise, or shape (C, H, W) together with a generator")
        noise = _randn((B, *shape), generator, pooled)
    if noise.shape[0] != B:
        raise ValueError(f"noise has batch {noise.shape[0]} but context has {B}")
    ts = sampling_timesteps(steps, shift=shift).to(noise.device)
    guided = guidance_scale != 1.0
    if guided:
        context = torch.cat([context, torch.zeros_like(context)])  # (2B, L, d): conditional, then null
        pooled = torch.cat([pooled, torch.zeros_like(pooled)])  # (2B, d)
    x = noise
    for t_cur, t_next in itertools.pairwise(ts):
        t = t_cur.expand(B).to(x.dtype)  # (B,)
        if guided:
            v_cond, v_null = model(torch.cat([x, x]), torch.cat([t, t]), context, pooled).chunk(2)
            v = v_null + guidance_scale * (v_cond - v_null)
        else:
            v = model(x, t, context, pooled)
        x = x + (t_next - t_cur).to(x.dtype) * v  # dt < 0: towards the data
    return x
