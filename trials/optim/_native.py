"""The row-norm step as one compiled CPU kernel: each matrix read and written once, at the cost of its memory traffic.

The streamed step in `functional.py` keeps U in cache, but it still runs five or six torch operations per chunk,
and on a CPU each of them is a pass over the chunk (about 2x the time of two element-wise passes over the matrices,
measured). Here the whole step is two loops of plain C per matrix:

- wide or square (m <= n), row by row: B <- lerp(B, g, 1 - mu), U <- lerp(g, B, mu) (or B), and U's squared row
  norm in one loop; then W <- decay * W + s * U with U recomputed from the row just written (still in L1 cache), so
  g, B and W each cross memory once;
- tall (m > n): `column_sumsq` makes the first sweep (B updated, U's squared column norms summed) and
  `column_apply` the second (W updated, U recomputed): 7 passes over memory against the element-wise floor's 6. A
  sharded matrix all-reduces the sums between the two.

Two more loops serve `ShardedPeriodicRowMuon`'s refresh step, whose momentum and update torch would run as five
passes and two temporaries: `momentum_nesterov` (B updated, U written once, in bf16 when that is what NS5 takes:
torch's round to nearest even) and `apply_update` (W <- decay W - eta O, O in bf16 or float32, any strides).

The lerps round as torch's vectorised lerp does (the momentum buffer is bit for bit the streamed step's); the
norms are summed in another order, so the update equals the streamed one up to float rounding (the tests hold it
to that). Only contiguous float32 CPU tensors take this path; everything else runs the
streamed step.

The kernel is C, compiled on first use by the machine's C compiler (`$CC`, else `cc`; about a second) and called
through ctypes with the tensors' data pointers, after their shapes, dtypes and layout are checked. It is kept in a
per-user cache (`$XDG_CACHE_HOME/scalesweep/kernels`, default `~/.cache/...`) keyed by the source, the compiler
and its flags, so later processes only load it. The flags are portable (-O3; AVX2 and FMA on x86 CPUs where torch
itself runs AVX2 or AVX512 kernels, so the lerps round as torch's do; no -march=native). Each build runs in a
private temporary directory and is moved into the cache atomically: processes that start at once never wait on a
lock, and one killed mid-build leaves nothing half-written. It runs on one thread (trials run one torch thread per
CPU); `python -m trials.optim._native` builds it ahead of time (the Makefile does, after installing).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import torch
from torch import Tensor

from ..core.trial_settings import TrialSettings

__all__ = [
    "kernel_cache_dir",
    "native_applies",
    "native_apply_update_",
    "native_column_apply_",
    "native_column_sumsq_",
    "native_kernel",
    "native_kernel_error",
    "native_momentum_nesterov_",
    "native_refresh_applies",
    "native_rownorm_update_",
]

log = logging.getLogger(__name__)

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>

/* torch's vectorised lerp, rounding included: fma(w, end - start, start) when |w| < 0.5, else
   fma(w - 1, end - start, end); a plain multiply-add where the CPU has no FMA (as torch's default kernels). */
#ifdef __FMA__
#define LERP(start, end, coeff, small) fmaf((coeff), (end) - (start), (small) ? (start) : (end))
#define DECAYED(w, decay, us) fmaf((w), (decay), (us))  /* torch.add(U * s, W, alpha=decay) */
#else
#define LERP(start, end, coeff, small) ((coeff) * ((end) - (start)) + ((small) ? (start) : (end)))
#define DECAYED(w, decay, us) ((w) * (decay) + (us))
#endif

typedef struct { float coeff_b, coeff_u; int small_b, small_u, nesterov; } momentum_t;

static momentum_t momentum_of(float w_b, float w_u, int nesterov) {
  /* w_b = 1 - mu for B <- lerp(B, g, w_b); w_u = mu for U <- lerp(g, B, w_u) */
  momentum_t m;
  m.small_b = fabsf(w_b) < 0.5f;
  m.coeff_b = m.small_b ? w_b : w_b - 1.0f;
  m.small_u = fabsf(w_u) < 0.5f;
  m.coeff_u = m.small_u ? w_u : w_u - 1.0f;
  m.nesterov = nesterov;
  return m;
}

/* One whole row-norm step of a wide or square matrix (unit rows). */
void row_step(float *restrict w, const float *restrict g, float *restrict b, int64_t rows, int64_t cols,
              float w_b, float w_u, int nesterov, float decay, float step_size, float eps) {
  const momentum_t mo = momentum_of(w_b, w_u, nesterov);
  for (int64_t i = 0; i < rows; ++i) {
    float *restrict wr = w + i * cols;
    const float *restrict gr = g + i * cols;
    float *restrict br = b + i * cols;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < cols; ++j) {
      const float bj = LERP(br[j], gr[j], mo.coeff_b, mo.small_b);
      br[j] = bj;
      const float u = mo.nesterov ? LERP(gr[j], bj, mo.coeff_u, mo.small_u) : bj;
      ss += u * u;
    }
    const float s = -step_size * (1.0f / fmaxf(sqrtf(ss), eps));
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float u = mo.nesterov ? LERP(gr[j], br[j], mo.coeff_u, mo.small_u) : br[j];
      wr[j] = DECAYED(wr[j], decay, u * s);
    }
  }
}

/* float32 -> bfloat16 rounded to nearest even, as torch's conversion (NaN -> quiet NaN). */
static inline uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if (f != f) return (uint16_t)0x7FC0;
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static inline float from_bf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* A refresh step's momentum and Newton-Schulz input in one pass over n contiguous values: B updated in place, U
   written to `u` (float32, or bfloat16 when u_bf16). */
void momentum_nesterov(const float *restrict g, float *restrict b, void *restrict u, int64_t n, float w_b,
                       float w_u, int nesterov, int u_bf16) {
  const momentum_t mo = momentum_of(w_b, w_u, nesterov);
  float *restrict uf = (float *)u;
  uint16_t *restrict uh = (uint16_t *)u;
  if (u_bf16) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float bj = LERP(b[j], g[j], mo.coeff_b, mo.small_b);
      b[j] = bj;
      uh[j] = to_bf16(mo.nesterov ? LERP(g[j], bj, mo.coeff_u, mo.small_u) : bj);
    }
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float bj = LERP(b[j], g[j], mo.coeff_b, mo.small_b);
      b[j] = bj;
      uf[j] = mo.nesterov ? LERP(g[j], bj, mo.coeff_u, mo.small_u) : bj;
    }
  }
}

/* A refresh step's update of contiguous W from O (float32, or bfloat16 when o_bf16; strides in elements):
   W <- decay * W + alpha * O, rounded as torch's W.mul_(decay) then W.add_(O, alpha=alpha). O with a column
   stride (the rows of a tall matrix's transposed NS5 result) is read in tiles of TILE_ROWS x TILE_COLS, so each
   cache line of O serves every row of the tile before it is evicted. */
#define TILE_ROWS 32
#define TILE_COLS 64
#define O_AT(i, j) (o_bf16 ? from_bf16(((const uint16_t *)o)[(i) * row_stride + (j) * col_stride]) \
                           : ((const float *)o)[(i) * row_stride + (j) * col_stride])
void apply_update(float *restrict w, const void *restrict o, int64_t rows, int64_t cols, int64_t row_stride,
                  int64_t col_stride, int o_bf16, float decay, float alpha) {
  if (col_stride == 1) {
    for (int64_t i = 0; i < rows; ++i) {
      float *restrict wr = w + i * cols;
      if (o_bf16) {
        const uint16_t *restrict orow = (const uint16_t *)o + i * row_stride;
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) wr[j] = DECAYED(from_bf16(orow[j]), alpha, wr[j] * decay);
      } else {
        const float *restrict orow = (const float *)o + i * row_stride;
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) wr[j] = DECAYED(orow[j], alpha, wr[j] * decay);
      }
    }
    return;
  }
  for (int64_t i0 = 0; i0 < rows; i0 += TILE_ROWS) {
    const int64_t i1 = i0 + TILE_ROWS < rows ? i0 + TILE_ROWS : rows;
    for (int64_t j0 = 0; j0 < cols; j0 += TILE_COLS) {
      const int64_t j1 = j0 + TILE_COLS < cols ? j0 + TILE_COLS : cols;
      for (int64_t i = i0; i < i1; ++i) {
        float *restrict wr = w + i * cols;
        for (int64_t j = j0; j < j1; ++j) wr[j] = DECAYED(O_AT(i, j), alpha, wr[j] * decay);
      }
    }
  }
}

/* First sweep of a tall matrix (unit columns): B updated in place, U's squared column norms written to `out`
   (cols values). An empty matrix gives zeros. */
void column_sumsq(const float *restrict g, float *restrict b, float *restrict out, int64_t rows, int64_t cols,
                  float w_b, float w_u, int nesterov) {
  const momentum_t mo = momentum_of(w_b, w_u, nesterov);
  memset(out, 0, (size_t)cols * sizeof(float));
  for (int64_t i = 0; i < rows; ++i) {
    const float *restrict gr = g + i * cols;
    float *restrict br = b + i * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float bj = LERP(br[j], gr[j], mo.coeff_b, mo.small_b);
      br[j] = bj;
      const float u = mo.nesterov ? LERP(gr[j], bj, mo.coeff_u, mo.small_u) : bj;
      out[j] += u * u;
    }
  }
}

/* Second sweep of a tall matrix: W <- decay * W + scales * U, U recomputed from g and the updated B; `scales`
   holds cols values, -step_size / clamped column norm. */
void column_apply(float *restrict w, const float *restrict g, const float *restrict b, const float *restrict scales,
                  int64_t rows, int64_t cols, float w_b, float w_u, int nesterov, float decay) {
  const momentum_t mo = momentum_of(w_b, w_u, nesterov);
  for (int64_t i = 0; i < rows; ++i) {
    float *restrict wr = w + i * cols;
    const float *restrict gr = g + i * cols;
    const float *restrict br = b + i * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float u = mo.nesterov ? LERP(gr[j], br[j], mo.coeff_u, mo.small_u) : br[j];
      wr[j] = DECAYED(wr[j], decay, u * scales[j]);
    }
  }
}
"""

