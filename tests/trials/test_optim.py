"""Periodic Row-wise Muon: the update rule, its equivalences, its state, routing and the factory."""

from __future__ import annotations

import io
import math

import pytest
import torch
from pydantic import ValidationError
from torch import nn

from trials.optim import (
    OptimizerConfig,
    PeriodicRowMuon,
    RowNormMuon,
    build_optimizer,
    list_optimizers,
    route_parameters,
)
from trials.optim.functional import adjust_lr, newton_schulz5, unit_rows_or_columns

SHAPES = [(48, 48), (32, 80), (96, 40)]  # square, wide, tall


def _matrix_with_spectrum(m: int, n: int, singular_values: torch.Tensor, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(m, m, generator=gen, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    k = min(m, n)
    return (u[:, :k] * singular_values.double()) @ v[:, :k].T


def _grads(shapes: list[tuple[int, int]], steps: int, seed: int = 0) -> list[list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [[torch.randn(*s, generator=gen) for s in shapes] for _ in range(steps)]


def _run(opt: torch.optim.Optimizer, params: list[torch.Tensor], grads: list[list[torch.Tensor]]) -> None:
    for step_grads in grads:
        for p, g in zip(params, step_grads, strict=True):
            p.grad = g.clone()
        opt.step()


def _params(shapes: list[tuple[int, int]], seed: int = 1) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=gen).mul_(0.1).requires_grad_() for s in shapes]


# --- the pure functions ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("m", "n"), [(64, 64), (32, 96), (96, 32)])
def test_ns5_maps_a_well_conditioned_spectrum_into_a_band(m: int, n: int) -> None:
    k = min(m, n)
    # Normalised singular values from 0.05 to 1 of the largest: all well above NS5's ~3e-3 floor.
    s = torch.linspace(0.05, 1.0, k)
    out = newton_schulz5(_matrix_with_spectrum(m, n, s).float())
    assert out.dtype == torch.bfloat16 and out.shape == (m, n)
    sv = torch.linalg.svdvals(out.double())
    assert sv.min() > 0.6 and sv.max() < 1.25, (sv.min(), sv.max())


def test_ns5_of_transpose_is_transpose() -> None:
    g = torch.randn(40, 72)
    assert torch.equal(newton_schulz5(g.T), newton_schulz5(g).T)


def test_ns5_matches_torch_private_routine_and_never_touches_its_input() -> None:
    from torch.optim._muon import _zeropower_via_newtonschulz as torch_ns  # the oracle

    for shape in SHAPES:
        g = torch.randn(*shape)
        ours = newton_schulz5(g)
        assert torch.equal(ours, torch_ns(g.clone(), (3.4445, -4.7750, 2.0315), 5, 1e-7))
    g16 = torch.randn(32, 64).bfloat16()
    before = g16.clone()
    newton_schulz5(g16)
    assert torch.equal(g16, before)  # torch's routine would have divided this tensor in place


@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_unit_rows_or_columns_and_their_rms(m: int, n: int) -> None:
    u = torch.randn(m, n, dtype=torch.float64)
    out = unit_rows_or_columns(u)
    dim = 0 if m > n else 1  # columns for tall, rows otherwise
    torch.testing.assert_close(out.norm(dim=dim), torch.ones(out.shape[1 - dim], dtype=torch.float64))
    rms = out.pow(2).mean().sqrt().item()
    assert rms == pytest.approx(1 / math.sqrt(max(m, n)), rel=1e-12)


def test_zero_rows_stay_zero_without_nan() -> None:
    u = torch.randn(8, 16)
    u[3] = 0
    out = unit_rows_or_columns(u)
    assert torch.isfinite(out).all()
    assert torch.equal(out[3], torch.zeros(16))


def test_adjust_lr_semantics() -> None:
    assert adjust_lr(0.02, None, (128, 32)) == pytest.approx(0.02 * 2.0)
    assert adjust_lr(0.02, "original", (32, 128)) == pytest.approx(0.02)
    assert adjust_lr(0.02, "match_rms_adamw", (32, 128)) == pytest.approx(0.02 * 0.2 * math.sqrt(128))
    with pytest.raises(ValueError, match="allowed"):
        adjust_lr(0.02, "bogus", (4, 4))


# --- the optimizer ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("adjust_lr_fn", [None, "match_rms_adamw"])
def test_refresh_every_1_is_torch_muon(nesterov: bool, adjust_lr_fn: str | None) -> None:
    kw = dict(lr=0.02, weight_decay=0.1, momentum=0.9, nesterov=nesterov, adjust_lr_fn=adjust_lr_fn)
    ours, ref = _params(SHAPES), _params(SHAPES)
    grads = _grads(SHAPES, 10)
    _run(PeriodicRowMuon(ours, refresh_every=1, **kw), ours, grads)
    _run(torch.optim.Muon(ref, **kw), ref, grads)
    for a, b in zip(ours, ref, strict=True):
        assert torch.equal(a, b)  # the refresh step is torch.optim.Muon's arithmetic, operation for operation


def test_ns5_runs_on_steps_0_K_2K_only() -> None:
    k = 4
    params = _params(SHAPES)
    opt = PeriodicRowMuon(params, refresh_every=k)
    pattern = []
    for step_grads in _grads(SHAPES, 13):
        before = opt.ns5_calls
        for p, g in zip(params, step_grads, strict=True):
            p.grad = g
        opt.step()
        pattern.append((opt.ns5_calls - before) // len(SHAPES))
    assert pattern == [1 if t % k == 0 else 0 for t in range(13)]
    assert opt.rownorm_calls == len(SHAPES) * sum(1 for t in range(13) if t % k)


def test_update_follows_the_rule_step_by_step() -> None:
    """Re-derive every step from the pure functions: NS5 on refresh steps, gamma-scaled unit rows/columns between."""
    lr, wd, mu, gamma, k = 0.05, 0.1, 0.9, 0.3, 3
    params = _params(SHAPES)
    opt = PeriodicRowMuon(params, lr=lr, weight_decay=wd, momentum=mu, refresh_every=k, gamma=gamma)
    expected = [p.detach().clone() for p in params]
    bufs = [torch.zeros_like(p) for p in expected]
    for t, step_grads in enumerate(_grads(SHAPES, 7)):
        for i, g in enumerate(step_grads):
            bufs[i] = bufs[i].lerp(g, 1 - mu)
            u = g.lerp(bufs[i], mu)
            eta = adjust_lr(lr, None, g.shape)
            o = newton_schulz5(u).float() if t % k == 0 else gamma * unit_rows_or_columns(u)
            expected[i] = expected[i] * (1 - lr * wd) - eta * o
            params[i].grad = g
        opt.step()
    for p, e in zip(params, expected, strict=True):
        torch.testing.assert_close(p.detach(), e, rtol=1e-5, atol=1e-6)


def test_gamma_scales_only_non_refresh_steps_exactly_linearly() -> None:
    k = 3
    a, b = _params(SHAPES), _params(SHAPES)
    opt_a = PeriodicRowMuon(a, lr=0.02, weight_decay=0.0, refresh_every=k, gamma=0.1)
    opt_b = PeriodicRowMuon(b, lr=0.02, weight_decay=0.0, refresh_every=k, gamma=0.2)
    for t, step_grads in enumerate(_grads(SHAPES, 7)):
        before_a = [p.detach().clone() for p in a]
        before_b = [p.detach().clone() for p in b]
        _run(opt_a, a, [step_grads])
        _run(opt_b, b, [step_grads])
        for pa, pb, ba, bb in zip(a, b, before_a, before_b, strict=True):
            da, db = (pa.detach() - ba).double(), (pb.detach() - bb).double()
            ratio = 1.0 if t % k == 0 else 2.0
            torch.testing.assert_close(db, ratio * da, rtol=1e-4, atol=1e-7)


def test_weight_decay_is_not_scaled_by_gamma() -> None:
    # With zero gradients the update is 0 * direction: only decay moves W, by the same factor for any gamma.
    for gamma in (0.1, 0.9):
        p = torch.ones(4, 8, requires_grad=True)
        opt = PeriodicRowMuon([p], lr=0.1, weight_decay=0.5, refresh_every=2, gamma=gamma)
        for _ in range(2):  # one refresh, one row-norm step
            p.grad = torch.zeros(4, 8)
            opt.step()
        torch.testing.assert_close(p.detach(), torch.full((4, 8), (1 - 0.05) ** 2))


def test_momentum_buffer_is_the_same_for_every_k() -> None:
    grads = _grads(SHAPES, 8)
    buffers = []
    for k in (1, 2, 3, 5):
        params = _params(SHAPES)
        opt = PeriodicRowMuon(params, refresh_every=k)
        _run(opt, params, grads)
        buffers.append([opt.state[p]["momentum_buffer"] for p in params])
    for other in buffers[1:]:
        for x, y in zip(buffers[0], other, strict=True):
            assert torch.equal(x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("nesterov", [True, False])
def test_gradients_are_never_modified(dtype: torch.dtype, nesterov: bool) -> None:
    params = [p.detach().to(dtype).requires_grad_() for p in _params(SHAPES)]
    opt = PeriodicRowMuon(params, refresh_every=2, nesterov=nesterov)
    for step_grads in _grads(SHAPES, 4):
        for p, g in zip(params, step_grads, strict=True):
            p.grad = g.to(dtype)
        kept = [p.grad.clone() for p in params]
        opt.step()
        for p, g in zip(params, kept, strict=True):
            assert torch.equal(p.grad, g)


def test_state_dict_round_trip_resumes_mid_period_bit_identically() -> None:
    grads = _grads(SHAPES, 9)
    straight = _params(SHAPES)
    opt = PeriodicRowMuon(straight, refresh_every=3, gamma=0.15)
    _run(opt, straight, grads)

    first = _params(SHAPES)
    opt1 = PeriodicRowMuon(first, refresh_every=3, gamma=0.15)
    _run(opt1, first, grads[:4])  # stop after step 4: counters at 4, mid-period
    blob = io.BytesIO()
    torch.save({"params": [p.detach() for p in first], "opt": opt1.state_dict()}, blob)
    blob.seek(0)
    saved = torch.load(blob)
    resumed = [p.clone().requires_grad_() for p in saved["params"]]
    opt2 = PeriodicRowMuon(resumed, refresh_every=3, gamma=0.15)
    opt2.load_state_dict(saved["opt"])
    _run(opt2, resumed, grads[4:])
    for a, b in zip(straight, resumed, strict=True):
        assert torch.equal(a, b)


def _rownorm_reference(params: list[torch.Tensor], grads: list[list[torch.Tensor]], *, lr: float, gamma: float,
                       weight_decay: float, momentum: float) -> list[torch.Tensor]:
    """The row-norm rule written out on its own: Muon's momentum and Nesterov step, unit rows (unit columns for a
    tall matrix), lr scaled by torch.optim.Muon's "original" shape rule and by gamma, decoupled weight decay."""
    weights = [p.detach().clone() for p in params]
    bufs = [torch.zeros_like(w) for w in weights]
    for step_grads in grads:
        for w, buf, g in zip(weights, bufs, step_grads, strict=True):
            buf.lerp_(g, 1 - momentum)
            u = g.lerp(buf, momentum)
            m, n = u.shape
            o = u / u.norm(dim=0 if m > n else 1, keepdim=True)
            w.mul_(1 - lr * weight_decay).sub_(o, alpha=gamma * lr * math.sqrt(max(1.0, m / n)))
    return weights


def test_rownorm_arm_never_runs_ns5_and_equals_periodic_off_refresh() -> None:
    grads = _grads(SHAPES, 5)
    params = _params(SHAPES)
    opt = RowNormMuon(params, lr=0.02, gamma=0.15, weight_decay=0.1)
    _run(opt, params, grads)
    assert opt.ns5_calls == 0 and opt.rownorm_calls == 5 * len(SHAPES)
    expected = _rownorm_reference(_params(SHAPES), grads, lr=0.02, gamma=0.15, weight_decay=0.1, momentum=0.95)
    for p, e in zip(params, expected, strict=True):
        torch.testing.assert_close(p.detach(), e, rtol=1e-5, atol=1e-6)

    # Equals the periodic arm's steps between refreshes: without weight decay a step's change depends only on the
    # gradients (through the momentum), so steps 1-4 of PeriodicRowMuon(K=5) move the weights exactly as steps
    # 1-4 of RowNormMuon do (step 0 differs: it is the periodic arm's refresh).
    def deltas(opt_factory: type[PeriodicRowMuon], **kwargs: object) -> list[list[torch.Tensor]]:
        ps = _params(SHAPES)
        o = opt_factory(ps, lr=0.02, gamma=0.15, weight_decay=0.0, **kwargs)
        out = []
        for step_grads in grads:
            before = [p.detach().clone() for p in ps]
            _run(o, ps, [step_grads])
            out.append([p.detach() - b for p, b in zip(ps, before, strict=True)])
        return out

    periodic, rownorm = deltas(PeriodicRowMuon, refresh_every=5), deltas(RowNormMuon)
    assert not torch.allclose(periodic[0][0], rownorm[0][0])  # the refresh step is NS5, not a row norm
    for step in range(1, 5):
        for a, b in zip(periodic[step], rownorm[step], strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


# --- the streamed non-refresh step ------------------------------------------------------------------------------

# Square, wide, tall, and a tall one whose rows do not divide into the chunks; chunk sizes: smaller than one row
# (a row per chunk), a few rows (the last chunk short), one that splits the group (48 x 48 fits in one chunk and
# goes through the multi-tensor path, the others are streamed), and the default (all in one multi-tensor pass).
STREAM_SHAPES = [(48, 48), (32, 80), (96, 40), (97, 31)]


@pytest.mark.parametrize("arm", ["periodic", "rownorm"])
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
@pytest.mark.parametrize("chunk", [7, 200, 2500, None, "native"])
def test_streamed_step_equals_the_unfused_one(arm: str, nesterov: bool, weight_decay: float,
                                              chunk: int | str | None) -> None:
    """The streamed step at four chunk sizes, and the compiled kernel ("native"), against the unfused reference."""
    grads = _grads(STREAM_SHAPES, 7)
    kw = dict(lr=0.05, weight_decay=weight_decay, momentum=0.9, nesterov=nesterov, gamma=0.3)

    def run(**extra: object) -> tuple[list[torch.Tensor], PeriodicRowMuon]:
        params = _params(STREAM_SHAPES)
        opt = (PeriodicRowMuon(params, refresh_every=3, **kw, **extra) if arm == "periodic"
               else RowNormMuon(params, **kw, **extra))
        _run(opt, params, grads)
        return params, opt

    kernel = "native" if chunk == "native" else "streamed"
    streamed, opt_s = run(rownorm_kernel="native") if chunk == "native" else run(rownorm_kernel="streamed",
                                                                               stream_chunk=chunk)
    unfused, opt_u = run(rownorm_kernel="unfused")
    assert opt_s.rownorm_kernels_used == {kernel} and opt_u.rownorm_kernels_used == {"unfused"}
    for a, b in zip(streamed, unfused, strict=True):
        # Column norms are summed in another order (float rounding); everything else is the same arithmetic.
        torch.testing.assert_close(a.detach(), b.detach(), rtol=2e-6, atol=1e-7)
    for a, b in zip(streamed, unfused, strict=True):
        assert torch.equal(opt_s.state[a]["momentum_buffer"], opt_u.state[b]["momentum_buffer"])
    assert (opt_s.ns5_calls, opt_s.rownorm_calls) == (opt_u.ns5_calls, opt_u.rownorm_calls)
    if arm == "rownorm" and nesterov:  # and both equal the rule written out on its own
        expected = _rownorm_reference(_params(STREAM_SHAPES), grads, lr=0.05, gamma=0.3, weight_decay=weight_decay,
                                      momentum=0.9)
        for p, e in zip(streamed, expected, strict=True):
            torch.testing.assert_close(p.detach(), e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("chunk", [5, None])
def test_streamed_step_in_bfloat16_stays_within_its_rounding(chunk: int | None) -> None:
    grads = [[g.bfloat16() for g in step] for step in _grads(STREAM_SHAPES, 4)]
    out = []
    for extra in ({"stream_chunk": chunk, "rownorm_kernel": "streamed"}, {"rownorm_kernel": "unfused"}):
        params = [p.detach().bfloat16().requires_grad_() for p in _params(STREAM_SHAPES)]
        _run(RowNormMuon(params, lr=0.05, gamma=0.3, **extra), params, grads)  # type: ignore[arg-type]
        out.append(params)
    for a, b in zip(*out, strict=True):
        # bf16 keeps 8 bits: the two may round a weight to neighbouring bf16 values, no further apart.
        torch.testing.assert_close(a.detach().float(), b.detach().float(), rtol=2**-7, atol=1e-6)


@pytest.mark.parametrize(("kernel", "largest_allowed"),
                         [("streamed", 64 * 1024), ("native", 64 * 1024), ("unfused", None)])
def test_streamed_step_allocates_no_temporary_the_size_of_a_parameter(kernel: str,
                                                                      largest_allowed: int | None) -> None:
    from torch.profiler import ProfilerActivity, profile

    shapes = [(2048, 256), (256, 1024)]  # tall and wide, 2 MiB and 1 MiB in fp32
    params = _params(shapes)
    for p, g in zip(params, _grads(shapes, 1)[0], strict=True):
        p.grad = g
    opt = RowNormMuon(params, rownorm_kernel=kernel, stream_chunk=2**14)
    opt.step()  # the momentum buffers and the workspace are made here, once
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        opt.step()
    largest = max(event.cpu_memory_usage for event in prof.events())
    if largest_allowed is None:  # the check can see a full-size temporary: the unfused step makes one per matrix
        assert largest >= 2048 * 256 * 4
    else:  # only per-column and per-row norm vectors are made: a few KiB
        assert 0 < largest <= largest_allowed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"rownorm_kernel": "fused"},
      r"rownorm_kernel='fused' is not supported; allowed: \['auto', 'native', 'streamed', 'unfused'\]"),
     ({"stream_chunk": 0}, "stream_chunk must be an int >= 1"),
     ({"stream_chunk": 1.5}, "stream_chunk must be an int >= 1")],
)
def test_bad_kernel_settings_are_refused(kwargs: dict, message: str) -> None:
    for cls in (PeriodicRowMuon, RowNormMuon):
        with pytest.raises(ValueError, match=message):
            cls([torch.zeros(3, 3, requires_grad=True)], **kwargs)


def test_non_matrix_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="only takes 2-D parameters"):
        PeriodicRowMuon([torch.zeros(4, requires_grad=True)])
    with pytest.raises(ValueError, match="only takes 2-D parameters"):
        PeriodicRowMuon([torch.zeros(2, 3, 4, requires_grad=True)])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"refresh_every": 0}, "refresh_every must be an int >= 1"),
        ({"refresh_every": 2.5}, "refresh_every must be an int >= 1"),
        ({"gamma": 0.0}, "gamma must be > 0"),
        ({"lr": -1.0}, "lr must be >= 0"),
        ({"momentum": 1.0}, r"momentum must be in \[0, 1\)"),
        ({"adjust_lr_fn": "rms"}, "allowed"),
    ],
)
def test_bad_hyperparameters_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PeriodicRowMuon([torch.zeros(3, 3, requires_grad=True)], **kwargs)


