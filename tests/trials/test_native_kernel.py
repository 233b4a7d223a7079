"""The compiled row-norm kernel: the same update as the streamed step, the cases it leaves to the streamed step, and
how it is built (a failed build falls back; processes building at once from a cold cache all succeed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from trials.optim import PeriodicRowMuon, RowNormMuon
from trials.optim._native import kernel_cache_dir, native_kernel, native_kernel_error

REPO = Path(__file__).resolve().parents[2]
SHAPES = [(64, 64), (48, 200), (200, 48), (333, 17), (1, 9), (9, 1)]  # square, wide, tall, odd sizes, vectors


@pytest.fixture(scope="module", autouse=True)
def kernel() -> None:
    if native_kernel() is None:  # a machine without a C++ compiler; CI has one, and fails on skips
        pytest.skip(f"the row-norm CPU kernel cannot be built here: {native_kernel_error()}")


def _params(shapes: list[tuple[int, int]], dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(*s, generator=gen, dtype=torch.float32).mul_(0.1).to(dtype).requires_grad_() for s in shapes]


def _steps(opt: torch.optim.Optimizer, params: list[torch.Tensor], steps: int, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(2)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen).to(dtype)
        opt.step()


@pytest.mark.parametrize("momentum", [0.9, 0.3])  # both sides of torch's lerp formula (weight below/above 0.5)
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_native_step_equals_the_streamed_one(momentum: float, nesterov: bool, weight_decay: float) -> None:
    out = {}
    for kernel in ("native", "streamed"):
        params = _params(SHAPES)
        opt = RowNormMuon(params, lr=0.05, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay,
                          gamma=0.3, rownorm_kernel=kernel)
        _steps(opt, params, 6, torch.float32)
        assert opt.rownorm_kernels_used == {kernel}
        out[kernel] = (params, [opt.state[p]["momentum_buffer"] for p in params])
    for a, b in zip(out["native"][0], out["streamed"][0], strict=True):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=2e-6, atol=1e-7)  # norms summed in another order
    for a, b in zip(out["native"][1], out["streamed"][1], strict=True):
        assert torch.equal(a, b)  # the momentum rounds as torch's lerp_ does, bit for bit


def test_native_step_moves_each_row_by_gamma_times_lr() -> None:
    """No decay, no Nesterov, one step from zero momentum: every row of a wide matrix (column of a tall one) moves
    by exactly gamma * lr in norm, whatever the gradient's scale."""
    params = _params([(20, 50), (50, 20)])
    opt = RowNormMuon(params, lr=0.1, gamma=0.2, momentum=0.0, nesterov=False, weight_decay=0.0,
                      rownorm_kernel="native")
    before = [p.detach().clone() for p in params]
    for p, scale in zip(params, (1e-3, 1e3), strict=True):
        p.grad = torch.randn(p.shape) * scale
    opt.step()
    wide, tall = (p.detach() - b for p, b in zip(params, before, strict=True))
    torch.testing.assert_close(wide.norm(dim=1), torch.full((20,), 0.02), rtol=1e-5, atol=0)
    # a tall matrix's lr is scaled by sqrt(rows / cols), as torch.optim.Muon's "original" rule does
    torch.testing.assert_close(tall.norm(dim=0), torch.full((20,), 0.02 * (50 / 20) ** 0.5), rtol=1e-5, atol=0)


def test_periodic_uses_the_kernel_between_refreshes_only() -> None:
    params = _params(SHAPES)
    opt = PeriodicRowMuon(params, refresh_every=3, rownorm_kernel="auto")
    _steps(opt, params, 6, torch.float32)
    assert opt.rownorm_kernels_used == {"native"}
    assert (opt.ns5_calls, opt.rownorm_calls) == (2 * len(SHAPES), 4 * len(SHAPES))


def test_what_the_kernel_cannot_take_runs_streamed() -> None:
    """bf16 matrices, and a matrix that is not contiguous, take the streamed step under "auto" and "native"; a
    group with both kinds runs each through its own path."""
    for kernel in ("auto", "native"):
        params = _params(SHAPES[:3], torch.bfloat16)
        opt = RowNormMuon(params, rownorm_kernel=kernel)
        _steps(opt, params, 2, torch.bfloat16)
        assert opt.rownorm_kernels_used == {"streamed"}
    strided = torch.randn(30, 40).t().contiguous().t().requires_grad_()  # a leaf with transposed strides
    assert not strided.is_contiguous()
    reference = [strided.detach().clone().requires_grad_(), *_params(SHAPES[:2])]
    mixed = [strided, *_params(SHAPES[:2])]
    opt = RowNormMuon(mixed, rownorm_kernel="auto")
    _steps(opt, mixed, 2, torch.float32)
    assert opt.rownorm_kernels_used == {"native", "streamed"}
    ref_opt = RowNormMuon(reference, rownorm_kernel="unfused")
    _steps(ref_opt, reference, 2, torch.float32)
    for a, b in zip(mixed, reference, strict=True):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=2e-6, atol=1e-7)