_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None
_error: str | None = None
_tried = False


def _cflags() -> list[str]:
    """-O3, and on x86 CPUs where torch runs its AVX2 or AVX512 kernels, AVX2 and FMA, so the loops round as
    torch's vectorised kernels do (no -march=native: the loops are memory-bound, and a cache shared by machines of
    different CPUs stays valid); the flags are part of the cache key."""
    flags = ["-O3", "-fopenmp-simd", "-ffp-contract=off", "-fPIC", "-shared", "-std=c99"]
    if platform.machine() in ("x86_64", "AMD64") and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        flags += ["-mavx2", "-mfma"]
    return flags


def _compiler() -> str:
    chosen = TrialSettings.from_env().compiler  # $CC
    return chosen or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang") or "cc"


def kernel_cache_dir() -> Path:
    """Where built kernels are kept: `$XDG_CACHE_HOME/scalesweep/kernels` (default `~/.cache/scalesweep/kernels`)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scalesweep" / "kernels"


def _library_name() -> str:
    key = "\0".join([_SOURCE, _compiler(), " ".join(_cflags()), platform.machine()])
    return "rownorm_" + hashlib.sha256(key.encode()).hexdigest()[:16] + ".so"


def _build(target: Path) -> None:
    """Compile into a private temporary directory, then move the library into the cache atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=target.parent) as tmp:
        source, library = Path(tmp) / "rownorm.c", Path(tmp) / "rownorm.so"
        source.write_text(_SOURCE, encoding="utf-8")
        done = subprocess.run([_compiler(), *_cflags(), str(source), "-o", str(library), "-lm"],
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{_compiler()} failed (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-300:] or 'no output'}")
        os.replace(library, target)  # atomic: another process sees the whole file or none


