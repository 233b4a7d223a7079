"""Optimizer step time: AdamW, vanilla Muon and Periodic Row-wise Muon K=2/3/4, side by side in one process.

The matrices are the 2-D weights of a double-stream MMDiT block stack (SD3/FLUX layout), per block and stream:
qkv (3d x d), attention output (d x d), MLP in (4d x d), MLP out (d x 4d), adaLN modulation (6d x d).
Default: width d=512 (8 heads of 64), 2 blocks, 2 streams: 20 matrices, 18.9M parameters.

Arms run interleaved in rounds of 12 steps (a whole number of periods for K = 2, 3 and 4), on identical gradients,
and the median per-step time over rounds is reported with its ratio to vanilla Muon. Gradients are fixed random
tensors: the optimizer's cost does not depend on their values.

Newton-Schulz dtype (`--ns-dtype`, default `auto` as in the trials): with bf16, vanilla Muon is `torch.optim.Muon`
itself; with fp32 (what `auto` picks on CPUs without native bf16 matmul) it is the same rule run by
`PeriodicRowMuon(refresh_every=1, ns_dtype=float32)`, so both arms share one Newton-Schulz implementation.

    python benchmarks/optimizer_step.py [--width 512] [--depth 2] [--rounds 5] [--threads N] [--ns-dtype auto]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from trials.optim import PeriodicRowMuon, fast_ns_dtype


def block_shapes(width: int, depth: int) -> list[tuple[int, int]]:
    d = width
    per_stream = [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d), (6 * d, d)]
    return per_stream * 2 * depth  # two streams (image, text) per double-stream block


def make_arm(name: str, params: list[torch.Tensor], ns_dtype: torch.dtype) -> torch.optim.Optimizer:
    if name == "adamw":
        return torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1)
    if name == "muon":
        if ns_dtype == torch.bfloat16:
            return torch.optim.Muon(params, lr=0.02)
        return PeriodicRowMuon(params, lr=0.02, refresh_every=1, ns_dtype=ns_dtype)
    k = int(name.split("K=")[1])
    return PeriodicRowMuon(params, lr=0.02, refresh_every=k, gamma=0.15, ns_dtype=ns_dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of 12 steps per arm (median reported)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--ns-dtype", choices=["auto", "bfloat16", "float32"], default="auto")
    parser.add_argument("--quick", action="store_true", help="width 256, 3 rounds: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.width, args.rounds = 256, 3
    torch.set_num_threads(args.threads)
    ns_dtype = fast_ns_dtype("cpu") if args.ns_dtype == "auto" else getattr(torch, args.ns_dtype)

    shapes = block_shapes(args.width, args.depth)
    numel = sum(m * n for m, n in shapes)
    arms = ["adamw", "muon", "periodic K=2", "periodic K=3", "periodic K=4"]
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(*s, generator=gen) for s in shapes]
    states = {}
    for arm in arms:
        params = [torch.randn(*s, generator=gen).mul_(0.02).requires_grad_() for s in shapes]
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        states[arm] = make_arm(arm, params, ns_dtype)
        states[arm].step()  # warm-up: allocate state, first-call overheads

    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{args.threads} thread(s), CPU capability {torch.backends.cpu.get_cpu_capability()}")
    muon_impl = "torch.optim.Muon" if ns_dtype == torch.bfloat16 else "PeriodicRowMuon(refresh_every=1)"
    print(f"Newton-Schulz dtype: {str(ns_dtype).removeprefix('torch.')}; vanilla Muon = {muon_impl}")
    print(f"matrices: {len(shapes)} ({args.depth} double-stream blocks, width {args.width}), "
          f"{numel / 1e6:.1f}M parameters; {args.rounds} rounds x 12 steps")
    per_step: dict[str, list[float]] = {arm: [] for arm in arms}
    for r in range(args.rounds):
        for arm in arms:
            opt = states[arm]
            start = time.perf_counter()
            for _ in range(12):
                opt.step()
            per_step[arm].append((time.perf_counter() - start) / 12)
        print(f"  round {r + 1}/{args.rounds} done", flush=True)

    muon = statistics.median(per_step["muon"])
    print("\n| arm | ms / step | ratio to vanilla Muon |\n|---|---|---|")
    for arm in arms:
        t = statistics.median(per_step[arm])
        print(f"| {arm} | {t * 1e3:.1f} | {t / muon:.3f} |")


if __name__ == "__main__":
    main()
