"""Optimizer step time: every arm, each kind of Periodic Row-wise Muon step, and the memory floor, side by side.

The matrices are the 2-D weights of a double-stream MMDiT block stack (SD3/FLUX layout), per block and stream:
qkv (3d x d), attention output (d x d), MLP in (4d x d), MLP out (d x 4d), adaLN modulation (6d x d).
Default: width d=512 (8 heads of 64), 2 blocks, 2 streams: 20 matrices, 18.9M parameters.

What runs, for each Newton-Schulz dtype (`--ns-dtype`: `both` where the CPU multiplies bf16 natively, else fp32):
- `adamw`, and vanilla Muon: `torch.optim.Muon` itself in bf16; in fp32 (which torch.optim.Muon cannot do) the same
  rule as `PeriodicRowMuon(refresh_every=1, ns_dtype=float32)`;
- `refresh step`: PeriodicRowMuon's refresh step alone (K=1), to set against torch.optim.Muon's step;
- `row-norm step`: its non-refresh step alone (`RowNormMuon` as the trials run it: the compiled kernel,
  `rownorm_kernel="native"`, where it builds), `row-norm step, streamed`: the same in torch operations, chunk by
  chunk (`"streamed"`), and `row-norm step, unfused`: the whole-matrix implementation both replaced (`"unfused"`);
- `floor`: the fewest element-wise passes any Muon-family step makes over the same tensors, two fused multi-tensor
  ones (`_foreach_lerp_` of the momentum, `_foreach_add_` of the update); the row-norm step is reported as a
  multiple of it;
- `periodic K=2/3/4`: the whole optimizer, refresh and row-norm steps in their proportions.

Arms run in rounds of 12 steps (a whole number of periods for K = 2, 3 and 4) on identical gradients, alternating
step by step, so machine noise hits them alike; each ratio is taken within a round (paired) and reported as the
median over rounds with its min-max and n. Gradients are fixed random tensors: the cost does not depend on their values.

    python benchmarks/optimizer_step.py [--width 512] [--depth 2] [--rounds 5] [--threads 1] [--ns-dtype both]
    python benchmarks/optimizer_step.py --rung cpu-m      # a rung's own block matrices
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch

from trials.optim import PeriodicRowMuon, RowNormMuon, fast_ns_dtype

STEPS_PER_ROUND = 12
LR = 0.02  # Muon's customary lr; the cost does not depend on it


def block_shapes(width: int, depth: int) -> list[tuple[int, int]]:
    d = width
    per_stream = [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d), (6 * d, d)]
    return per_stream * 2 * depth  # two streams (image, text) per double-stream block


def too_few_gpus(ranks: int, what: str) -> str | None:
    """A GPU benchmark's one-line refusal where this machine has fewer than `ranks` GPUs (one NCCL rank each):
    `what` it needs, what the machine has and what is allowed; None where it has enough."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus >= ranks:
        return None
    allowed = f"--world 2..{gpus} with --device cuda, or --device cpu" if gpus >= 2 else "--device cpu"
    return f"{what}; this machine has {gpus} GPU(s). Allowed: {allowed}"


def cpu_features() -> str:
    """The CPU model and the flags that decide bf16 speed (AMX-BF16, AVX512-BF16, AVX2), from /proc/cpuinfo."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and model in ("", "x86_64", platform.machine()):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    shown = [f for f in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if f in flags]
    try:
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        native = False
    return (f"{model}; flags: {', '.join(shown) or 'none of amx_bf16/avx512_bf16/avx2'}; "
            f"torch CPU capability {torch.backends.cpu.get_cpu_capability()}; native bf16 matmul: {native}")


def _with_grads(shapes: list[tuple[int, int]], grads: list[torch.Tensor], gen: torch.Generator) -> list[torch.Tensor]:
    params = [torch.randn(*s, generator=gen).mul_(0.02).requires_grad_() for s in shapes]
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    return params


def make_arms(shapes: list[tuple[int, int]], grads: list[torch.Tensor], ns_dtype: torch.dtype,
              gen: torch.Generator) -> dict[str, Callable[[], object]]:
    """Arm name -> one step of it, each on parameters of its own with the same gradients."""
    arms: dict[str, torch.optim.Optimizer] = {}
    arms["adamw"] = torch.optim.AdamW(_with_grads(shapes, grads, gen), lr=3e-3, weight_decay=0.1)
    if ns_dtype == torch.bfloat16:
        arms["muon"] = torch.optim.Muon(_with_grads(shapes, grads, gen), lr=LR)
    else:
        arms["muon"] = PeriodicRowMuon(_with_grads(shapes, grads, gen), lr=LR, refresh_every=1, ns_dtype=ns_dtype)
    arms["refresh step"] = PeriodicRowMuon(_with_grads(shapes, grads, gen), lr=LR, refresh_every=1,
                                           ns_dtype=ns_dtype)
    arms["row-norm step"] = RowNormMuon(_with_grads(shapes, grads, gen), lr=LR)
    arms["row-norm step, streamed"] = RowNormMuon(_with_grads(shapes, grads, gen), lr=LR, rownorm_kernel="streamed")
    arms["row-norm step, unfused"] = RowNormMuon(_with_grads(shapes, grads, gen), lr=LR, rownorm_kernel="unfused")
    for k in (2, 3, 4):
        arms[f"periodic K={k}"] = PeriodicRowMuon(_with_grads(shapes, grads, gen), lr=LR, refresh_every=k,
                                                  gamma=0.15, ns_dtype=ns_dtype)
    steps: dict[str, Callable[[], object]] = {name: opt.step for name, opt in arms.items()}
    for step in steps.values():
        step()  # allocate state; the kernel each row-norm arm runs is known after a step
    kernels = {name: sorted(getattr(opt, "rownorm_kernels_used", ())) for name, opt in arms.items()}
    print("  row-norm kernels:", "; ".join(f"{name}: {','.join(k)}" for name, k in kernels.items() if k))
    floor_params = [torch.randn(*s, generator=gen) for s in shapes]
    floor_bufs = [torch.zeros(*s) for s in shapes]

    def floor() -> None:
        torch._foreach_lerp_(floor_bufs, grads, 0.05)  # the momentum: B <- lerp(B, g, 1 - mu)
        torch._foreach_add_(floor_params, floor_bufs, alpha=-1e-3)  # the update: W <- W - eta * B

    steps["floor"] = floor
    for step in steps.values():
        step()  # warm-up: allocate state and workspaces, first-call overheads
    return steps


def run_rounds(steps: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds per step of each arm in each round. Arms alternate step by step within a round (each arm's 12
    steps are spread over the whole round), so a burst of load on a shared machine hits every arm alike."""
    per_step: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(rounds):
        spent = dict.fromkeys(steps, 0.0)
        for _ in range(STEPS_PER_ROUND):
            for name, step in steps.items():
                start = time.perf_counter()
                step()
                spent[name] += time.perf_counter() - start
        for name, total in spent.items():
            per_step[name].append(total / STEPS_PER_ROUND)
        print(f"  round {r + 1}/{rounds} done", flush=True)
    return per_step


