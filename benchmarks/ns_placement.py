"""Newton-Schulz placement under FSDP2: replicated vs distributed, for vanilla Muon and periodic K=3, side by side.

Measured, on `--world` gloo ranks of this machine (1 compute thread each by default), under real `fully_shard`:
the per-rank optimizer step of `ShardedPeriodicRowMuon` with `ns_placement="replicated"` (every rank gathers every
whole matrix and runs NS5 on it: the paper's and Moonlight's design) and `"distributed"` (one owner rank per matrix,
all-to-all there and back: microsoft/dion's design), each at `refresh_every=1` (vanilla Muon) and 3 (periodic).
The matrices are `optimizer_step.py`'s MMDiT block stack (default width 512, 2 double-stream blocks: 20 matrices,
18.9M parameters), with fixed random gradient shards (the cost does not depend on their values).

The four arms run interleaved, in blocks of 3 steps (one whole period of K = 3) per arm per round, the arm order
rotated every round, every block started together on all ranks (a barrier). Per block and rank: wall time
(`perf_counter`) and this thread's CPU time (`thread_time`: the compute; gloo's transfers run on its own threads, so
they and the waits are only in the wall time). A step is as slow as its slowest rank, so each block's figure is the
maximum over ranks; each ratio is taken within a round (paired) and reported as the median over rounds with its
min-max. Bytes are `CommStats`' counts per rank per step, beside the formula of `trials/optim/_sharded.py`'s
docstring.

With `--device cuda` the same arms run on `--world` NCCL ranks, one GPU each (the ranks' kernels finished before
each clock is read; the wall columns are the ones to read there).

Then, computed rather than measured: NS5 FLOPs and bytes per rank per step at the paper's ladder (the project's own
MMDiT at `paper-1.3b` ... `paper-15b`, its Muon matrices counted on the meta device) for W = 16 and 256 ranks, bf16
NS5, the four combinations; the owners balanced as the optimizer balances them.

    python benchmarks/ns_placement.py [--width 512] [--depth 2] [--rounds 12] [--world 2] [--threads 1]
    python benchmarks/ns_placement.py --device cuda --world 2   # NCCL ranks, one GPU each (where GPUs are lent)
    python benchmarks/ns_placement.py --table-only      # the computed table alone (seconds, no ranks)
    python benchmarks/ns_placement.py --fit-cost        # the owner's per-element costs (one process, seconds)
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from optimizer_step import block_shapes, cpu_features, too_few_gpus
from sharded_comm import Stack, gloo_rank

from trials.optim import ShardedPeriodicRowMuon, fast_ns_dtype, logical_bytes_sent
from trials.optim._placement import ns_flops, ns_owners
from trials.optim.functional import NS_COEFFICIENTS, _newton_schulz5

# (optimizer, placement) -> refresh_every
ARMS: dict[tuple[str, str], int] = {
    ("Muon", "replicated"): 1,
    ("Muon", "distributed"): 1,
    ("periodic K=3", "replicated"): 3,
    ("periodic K=3", "distributed"): 3,
}
BLOCK = 3  # steps per arm per round: one whole period of K = 3 (three of K = 1)
TARGET = 0.6  # issue 52: distributed <= 0.6x replicated per-rank optimizer time on 2 ranks
PAPER_CUT = "46.9-54.3 %"  # the paper's measured optimizer-time cut of periodic K=3 against Muon at 15B
LADDER = ("paper-1.3b", "paper-4b", "paper-9b", "paper-15b")


# === the formulas (trials/optim/_sharded.py's docstring) ==========================================================


def rows_of(m: int, world: int, rank: int) -> int:
    chunk = -(-m // world)  # torch.chunk's split, as FSDP2 shards
    return min(m, (rank + 1) * chunk) - min(m, rank * chunk)


def refresh_bytes(shapes: list[tuple[int, int]], world: int, placement: str, wire: int, back: int) -> list[float]:
    """Bytes each rank sends on one refresh step: the all-gather of U (padded shards), or the two all-to-alls."""
    if placement == "replicated":
        gathered = wire * sum(world * -(-m // world) * n for m, n in shapes)
        return [logical_bytes_sent("all_gather", gathered, world)] * world
    owners = ns_owners(shapes, world)
    sent = [0.0] * world
    for (m, n), owner in zip(shapes, owners, strict=True):
        for rank in range(world):
            mine = rows_of(m, world, rank)
            sent[rank] += (m - mine) * n * back if owner == rank else mine * n * wire
    return sent


def column_sum_bytes(shapes: list[tuple[int, int]], world: int) -> float:
    """The row-norm step's one all-reduce: fp32 column sums of squares of every tall matrix."""
    return logical_bytes_sent("all_reduce", 4 * sum(n for m, n in shapes if m > n), world)