def _run_python(code: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_a_failed_build_falls_back_under_auto_and_is_an_error_under_native(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "CC": "/bin/false", "PYTHONPATH": str(REPO)}
    code = """
        import torch
        from trials.optim import RowNormMuon
        p = torch.randn(8, 16, requires_grad=True)
        opt = RowNormMuon([p], rownorm_kernel="auto")
        p.grad = torch.randn(8, 16)
        opt.step()
        print("auto ran:", sorted(opt.rownorm_kernels_used))
        try:
            RowNormMuon([p], rownorm_kernel="native")
        except RuntimeError as exc:
            print("native refused:", exc)
    """
    done = _run_python(code, env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "auto ran: ['streamed']" in done.stdout
    assert "native refused: rownorm_kernel='native' needs the compiled CPU kernel" in done.stdout
    assert "use 'auto'" in done.stdout
    assert "the row-norm CPU kernel is unavailable" in done.stderr  # said once, in the log
    assert not list((tmp_path / "scalesweep" / "kernels").glob("*.so"))  # nothing half-built is kept


def test_processes_building_at_once_from_a_cold_cache_all_succeed(tmp_path: Path) -> None:
    """Three processes start at once with an empty kernel cache: each builds in a private directory and moves its
    file into place atomically, so none waits on a lock another holds (or left behind when killed), all get a
    working kernel, and the cache ends with one file and no build directories."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    code = """
        import torch
        from trials.optim._native import native_kernel, native_kernel_error
        from trials.optim import RowNormMuon
        assert native_kernel() is not None, native_kernel_error()
        p = torch.randn(8, 16, requires_grad=True)
        opt = RowNormMuon([p], rownorm_kernel="native")
        p.grad = torch.randn(8, 16)
        opt.step()
        print("ok", sorted(opt.rownorm_kernels_used))
    """
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert "ok ['native']" in out
    cache = tmp_path / "scalesweep" / "kernels"
    assert [p.suffix for p in cache.iterdir()] == [".so"]
    # and a later process loads it without building
    done = _run_python("from trials.optim._native import native_kernel; import logging; "
                       "logging.basicConfig(level=logging.INFO); assert native_kernel() is not None", env, 120)
    assert done.returncode == 0 and "building" not in done.stderr


def test_the_cache_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kernel_cache_dir() == tmp_path / "scalesweep" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert kernel_cache_dir() == Path.home() / ".cache" / "scalesweep" / "kernels"


def test_the_kernel_refuses_tensors_it_would_write_past() -> None:
    """The kernel writes through raw pointers, so every size, dtype and layout is checked first: a grad of another
    shape, a bf16 buffer, a transposed (non-contiguous) parameter, and a scales vector of the wrong length are each
    refused with a ValueError naming the tensor, and nothing is written."""
    from trials.optim._native import native_column_apply_, native_rownorm_update_

    w, g, b = torch.zeros(8, 16), torch.ones(8, 16), torch.zeros(8, 16)
    kw = dict(momentum=0.9, nesterov=True, decay=1.0, step_size=0.1, eps=1e-7)
    with pytest.raises(ValueError, match="one shape"):
        native_rownorm_update_(w, torch.ones(8, 15), b, **kw)
    with pytest.raises(ValueError, match=r"momentum buffer is torch\.bfloat16"):
        native_rownorm_update_(w, g, b.bfloat16(), **kw)
    with pytest.raises(ValueError, match=r"param is torch\.float32 on cpu, not contiguous"):
        native_rownorm_update_(torch.zeros(16, 8).t(), g, b, **kw)
    tall = torch.zeros(16, 8)
    with pytest.raises(ValueError, match=r"scales must hold one value per column \(8\), got 7"):
        native_column_apply_(tall, torch.ones(16, 8), torch.zeros(16, 8), torch.ones(7), momentum=0.9,
                             nesterov=True, decay=1.0)
    assert not w.any() and not b.any() and not tall.any()


@pytest.mark.parametrize("momentum", [0.9, 0.3])
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_refresh_momentum_kernel_equals_torchs_lerps_and_cast(momentum: float, nesterov: bool,
                                                              dtype: torch.dtype) -> None:
    """ShardedPeriodicRowMuon's refresh: B updated and U written (in the Newton-Schulz dtype) in one pass, bit for
    bit what torch's buf.lerp_, grad.lerp and the cast give."""
    from trials.optim._native import native_momentum_nesterov_

    gen = torch.Generator().manual_seed(4)
    for shape in SHAPES:
        g, b = torch.randn(*shape, generator=gen), torch.randn(*shape, generator=gen)
        expected_b = b.clone().lerp_(g, 1.0 - momentum)
        expected_u = (g.lerp(expected_b, momentum) if nesterov else expected_b).to(dtype)
        out = torch.empty(shape, dtype=dtype)
        native_momentum_nesterov_(g, b, out, momentum=momentum, nesterov=nesterov)
        assert torch.equal(b, expected_b) and torch.equal(out, expected_u), shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_refresh_update_kernel_equals_torchs_mul_and_add(dtype: torch.dtype) -> None:
    """W <- decay W - eta O in one pass, O contiguous or a transposed view (a tall matrix's NS5 result), bit for
    bit torch's W.mul_(decay).add_(O, alpha=-eta) (one rounding for the product, one fused multiply-add)."""
    from trials.optim._native import native_apply_update_

    gen = torch.Generator().manual_seed(5)
    for rows, cols in SHAPES:
        w = torch.randn(rows, cols, generator=gen)
        for o in (torch.randn(rows, cols, generator=gen).to(dtype), torch.randn(cols, rows, generator=gen).to(dtype).T,
                  torch.randn(cols, 2 * rows, generator=gen).to(dtype).T[rows:]):
            expected = w.clone().mul_(0.998).add_(o, alpha=-0.03)
            got = w.clone()
            native_apply_update_(got, o, decay=0.998, alpha=-0.03)
            assert torch.equal(got, expected), (rows, cols)
    with pytest.raises(ValueError, match=r"reads a float32 or bfloat16 CPU tensor of shape \(4, 3\)"):
        native_apply_update_(torch.zeros(4, 3), torch.zeros(4, 3, dtype=torch.float16), decay=1.0, alpha=1.0)
    with pytest.raises(ValueError, match=r"writes a contiguous float32 or bfloat16 CPU tensor of shape \(4, 3\)"):
        from trials.optim._native import native_momentum_nesterov_

        native_momentum_nesterov_(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(3, 4).T, momentum=0.9,
                                  nesterov=True)
