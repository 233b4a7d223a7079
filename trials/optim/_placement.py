"""Where Newton-Schulz runs under sharding: its cost, owner ranks balanced by that cost, and a batched NS5.

Pure functions of shapes and tensors, used by `ShardedPeriodicRowMuon(ns_placement="distributed")` and by
`benchmarks/ns_placement.py`'s projection to the paper's shapes, so the table and the optimizer share one cost model.

NS5 on an m x n matrix works in the wide orientation (s = min(m, n) rows, l = max(m, n) columns); each of its
`steps` iterations is three matrix products:

    A = X X^T            s x l by l x s     2 s^2 l FLOPs
    B = b A + c A A      s x s by s x s     2 s^3
    X = a X + B X        s x s by s x l     2 s^2 l

so `ns_flops(m, n) = steps * (4 s^2 l + 2 s^3)`: about m n min(m, n) times 4 steps for a strongly rectangular one.

What a matrix costs its owner is more than its FLOPs: the owner copies the other ranks' rows into the whole matrix
and each rank's rows of the result out of it, and a tall matrix's result (the transpose of NS5's wide one) takes
one more whole, transposing copy to rows. So the owners balance `ns_cost`: the FLOPs plus two per-element terms in
FLOP-equivalents, measured once (constants below).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

import torch
from torch import Tensor

__all__ = ["NS_PLACEMENTS", "assign_owners", "newton_schulz5_batched", "ns_cost", "ns_flops", "ns_owners",
           "pipeline_slots"]

# "replicated": every rank gathers every whole matrix and runs NS5 on it (the paper's and Moonlight's design).
# "distributed": one owner rank per matrix runs NS5 once (microsoft/dion's all-to-all design).
NS_PLACEMENTS: tuple[str, ...] = ("replicated", "distributed")


def ns_flops(rows: int, cols: int, steps: int = 5) -> int:
    """Floating-point operations of `steps` Newton-Schulz iterations on a rows x cols matrix (module docstring)."""
    s, l = min(rows, cols), max(rows, cols)
    return steps * (4 * s * s * l + 2 * s**3)


# An owned matrix's work beyond NS5, per element, in NS5 FLOP-equivalents (seconds per element / seconds per NS5
# FLOP). Measured with `python benchmarks/ns_placement.py --fit-cost --repeats 25` on 2026-12-06 (the 2-vCPU Intel
# Xeon with AMX-BF16, one thread, bf16 NS5 at 0.9-1.1 TFLOP/s, the width-512 MMDiT block shapes, medians; three runs
# gave 108, 110 and 120, and 551, 551 and 562 for the tall term). NS5 itself took 0.90-1.11x its wide mirror's time
# on a tall matrix, either side by run, so the tall term is the copy alone. Against the ~11,500 NS5 FLOPs per
# element of a 512-wide matrix both are small: they tip the balance between matrices of (nearly) equal FLOPs, as a
# tall matrix and its wide mirror, and weigh more in small matrices, where copies are most of the work. On another
# machine or dtype the ratio moves; what matters is that every rank uses the same numbers.
OWNER_ELEMENT_COST = 110.0  # every owned matrix: the other ranks' rows copied in (assembly) and out (send-back)
TALL_ELEMENT_COST = 550.0  # a tall one on top: the transposing copy of its result (NS5 works on the wide transpose)


def ns_cost(rows: int, cols: int, steps: int = 5) -> float:
    """What orthogonalising one rows x cols matrix costs its owner, in NS5 FLOP-equivalents: `ns_flops` plus the
    per-element terms above (a function of the shape alone, so every rank computes the same costs)."""
    per_element = OWNER_ELEMENT_COST + (TALL_ELEMENT_COST if rows > cols else 0.0)
    return ns_flops(rows, cols, steps) + per_element * rows * cols


def ns_owners(shapes: Sequence[tuple[int, int]], world: int, steps: int | Sequence[int] = 5) -> list[int]:
    """The owner rank of each matrix under the distributed placement: `assign_owners` on `ns_cost` (the optimizer,
    the byte formula and the benchmark's projection all call this)."""
    counts = [steps] * len(shapes) if isinstance(steps, int) else list(steps)
    return assign_owners([ns_cost(m, n, k) for (m, n), k in zip(shapes, counts, strict=True)], world)


def assign_owners(costs: Sequence[float], world: int) -> list[int]:
    """An owner rank for each job, balancing the summed cost per rank: longest job first, each to the least-loaded
    rank (Graham's LPT rule: the busiest rank carries at most 4/3 of the optimum). Deterministic (ties go to the
    lower job index and the lower rank), so every rank computes the same assignment from the same costs."""
    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    owners = [0] * len(costs)
    loads = [(0.0, rank) for rank in range(world)]  # a heap of (load, rank): the least-loaded, lowest rank first
    for job in sorted(range(len(costs)), key=lambda j: (-costs[j], j)):
        load, rank = heapq.heappop(loads)
        owners[job] = rank
        heapq.heappush(loads, (load + costs[job], rank))
    return owners


def pipeline_slots(
    owners: Sequence[int], calls: Sequence[Hashable], sizes: Sequence[int], world: int
) -> list[list[list[int]]]:
    """The stages of a distributed refresh: `slots[s][r]` lists the matrices (indices, ascending) of owner rank r's
    s-th NS5 call, empty once r has no more. Matrices with the same owner and call key are one call (a batch);
    `sizes` are their element counts.

    Each slot is one all-to-all there and one back, so an owner runs NS5 on slot s while the shards of slot s + 1
    arrive and the rows of slot s - 1 go back. Two transfers are left uncovered: the first slot's (waited for
    before any NS5) and the last slot's return (nothing left to run under it but applying rows). So each owner's
    calls go smallest first, then largest first: both ends are small. Deterministic (ties keep the order of first
    appearance), so every rank computes the same slots from the same shapes."""
    per_owner: list[dict[Hashable, list[int]]] = [{} for _ in range(world)]
    for j, (owner, key) in enumerate(zip(owners, calls, strict=True)):
        per_owner[owner].setdefault(key, []).append(j)
    ordered = []
    for groups in per_owner:
        batches = sorted(groups.values(), key=lambda batch: sum(sizes[j] for j in batch))
        ordered.append(batches[:1] + batches[:0:-1])
    return [[batches[s] if s < len(batches) else [] for batches in ordered]
            for s in range(max(map(len, ordered), default=0))]


def newton_schulz5_batched(
    g: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float, dtype: torch.dtype
) -> Tensor:
    """`newton_schulz5` on a stack of same-shape matrices, (B, m, n) -> (B, m, n) in `dtype`, in one call per
    product. Each matrix is normalised by its own Frobenius norm. Operation for operation the 2-D routine's, with
    batched products (`baddbmm`); on the CPUs measured here (AMX Xeon, one thread) the result equals the 2-D
    routine's bit for bit, and in any case to float rounding. `g` is never modified."""
    a, b, c = coefficients
    x = g.to(dtype)
    transposed = g.size(-2) > g.size(-1)
    if transposed:
        x = x.mT  # the wide orientation: the Gram matrices are (B, s, s)
    norms = torch.linalg.vector_norm(x, dim=(-2, -1), keepdim=True).clamp_(min=eps)  # (B, 1, 1)
    x = x / norms
    for _ in range(steps):
        gram = x @ x.mT
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)  # b*A + c*A^2
        x = torch.baddbmm(x, poly, x, beta=a)  # a*X + (b*A + c*A^2) X
    return x.mT if transposed else x