def _bind(library: ctypes.CDLL) -> ctypes.CDLL:
    ptr, i64, f32, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
    library.row_step.argtypes = [ptr, ptr, ptr, i64, i64, f32, f32, i32, f32, f32, f32]
    library.column_sumsq.argtypes = [ptr, ptr, ptr, i64, i64, f32, f32, i32]
    library.column_apply.argtypes = [ptr, ptr, ptr, ptr, i64, i64, f32, f32, i32, f32]
    library.momentum_nesterov.argtypes = [ptr, ptr, ptr, i64, f32, f32, i32, i32]
    library.apply_update.argtypes = [ptr, ptr, i64, i64, i64, i64, i32, f32, f32]
    for fn in (library.row_step, library.column_sumsq, library.column_apply, library.momentum_nesterov,
               library.apply_update):
        fn.restype = None
    return library


def native_kernel(*, build: bool = True) -> ctypes.CDLL | None:
    """The compiled kernel, building it on first use (about a second) unless `build=False`; None when it cannot be
    built here (no C compiler), with the reason in `native_kernel_error()` and one warning in the log. Tried once
    per process."""
    global _loaded, _error, _tried
    if _tried:
        return _loaded
    with _lock:
        if _tried:
            return _loaded
        target = kernel_cache_dir() / _library_name()
        try:
            if not target.exists():
                if not build:
                    return None
                log.info("building the row-norm CPU kernel into %s", target)
                _build(target)
            _loaded = _bind(ctypes.CDLL(str(target)))
            _error = None
        except Exception as exc:  # any build or load failure leaves the streamed step, which needs nothing
            _error = f"{type(exc).__name__}: {exc}"
            log.warning("the row-norm CPU kernel is unavailable (%s); the streamed step runs instead", _error)
        _tried = True
        return _loaded


