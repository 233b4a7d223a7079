"""ShardedPeriodicRowMuon under 2 gloo ranks on CPU with real `fully_shard` (FSDP2) parameters.

FSDP2 runs on CPU with gloo in torch 2.13, so the matrices here are the DTensors `fully_shard` makes, not hand-made
ones. Every rank generates the *full* gradients from a seed and takes its shard, and runs the unsharded
`PeriodicRowMuon` on the same full gradients in-process as the reference: NS5 amplifies tiny input differences, so
the two must see identical inputs, not two backward passes.

The ranks are fresh interpreters started by the test (`python <this file> RANK WORLD OUT`), the same thing
multiprocessing's "spawn" does; pytest's importlib mode leaves this module unimportable by name, which spawn's
pickled target would need. Each rank runs every scenario once (one start-up for the whole file), saves its
numbers, and the tests assert on them. A hang fails instead of blocking: gloo collectives time out, and the join
has a deadline after which the ranks are killed.
"""

from __future__ import annotations

import datetime
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import Tensor, nn

from trials.optim import PeriodicRowMuon, ShardedPeriodicRowMuon, logical_bytes_sent
from trials.optim._comm import CommStats
from trials.optim._placement import (
    OWNER_ELEMENT_COST,
    TALL_ELEMENT_COST,
    assign_owners,
    newton_schulz5_batched,
    ns_cost,
    ns_flops,
    ns_owners,
    pipeline_slots,
)

WORLD = 2  # the full set of scenarios; the conformance ones also run on WORLD4 ranks
WORLD4 = 4
DEADLINE_S = 120  # backstop for the ranks (they take 10-25 s here); a gloo hang already fails at GLOO_TIMEOUT_S
GLOO_TIMEOUT_S = 30  # a collective waiting this long is a hang: it raises inside the scenario instead

# name -> (rows, cols): each branch, uneven shards, and fewer rows than ranks (rank 1's shard of "tiny" is empty)
SHAPES: dict[str, tuple[int, int]] = {
    "wide": (32, 80),
    "tall": (96, 40),
    "square": (48, 48),
    "tall_uneven": (37, 19),
    "wide_uneven": (7, 30),
    "tiny": (1, 12),
    "tall_tiny": (3, 2),
}
WIDE_ONLY = ("wide", "square", "wide_uneven", "tiny")
# Same-shape matrices, more of each than ranks, so owners get several and batch them into one NS5 call.
BATCHED: list[tuple[int, int]] = [(32, 80)] * 5 + [(37, 19)] * 5 + [(1, 12)]
# Fewer matrices than ranks: on 4 ranks two own nothing, yet they send their rows and get the results back.
TWO = ("tall", "wide")
FP32 = torch.float32


# === the rank side ==============================================================================================


class _Matrices(nn.Module):
    """One weight matrix per shape; fully_shard turns each into a Shard(0) DTensor."""

    def __init__(self, shapes: list[tuple[int, int]], seed: int = 1) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(*s, generator=gen) * 0.1) for s in shapes])

    def forward(self, x: Tensor) -> Tensor:  # not used: gradients are set by hand
        return x


def _sharded_model(shapes: list[tuple[int, int]], mesh: Any, seed: int = 1,
                   dtypes: list[torch.dtype] | None = None) -> tuple[_Matrices, list[Tensor]]:
    from torch.distributed.fsdp import fully_shard

    model = _Matrices(shapes, seed)
    for i, dtype in enumerate(dtypes or []):
        model.weights[i] = nn.Parameter(model.weights[i].detach().to(dtype))
    full = [p.detach().clone().requires_grad_() for p in model.weights]  # the unsharded reference, same start
    fully_shard(model, mesh=mesh)
    return model, full