def ns_flops_per_rank(shapes: list[tuple[int, int]], world: int, placement: str) -> list[float]:
    """NS5 FLOPs each rank runs on one refresh step."""
    flops = [ns_flops(m, n) for m, n in shapes]
    if placement == "replicated":
        return [float(sum(flops))] * world
    loads = [0.0] * world
    for f, owner in zip(flops, ns_owners(shapes, world), strict=True):
        loads[owner] += f
    return loads


# === measured: the ranks ============================================================================================


def _rank(rank: int, args: argparse.Namespace, rendezvous: str, out: str) -> None:
    from torch.distributed.fsdp import fully_shard

    shapes = block_shapes(args.width, args.depth)
    mesh, ns_dtype, grads, _ = gloo_rank(rank, args, rendezvous, shapes)  # the gradients shared by every arm
    opts: dict[tuple[str, str], ShardedPeriodicRowMuon] = {}
    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)  # a step's kernels finished before a clock is read
    for arm, k in ARMS.items():
        model = Stack(shapes, torch.Generator().manual_seed(1)).to(args.device)
        fully_shard(model, mesh=mesh)
        for p, g in zip(model.weights, grads, strict=True):
            p.grad = g
        opt = ShardedPeriodicRowMuon(list(model.weights), lr=0.02, refresh_every=k, gamma=0.15, ns_dtype=ns_dtype,
                                     ns_placement=arm[1])
        for _ in range(BLOCK):  # warm-up: state, first-call overheads, the row-norm kernel's build
            opt.step()
        opt.comm_stats.reset()
        opt.ns5_calls = 0
        opts[arm] = opt
    arms = list(ARMS)
    wall: dict[tuple[str, str], list[float]] = {arm: [] for arm in arms}
    cpu: dict[tuple[str, str], list[float]] = {arm: [] for arm in arms}
    for r in range(args.rounds):
        for arm in arms[r % len(arms) :] + arms[: r % len(arms)]:  # rotated: no arm always runs first
            opt = opts[arm]
            sync()
            dist.barrier()
            w0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(BLOCK):
                opt.step()
            sync()
            wall[arm].append((time.perf_counter() - w0) / BLOCK)
            cpu[arm].append((time.thread_time() - c0) / BLOCK)
        if rank == 0:
            print(f"  round {r + 1}/{args.rounds} done", flush=True)
    mine = {
        "wall": wall,
        "cpu": cpu,
        "bytes": {arm: {k: v / o.comm_stats.steps for k, v in o.comm_stats.total_bytes.items()}
                  for arm, o in opts.items()},
        "ns5_per_step": {arm: o.ns5_calls / o.comm_stats.steps for arm, o in opts.items()},
        "ns_dtype": str(ns_dtype).removeprefix("torch."),
    }
    every: list[Any] = [None] * args.world
    dist.all_gather_object(every, mine)
    if rank == 0:
        torch.save(every, out)
    dist.destroy_process_group()


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def measured(args: argparse.Namespace) -> None:
    shapes = block_shapes(args.width, args.depth)
    numel = sum(m * n for m, n in shapes)
    print(f"machine: {cpu_features()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    ranks_are = "NCCL ranks x 1 GPU each" if args.device == "cuda" else f"gloo ranks x {args.threads} thread(s)"
    if args.device == "cuda":
        names = sorted({torch.cuda.get_device_name(i) for i in range(args.world)})
        print(f"GPUs: {', '.join(names)}; the thread-CPU column is the host's thread, not the GPU's work: read wall")
    print(f"{args.world} {ranks_are}; {len(shapes)} matrices ({args.depth} double-stream "
          f"blocks, width {args.width}), {numel / 1e6:.1f}M parameters, fully_shard on dim 0; {args.rounds} rounds x "
          f"{BLOCK} steps per arm, interleaved")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "stats.pt")
        rendezvous = f"file://{Path(tmp) / 'rendezvous'}"
        mp.spawn(_rank, args=(args, rendezvous, out), nprocs=args.world, join=True)
        ranks: list[dict[str, Any]] = torch.load(out, weights_only=False)
    ns_dtype = ranks[0]["ns_dtype"]
    size = 2 if ns_dtype == "bfloat16" else 4
    print(f"Newton-Schulz dtype: {ns_dtype} (what is sent out and back)\n")

    def per_round(kind: str, arm: tuple[str, str]) -> list[float]:  # the slowest rank of each round
        return [max(r[kind][arm][i] for r in ranks) for i in range(args.rounds)]

    print("| arm | wall ms / step | thread-CPU ms / step | NS5 matrices / step / rank | bytes / step / rank "
          "(counted) | formula | counted / formula |\n|---|---|---|---|---|---|---|")
    for arm, k in ARMS.items():
        placement = arm[1]
        refresh = refresh_bytes(shapes, args.world, placement, size, size)
        counted = [sum(r["bytes"][arm].values()) for r in ranks]
        formula = [(refresh[i] + (k - 1) * column_sum_bytes(shapes, args.world)) / k for i in range(args.world)]
        ns5 = "/".join(f"{r['ns5_per_step'][arm]:.2f}" for r in ranks)
        print(f"| {arm[0]}, {placement} | {statistics.median(per_round('wall', arm)) * 1e3:.1f} | "
              f"{statistics.median(per_round('cpu', arm)) * 1e3:.1f} | {ns5} | "
              f"{' / '.join(f'{c / 1e6:.3f} MB' for c in counted)} | "
              f"{' / '.join(f'{f / 1e6:.3f} MB' for f in formula)} | "
              f"{' / '.join(f'{c / f:.4f}' for c, f in zip(counted, formula, strict=True))} |")
    print(f"\nDistributed / replicated, per round (paired), median (min-max) over {args.rounds} rounds; "
          f"target <= {TARGET}:\n")
    print("| optimizer | wall-time ratio | thread-CPU ratio | target met (wall) |\n|---|---|---|---|")
    for name in ("Muon", "periodic K=3"):
        ratios = {kind: [d / r for d, r in zip(per_round(kind, (name, "distributed")),
                                               per_round(kind, (name, "replicated")), strict=True)]
                  for kind in ("wall", "cpu")}
        met = statistics.median(ratios["wall"]) <= TARGET
        print(f"| {name} | {_median_range(ratios['wall'])} | {_median_range(ratios['cpu'])} | "
              f"{'yes' if met else 'no'} |")