# --- routing and the factory ------------------------------------------------------------------------------------


class _Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.modulation = nn.Linear(d, 6 * d)  # adaLN: conditioning -> shift/scale/gate
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))


class _TinyMMDiT(nn.Module):
    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.patch = nn.Linear(12, d)
        self.text = nn.Embedding(10, d)
        self.blocks = nn.ModuleList([_Block(d) for _ in range(2)])
        self.final_modulation = nn.Linear(d, 2 * d)
        self.final = nn.Linear(d, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.patch(x)
        for blk in self.blocks:
            h = h + blk.mlp(blk.norm(h)) + blk.qkv(h)[..., : h.shape[-1]] + blk.modulation(h)[..., : h.shape[-1]]
        return self.final(h + self.final_modulation(h)[..., : h.shape[-1]] + self.text.weight.mean())


def test_routing_puts_exactly_the_block_matrices_in_the_muon_group() -> None:
    model = _TinyMMDiT()
    routing = route_parameters(model)
    muon = {n for n, _ in routing.muon}
    expected = {
        f"blocks.{i}.{name}.weight" for i in range(2) for name in ("modulation", "qkv", "mlp.0", "mlp.2")
    }
    assert muon == expected  # block adaLN modulation matrices included
    aux = {n for n, _ in routing.aux}
    assert {"final_modulation.weight", "final.weight", "patch.weight", "text.weight"} <= aux
    assert all(not n.startswith("blocks.") or p.ndim == 1 for n, p in routing.aux)
    total = sum(p.numel() for p in model.parameters())
    assert routing.muon_numel + routing.aux_numel == total
    with pytest.raises(ValueError, match="top-level modules"):
        route_parameters(model, block_prefixes=("transformer_blocks",))


@pytest.mark.parametrize("name", ["adamw", "muon", "periodic", "rownorm"])
def test_factory_builds_every_arm_and_it_trains(name: str) -> None:
    torch.manual_seed(0)
    model = _TinyMMDiT()
    opt = build_optimizer(model, {"name": name, "lr": 0.01 if name != "adamw" else 3e-3, "aux_lr": 1e-3})
    x = torch.randn(32, 12)
    target = torch.randn(32, 12) * 0.1
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = (model(x) - target).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert opt.steps == 30 and opt.total_step_time_s > 0
    expected_ns5 = {"adamw": 0, "muon": 30 * 8, "periodic": 10 * 8, "rownorm": 0}[name]
    expected_rownorm = {"adamw": 0, "muon": 0, "periodic": 20 * 8, "rownorm": 30 * 8}[name]
    assert (opt.ns5_calls, opt.rownorm_calls) == (expected_ns5, expected_rownorm)


@pytest.mark.parametrize("name", ["periodic", "rownorm"])
def test_factory_passes_the_row_norm_kernel_through(name: str) -> None:
    for kernel in ("native", "streamed", "unfused"):
        opt = build_optimizer(_TinyMMDiT(), {"name": name, "rownorm_kernel": kernel})
        assert opt.matrix.rownorm_kernel == kernel
    assert build_optimizer(_TinyMMDiT(), {"name": name}).matrix.rownorm_kernel == "auto"  # the default


def test_factory_state_dict_round_trip() -> None:
    torch.manual_seed(0)
    model = _TinyMMDiT()
    opt = build_optimizer(model, OptimizerConfig(name="periodic"))
    x = torch.randn(8, 12)
    for _ in range(2):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    blob = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, blob)
    blob.seek(0)
    saved = torch.load(blob, weights_only=False)
    clone = _TinyMMDiT()
    clone.load_state_dict(saved["model"])
    opt2 = build_optimizer(clone, OptimizerConfig(name="periodic"))
    opt2.load_state_dict(saved["opt"])
    assert (opt2.steps, opt2.ns5_calls, opt2.rownorm_calls) == (opt.steps, opt.ns5_calls, opt.rownorm_calls)
    for m, o in ((model, opt), (clone, opt2)):
        o.zero_grad()
        m(x).pow(2).mean().backward()
        o.step()
    for a, b in zip(model.parameters(), clone.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="state is for optimizer 'periodic'"):
        build_optimizer(_TinyMMDiT(), {"name": "muon"}).load_state_dict(saved["opt"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "sgd"}, "'adamw', 'muon', 'periodic', 'rownorm', 'muon_extra_ns' or 'muon_stretched'"),
        ({"refresh_every": 0}, "refresh_every\n  Input should be greater than or equal to 1"),
        ({"gamma": 0}, "gamma\n  Input should be greater than 0"),
        ({"lr": 0}, "lr\n  Input should be greater than 0"),
        ({"momentum": 1.5}, "momentum\n  Input should be less than 1"),
        ({"adjust_lr_fn": "rms"}, "'original' or 'match_rms_adamw'"),
        ({"K": 3}, "K\n  Extra inputs are not permitted"),
        ({"rownorm_kernel": "fused"}, "rownorm_kernel\n  Input should be 'auto', 'native', 'streamed' or 'unfused'"),
    ],
)
def test_factory_refuses_bad_configs_with_the_field_and_allowed_values(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        build_optimizer(_TinyMMDiT(), fields)
    assert message in str(info.value)


def test_default_lrs_follow_the_arm() -> None:
    assert list_optimizers() == ["adamw", "muon", "muon_extra_ns", "muon_stretched", "periodic", "rownorm"]
    assert OptimizerConfig(name="muon").resolved_lr == 0.02
    assert OptimizerConfig(name="adamw").resolved_lr == 3e-3
    assert OptimizerConfig(name="adamw", lr=1e-3).resolved_lr == 1e-3


def test_ns5_in_float32_keeps_the_band_and_is_close_to_bf16() -> None:
    s = torch.linspace(0.05, 1.0, 48)
    g = _matrix_with_spectrum(96, 48, s).float()
    out32 = newton_schulz5(g, dtype=torch.float32)
    assert out32.dtype == torch.float32
    sv = torch.linalg.svdvals(out32.double())
    assert sv.min() > 0.6 and sv.max() < 1.25
    # bf16 has ~3 significant digits: the two precisions agree to that level, not bit for bit.
    assert (out32 - newton_schulz5(g).float()).abs().max().item() < 0.05


@pytest.mark.parametrize(("ns_dtype", "expected"), [("bfloat16", torch.optim.Muon), ("float32", PeriodicRowMuon)])
def test_muon_arm_is_torch_muon_in_bf16_and_the_same_rule_in_fp32(ns_dtype: str, expected: type) -> None:
    opt = build_optimizer(_TinyMMDiT(), {"name": "muon", "ns_dtype": ns_dtype})
    assert type(opt.matrix) is expected
    assert opt.ns_dtype == getattr(torch, ns_dtype)
    if expected is PeriodicRowMuon:
        assert opt.matrix.param_groups[0]["refresh_every"] == 1
    periodic = build_optimizer(_TinyMMDiT(), {"name": "periodic", "ns_dtype": ns_dtype})
    assert periodic.matrix.param_groups[0]["ns_dtype"] == getattr(torch, ns_dtype)


@pytest.mark.parametrize(("native_bf16", "expected"), [(True, torch.bfloat16), (False, torch.float32),
                                                       (RuntimeError, torch.float32)])
def test_auto_ns_dtype_follows_the_hardware_probe(monkeypatch: pytest.MonkeyPatch, native_bf16: object,
                                                  expected: torch.dtype) -> None:
    from trials.optim import fast_ns_dtype

    def probe() -> bool:
        if native_bf16 is RuntimeError:  # the private probe failing: stay exact
            raise RuntimeError("no probe")
        return bool(native_bf16)

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", probe)
    assert fast_ns_dtype("cpu") == expected
    assert fast_ns_dtype("cuda") == torch.bfloat16  # every CUDA device computes bf16 natively
    periodic = build_optimizer(_TinyMMDiT(), {"name": "periodic"})
    muon = build_optimizer(_TinyMMDiT(), {"name": "muon"})
    assert periodic.ns_dtype == muon.ns_dtype == expected
    assert periodic.matrix.defaults["ns_dtype"] == expected  # the dtype its Newton-Schulz really runs in
    # in bf16 the muon arm is torch.optim.Muon itself; in fp32 the same rule as PeriodicRowMuon with K=1
    if expected == torch.bfloat16:
        assert type(muon.matrix) is torch.optim.Muon
    else:
        assert isinstance(muon.matrix, PeriodicRowMuon) and muon.matrix.defaults["ns_dtype"] == torch.float32
    assert build_optimizer(_TinyMMDiT(), {"name": "periodic", "ns_dtype": "float32"}).ns_dtype == torch.float32


def test_ns_placement_is_an_optimizer_setting_with_two_values() -> None:
    from pydantic import ValidationError

    from trials.optim import OptimizerConfig

    assert OptimizerConfig().ns_placement == "replicated"
    assert OptimizerConfig(name="muon", ns_placement="distributed").ns_placement == "distributed"
    with pytest.raises(ValidationError) as err:
        OptimizerConfig(ns_placement="everywhere")  # type: ignore[arg-type]
    assert err.value.errors()[0]["loc"] == ("ns_placement",) and "distributed" in str(err.value)