def native_kernel_error() -> str | None:
    """Why the compiled kernel could not be built or loaded in this process, or None."""
    return _error


def native_applies(*tensors: Tensor) -> bool:
    """Whether the compiled kernel can take these tensors: contiguous float32 on a CPU."""
    return all(t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous() for t in tensors)


def _kernel() -> ctypes.CDLL:
    library = native_kernel()
    if library is None:
        raise RuntimeError(f"the row-norm CPU kernel is unavailable: {native_kernel_error()}")
    return library


def _check(matrices: dict[str, Tensor], vectors: dict[str, Tensor]) -> tuple[int, int]:
    """The kernel writes through raw pointers, so every size is checked here: equal 2-D shapes, and vectors of one
    value per column, all contiguous float32 on a CPU."""
    shapes = {tuple(t.shape) for t in matrices.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(f"the row-norm kernel needs 2-D matrices of one shape, got "
                         f"{ {k: tuple(t.shape) for k, t in matrices.items()} }")
    rows, cols = next(iter(shapes))
    for name, t in {**matrices, **vectors}.items():
        if not native_applies(t):
            raise ValueError(f"the row-norm kernel needs contiguous float32 CPU tensors; {name} is {t.dtype} on "
                             f"{t.device}{'' if t.is_contiguous() else ', not contiguous'}")
    for name, t in vectors.items():
        if t.numel() != cols:
            raise ValueError(f"{name} must hold one value per column ({cols}), got {t.numel()}")
    return rows, cols


def _weights(momentum: float) -> tuple[float, float]:
    return 1.0 - momentum, momentum  # B <- lerp(B, g, 1 - mu); U <- lerp(g, B, mu)


def native_rownorm_update_(param: Tensor, grad: Tensor, buf: Tensor, *, momentum: float, nesterov: bool,
                           decay: float, step_size: float, eps: float) -> None:
    """`functional.rownorm_update_` in the compiled kernel: one whole non-refresh step of one contiguous float32
    CPU matrix, in place (unit rows when m <= n, unit columns when m > n, in two sweeps)."""
    rows, cols = _check({"param": param, "grad": grad, "momentum buffer": buf}, {})
    if rows <= cols:
        _kernel().row_step(param.data_ptr(), grad.data_ptr(), buf.data_ptr(), rows, cols, *_weights(momentum),
                           nesterov, decay, step_size, eps)
        return
    sums = torch.empty(cols, dtype=torch.float32)
    native_column_sumsq_(grad, buf, sums, momentum=momentum, nesterov=nesterov)
    scales = sums.sqrt_().clamp_min_(eps).reciprocal_().mul_(-step_size)
    native_column_apply_(param, grad, buf, scales, momentum=momentum, nesterov=nesterov, decay=decay)


def native_column_sumsq_(grad: Tensor, buf: Tensor, out: Tensor, *, momentum: float, nesterov: bool) -> None:
    """`functional.column_sumsq_` in the compiled kernel (`out`: n contiguous float32 values)."""
    rows, cols = _check({"grad": grad, "momentum buffer": buf}, {"out": out})
    _kernel().column_sumsq(grad.data_ptr(), buf.data_ptr(), out.data_ptr(), rows, cols, *_weights(momentum),
                           nesterov)


def native_column_apply_(param: Tensor, grad: Tensor, buf: Tensor, scales: Tensor, *, momentum: float,
                         nesterov: bool, decay: float) -> None:
    """`functional.normalized_update_` in the compiled kernel (`scales`: n float32 values, as from
    `step_scales`)."""
    rows, cols = _check({"param": param, "grad": grad, "momentum buffer": buf}, {"scales": scales})
    _kernel().column_apply(param.data_ptr(), grad.data_ptr(), buf.data_ptr(), scales.data_ptr(), rows, cols,
                           *_weights(momentum), nesterov, decay)


def native_momentum_nesterov_(grad: Tensor, buf: Tensor, out: Tensor, *, momentum: float, nesterov: bool) -> None:
    """A refresh step's `buf.lerp_(grad, 1 - momentum)` and `out.copy_(grad.lerp(buf, momentum))` (or of `buf`
    without Nesterov) in one pass: the buffer bit for bit torch's, `out` (contiguous float32 or bfloat16, grad's
    shape) rounded as torch's copy. `grad` and `buf`: contiguous float32 CPU tensors of one shape."""
    _check({"grad": grad, "momentum buffer": buf}, {})
    if out.shape != grad.shape or not _update_applies(out) or not out.is_contiguous():
        raise ValueError(f"the momentum kernel writes a contiguous float32 or bfloat16 CPU tensor of shape "
                         f"{tuple(grad.shape)}; got {out.dtype} {tuple(out.shape)} on {out.device}"
                         f"{'' if out.is_contiguous() else ', not contiguous'}")
    _kernel().momentum_nesterov(grad.data_ptr(), buf.data_ptr(), out.data_ptr(), grad.numel(), *_weights(momentum),
                                nesterov, out.dtype == torch.bfloat16)


def native_apply_update_(param: Tensor, update: Tensor, *, decay: float, alpha: float) -> None:
    """A refresh step's `param.mul_(decay).add_(update, alpha=alpha)` in one pass, with no float32 copy of a
    bfloat16 `update` (any strides: a tall matrix's transposed result is read in place). `param`: a contiguous
    float32 CPU matrix."""
    _check({"param": param}, {})
    if update.shape != param.shape or not _update_applies(update) or min(update.stride(), default=0) < 0:
        raise ValueError(f"the update kernel reads a float32 or bfloat16 CPU tensor of shape {tuple(param.shape)}; "
                         f"got {update.dtype} {tuple(update.shape)} on {update.device}")
    rows, cols = param.shape
    _kernel().apply_update(param.data_ptr(), update.data_ptr(), rows, cols, update.stride(0), update.stride(1),
                           update.dtype == torch.bfloat16, decay, alpha)


def _update_applies(t: Tensor) -> bool:
    return t.device.type == "cpu" and t.dtype in (torch.float32, torch.bfloat16)


def native_refresh_applies(param: Tensor, grad: Tensor, buf: Tensor) -> bool:
    """Whether the refresh kernels can take this matrix's tensors (the update and U are checked by the kernels):
    contiguous float32 on a CPU, and the kernel built."""
    return native_applies(param, grad, buf) and native_kernel() is not None


if __name__ == "__main__":  # python -m trials.optim._native: build ahead of time, say where and how long
    import time

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.perf_counter()
    if native_kernel() is None:
        print(f"row-norm CPU kernel: not available ({native_kernel_error()}); the streamed step will run")
        sys.exit(0)
    print(f"row-norm CPU kernel: ready in {time.perf_counter() - started:.1f} s "
          f"({kernel_cache_dir() / _library_name()})")