# === the owner's cost model: trials/optim/_placement.py's constants, measured ====================================


def _thread_time(fn: Any, repeats: int) -> float:
    """Median thread-CPU seconds of `fn()` over `repeats` calls, after one untimed call."""
    fn()
    times = []
    for _ in range(repeats):
        c0 = time.thread_time()
        fn()
        times.append(time.thread_time() - c0)
    return statistics.median(times)


def fit_owner_cost(args: argparse.Namespace) -> None:
    """What owning a matrix costs beyond its NS5 FLOPs, per element, in FLOP-equivalents: the work of
    `ShardedPeriodicRowMuon._orthogonalize_owned` on one matrix at W = 2, timed on one thread per shape of the
    benchmark's block and its mirror (same FLOPs, other orientation). NS5 runs on the contiguous assembled matrix;
    the copies are the other rank's rows in, the transposing copy of a tall result, and the other rank's rows out."""
    torch.set_num_threads(args.threads)
    ns_dtype = fast_ns_dtype("cpu") if args.ns_dtype == "auto" else getattr(torch, args.ns_dtype)
    shapes = sorted({s for m, n in block_shapes(args.width, args.depth) for s in ((m, n), (n, m))})
    gen = torch.Generator().manual_seed(0)
    ns5, copies = {}, {}
    for m, n in shapes:
        u = torch.randn(m, n, generator=gen).to(ns_dtype)
        ns5[m, n] = _thread_time(lambda u=u: _newton_schulz5(u.clone(), NS_COEFFICIENTS, 5, 1e-7, ns_dtype,
                                                             owned=True), args.repeats)
        ns5[m, n] -= _thread_time(u.clone, args.repeats)  # the clone is the benchmark's, not the owner's
        half = rows_of(m, 2, 0)
        result = _newton_schulz5(u.clone(), NS_COEFFICIENTS, 5, 1e-7, ns_dtype, owned=True)

        def owner_copies(u: torch.Tensor = u, result: torch.Tensor = result, half: int = half) -> None:
            whole = torch.empty_like(u)
            whole[half:].copy_(u[half:])  # the other rank's rows, assembled
            rows = result.contiguous()  # a tall result's transposing copy (a no-op for a wide one)
            torch.empty_like(rows[:half]).copy_(rows[:half])  # the other rank's rows, into the send-back buffer

        copies[m, n] = _thread_time(owner_copies, args.repeats)
    wide = [s for s in shapes if s[0] <= s[1]]
    tall = [s for s in shapes if s[0] > s[1]]
    # Seconds per NS5 FLOP: least squares through the origin over the wide and square shapes.
    per_flop = sum(ns5[s] * ns_flops(*s) for s in wide) / sum(ns_flops(*s) ** 2 for s in wide)
    owner = statistics.mean(copies[s] / (s[0] * s[1]) for s in wide)
    # A tall matrix's extra is its copies' (the transposing copy of the result): NS5 itself ran as fast per FLOP on
    # the transposed input as on the wide mirror (the ratios printed below), within the repeats' noise, which an
    # NS5 difference per element would carry into the constant.
    tall_extra = statistics.mean((copies[s] - copies[s[::-1]]) / (s[0] * s[1]) for s in tall)
    print(f"machine: {cpu_features()}; {args.threads} thread(s); NS5 in {ns_dtype}; median of {args.repeats}\n")
    print("| shape | NS5 ms | owner copies ms | NS5 GFLOP/s | copies, FLOP-equivalents per element |\n"
          "|---|---|---|---|---|")
    for s in shapes:
        print(f"| {s[0]} x {s[1]} | {ns5[s] * 1e3:.2f} | {copies[s] * 1e3:.2f} | {ns_flops(*s) / ns5[s] / 1e9:.0f} | "
              f"{copies[s] / per_flop / (s[0] * s[1]):.0f} |")
    print(f"\nseconds per NS5 FLOP (wide and square): {per_flop:.3e}; NS5 time tall / wide mirror: "
          + ", ".join(f"{m} x {n} {ns5[m, n] / ns5[n, m]:.3f}" for m, n in tall))
    print(f"OWNER_ELEMENT_COST = {owner / per_flop:.0f}  # copies of a wide matrix, per element")
    print(f"TALL_ELEMENT_COST = {tall_extra / per_flop:.0f}  # a tall one's extra copies against its mirror's")


