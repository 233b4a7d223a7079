"""Sharded optimizer step under FSDP2 on gloo ranks: logical bytes and time per step, vanilla Muon vs periodic K=2/3/4.

The matrices are those of `optimizer_step.py` (a double-stream MMDiT block stack: per block and stream qkv (3d x d),
attention out (d x d), MLP in (4d x d), MLP out (d x 4d), adaLN modulation (6d x d)), sharded on dim 0 by
`fully_shard` over `--world` gloo ranks on this machine. Every arm is `ShardedPeriodicRowMuon`; vanilla Muon is its
`refresh_every=1` (an all-gather of the momentum and NS5 every step), so all arms share one implementation.

Bytes are the optimizer's logical bytes sent per rank per step (`CommStats`: nccl-tests' bus convention, padding
included), averaged over whole periods. Time is the optimizer step alone (gradients are fixed random shards: the
cost does not depend on their values), the slowest rank's, median over rounds of 12 steps (a whole number of
periods for K = 2, 3 and 4), arms interleaved. Each rank runs one compute thread (`--threads`).

Default: width 384, one double-stream block (10 matrices, 5.3M parameters): about two minutes on 2 CPU cores with
fp32 Newton-Schulz. The bytes ratio of periodic K to Muon is 1/K plus the column-norm scalars, 2 / (9 d) at K = 3
and W = 2 (0.0006 at d = 384), so it does not depend on the depth.

    python benchmarks/sharded_comm.py [--width 384] [--depth 1] [--rounds 3] [--world 2] [--bucket-mb 16]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from trials.optim import ShardedPeriodicRowMuon, fast_ns_dtype

ARMS: dict[str, int] = {"vanilla Muon": 1, "periodic K=2": 2, "periodic K=3": 3, "periodic K=4": 4}
STEPS_PER_ROUND = 12  # lcm(2, 3, 4): every round holds whole periods of every arm


def block_shapes(width: int, depth: int) -> list[tuple[int, int]]:
    d = width
    per_stream = [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d), (6 * d, d)]  # the same stack as optimizer_step.py
    return per_stream * 2 * depth  # two streams (image, text) per double-stream block


class Stack(nn.Module):
    def __init__(self, shapes: list[tuple[int, int]], gen: torch.Generator) -> None:
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(*s, generator=gen) * 0.02) for s in shapes])


def gloo_rank(
    rank: int, args: argparse.Namespace, rendezvous: str, shapes: list[tuple[int, int]]
) -> tuple[Any, torch.dtype, list[Any], torch.Generator]:
    """One rank of a benchmark (`args.world`, `args.threads`, `args.ns_dtype`, and `args.device` where the script
    has it: gloo on the CPU, NCCL with GPU `rank` on "cuda"): its process group, the 1-D mesh, the Newton-Schulz
    dtype, the same full gradients of `shapes` on every rank, each keeping its rows (no collective), for every arm
    to reuse, and the seeded generator they were drawn from (models draw on from it, on the CPU).
    benchmarks/ns_placement.py's ranks start here too."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    device = getattr(args, "device", "cpu")
    torch.set_num_threads(args.threads)
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl" if device == "cuda" else "gloo", init_method=rendezvous, rank=rank, world_size=args.world,
        timeout=datetime.timedelta(minutes=10),
    )
    mesh = init_device_mesh(device, (args.world,))
    ns_dtype = fast_ns_dtype(device) if args.ns_dtype == "auto" else getattr(torch, args.ns_dtype)
    gen = torch.Generator().manual_seed(0)
    grads = [distribute_tensor(torch.randn(*s, generator=gen).to(device), mesh, [Shard(0)], src_data_rank=None)
             for s in shapes]
    return mesh, ns_dtype, grads, gen