def _full_grads(shapes: list[tuple[int, int]], steps: int, seed: int = 0) -> list[list[Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [[torch.randn(*s, generator=gen) for s in shapes] for _ in range(steps)]


def _shard_of(full: Tensor, mesh: Any) -> Tensor:
    from torch.distributed.tensor import Shard, distribute_tensor

    # src_data_rank=None: every rank already holds the full tensor, so each just keeps its rows (no collective).
    return distribute_tensor(full, mesh, [Shard(0)], src_data_rank=None)


def _rows(full: Tensor, rank: int) -> Tensor:
    chunk = -(-full.shape[0] // dist.get_world_size())  # torch.chunk's split, as FSDP2 shards
    return full[rank * chunk : (rank + 1) * chunk]


def _rel_err(sharded: Any, full: Tensor, rank: int) -> float:  # sharded: a DTensor
    local, expected = sharded.to_local().detach(), _rows(full.detach(), rank)
    if expected.numel() == 0:
        return 0.0 if local.numel() == 0 else math.inf
    return ((local - expected).abs().max() / expected.abs().max()).item()


_COLLECTIVE_FNS = (
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_reduce",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "reduce_scatter_tensor",
)


@contextmanager
def _counting_collectives() -> Iterator[dict[str, int]]:
    """Count calls of torch.distributed's collective functions (the optimizer calls them through `dist.`)."""
    counts: dict[str, int] = {}
    saved = {name: getattr(dist, name) for name in _COLLECTIVE_FNS if hasattr(dist, name)}

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] = counts.get(name, 0) + 1
            return fn(*args, **kwargs)

        return counted

    for name, fn in saved.items():
        setattr(dist, name, wrap(name, fn))
    try:
        yield counts
    finally:
        for name, fn in saved.items():
            setattr(dist, name, fn)


def _seq(group: Any) -> int:
    """The process group's collective sequence number: it moves on every collective issued on the group."""
    return group._get_sequence_number_for_group()


def _equality(
    rank: int, mesh: Any, *, k: int, steps: int, ns_dtype: torch.dtype, names: tuple[str, ...] = (),
    shapes: list[tuple[int, int]] | None = None, placement: str = "replicated", reference: str = "periodic",
    dtypes: list[torch.dtype] | None = None, sharded_kw: dict[str, Any] | None = None,
    ref_kw: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    """The sharded optimizer against the unsharded one (PeriodicRowMuon, or torch.optim.Muon itself for
    reference="muon": K = 1 in bf16) on the same full gradients, step by step."""
    if shapes is None:
        shapes = [SHAPES[n] for n in names]
    else:
        names = tuple(f"m{i}" for i in range(len(shapes)))
    model, ref = _sharded_model(shapes, mesh, dtypes=dtypes)
    params = list(model.weights)
    # A few KB per bucket: several buckets per refresh step, so the overlapped pipeline really runs.
    opt = ShardedPeriodicRowMuon(params, lr=0.02, refresh_every=k, ns_dtype=ns_dtype, bucket_bytes=16 * 1024,
                                 ns_placement=placement, **kw, **(sharded_kw or {}))
    ref_opt: torch.optim.Optimizer
    if reference == "muon":
        ref_opt = torch.optim.Muon(ref, lr=0.02, **kw)
    else:
        ref_opt = PeriodicRowMuon(ref, lr=0.02, refresh_every=k, ns_dtype=ns_dtype, **kw, **(ref_kw or {}))
    group = mesh.get_group()
    errors = dict.fromkeys(names, 0.0)
    per_step = []
    for step_grads in _full_grads(shapes, steps):
        for p, r, g in zip(params, ref, step_grads, strict=True):
            g = g.to(p.dtype)
            p.grad = _shard_of(g, mesh)
            r.grad = g.clone()
        before = _seq(group)
        with _counting_collectives() as counts:
            opt.step()
        ref_opt.step()
        per_step.append(
            {
                "seq_delta": _seq(group) - before,
                "counted": dict(counts),
                "calls": dict(opt.comm_stats.step_calls),
                "bytes": dict(opt.comm_stats.step_bytes),
            }
        )
        for name, p, r in zip(names, params, ref, strict=True):
            errors[name] = max(errors[name], _rel_err(p, r, rank))
    buffers_equal = all(
        torch.equal(opt.state[p]["momentum_buffer"].to_local(), _rows(ref_opt.state[r]["momentum_buffer"], rank))
        for p, r in zip(params, ref, strict=True)
    )
    placements = {str(p.placements) for p in params}
    return {
        "errors": errors,
        "per_step": per_step,
        "buffers_equal": buffers_equal,
        "placements": placements,
        "ns5_calls": opt.ns5_calls,
        "ns5_batches": opt.ns5_batches,
        "rownorm_calls": opt.rownorm_calls,
        "kernels": sorted(opt.rownorm_kernels_used),
        "local_rows": {n: p.to_local().shape[0] for n, p in zip(names, params, strict=True)},
        "world_size": opt.world_size,
        "shapes": shapes,
        "rank": rank,
    }


def _mmdit_shapes(d: int) -> list[tuple[int, int]]:
    # Per block and stream: qkv, attention out, MLP in, MLP out, adaLN modulation (benchmarks/optimizer_step.py).
    return [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d), (6 * d, d)] * 2


def _bytes(rank: int, mesh: Any) -> dict[str, Any]:
    shapes = _mmdit_shapes(16)
    out: dict[str, Any] = {"shapes": shapes}
    for k in (1, 3):
        model, _ = _sharded_model(shapes, mesh)
        opt = ShardedPeriodicRowMuon(list(model.weights), refresh_every=k, ns_dtype=FP32, bucket_bytes=8 * 1024)
        per_step = []
        for step_grads in _full_grads(shapes, 6):
            for p, g in zip(model.weights, step_grads, strict=True):
                p.grad = _shard_of(g, mesh)
            opt.step()
            per_step.append(dict(opt.comm_stats.step_bytes))
        out[f"K{k}"] = {
            "per_step": per_step,
            "metrics": opt.comm_stats.as_metrics(),
            "total": opt.comm_stats.total_bytes,
        }
    # bf16 NS gathers U in bf16: half the all-gather bytes of fp32, the same all-reduce bytes.
    model, _ = _sharded_model(shapes, mesh)
    opt = ShardedPeriodicRowMuon(list(model.weights), refresh_every=3, ns_dtype=torch.bfloat16)
    for step_grads in _full_grads(shapes, 2):
        for p, g in zip(model.weights, step_grads, strict=True):
            p.grad = _shard_of(g, mesh)
        opt.step()
        out.setdefault("bf16", []).append(dict(opt.comm_stats.step_bytes))
    return out


def _placement_bytes(rank: int, mesh: Any) -> dict[str, Any]:
    """Bytes per rank per step of both placements, K = 1 and 3, on MMDiT-block shapes plus two uneven ones."""
    shapes = [*_mmdit_shapes(16), SHAPES["tall_uneven"], SHAPES["wide_uneven"]]
    out: dict[str, Any] = {"shapes": shapes, "rank": rank}
    grads = _full_grads(shapes, 6)
    for placement in ("replicated", "distributed"):
        for k in (1, 3):
            for dtype in (FP32, torch.bfloat16):
                model, _ = _sharded_model(shapes, mesh)
                opt = ShardedPeriodicRowMuon(list(model.weights), refresh_every=k, ns_dtype=dtype,
                                             ns_placement=placement)
                per_step = []
                for step_grads in grads:
                    for p, g in zip(model.weights, step_grads, strict=True):
                        p.grad = _shard_of(g, mesh)
                    opt.step()
                    per_step.append(dict(opt.comm_stats.step_bytes))
                out[placement, k, str(dtype)] = per_step
    return out


def _missing_grad(rank: int, mesh: Any, placement: str = "replicated") -> dict[str, Any]:
    """Rank 1 has no grad for the wide and the tall matrix on some steps; nobody has one for a third on step 2."""
    names = ("wide", "tall", "wide_uneven", "square")
    shapes = [SHAPES[n] for n in names]
    model, ref = _sharded_model(shapes, mesh)
    params = list(model.weights)
    params[3].requires_grad_(False)  # frozen on every rank: skipped on every rank
    before_frozen = params[3].to_local().clone()
    opt = ShardedPeriodicRowMuon(params, lr=0.02, refresh_every=2, ns_dtype=FP32, ns_placement=placement)
    ref_opt = PeriodicRowMuon(ref[:3], lr=0.02, refresh_every=2, ns_dtype=FP32)
    errors = dict.fromkeys(names[:3], 0.0)
    started = time.perf_counter()
    for t, step_grads in enumerate(_full_grads(shapes, 5)):
        for i in range(3):
            g = step_grads[i]
            rank1_missing = i in (0, 1) and t in (1, 2, 3)
            nobody = i == 2 and t == 2
            if nobody:
                g = torch.zeros_like(g)  # the reference: a missing grad counts as zeros (module docstring)
            elif rank1_missing:
                g = g.clone()
                chunk = -(-g.shape[0] // dist.get_world_size())
                g[chunk:] = 0  # rank 1's rows
            missing_here = nobody or (rank1_missing and rank == 1)
            params[i].grad = None if missing_here else _shard_of(g, mesh)
            ref[i].grad = g
        opt.step()
        ref_opt.step()
        for name, p, r in zip(names[:3], params[:3], ref[:3], strict=True):
            errors[name] = max(errors[name], _rel_err(p, r, rank))
    return {
        "errors": errors,
        "seconds": time.perf_counter() - started,
        "frozen_untouched": torch.equal(params[3].to_local(), before_frozen) and params[3] not in opt.state,
        "steps": [opt.state[p]["step"] for p in params[:3]],
    }


def _checkpoint(rank: int, mesh: Any, ckpt_dir: Path, placement: str = "replicated") -> dict[str, Any]:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    names = ("wide", "tall", "tall_uneven", "tiny")
    shapes = [SHAPES[n] for n in names]
    grads = _full_grads(shapes, 7, seed=3)

    def run(model: _Matrices, opt: ShardedPeriodicRowMuon, step_grads: list[list[Tensor]]) -> None:
        for gs in step_grads:
            for p, g in zip(model.weights, gs, strict=True):
                p.grad = _shard_of(g, mesh)
            opt.step()

    def fresh() -> tuple[_Matrices, ShardedPeriodicRowMuon]:
        model, _ = _sharded_model(shapes, mesh)
        return model, ShardedPeriodicRowMuon(list(model.weights), lr=0.02, refresh_every=3, ns_dtype=FP32,
                                             ns_placement=placement)

    straight, straight_opt = fresh()
    run(straight, straight_opt, grads)

    first, first_opt = fresh()
    run(first, first_opt, grads[:4])  # counters at 4: mid-period
    state: dict[str, Any] = dict(zip(("model", "optim"), get_state_dict(first, first_opt), strict=True))
    buffer_types = sorted({type(v["momentum_buffer"]).__name__ for v in state["optim"]["state"].values()})
    dcp.save(state, checkpoint_id=str(ckpt_dir))

    out: dict[str, Any] = {"buffer_types": buffer_types}
    # A fresh optimizer (DCP's loader first runs one zero-lr step on it to create its state), and one that has
    # already stepped elsewhere.
    for case in ("fresh", "stepped"):
        resumed, resumed_opt = fresh()
        if case == "stepped":
            run(resumed, resumed_opt, [[torch.randn(*s) for s in shapes]])
        state = dict(zip(("model", "optim"), get_state_dict(resumed, resumed_opt), strict=True))
        dcp.load(state, checkpoint_id=str(ckpt_dir))
        set_state_dict(resumed, resumed_opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        steps_after_load = [resumed_opt.state[p]["step"] for p in resumed.weights]
        run(resumed, resumed_opt, grads[4:])
        identical = all(
            torch.equal(a.to_local(), b.to_local()) for a, b in zip(straight.weights, resumed.weights, strict=True)
        )
        buffers = all(
            torch.equal(
                straight_opt.state[a]["momentum_buffer"].to_local(),
                resumed_opt.state[b]["momentum_buffer"].to_local(),
            )
            for a, b in zip(straight.weights, resumed.weights, strict=True)
        )
        out[case] = {"identical": identical, "buffers": buffers, "steps_after_load": steps_after_load}
    return out


def _end_to_end(rank: int, mesh: Any, placement: str = "replicated") -> dict[str, Any]:
    """A real forward/backward through per-layer fully_shard, against the same model unsharded on the whole batch."""
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 40, bias=False), nn.Tanh(), nn.Linear(40, 7, bias=False))  # tall, wide
    ref = nn.Sequential(nn.Linear(24, 40, bias=False), nn.Tanh(), nn.Linear(40, 7, bias=False))
    ref.load_state_dict(model.state_dict())
    fully_shard(model[0], mesh=mesh)
    fully_shard(model[2], mesh=mesh)
    fully_shard(model, mesh=mesh)
    gen = torch.Generator().manual_seed(5)
    x, y = torch.randn(2 * 16, 24, generator=gen), torch.randn(2 * 16, 7, generator=gen)
    mine = slice(rank * 16, (rank + 1) * 16)  # each rank its half; FSDP2 averages the gradients
    opt = ShardedPeriodicRowMuon(model.parameters(), lr=0.05, refresh_every=3, ns_dtype=FP32, ns_placement=placement)
    ref_opt = PeriodicRowMuon(ref.parameters(), lr=0.05, refresh_every=3, ns_dtype=FP32)
    losses = []
    for _ in range(6):
        loss = (model(x[mine]) - y[mine]).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_loss = (ref(x) - y).pow(2).mean()
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        losses.append(ref_loss.item())
    errors = [_rel_err(p, r, rank) for p, r in zip(model.parameters(), ref.parameters(), strict=True)]
    return {"losses": losses, "errors": errors}


def _refusals(rank: int, mesh: Any) -> dict[str, Any]:
    from torch.distributed.tensor import Shard, distribute_tensor

    out = {}
    p = nn.Parameter(_shard_of(torch.randn(8, 4), mesh))
    try:
        PeriodicRowMuon([p])
        out["plain"] = "accepted"
    except ValueError as e:
        out["plain"] = str(e)
    q = nn.Parameter(distribute_tensor(torch.randn(8, 4), mesh, [Shard(1)], src_data_rank=None))
    try:
        ShardedPeriodicRowMuon([q])
        out["shard1"] = "accepted"
    except ValueError as e:
        out["shard1"] = str(e)
    # The factory picks the sharded class for FSDP2 parameters (the muon arm as its all-gather-every-step path).
    from torch.distributed.fsdp import fully_shard

    from trials.optim import build_optimizer

    model = nn.Module()
    model.blocks = nn.ModuleList([nn.Linear(8, 16), nn.Linear(16, 8)])
    model.head = nn.Linear(8, 2)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    built = {
        name: build_optimizer(model, {"name": name, "ns_dtype": "float32"}).matrix for name in ("periodic", "muon")
    }
    out["factory"] = {name: (type(o).__name__, o.param_groups[0]["refresh_every"]) for name, o in built.items()}
    return out


def _worker(rank: int, world: int, out_dir: Path) -> None:
    torch.set_num_threads(1)  # two ranks share two cores
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group(
        "gloo",
        init_method=f"file://{out_dir / 'rendezvous'}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=GLOO_TIMEOUT_S),
    )
    mesh = init_device_mesh("cpu", (world,))
    all_names = tuple(SHAPES)
    bf16 = torch.bfloat16
    # Both placements, K = 1 and 3, fp32 and bf16 NS5, every shape (tall, wide, uneven, empty shards), and owners
    # holding several same-shape matrices; K = 1 in bf16 against torch.optim.Muon itself.
    conformance: dict[str, Callable[[], dict[str, Any]]] = {}
    for placement, prefix in (("replicated", ""), ("distributed", "dist_")):
        conformance |= {
            f"{prefix}periodic_fp32": lambda p=placement: _equality(rank, mesh, k=3, steps=7, ns_dtype=FP32,
                                                                    names=all_names, placement=p),
            f"{prefix}vanilla_fp32": lambda p=placement: _equality(rank, mesh, k=1, steps=3, ns_dtype=FP32,
                                                                   names=all_names, placement=p),
            f"{prefix}periodic_bf16_k3": lambda p=placement: _equality(rank, mesh, k=3, steps=4, ns_dtype=bf16,
                                                                       names=all_names, placement=p),
            f"{prefix}vanilla_bf16_torch": lambda p=placement: _equality(rank, mesh, k=1, steps=3, ns_dtype=bf16,
                                                                         names=all_names, placement=p,
                                                                         reference="muon"),
            f"{prefix}batched_fp32": lambda p=placement: _equality(rank, mesh, k=3, steps=4, ns_dtype=FP32,
                                                                   shapes=BATCHED, placement=p),
            f"{prefix}batched_bf16": lambda p=placement: _equality(rank, mesh, k=1, steps=2, ns_dtype=bf16,
                                                                   shapes=BATCHED, placement=p),
            f"{prefix}two_matrices": lambda p=placement: _equality(rank, mesh, k=3, steps=4, ns_dtype=bf16,
                                                                   names=TWO, placement=p),
        }
    # bf16 and fp32 parameters in one optimizer with fp32 NS5: U goes out in each parameter's dtype, so the
    # distributed placement runs one pair of all-to-alls per wire dtype.
    mixed: dict[str, Any] = dict(k=3, steps=4, ns_dtype=FP32, names=("wide", "tall_uneven", "square", "tall"),
                                 dtypes=[FP32, bf16, bf16, FP32])
    conformance["mixed_dtypes"] = lambda: _equality(rank, mesh, **mixed)
    conformance["dist_mixed_dtypes"] = lambda: _equality(rank, mesh, placement="distributed", **mixed)
    conformance["placement_bytes"] = lambda: _placement_bytes(rank, mesh)
    if world != WORLD:
        scenarios = conformance
    else:
        scenarios = {**conformance, **_two_rank_scenarios(rank, mesh, out_dir)}
    results: dict[str, Any] = {}
    for name, scenario in scenarios.items():
        started = time.perf_counter()
        try:
            results[name] = scenario()
        except Exception:
            results[name] = {"error": traceback.format_exc()}
        results[name]["wall_s"] = time.perf_counter() - started
        torch.save(results, out_dir / f"rank{rank}.pt")  # after each scenario: a later hang keeps the earlier
    # Tear-down: both ranks meet before the group goes, then leave without the interpreter's shutdown. Without
    # them rank 1 sometimes exited with "terminate called without an active exception" after every scenario had
    # finished and been saved (in one fresh-clone CI run and 1 of 9 local runs): gloo's threads racing process exit.
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _two_rank_scenarios(rank: int, mesh: Any, out_dir: Path) -> dict[str, Callable[[], dict[str, Any]]]:
    all_names = tuple(SHAPES)
    return {
        "periodic_bf16": lambda: _equality(
            rank,
            mesh,
            k=2,
            steps=4,
            ns_dtype=torch.bfloat16,
            names=("wide", "tall_uneven", "tiny", "tall_tiny"),
            nesterov=False,
            adjust_lr_fn="match_rms_adamw",
        ),
        # The streamed row-norm step in chunks of a row or two, and the compiled kernel (tall local shards take
        # the two-sweep path around the all-reduce), against the unsharded, unfused reference; and the unfused
        # kernel sharded.
        "streamed_chunks": lambda: _equality(rank, mesh, k=3, steps=7, ns_dtype=FP32, names=all_names,
                                             sharded_kw={"stream_chunk": 24, "rownorm_kernel": "streamed"},
                                             ref_kw={"rownorm_kernel": "unfused"}),
        "native": lambda: _equality(rank, mesh, k=3, steps=7, ns_dtype=FP32, names=all_names,
                                    sharded_kw={"rownorm_kernel": "native"}, ref_kw={"rownorm_kernel": "unfused"}),
        "unfused": lambda: _equality(rank, mesh, k=3, steps=7, ns_dtype=FP32, names=all_names,
                                     rownorm_kernel="unfused"),
        "wide_only": lambda: _equality(rank, mesh, k=3, steps=6, ns_dtype=FP32, names=WIDE_ONLY),
        "dist_wide_only": lambda: _equality(rank, mesh, k=3, steps=6, ns_dtype=FP32, names=WIDE_ONLY,
                                            placement="distributed"),
        "bytes": lambda: _bytes(rank, mesh),
        "refusals": lambda: _refusals(rank, mesh),
        "end_to_end": lambda: _end_to_end(rank, mesh),
        "dist_end_to_end": lambda: _end_to_end(rank, mesh, "distributed"),
        "checkpoint": lambda: _checkpoint(rank, mesh, out_dir / "ckpt"),
        "dist_checkpoint": lambda: _checkpoint(rank, mesh, out_dir / "dist_ckpt", "distributed"),
        # Last: if it ever desynchronised the ranks, it could not spoil the scenarios before it.
        "missing_grad": lambda: _missing_grad(rank, mesh),
        "dist_missing_grad": lambda: _missing_grad(rank, mesh, "distributed"),
    }


# === the pytest side ============================================================================================


@pytest.fixture(scope="module")
def ranks() -> Iterator[list[dict[str, Any]]]:
    yield from _spawn(WORLD)


@pytest.fixture(scope="module")
def ranks4() -> Iterator[list[dict[str, Any]]]:
    yield from _spawn(WORLD4)


@pytest.fixture(scope="module", params=[WORLD, WORLD4], ids=lambda w: f"{w}ranks")
def any_ranks(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """The conformance scenarios' results on 2 and on 4 ranks."""
    return request.getfixturevalue("ranks" if request.param == WORLD else "ranks4")


def _spawn(world: int) -> Iterator[list[dict[str, Any]]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
        logs = [open(out / f"rank{r}.log", "w") for r in range(world)]  # closed below, after the ranks end
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, str(r), str(world), str(out)],
                stdout=logs[r],
                stderr=subprocess.STDOUT,
                env=env,
            )
            for r in range(world)
        ]
        deadline = time.monotonic() + DEADLINE_S
        try:
            for p in procs:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        hung = [r for r, p in enumerate(procs) if p.poll() is None]
        for r in hung:
            procs[r].kill()
            procs[r].wait()
        for log in logs:
            log.close()
        results = []
        for r in range(world):
            path = out / f"rank{r}.pt"
            results.append(torch.load(path, weights_only=False) if path.exists() else {})
        if hung:
            tails = "\n".join((out / f"rank{r}.log").read_text()[-2000:] for r in range(world))
            done = sorted(results[0])
            pytest.fail(f"ranks {hung} still running after {DEADLINE_S} s (a hang); finished: {done}\n{tails}")
        failed = [r for r, p in enumerate(procs) if p.returncode != 0]
        if failed:
            tails = "\n".join((out / f"rank{r}.log").read_text()[-3000:] for r in failed)
            pytest.fail(f"ranks {failed} exited with an error:\n{tails}")
        yield results


def _scenario(ranks: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    per_rank = [r.get(name, {"error": "not run"}) for r in ranks]
    for rank, res in enumerate(per_rank):
        if "error" in res:
            pytest.fail(f"scenario {name!r} failed on rank {rank}:\n{res['error']}")
    return per_rank


def test_fully_shard_makes_shard0_dtensors_with_torch_chunk_rows(ranks: list[dict[str, Any]]) -> None:
    res = _scenario(ranks, "periodic_fp32")
    assert all(r["placements"] == {"(Shard(dim=0),)"} for r in res)
    assert all(r["world_size"] == WORLD for r in res)
    for name, (rows, _) in SHAPES.items():
        chunk = -(-rows // WORLD)
        assert [r["local_rows"][name] for r in res] == [min(chunk, rows), rows - min(chunk, rows)]
    assert res[1]["local_rows"]["tiny"] == 0  # fewer rows than ranks: an empty shard


@pytest.mark.parametrize("scenario", ["periodic_fp32", "vanilla_fp32", "periodic_bf16", "streamed_chunks", "native",
                                      "unfused"])
def test_sharded_equals_unsharded_on_every_shape(ranks: list[dict[str, Any]], scenario: str) -> None:
    kernels = {"streamed_chunks": ["streamed"], "native": ["native"], "unfused": ["unfused"], "vanilla_fp32": []}
    for rank, res in enumerate(_scenario(ranks, scenario)):
        if scenario in kernels:
            assert res["kernels"] == kernels[scenario], (rank, res["kernels"])
        worst = max(res["errors"].values())
        assert worst <= 1e-5, (rank, res["errors"])
        assert res["buffers_equal"], rank  # the momentum itself is bit-identical


CONFORMANCE = ["periodic_fp32", "vanilla_fp32", "periodic_bf16_k3", "vanilla_bf16_torch", "batched_fp32",
               "batched_bf16", "mixed_dtypes", "two_matrices"]


@pytest.mark.parametrize("placement", ["replicated", "distributed"])
@pytest.mark.parametrize("scenario", CONFORMANCE)
def test_both_placements_equal_the_unsharded_optimizer(any_ranks: list[dict[str, Any]], placement: str,
                                                       scenario: str) -> None:
    """2 and 4 ranks; K = 1 and 3; fp32 and bf16 NS5 (K = 1 bf16 against torch.optim.Muon itself); tall, wide,
    uneven and empty shards; owners batching same-shape matrices; owners with several slots of the distributed
    pipeline and owners of nothing (`test_the_pipeline_slots_of_the_conformance_scenarios`). Identical gradients
    on both sides (NS5 in bf16 amplifies the smallest input difference), so everything but the tall matrices'
    cross-rank column sums is bitwise: 1e-5 relative is far below one bf16 rounding (4e-3)."""
    res = _scenario(any_ranks, ("dist_" if placement == "distributed" else "") + scenario)
    for rank, r in enumerate(res):
        assert max(r["errors"].values()) <= 1e-5, (rank, r["errors"])
        assert r["buffers_equal"], rank
    k = 3 if scenario.startswith(("periodic", "batched_fp32", "mixed", "two")) else 1
    steps = len(res[0]["per_step"])
    refreshes = len(range(0, steps, k)) * len(res[0]["shapes"])
    if placement == "distributed":
        # NS5 ran once per matrix and refresh, across all ranks together; every rank orthogonalised some, as long
        # as there were matrices enough.
        assert sum(r["ns5_calls"] for r in res) == refreshes
        assert sum(r["ns5_calls"] > 0 for r in res) == min(len(res), len(res[0]["shapes"]))
    else:
        assert all(r["ns5_calls"] == refreshes for r in res)  # every rank repeats every matrix
    if scenario == "mixed_dtypes" and placement == "distributed":
        # One exchange per wire dtype (the fp32 and the bf16 parameters), a pair of all-to-alls per slot of each,
        # on refresh steps only: on 2 ranks the busiest owner has two calls of each dtype (3 slots in all, one
        # owner's fp32 part empty), on 4 ranks every rank owns one matrix.
        fp32, bf16 = [0, 3], [1, 2]  # the parameters' dtypes: FP32, bf16, bf16, FP32
        per_refresh = _a2a_per_refresh(res[0]["shapes"], len(res), [fp32, bf16])
        assert per_refresh == {2: 6, 4: 4}[len(res)]
        assert [s["calls"]["all_to_all"] for s in res[0]["per_step"]] == [per_refresh, 0, 0, per_refresh]
    if scenario.startswith("batched") and placement == "distributed":
        # 5 + 5 same-shape matrices over W ranks: some owner holds several and runs them in one call.
        assert any(r["ns5_batches"] < r["ns5_calls"] for r in res)


def _a2a_bytes(shapes: list[tuple[int, int]], world: int, rank: int, wire: int, back: int) -> int:
    """The module docstring's exact formula: what `rank` sends in one distributed refresh. To each owner its rows
    of U (in the wire dtype); as owner, every other rank's rows of the result (in the NS5 dtype)."""
    owners = ns_owners(shapes, world)
    sent = 0
    for (m, n), owner in zip(shapes, owners, strict=True):
        chunk = -(-m // world)
        mine = min(m, (rank + 1) * chunk) - min(m, rank * chunk)
        sent += (m - mine) * n * back if owner == rank else mine * n * wire
    return sent


def _a2a_per_refresh(shapes: list[tuple[int, int]], world: int, exchanges: list[list[int]] | None = None) -> int:
    """All-to-alls one distributed refresh issues: a pair per slot (`pipeline_slots`: as many as the busiest owner
    has NS5 calls) of each exchange (`exchanges`: the matrices of each wire dtype; one exchange by default). Every
    side here is at most CPU_BATCH_MAX_SIDE, so an owner's same-shape matrices are one call."""
    owners = ns_owners(shapes, world)
    calls = 0
    for members in exchanges or [list(range(len(shapes)))]:
        part = [shapes[j] for j in members]
        calls += 2 * len(pipeline_slots([owners[j] for j in members], part, [m * n for m, n in part], world))
    return calls


def test_distributed_refresh_is_two_all_to_alls_per_slot_and_row_norm_steps_are_unchanged(
    any_ranks: list[dict[str, Any]],
) -> None:
    tall_cols = sum(c for r, c in SHAPES.values() if r > c)
    for r in _scenario(any_ranks, "dist_periodic_fp32"):
        world = r["world_size"]
        # The seven SHAPES: on 2 ranks 4 slots (owners with 4 and 3 calls), on 4 ranks 4 (one owner with 4).
        per_refresh = _a2a_per_refresh(r["shapes"], world)
        assert per_refresh == 8
        for t, step in enumerate(r["per_step"]):
            if t % 3:  # exactly the replicated placement's non-refresh step
                assert step["seq_delta"] == 1 and step["counted"] == {"all_reduce": 1}
                assert step["bytes"]["all_reduce"] == logical_bytes_sent("all_reduce", 4 * tall_cols, world)
            else:
                assert step["seq_delta"] == per_refresh and step["counted"] == {"all_to_all_single": per_refresh}
                assert step["calls"] == {"all_gather": 0, "all_to_all": per_refresh, "all_reduce": 0}
                assert step["bytes"]["all_to_all"] == _a2a_bytes(r["shapes"], world, r["rank"], 4, 4)


def test_distributed_bytes_per_rank_follow_the_formula(any_ranks: list[dict[str, Any]]) -> None:
    res = _scenario(any_ranks, "placement_bytes")
    shapes, world = res[0]["shapes"], len(res)
    for k, dtype, size in [(1, "torch.float32", 4), (3, "torch.float32", 4), (1, "torch.bfloat16", 2),
                           (3, "torch.bfloat16", 2)]:
        matrix_bytes = size * sum(m * n for m, n in shapes)
        balanced = 2 * (world - 1) / world**2 * matrix_bytes  # the docstring's formula with balanced owners
        gathered = size * sum(world * -(-m // world) * n for m, n in shapes)
        for r in res:
            dist_steps, rep_steps = r["distributed", k, dtype], r["replicated", k, dtype]
            for t in range(0, 6, k):
                counted = dist_steps[t]["all_to_all"]
                assert counted == _a2a_bytes(shapes, world, r["rank"], size, size)
                assert counted == pytest.approx(balanced, rel=0.05)
                assert dist_steps[t]["all_gather"] == 0
                assert rep_steps[t]["all_gather"] == logical_bytes_sent("all_gather", gathered, world)
                assert rep_steps[t]["all_to_all"] == 0
            for t in (t for t in range(6) if t % k):  # row-norm steps: the same bytes under both placements
                assert dist_steps[t] == rep_steps[t] and dist_steps[t]["all_to_all"] == 0
        mean = sum(r["distributed", k, dtype][0]["all_to_all"] for r in res) / world
        assert mean == pytest.approx(balanced, rel=0.01)
        if world == 2:  # at W = 2 both placements send half of every matrix, up to the all-gather's padding
            assert res[0]["distributed", k, dtype][0]["all_to_all"] == pytest.approx(
                logical_bytes_sent("all_gather", gathered, world), rel=0.02)


def test_distributed_wide_non_refresh_steps_touch_no_collective(ranks: list[dict[str, Any]]) -> None:
    per_refresh = _a2a_per_refresh([SHAPES[n] for n in WIDE_ONLY], WORLD)
    assert per_refresh == 6  # 3 slots: rank 0 owns 3 of the 4 matrices
    for res in _scenario(ranks, "dist_wide_only"):
        for t, step in enumerate(res["per_step"]):
            if t % 3:
                assert step["seq_delta"] == 0 and step["counted"] == {}, (t, step)
            else:
                assert step["seq_delta"] == per_refresh and step["counted"] == {"all_to_all_single": per_refresh}


def _gathers_per_refresh(names: tuple[str, ...], bucket_bytes: int = 16 * 1024) -> int:
    """All-gathers one refresh step issues: the matrices in order, packed into buckets of at most `bucket_bytes`
    gathered fp32 bytes (WORLD shards of ceil(rows / WORLD) rows each); a matrix that does not fit starts a new one.
    All seven SHAPES give 3 (10,240 | 15,360 | 9,216 + 2,888 + 960 + 96 + 32 bytes); WIDE_ONLY gives 2."""
    buckets, size = 0, 0
    for name in names:
        rows, cols = SHAPES[name]
        nbytes = WORLD * -(-rows // WORLD) * cols * 4
        if buckets and size + nbytes <= bucket_bytes:
            size += nbytes
        else:
            buckets, size = buckets + 1, nbytes
    return buckets


def test_wide_non_refresh_steps_touch_no_collective(ranks: list[dict[str, Any]]) -> None:
    for res in _scenario(ranks, "wide_only"):
        for t, step in enumerate(res["per_step"]):
            if t % 3:
                assert step["seq_delta"] == 0 and step["counted"] == {}, (t, step)
                assert step["calls"] == {"all_gather": 0, "all_to_all": 0, "all_reduce": 0}
                assert sum(step["bytes"].values()) == 0
            else:
                assert step["seq_delta"] == step["calls"]["all_gather"] == _gathers_per_refresh(WIDE_ONLY) == 2
                assert step["calls"]["all_reduce"] == 0


def test_tall_matrices_share_one_all_reduce_per_non_refresh_step(ranks: list[dict[str, Any]]) -> None:
    tall_cols = sum(c for r, c in SHAPES.values() if r > c)
    for res in [*_scenario(ranks, "periodic_fp32"), *_scenario(ranks, "streamed_chunks"), *_scenario(ranks, "native")]:
        for t, step in enumerate(res["per_step"]):
            if t % 3:
                assert step["seq_delta"] == 1 and step["counted"] == {"all_reduce": 1}
                assert step["calls"] == {"all_gather": 0, "all_to_all": 0, "all_reduce": 1}
                assert step["bytes"]["all_reduce"] == logical_bytes_sent("all_reduce", 4 * tall_cols, WORLD)
            else:
                assert step["seq_delta"] == step["calls"]["all_gather"] == _gathers_per_refresh(tuple(SHAPES)) == 3
                assert step["calls"]["all_reduce"] == 0
        n = len(SHAPES)
        assert (res["ns5_calls"], res["rownorm_calls"]) == (3 * n, 4 * n)


def test_vanilla_gathers_every_step(ranks: list[dict[str, Any]]) -> None:
    for res in _scenario(ranks, "vanilla_fp32"):
        # K=1: every step is a refresh, gathering every matrix in its 3 buckets and reducing nothing.
        assert [s["calls"] for s in res["per_step"]] == [{"all_gather": 3, "all_to_all": 0, "all_reduce": 0}] * 3
        assert all(s["seq_delta"] == 3 for s in res["per_step"])


def test_k3_sends_one_third_of_vanilla_up_to_the_column_norm_scalars(ranks: list[dict[str, Any]]) -> None:
    for res in _scenario(ranks, "bytes"):
        shapes = res["shapes"]
        # Every rank's shard padded to ceil(m / W) rows, fp32: the gathered bytes of one refresh.
        gathered = sum(WORLD * -(-m // WORLD) * n * 4 for m, n in shapes)
        column_sums = sum(4 * n for m, n in shapes if m > n)
        vanilla = [sum(s.values()) for s in res["K1"]["per_step"]]
        periodic = [sum(s.values()) for s in res["K3"]["per_step"]]
        assert vanilla == [logical_bytes_sent("all_gather", gathered, WORLD)] * 6
        scalars = logical_bytes_sent("all_reduce", column_sums, WORLD)
        assert periodic == [vanilla[0], scalars, scalars] * 2
        ratio = sum(periodic) / sum(vanilla)
        assert ratio == pytest.approx(1 / 3 + 2 * scalars / (3 * vanilla[0]), rel=1e-12)
        # For MMDiT blocks (3 tall matrices of n = d columns per 18 d^2 weights) the excess is 2 / (9 d) at W = 2:
        # 0.014 at this test's d = 16, 0.0004 at d = 512, 0.00007 at FLUX's d = 3072.
        d = shapes[1][0]
        assert ratio == pytest.approx(1 / 3 + 2 / (9 * d), rel=1e-12)
        assert res["K3"]["metrics"]["comm/mean_bytes_per_step"] == pytest.approx(sum(periodic) / 6)
        bf16 = res["bf16"]
        assert bf16[0]["all_gather"] == vanilla[0] / 2 and bf16[1]["all_reduce"] == scalars


@pytest.mark.parametrize("scenario", ["missing_grad", "dist_missing_grad"])
def test_a_parameter_without_grad_on_one_rank_neither_hangs_nor_diverges(ranks: list[dict[str, Any]],
                                                                         scenario: str) -> None:
    res = _scenario(ranks, scenario)
    for rank, r in enumerate(res):
        assert max(r["errors"].values()) <= 1e-5, (rank, r["errors"])
        assert r["steps"] == [5, 5, 5]  # every rank advanced every counter: the periods stay aligned
        assert r["frozen_untouched"]
        assert r["seconds"] < GLOO_TIMEOUT_S


@pytest.mark.parametrize("scenario", ["checkpoint", "dist_checkpoint"])
def test_checkpoint_resumes_identically_under_sharding(ranks: list[dict[str, Any]], scenario: str) -> None:
    for rank, r in enumerate(_scenario(ranks, scenario)):
        assert r["buffer_types"] == ["DTensor"], rank  # saved sharded, not gathered
        for case in ("fresh", "stepped"):
            assert r[case]["steps_after_load"] == [4, 4, 4, 4], (rank, case)
            assert r[case]["identical"] and r[case]["buffers"], (rank, case)


@pytest.mark.parametrize("scenario", ["end_to_end", "dist_end_to_end"])
def test_real_fully_shard_training_matches_the_unsharded_model(ranks: list[dict[str, Any]], scenario: str) -> None:
    for r in _scenario(ranks, scenario):
        assert r["losses"][-1] < 0.8 * r["losses"][0]
        # Two backward passes (FSDP2 averages per-rank gradients): equal up to reduction order, not bit for bit.
        assert max(r["errors"]) < 1e-4, r["errors"]


def test_unsharded_optimizer_refuses_dtensors_and_shard1_is_refused(ranks: list[dict[str, Any]]) -> None:
    for r in _scenario(ranks, "refusals"):
        assert "ShardedPeriodicRowMuon" in r["plain"]
        assert "sharded on dim 0" in r["shard1"]
        assert r["factory"] == {"periodic": ("ShardedPeriodicRowMuon", 3), "muon": ("ShardedPeriodicRowMuon", 1)}


# --- in-process: plain tensors and the accounting ----------------------------------------------------------------


def test_plain_tensors_follow_periodic_row_muon_bit_for_bit() -> None:
    shapes = list(SHAPES.values())
    gen = torch.Generator().manual_seed(1)
    init = [torch.randn(*s, generator=gen) * 0.1 for s in shapes]
    a = [t.clone().requires_grad_() for t in init]
    b = [t.clone().requires_grad_() for t in init]
    opt_a = ShardedPeriodicRowMuon(a, lr=0.02, refresh_every=3, ns_dtype=FP32)
    opt_b = PeriodicRowMuon(b, lr=0.02, refresh_every=3, ns_dtype=FP32)
    for t, step_grads in enumerate(_full_grads(shapes, 7)):
        for i, (pa, pb, g) in enumerate(zip(a, b, step_grads, strict=True)):
            skip = i == 0 and t == 2  # a missing grad skips a plain tensor, as in PeriodicRowMuon
            pa.grad, pb.grad = (None, None) if skip else (g.clone(), g.clone())
        opt_a.step()
        opt_b.step()
    for pa, pb in zip(a, b, strict=True):
        assert torch.equal(pa, pb)
    assert opt_a.world_size == 1 and opt_a.comm_stats.total_bytes_sent == 0.0
    assert (opt_a.ns5_calls, opt_a.rownorm_calls) == (opt_b.ns5_calls, opt_b.rownorm_calls)


def test_logical_bytes_follow_the_bus_convention() -> None:
    assert logical_bytes_sent("all_gather", 1000, 4) == 750.0
    assert logical_bytes_sent("all_reduce", 1000, 4) == 1500.0
    assert logical_bytes_sent("all_gather", 1000, 1) == 0.0
    assert logical_bytes_sent("all_reduce", 8, 2) == 8.0  # at W = 2: the rank's own input buffer
    assert logical_bytes_sent("all_to_all", 1000, 4) == 1000.0  # what it sends to the others, no ring factor
    assert logical_bytes_sent("all_to_all", 1000, 1) == 0.0
    with pytest.raises(ValueError, match="allowed"):
        logical_bytes_sent("broadcast", 8, 2)
    stats = CommStats(world_size=2)
    stats.begin_step()
    stats.record("all_gather", 400)
    stats.record("all_gather", 200)
    stats.record("all_reduce", 16)
    stats.begin_step()
    stats.record("all_reduce", 16)
    stats.record("all_to_all", 100)
    assert stats.step_bytes == {"all_gather": 0.0, "all_to_all": 100.0, "all_reduce": 16.0}
    assert stats.step_calls["all_reduce"] == 1
    assert stats.total_bytes == {"all_gather": 300.0, "all_to_all": 100.0, "all_reduce": 32.0}
    assert stats.total_calls["all_gather"] == 2
    metrics = stats.as_metrics()
    assert metrics["comm/bytes_total"] == 432.0 and metrics["comm/mean_bytes_per_step"] == 216.0
    assert metrics["comm/all_to_all_bytes_per_step"] == 100.0
    stats.reset()
    assert stats.total_bytes_sent == 0.0 and stats.steps == 0


def test_ns_placement_outside_its_two_values_is_refused() -> None:
    bad: Any
    allowed = r"is not supported; allowed: \['replicated', 'distributed'\]"
    for bad in ("owner", "Distributed", None, 1):
        with pytest.raises(ValueError, match=rf"ns_placement=.* {allowed}"):
            ShardedPeriodicRowMuon([torch.zeros(3, 3, requires_grad=True)], ns_placement=bad)
    assert ShardedPeriodicRowMuon([torch.zeros(3, 3, requires_grad=True)]).ns_placement == "replicated"


def test_owners_balance_the_owners_modelled_cost() -> None:
    # NS5 FLOPs: 5 * (4 s^2 l + 2 s^3) with s = min, l = max.
    assert ns_flops(512, 512) == 5 * 6 * 512**3
    assert ns_flops(3 * 512, 512) == ns_flops(512, 3 * 512) == 5 * (4 * 3 + 2) * 512**3
    # The owner's cost adds per-element terms: a tall matrix costs more than the wide one of the same FLOPs.
    assert OWNER_ELEMENT_COST > 0 and TALL_ELEMENT_COST > 0
    assert ns_cost(512, 2048) == ns_flops(512, 2048) + OWNER_ELEMENT_COST * 512 * 2048
    assert ns_cost(2048, 512) - ns_cost(512, 2048) == pytest.approx(TALL_ELEMENT_COST * 2048 * 512)
    assert ns_cost(512, 512, steps=3) == ns_flops(512, 512, 3) + OWNER_ELEMENT_COST * 512 * 512
    # benchmarks/ns_placement.py's matrices: 2 MMDiT blocks at width 512, 12 tall, 4 square, 4 wide. On FLOPs alone
    # a tall matrix ties with its wide mirror and ties go to the lower index, so rank 0 got 8 of the 12 tall ones
    # (measured 210 against 193 ms a refresh); on the owner's cost each rank owns 6: each rank one stream's five
    # matrices of each block, the same work on both.
    shapes = _mmdit_shapes(512) * 2
    by_flops = assign_owners([ns_flops(m, n) for m, n in shapes], 2)
    owners = ns_owners(shapes, 2)
    for chosen, tall_per_rank in [(by_flops, [8, 4]), (owners, [6, 6])]:
        assert [sum(m > n and o == r for (m, n), o in zip(shapes, chosen, strict=True)) for r in range(2)] == \
            tall_per_rank
    assert owners == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1] * 2
    # LPT's bound: the modelled loads differ by at most one matrix's cost, on 2 and 4 ranks.
    costs = [ns_cost(m, n) for m, n in shapes]
    for world in (2, 4):
        chosen = ns_owners(shapes, world)
        loads = [sum(c for c, o in zip(costs, chosen, strict=True) if o == r) for r in range(world)]
        assert max(loads) - min(loads) <= max(costs)
        assert max(loads) / (sum(costs) / world) <= 1.1
    # Per-matrix NS5 steps: fewer steps, a smaller cost (one step of 512 x 512 is 0.8, five of 400 x 400 1.9 GFLOP).
    assert ns_owners([(512, 512), (400, 400)], 2) == [0, 1]
    assert ns_owners([(512, 512), (400, 400)], 2, steps=[1, 5]) == [1, 0]
    # Equal jobs go round-robin; the largest first to the least-loaded rank, ties to the lower index and rank.
    assert assign_owners([1.0] * 5, 2) == [0, 1, 0, 1, 0]
    assert assign_owners([1.0, 5.0, 3.0, 3.0], 2) == [0, 0, 1, 1]
    assert assign_owners([2.0, 1.0], 4) == [0, 1]


def test_pipeline_slots_order_each_owners_calls_and_cover_every_matrix_once() -> None:
    # Rank 0 owns calls of 10, 40 (two matrices of one key), 30 and 5 elements; rank 1 one of 7; rank 2 none.
    owners = [0, 0, 0, 0, 1, 0]
    keys = ["a", "b", "b", "c", "d", "e"]
    sizes = [10, 20, 20, 30, 7, 5]
    slots = pipeline_slots(owners, keys, sizes, 3)
    # Smallest first (the only transfer waited for before NS5), then largest first (the last return is small).
    assert slots == [[[5], [4], []], [[1, 2], [], []], [[3], [], []], [[0], [], []]]
    assert pipeline_slots([], [], [], 2) == []
    # The same inputs give the same slots (every rank computes them alone).
    assert pipeline_slots(owners, keys, sizes, 3) == slots


def test_the_pipeline_slots_of_the_conformance_scenarios() -> None:
    """What the distributed conformance scenarios exercise: several slots with one owner's calls in each, owners
    whose part of a slot is empty, owners of nothing, and a batched call inside a slot."""

    def plan(shapes: list[tuple[int, int]], world: int) -> list[list[list[int]]]:
        return pipeline_slots(ns_owners(shapes, world), shapes, [m * n for m, n in shapes], world)

    seven = list(SHAPES.values())
    assert plan(seven, 2) == [[[6], [3]], [[1], [0]], [[4], [2]], [[5], []]]
    assert plan(seven, 4) == [[[1], [2], [0], [6]], [[], [], [], [3]], [[], [], [], [4]], [[], [], [], [5]]]
    assert plan(BATCHED, 2) == [[[10], [5, 6, 7, 9]], [[0, 2, 4], [1, 3]], [[8], []]]
    assert plan([SHAPES[n] for n in TWO], 4) == [[[0], [1], [], []]]


def test_batched_newton_schulz_equals_the_2d_routine() -> None:
    from trials.optim.functional import newton_schulz5

    gen = torch.Generator().manual_seed(3)
    for shape in [(3, 32, 80), (4, 37, 19)]:
        g = torch.randn(*shape, generator=gen)
        before = g.clone()
        for dtype in (FP32, torch.bfloat16):
            batched = newton_schulz5_batched(g, (3.4445, -4.7750, 2.0315), 5, 1e-7, dtype)
            one_by_one = torch.stack([newton_schulz5(m, dtype=dtype) for m in g])
            # Bit for bit on the CPUs measured (one thread); to rounding in any case.
            assert (batched.float() - one_by_one.float()).abs().max() <= (1e-6 if dtype == FP32 else 1e-2)
        assert torch.equal(g, before)


def test_bad_bucket_size_is_refused() -> None:
    bad: Any
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="bucket_bytes must be an int >= 1"):
            ShardedPeriodicRowMuon([torch.zeros(3, 3, requires_grad=True)], bucket_bytes=bad)


if __name__ == "__main__":  # one rank, started by the `ranks` fixture
    _worker(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))


def test_the_readme_fsdp2_example_runs_under_torchrun() -> None:
    """examples/train_fsdp2.py, as the README shows it: two gloo ranks, loss falls, bytes only on refresh steps."""
    import re
    import subprocess

    example = Path(__file__).resolve().parents[2] / "examples" / "train_fsdp2.py"
    torchrun = Path(sys.executable).with_name("torchrun")
    out = subprocess.run(
        [str(torchrun), "--nproc-per-node", "2", str(example)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = re.findall(r"step (\d+) loss ([\d.]+) sent ([\d.]+) kB", out.stdout)
    assert [int(r[0]) for r in rows] == [0, 10, 20, 30]
    losses = [float(r[1]) for r in rows]
    assert losses[-1] < 0.5 * losses[0]
    sent = [float(r[2]) for r in rows]
    assert sent[1] < 0.01 * sent[0]  # step 10 (10 % 3 != 0): one all-reduce of column scalars, no gather