# === computed: the paper's ladder ==================================================================================


def paper_shapes(rung: str) -> list[tuple[int, int]]:
    """The Muon matrices (block 2-D weights) of the project's MMDiT at a paper rung, built on the meta device."""
    from trials.models import build_model
    from trials.optim import route_parameters

    with torch.device("meta"):
        model = build_model(rung)
    return [(int(p.shape[0]), int(p.shape[1])) for _, p in route_parameters(model).muon]


def projection(worlds: tuple[int, ...] = (16, 256)) -> None:
    print("\nComputed: NS5 FLOPs and bytes per rank per step at the paper's shapes (bf16 NS5, K = 3 for periodic; "
          "max over ranks, owners balanced as the optimizer balances them)\n")
    print("| rung | matrices | W | Muon, replicated | Muon, distributed | periodic, replicated | "
          "periodic, distributed | periodic-distributed / Muon-replicated | 1 / (3W) | busiest owner / mean | "
          "bytes MB: Muon rep / dist, periodic rep / dist |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for rung in LADDER:
        shapes = paper_shapes(rung)
        for world in worlds:
            loads = ns_flops_per_rank(shapes, world, "distributed")
            flops = {"replicated": max(ns_flops_per_rank(shapes, world, "replicated")), "distributed": max(loads)}
            sums = column_sum_bytes(shapes, world)
            sent = {p: max(refresh_bytes(shapes, world, p, 2, 2)) for p in ("replicated", "distributed")}
            cells = [flops["replicated"], flops["distributed"], flops["replicated"] / 3, flops["distributed"] / 3]
            mb = [sent["replicated"], sent["distributed"], (sent["replicated"] + 2 * sums) / 3,
                  (sent["distributed"] + 2 * sums) / 3]
            print(f"| {rung} | {len(shapes)} | {world} | "
                  + " | ".join(f"{c / 1e12:.2f} TFLOP" for c in cells)
                  + f" | {cells[3] / cells[0]:.5f} | {1 / (3 * world):.5f} | {max(loads) * world / sum(loads):.3f} | "
                  + " / ".join(f"{b / 1e6:.0f}" for b in mb) + " |")
    print(f"\nThe paper measured periodic K=3 cutting the optimizer time by {PAPER_CUT} against Muon at 15B "
          "(replicated NS5 on every rank): the NS5 FLOPs alone fall to 1/3 there. Distributing NS5 divides them by W "
          "more, up to the balance of owners (the ratio column against 1/(3W)).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=12, help=f"rounds of {BLOCK} steps per arm")
    parser.add_argument("--world", type=int, default=2, help="ranks on this machine (gloo; NCCL: one GPU each)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cpu: gloo ranks; cuda: NCCL ranks, one GPU each (--world at most the GPUs here)")
    parser.add_argument("--threads", type=int, default=1, help="compute threads per rank")
    parser.add_argument("--ns-dtype", choices=["auto", "bfloat16", "float32"], default="auto")
    parser.add_argument("--table-only", action="store_true", help="only the computed table at the paper's shapes")
    parser.add_argument("--fit-cost", action="store_true",
                        help="only measure the owner's per-element costs (trials/optim/_placement.py's constants)")
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per shape for --fit-cost")
    args = parser.parse_args()
    if args.device == "cuda" and not args.table_only and not args.fit_cost and (refusal := too_few_gpus(
            args.world, f"--device cuda runs one NCCL rank per GPU: --world {args.world} needs {args.world} GPUs")):
        parser.error(refusal)
    if args.fit_cost:
        fit_owner_cost(args)
        return
    if not args.table_only:
        measured(args)
    projection()


if __name__ == "__main__":
    main()