def _rank(rank: int, args: argparse.Namespace, rendezvous: str, out: str) -> None:
    from torch.distributed.fsdp import fully_shard

    shapes = block_shapes(args.width, args.depth)
    mesh, ns_dtype, grads, gen = gloo_rank(rank, args, rendezvous, shapes)
    opts: dict[str, ShardedPeriodicRowMuon] = {}
    for arm, k in ARMS.items():
        model = Stack(shapes, gen)
        fully_shard(model, mesh=mesh)
        for p, g in zip(model.weights, grads, strict=True):
            p.grad = g
        opts[arm] = ShardedPeriodicRowMuon(
            list(model.weights),
            lr=0.02,
            refresh_every=k,
            gamma=0.15,
            ns_dtype=ns_dtype,
            bucket_bytes=int(args.bucket_mb * 2**20),
        )
        opts[arm].step()  # warm-up: allocate state, first-call overheads
    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for r in range(args.rounds):
        for arm, opt in opts.items():
            opt.comm_stats.reset()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(STEPS_PER_ROUND):
                opt.step()
            elapsed = torch.tensor([(time.perf_counter() - start) / STEPS_PER_ROUND], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # a step is as slow as its slowest rank
            times[arm].append(elapsed.item())
        if rank == 0:
            print(f"  round {r + 1}/{args.rounds} done", flush=True)
    if rank == 0:
        stats = {
            arm: {
                "bytes": {k: v / opt.comm_stats.steps for k, v in opt.comm_stats.total_bytes.items()},
                "calls": {k: v / opt.comm_stats.steps for k, v in opt.comm_stats.total_calls.items()},
                "seconds": statistics.median(times[arm]),
                "ns_dtype": str(ns_dtype).removeprefix("torch."),
            }
            for arm, opt in opts.items()
        }
        torch.save(stats, out)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help=f"rounds of {STEPS_PER_ROUND} steps per arm (median)")
    parser.add_argument("--world", type=int, default=2, help="gloo ranks on this machine")
    parser.add_argument("--threads", type=int, default=1, help="compute threads per rank")
    parser.add_argument("--bucket-mb", type=float, default=16.0, help="all-gather bucket size, MiB")
    parser.add_argument("--ns-dtype", choices=["auto", "bfloat16", "float32"], default="auto")
    args = parser.parse_args()

    shapes = block_shapes(args.width, args.depth)
    numel = sum(m * n for m, n in shapes)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(
        f"{args.world} gloo ranks x {args.threads} thread(s); matrices: {len(shapes)} ({args.depth} double-stream "
        f"blocks, width {args.width}), {numel / 1e6:.1f}M parameters, fully_shard on dim 0; bucket "
        f"{args.bucket_mb:g} MiB; {args.rounds} rounds x {STEPS_PER_ROUND} steps"
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "stats.pt")
        rendezvous = f"file://{Path(tmp) / 'rendezvous'}"
        mp.spawn(_rank, args=(args, rendezvous, out), nprocs=args.world, join=True)
        stats: dict[str, Any] = torch.load(out)
    print(f"Newton-Schulz dtype: {stats['vanilla Muon']['ns_dtype']}")

    base = stats["vanilla Muon"]
    base_bytes = sum(base["bytes"].values())
    print(
        "\n| arm | MB sent / step / rank | all-gather MB | all-reduce KB | collectives / step | ms / step "
        "| bytes ratio to Muon | time ratio to Muon |\n|---|---|---|---|---|---|---|---|"
    )
    for arm, s in stats.items():
        total = sum(s["bytes"].values())
        calls = sum(s["calls"].values())
        print(
            f"| {arm} | {total / 1e6:.3f} | {s['bytes']['all_gather'] / 1e6:.3f} | "
            f"{s['bytes']['all_reduce'] / 1e3:.2f} | {calls:.2f} | {s['seconds'] * 1e3:.1f} | "
            f"{total / base_bytes:.4f} | {s['seconds'] / base['seconds']:.3f} |"
        )


if __name__ == "__main__":
    main()