def paired(per_step: dict[str, list[float]], num: str, den: str) -> str:
    """The per-round ratio num/den: median [min, max], n rounds."""
    ratios = [a / b for a, b in zip(per_step[num], per_step[den], strict=True)]
    return f"{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}], n={len(ratios)}"


def report(per_step: dict[str, list[float]], ns_dtype: torch.dtype) -> None:
    muon_impl = "torch.optim.Muon" if ns_dtype == torch.bfloat16 else "PeriodicRowMuon(refresh_every=1), the same code"
    print(f"\nNewton-Schulz in {str(ns_dtype).removeprefix('torch.')}; vanilla Muon = {muon_impl}")
    print("| arm | ms / step (median) | ratio to vanilla Muon, per round: median [min, max], n |")
    print("|---|---|---|")
    for name, times in per_step.items():
        print(f"| {name} | {statistics.median(times) * 1e3:.1f} | {paired(per_step, name, 'muon')} |")
    print("\ntargets, each ratio paired by round:")
    print(f"  row-norm step / floor: {paired(per_step, 'row-norm step', 'floor')} (target <= 2)")
    print(f"  row-norm step, streamed / floor: {paired(per_step, 'row-norm step, streamed', 'floor')}")
    print(f"  row-norm step, unfused / floor: {paired(per_step, 'row-norm step, unfused', 'floor')} (before)")
    print(f"  refresh step / vanilla Muon: {paired(per_step, 'refresh step', 'muon')} (target <= 1.05)")
    target = "0.40 (bf16)" if ns_dtype == torch.bfloat16 else "0.34 (fp32)"
    print(f"  periodic K=3 / vanilla Muon: {paired(per_step, 'periodic K=3', 'muon')} (target <= {target})")
    med = {name: statistics.median(times) for name, times in per_step.items()}
    predicted = (med["refresh step"] + 2 * med["row-norm step"]) / (3 * med["muon"])
    print(f"  (refresh + 2 x row-norm) / (3 x Muon) from the medians: {predicted:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of 12 steps per arm (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the trials use 1)")
    parser.add_argument("--ns-dtype", choices=["both", "auto", "bfloat16", "float32"], default="both",
                        help="both = bf16 and fp32 where bf16 matmul is native, fp32 alone elsewhere; auto = the "
                             "trials' choice")
    parser.add_argument("--rung", default=None,
                        help="time the block matrices of this rung of the model ladder (e.g. cpu-m) instead of "
                             "--width/--depth")
    parser.add_argument("--quick", action="store_true", help="width 256, 3 rounds: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.width, args.rounds = 256, 3
    torch.set_num_threads(args.threads)
    fast = fast_ns_dtype("cpu")
    if args.ns_dtype == "both":
        dtypes = [torch.bfloat16, torch.float32] if fast == torch.bfloat16 else [torch.float32]
    else:
        dtypes = [fast if args.ns_dtype == "auto" else getattr(torch, args.ns_dtype)]

    if args.rung:
        from trials.models import build_model
        from trials.optim import route_parameters

        # The matrices the trial gives the Muon family: the rung's own block weights.
        shapes = [(int(p.shape[0]), int(p.shape[1]))
                  for _, p in route_parameters(build_model(args.rung), block_prefixes=("blocks",)).muon]
        where = f"the block matrices of rung {args.rung}"
    else:
        shapes = block_shapes(args.width, args.depth)
        where = f"{args.depth} double-stream blocks, width {args.width}"
    numel = sum(m * n for m, n in shapes)
    print(f"CPU: {cpu_features()}")
    print(f"torch {torch.__version__}, {args.threads} thread(s); matrices: {len(shapes)} ({where}), "
          f"{numel / 1e6:.2f}M parameters; {args.rounds} rounds x {STEPS_PER_ROUND} steps")
    if args.ns_dtype == "both" and fast != torch.bfloat16:
        print("no native bf16 matmul here: bf16 Newton-Schulz would run 10-30x slower, so only fp32 is timed "
              "(--ns-dtype bfloat16 forces it)")
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(*s, generator=gen) for s in shapes]
    for ns_dtype in dtypes:
        print(f"\nNewton-Schulz dtype {str(ns_dtype).removeprefix('torch.')}:")
        report(run_rounds(make_arms(shapes, grads, ns_dtype, gen), args.rounds), ns_dtype)


if __name__ == "__main__":
    main()
