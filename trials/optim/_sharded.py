"""Periodic Row-wise Muon on FSDP2-sharded parameters, with communication accounting.

FSDP2 (`torch.distributed.fsdp.fully_shard`) keeps each parameter as a DTensor sharded on dim 0 (`Shard(0)`): of an
m x n matrix, rank r holds rows [r*c, min(m, (r+1)*c)) with c = ceil(m / W), torch.chunk's split (so with m < W the
last ranks hold empty shards). The update rule is `PeriodicRowMuon`'s, step for step; what each branch needs from
the other ranks:

    refresh (t % K == 0), `ns_placement="replicated"` (the default):
                             NS5 needs the whole U: its shards are all-gathered bucket by bucket (`bucket_bytes`),
                             the gather of bucket i+1 in flight while NS5 runs on bucket i. Every rank runs NS5 on
                             the whole matrix and keeps its own rows (Moonlight's and the paper's design: no second
                             collective, but W ranks repeat the same work).
    refresh, `ns_placement="distributed"`:
                             each matrix has one owner rank, chosen from the shapes alone so every rank agrees:
                             costliest first, each to the least-loaded rank (`_placement.ns_owners`: NS5 FLOPs
                             plus the owner's measured per-element work, `ns_cost`). An all-to-all sends every
                             rank's rows of U to the owners; each owner assembles its whole matrices, runs NS5 once
                             (same-shape matrices stacked into one batched call), and a second all-to-all returns
                             each rank its rows of the result. Pipelined in slots (`_placement.pipeline_slots`):
                             slot s holds one NS5 call of each owner and has its own pair of all-to-alls. Every
                             slot's shards leave at once; an owner runs NS5 on slot s while the shards of s + 1
                             arrive and the rows of s - 1 travel back (gloo and NCCL move them on their own
                             threads and streams), so only the first slot's shards and the last slot's return are
                             waited for, the return under the column-norm step. A rank's own rows of its own
                             matrices skip both (written into the assembled matrix, applied from the result).
                             Uneven shards need no padding (the all-to-all takes per-rank sizes). microsoft/dion's
                             Muon does the same for every step.
    row norm, m <= n         every row is local: nothing is sent (either placement).
    column norm, m > n       each rank sums the squares of its rows per column; ONE all-reduce per step carries the
                             n sums of every tall matrix (concatenated into one buffer); then each rank divides.

So at K = 3 a rank sends one refresh's bytes per three steps plus n floats per tall matrix on the other two: a third
of vanilla Muon's bytes, up to the column-norm scalars. `refresh_every=1` is the sharded vanilla-Muon baseline (a
refresh every step). What is sent out is U, the Nesterov-corrected momentum (NS5's input), in the Newton-Schulz
dtype when that is narrower than the parameter's (bf16 halves the bytes and changes nothing: NS5 casts to it first);
the distributed placement's results come back in the Newton-Schulz dtype (what the unsharded update adds).

Bytes sent per rank on a refresh step (`comm_stats`, counted exactly as below). With b bytes per element, W ranks,
S = b * sum of m*n over the refreshed matrices, rank r holding rows_r(j) of matrix j (torch.chunk's split) and
owning the set O(r):

    replicated    all_gather  (W - 1) / W * b * sum_j W * ceil(m_j / W) * n_j   ~ (W - 1) / W * S
    distributed   all_to_all  b * [ sum_{j not in O(r)} rows_r(j) n_j  +  sum_{j in O(r)} (m_j - rows_r(j)) n_j ]

With even shards the distributed line is S / W + (W - 2) / W * S_own(r), S_own(r) the bytes of the matrices r owns;
balanced owners (S_own = S / W) give 2 (W - 1) / W^2 * S: at W = 2 exactly the all-gather's S / 2 (the design saves
Newton-Schulz work there, not bytes), and 2 / W of it at larger W. The owners balance NS5 cost, not bytes, and
whole matrices do not split, so a rank's count departs from the balanced figure as the matrices per rank fall:
within 4 % in the tests (2 and 4 ranks), 12 % over it for the busiest rank at the paper's 15B shapes on 256 ranks
(467 matrices; `benchmarks/ns_placement.py`). The exact line holds to the byte.

Agreement between ranks: every rank must issue the same collectives in the same order, so what a step sends is
decided only from what all ranks share (shapes, placements, dtypes, step counters, `requires_grad`), never from
whether this rank's shard has a `.grad`. A sharded matrix takes part in a step iff `p.requires_grad`; a rank whose
shard has no gradient uses zeros for it (FSDP2's reduce-scatter normally gives every rank one; a missing one comes
from a hand-made or partial backward, or a module unused on every rank). Its momentum rows then decay, weight decay
applies and the step counter advances with the other ranks', where `PeriodicRowMuon` would skip the matrix. To
freeze a sharded matrix, set `requires_grad=False` on every rank. Plain (unsharded) tensors in the same optimizer
are replicated parameters, updated locally with `PeriodicRowMuon`'s rule: a missing grad skips them.

Communication is counted in `comm_stats` (`CommStats`): logical bytes sent per rank, per step and cumulative, by
collective kind, with the nccl-tests bus convention (an all-gather of S bytes over W ranks: (W-1)/W*S sent per
rank; an all-reduce: 2(W-1)/W*S; padding of uneven shards counts).

Use in an FSDP2 trainer (the full, runnable version is `examples/train_fsdp2.py`, run by a test under
torchrun). The optimizer only needs the `Shard(0)` DTensors that `fully_shard` makes, on a 1-D mesh; HSDP's
`(Replicate(), Shard(0))` takes the same path (the shard mesh dimension's group), untested here.

    # examples/train_fsdp2.py (run: torchrun --nproc-per-node 2 examples/train_fsdp2.py), in short:
    for block in model.blocks:
        fully_shard(block)  # its weights become DTensors sharded on dim 0
    fully_shard(model)
    routing = route_parameters(model)  # block matrices -> Muon; biases, input and output layers -> AdamW
    muon = ShardedPeriodicRowMuon([p for _, p in routing.muon], lr=0.02, refresh_every=3, gamma=0.15)
    adamw = torch.optim.AdamW([p for _, p in routing.aux], lr=1e-3)
    ...
    loss.backward(); muon.step(); adamw.step(); muon.zero_grad(); adamw.zero_grad()
    mlflow.log_metrics(muon.comm_stats.as_metrics(), step=step)

On this AVX2-only CPU pass `ns_dtype=trials.optim.fast_ns_dtype()` (fp32): bf16 matmul is 10-30x slower there.
Checkpoint with `torch.distributed.checkpoint`: `get_state_dict(model, muon)` / `set_state_dict(...)` around
`dcp.save` / `dcp.load`; the momentum buffers are DTensors with the parameters' placements, so they are saved
sharded, and the step counters are ints, so a run resumes mid-period exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from ._comm import CommStats, local_tensor
from ._native import (
    native_column_apply_,
    native_column_sumsq_,
    native_refresh_applies,
)
from ._periodic import PeriodicRowMuon, closure_loss
from ._placement import NS_PLACEMENTS, newton_schulz5_batched, ns_owners, pipeline_slots
from ._shard_items import _Item, _Layout, _layout_of, _numel_of_rows
from .functional import _newton_schulz5, adjust_lr, column_sumsq_, normalized_update_, step_scales

__all__ = ["DEFAULT_BUCKET_BYTES", "NS_PLACEMENTS", "ShardedPeriodicRowMuon"]

# Big enough that each gather moves tens of MB (collective latency amortised), small enough that the two gathered
# buckets alive at once (the one in NS5 and the next in flight) stay a small fraction of a large block's weights.
DEFAULT_BUCKET_BYTES = 64 * 2**20

# The distributed placement stacks same-shape matrices into one batched NS5 call on accelerators (where one call per
# matrix costs kernel launches), but on a CPU only while the smaller side is at most this: measured on the AMX Xeon
# (one thread, bf16, two matrices per call against one call each), 192 x 64 took 0.45x the time, 128 x 128 0.62x,
# 256 x 256 0.88x, 256 x 1024 0.96x, but 512 x 512 1.17x and 3072 x 512 1.7x (torch's batched bf16 products take
# a slower path there).
CPU_BATCH_MAX_SIDE = 256


def _all_gather(output: Tensor, input_: Tensor, group: Any) -> Any:
    # torch 2.13 renamed all_gather_into_tensor to all_gather_single and deprecated the old name; support both.
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return gather(output, input_, group=group, async_op=True)


class ShardedPeriodicRowMuon(PeriodicRowMuon):
    """`PeriodicRowMuon` for FSDP2-sharded matrices (DTensor, `Shard(0)`), and plain tensors, with `comm_stats`.

    Same arguments and defaults as `PeriodicRowMuon`, plus keyword-only `bucket_bytes`: the most bytes of gathered
    momentum per all-gather on refresh steps (a larger matrix gets a bucket of its own). Results equal
    `PeriodicRowMuon` on the unsharded matrices with the same gradients (column norms of tall matrices are summed
    across ranks, so they agree to rounding, about 1e-7 relative; everything else is bitwise). `refresh_every=1` is
    sharded vanilla Muon. The module docstring gives the communication plan, the rule for missing gradients, the
    logical-bytes convention and an FSDP2 example.

    Keyword-only `ns_placement`: "replicated" (default; every rank runs NS5 on every whole refreshed matrix) or
    "distributed" (each matrix orthogonalised once, on an owner rank; module docstring). Both give the same update.
    `bucket_bytes` applies to the replicated placement's all-gathers.

    With `rownorm_kernel` "auto" (the default) or "native", a sharded float32 CPU matrix's refresh step runs its
    momentum (written straight into the send buffer as U) and its update in the compiled kernel too
    (`trials.optim._native`: torch's arithmetic, bit for bit); "streamed" and "unfused" keep torch's operations.

    All sharded matrices must share one process group (one FSDP2 mesh). Counters: `ns5_calls` (matrices this rank
    ran NS5 on: every refreshed one when replicated, the ones it owns when distributed), `ns5_batches` (NS5 calls,
    a stack of same-shape matrices counting once), `rownorm_calls` and `comm_stats`.
    """

    _accepts_dtensor = True

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        *args: Any,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        ns_placement: str = "replicated",
        **kwargs: Any,
    ) -> None:
        # The other arguments are PeriodicRowMuon's, passed through unchanged (same names, order and defaults).
        if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be an int >= 1, got {bucket_bytes!r}")
        if not isinstance(ns_placement, str) or ns_placement not in NS_PLACEMENTS:
            raise ValueError(f"ns_placement={ns_placement!r} is not supported; allowed: {list(NS_PLACEMENTS)}")
        self.bucket_bytes = bucket_bytes
        self.ns_placement = ns_placement
        self._layouts: dict[Tensor, _Layout] = {}
        self._group: Any = None
        self._group_ranks: tuple[int, ...] | None = None
        super().__init__(params, *args, **kwargs)
        self.comm_stats = CommStats(world_size=self.world_size)
        self.ns5_batches = 0  # NS5 calls on this rank, a batch of same-shape matrices counting once
        self._scratch_buffers: dict[tuple[str, torch.dtype], Tensor] = {}

    @property
    def world_size(self) -> int:
        """Ranks the matrices are sharded over (1 when none is sharded)."""
        return max((lay.world for lay in self._layouts.values()), default=1)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        for p in self.param_groups[-1]["params"]:
            if p.ndim != 2:  # PeriodicRowMuon refuses it with the routing hint once construction is done
                continue
            layout = _layout_of(p)
            if layout.group is not None:
                ranks = tuple(dist.get_process_group_ranks(layout.group))
                if self._group_ranks is None:
                    self._group, self._group_ranks = layout.group, ranks
                elif ranks != self._group_ranks:
                    raise ValueError(
                        f"all sharded matrices must share one process group; got ranks {ranks} and "
                        f"{self._group_ranks}: use one optimizer per FSDP mesh"
                    )
            self._layouts[p] = layout
        if hasattr(self, "comm_stats"):  # a group added after construction may widen the world
            self.comm_stats.world_size = self.world_size

    def _local_grad(self, p: Tensor, layout: _Layout) -> Tensor | None:
        grad = p.grad
        if grad is None:
            if layout.world == 1:
                return None  # a local matrix: skip it, as PeriodicRowMuon does
            # A sharded one takes part on every rank (module docstring): a missing shard gradient counts as zeros.
            return torch.zeros_like(local_tensor(p))
        if grad.is_sparse:
            raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
        local = local_tensor(grad)
        if local.shape != local_tensor(p).shape:
            raise RuntimeError(
                f"gradient shard of shape {tuple(local.shape)} for a parameter shard of shape "
                f"{tuple(local_tensor(p).shape)}: gradients must be sharded like their parameters"
            )
        return local

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """Performs one optimisation step (the module docstring says what is communicated and when)."""
        loss = closure_loss(closure)
        self.comm_stats.begin_step()

        # Pass 1: momentum for every matrix, and sort the updates by what they need from other ranks.
        local_refresh, local_rownorm, sharded_refresh, sharded_tall = self._sorted_items()

        # Issue the communication first, so it runs under the local work.
        tall_updates, column_sums, reduce_work = self._start_column_sums(sharded_tall)
        distributed = self.ns_placement == "distributed"
        exchanges = self._start_exchanges(sharded_refresh) if distributed else []
        buckets = [] if distributed else self._buckets(sharded_refresh)
        in_flight = [self._start_gather(buckets[0], 0)] if buckets else []

        for item in local_rownorm:
            # Rows (m <= n) or columns (m > n) of the whole matrix; for a sharded wide one, of its local rows.
            self._rownorm(item.local, item.grad, item.buf, item.group, item.eta)
            self.rownorm_calls += 1
        for item in local_refresh:
            item.apply_ortho(self._ns5(item.nesterov(), item.group, owned=item.group["nesterov"]))
            self.ns5_calls += 1
            self.ns5_batches += 1

        # Refresh: NS5 on bucket i while the gather of bucket i+1 is in flight.
        for i, bucket in enumerate(buckets):
            work, gathered = in_flight.pop(0)
            if i + 1 < len(buckets):
                in_flight.append(self._start_gather(buckets[i + 1], (i + 1) % 2))
            work.wait()
            self._finish_refresh(bucket, gathered)
        # Distributed: NS5 on the matrices this rank owns, slot by slot, each slot's rows going back under the next
        # slot's NS5 (the last slot's under the column-norm step below).
        returning = [self._orthogonalize_owned(exchange) for exchange in exchanges]

        if reduce_work is not None:
            reduce_work.wait()
            self._apply_tall(sharded_tall, tall_updates, column_sums)
        for exchange in returning:
            self._apply_returned(exchange)
        return loss

    def _sorted_items(self) -> tuple[list[_Item], list[_Item], list[_Item], list[_Item]]:
        """Every matrix with a gradient as an `_Item` (its momentum updated, or left to a fused kernel), sorted by
        what its update needs from other ranks: (whole-matrix refreshes, local row norms, sharded refreshes,
        sharded tall row norms)."""
        local_refresh: list[_Item] = []
        local_rownorm: list[_Item] = []
        sharded_refresh: list[_Item] = []
        sharded_tall: list[_Item] = []
        for group in self.param_groups:
            k: int | None = group["refresh_every"]
            for p in group["params"]:
                layout = self._layouts[p]
                if layout.world > 1 and not p.requires_grad:
                    continue  # frozen on every rank: an agreed skip
                grad = self._local_grad(p, layout)
                if grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    # A DTensor buffer (placements of p) so torch.distributed.checkpoint saves it sharded.
                    like = p.grad if p.grad is not None else p
                    state["momentum_buffer"] = torch.zeros_like(like, memory_format=torch.preserve_format)
                buf = local_tensor(state["momentum_buffer"])
                t: int = state["step"]
                state["step"] = t + 1
                eta = adjust_lr(group["lr"], group["adjust_lr_fn"], p.shape)
                item = _Item(local_tensor(p), grad, buf, layout, group, eta)
                refresh = k is not None and t % k == 0
                if refresh:
                    # The non-refresh kernels update the momentum themselves, in the same pass over B; so do the
                    # refresh kernels of a sharded matrix, as they write U into the send buffer. (A plain matrix
                    # keeps PeriodicRowMuon's torch operations: its update stays that optimizer's bit for bit.)
                    item.native = layout.world > 1 and self.rownorm_kernel in ("auto", "native") and \
                        native_refresh_applies(item.local, grad, buf)
                    item.momentum_pending = item.native
                    if not item.momentum_pending:
                        buf.lerp_(grad, 1.0 - group["momentum"])
                if layout.world == 1:
                    (local_refresh if refresh else local_rownorm).append(item)
                elif refresh:
                    sharded_refresh.append(item)
                elif layout.tall:
                    sharded_tall.append(item)
                else:
                    local_rownorm.append(item)  # wide or square: its rows are all here
        return local_refresh, local_rownorm, sharded_refresh, sharded_tall

    def _apply_tall(self, items: list[_Item], tall_updates: list[Tensor], column_sums: Tensor) -> None:
        """The column-norm step of the sharded tall matrices, once their columns' sums of squares are all-reduced."""
        offset = 0
        for i, item in enumerate(items):
            n = item.layout.cols
            group = item.group
            norms = column_sums[offset : offset + n].sqrt().view(1, n)
            if tall_updates:  # the unfused reference kept each U
                item.apply_normalized(tall_updates[i], norms.clamp_min_(group["eps"]))
            else:  # streamed or native: U recomputed from g and the updated B
                scales = step_scales(norms, group["gamma"] * item.eta, group["eps"])
                if self._native_for(item.local, item.grad, item.buf, scales):
                    native_column_apply_(item.local, item.grad, item.buf, scales, momentum=group["momentum"],
                                         nesterov=group["nesterov"], decay=item.decay)
                else:
                    normalized_update_(item.local, item.grad, item.buf, scales, momentum=group["momentum"],
                                       nesterov=group["nesterov"], decay=item.decay,
                                       workspace=self._workspace(item.local.device))
            offset += n
            self.rownorm_calls += 1

    def _scratch(self, name: str, numel: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """A 1-D buffer for a collective, kept from step to step on a CPU: glibc hands large freed blocks back to
        the OS, so a fresh buffer each step pays a page fault per 4 KiB page on first touch (on the AMX Xeon, 2
        ranks, width 512: about 60 ms of a 240 ms distributed Muon step, in the copies into the send buffers).
        Accelerators' caching allocators already reuse memory. Never part of the state dict."""
        if device.type != "cpu":
            return torch.empty(numel, dtype=dtype, device=device)
        buf = self._scratch_buffers.get((name, dtype))
        if buf is None or buf.numel() < numel:
            buf = self._scratch_buffers[name, dtype] = torch.empty(numel, dtype=dtype, device=device)
        return buf[:numel]

    @staticmethod
    def _ns5(update: Tensor, group: dict[str, Any], *, owned: bool = False) -> Tensor:
        return _newton_schulz5(update, group["ns_coefficients"], group["ns_steps"], group["eps"], group["ns_dtype"],
                               owned=owned)

    # --- tall matrices: one all-reduce of every column sum of squares ----------------------------------------

    def _start_column_sums(self, items: list[_Item]) -> tuple[list[Tensor], Tensor, Any]:
        """The momentum update and the squared column norms of U's local rows of every tall matrix, all in one
        buffer, and its all-reduce in flight. The streamed kernel keeps nothing else (U is recomputed once the sums
        arrive); the unfused reference also returns each U, kept until then."""
        if not items:
            return [], torch.empty(0), None
        # The buffer's dtype follows the parameters' (the same on every rank), accumulating as
        # normalize_rows_or_columns does: fp32 for half types and fp32, fp64 when any matrix is fp64.
        acc = torch.float64 if any(item.local.dtype == torch.float64 for item in items) else torch.float32
        sums = torch.empty(sum(item.layout.cols for item in items), dtype=acc, device=items[0].local.device)
        updates = []
        offset = 0
        for item in items:
            n = item.layout.cols
            group = item.group
            # Squared column norms of the local rows; an empty shard contributes zeros.
            part = sums[offset : offset + n]
            if self.rownorm_kernel != "unfused" and self._native_for(item.grad, item.buf, part):
                native_column_sumsq_(item.grad, item.buf, part, momentum=group["momentum"],
                                     nesterov=group["nesterov"])
            elif self.rownorm_kernel != "unfused":
                column_sumsq_(item.grad, item.buf, part, momentum=group["momentum"],
                              nesterov=group["nesterov"], workspace=self._workspace(item.local.device))
            else:
                self.rownorm_kernels_used.add("unfused")
                item.buf.lerp_(item.grad, 1.0 - group["momentum"])
                update = item.nesterov()
                torch.linalg.vector_norm(update, dim=0, dtype=acc, out=sums[offset : offset + n]).square_()
                updates.append(update)
            offset += n
        work = dist.all_reduce(sums, op=dist.ReduceOp.SUM, group=self._group, async_op=True)
        self.comm_stats.record("all_reduce", sums.numel() * sums.element_size())
        return updates, sums, work

    # --- refresh: bucketed all-gather of U, NS5 on the whole matrix, keep the local rows ---------------------

    @staticmethod
    def _gather_dtype(item: _Item) -> torch.dtype:
        # NS5 starts with U.to(ns_dtype): gathering in that dtype when it is narrower sends fewer bytes and gives
        # the same NS5 input, bit for bit. Decided from the parameter's dtype, which every rank agrees on (a rank
        # whose grad is missing must still build the same bucket); FSDP2's sharded grads have the param's dtype.
        ns_dtype: torch.dtype = item.group["ns_dtype"]
        dtype = item.local.dtype
        return ns_dtype if ns_dtype.itemsize < dtype.itemsize else dtype

    def _buckets(self, items: list[_Item]) -> list[list[_Item]]:
        buckets: list[list[_Item]] = []
        size, dtype = 0, None
        for item in items:
            lay = item.layout
            item_dtype = self._gather_dtype(item)
            nbytes = lay.world * lay.chunk * lay.cols * item_dtype.itemsize
            if buckets and item_dtype == dtype and size + nbytes <= self.bucket_bytes:
                buckets[-1].append(item)
                size += nbytes
            else:
                buckets.append([item])
                size, dtype = nbytes, item_dtype
        return buckets

    def _start_gather(self, bucket: list[_Item], parity: int) -> tuple[Any, Tensor]:
        """The gather of one bucket in flight. `parity`: which of two buffer pairs it uses (the bucket in NS5 holds
        the other)."""
        dtype = self._gather_dtype(bucket[0])
        per_rank = sum(item.layout.chunk * item.layout.cols for item in bucket)
        device = bucket[0].local.device
        send = self._scratch(f"gather_send{parity}", per_rank, dtype, device)
        offset = 0
        for item in bucket:
            lay = item.layout
            shard = send[offset : offset + lay.chunk * lay.cols].view(lay.chunk, lay.cols)
            item.nesterov_into(shard[: lay.stop - lay.start])
            shard[lay.stop - lay.start :].zero_()  # pad uneven shards to `chunk` rows: all_gather needs equal sizes
            offset += lay.chunk * lay.cols
        world = bucket[0].layout.world
        gathered = self._scratch(f"gathered{parity}", world * per_rank, dtype, device)
        work = _all_gather(gathered, send, self._group)
        self.comm_stats.record("all_gather", gathered.numel() * gathered.element_size())
        return work, gathered

    def _finish_refresh(self, bucket: list[_Item], gathered: Tensor) -> None:
        world = bucket[0].layout.world
        by_rank = gathered.view(world, -1)  # (W, per-rank bucket numel): rank r's shards, one after another
        offset = 0
        for item in bucket:
            lay = item.layout
            numel = lay.chunk * lay.cols
            # (W, chunk*n) -> (W*chunk, n) stacks the ranks' padded rows in order; dropping the padding at the end
            # leaves the whole (m, n) U.
            whole = by_rank[:, offset : offset + numel].reshape(world * lay.chunk, lay.cols)[: lay.rows]
            ortho = self._ns5(whole, item.group, owned=True)  # `whole` is our gather buffer
            item.apply_ortho(ortho[lay.start : lay.stop])
            self.ns5_calls += 1
            self.ns5_batches += 1
            offset += numel

    # --- refresh, distributed: each whole matrix on one owner rank, NS5 once, its rows sent back ------------------

    def _start_exchanges(self, items: list[_Item]) -> list[_Exchange]:
        """Owners for this step's refreshed matrices, and the first all-to-all of every slot (shards to owners) in
        flight: one exchange per wire dtype (almost always one)."""
        if not items:
            return []
        shapes = [(it.layout.rows, it.layout.cols) for it in items]
        # From shapes alone: every rank computes the same owners.
        owners = ns_owners(shapes, items[0].layout.world, [it.group["ns_steps"] for it in items])
        by_dtype: dict[tuple[torch.dtype, torch.dtype], list[tuple[_Item, int]]] = {}
        for item, owner in zip(items, owners, strict=True):
            key = (self._gather_dtype(item), item.group["ns_dtype"])
            by_dtype.setdefault(key, []).append((item, owner))
        return [self._start_exchange(pairs, *key, index=i) for i, (key, pairs) in enumerate(by_dtype.items())]

    def _start_exchange(self, pairs: list[tuple[_Item, int]], wire: torch.dtype, ns_dtype: torch.dtype, *,
                        index: int) -> _Exchange:
        layout = pairs[0][0].layout
        world, rank = layout.world, layout.rank
        device = pairs[0][0].local.device
        items = [item for item, _ in pairs]
        plan = pipeline_slots([owner for _, owner in pairs], _ns5_call_keys(items),
                              [it.layout.rows * it.layout.cols for it in items], world)
        slots = [_Slot([[items[j] for j in owned] for owned in by_owner], rank) for by_owner in plan]
        send = self._scratch(f"a2a_send{index}", sum(sum(s.send_splits) for s in slots), wire, device)
        recv = self._scratch(f"a2a_recv{index}", sum(sum(s.recv_splits) for s in slots), wire, device)
        sent = received = 0
        for s in slots:
            # Send: for each other owner rank in turn, this rank's rows of U of its matrices in the slot (in step
            # order); each slot leaves as soon as it is written, the first while the others are. A rank's rows of
            # its own matrices never enter the exchange (no segment to itself, in either all-to-all): they are
            # written straight into the assembled matrix, and their result applied straight from NS5's.
            s.sent_at, s.received_at = sent, received
            out = send[sent : sent + sum(s.send_splits)]
            offset = 0
            for owner, owned in enumerate(s.by_owner):
                if owner == rank:
                    continue
                for it in owned:
                    rows = it.layout.stop - it.layout.start
                    it.nesterov_into(out[offset : offset + it.local.numel()].view(rows, it.layout.cols))
                    offset += it.local.numel()
            # Receive: from each other rank, its rows of every matrix this rank owns in the slot.
            s.buffer = recv[received : received + sum(s.recv_splits)]
            s.work = dist.all_to_all_single(s.buffer, out, s.recv_splits, s.send_splits, group=self._group,
                                            async_op=True)
            self.comm_stats.record("all_to_all", out.numel() * wire.itemsize)
            sent, received = sent + out.numel(), received + s.buffer.numel()
        # While they are in flight: the owned matrices' (B, m, n) buffers, this rank's own rows of U already in place.
        for s in slots:
            if s.mine:
                lay = s.mine[0].layout
                s.stack = torch.empty(len(s.mine), lay.rows, lay.cols, dtype=wire, device=device)
                for it, whole in zip(s.mine, s.stack, strict=True):
                    it.nesterov_into(whole[it.layout.start : it.layout.stop])
        return _Exchange(slots, ns_dtype, index, sent, received)

    def _orthogonalize_owned(self, ex: _Exchange) -> _Exchange:
        """Slot by slot: wait for its shards, complete each owned matrix, NS5 (one call per slot), send each other
        rank its rows of the results (the slot's second all-to-all, left in flight under the next slot's NS5) and
        apply this rank's own rows."""
        device = ex.slots[0].buffer.device
        back = self._scratch(f"a2a_back{ex.index}", ex.received, ex.ns_dtype, device)
        returned = self._scratch(f"a2a_returned{ex.index}", ex.sent, ex.ns_dtype, device)
        for s in ex.slots:
            s.work.wait()
            ortho = self._ns5_slot(s, ex.ns_dtype)
            # Send back: to each other rank, its rows of every owned matrix of the slot, in step order (where its
            # shards came from in the first all-to-all); receive from each other owner the rows of its matrices, in
            # the order this rank sent them.
            out = back[s.received_at : s.received_at + s.buffer.numel()]
            for i, start, stop, offset in _peer_rows(s):
                cols = s.mine[i].layout.cols
                out[offset : offset + (stop - start) * cols].view(stop - start, cols).copy_(ortho[i][start:stop])
            s.buffer = returned[s.sent_at : s.sent_at + sum(s.send_splits)]
            s.work = dist.all_to_all_single(s.buffer, out, s.send_splits, s.recv_splits, group=self._group,
                                            async_op=True)
            self.comm_stats.record("all_to_all", out.numel() * ex.ns_dtype.itemsize)
            for it, result in zip(s.mine, ortho, strict=True):  # this rank's own rows, while the others' travel
                it.apply_ortho(result[it.layout.start : it.layout.stop])
        return ex

    def _ns5_slot(self, s: _Slot, ns_dtype: torch.dtype) -> list[Tensor]:
        """The slot's owned matrices completed with the other ranks' rows, and their NS5 results, as rows."""
        if not s.mine:
            return []
        for i, start, stop, offset in _peer_rows(s):
            cols = s.mine[i].layout.cols
            s.stack[i, start:stop].copy_(s.buffer[offset : offset + (stop - start) * cols].view(stop - start, cols))
        g = s.mine[0].group
        coefficients, steps, eps = g["ns_coefficients"], g["ns_steps"], g["eps"]
        if len(s.mine) == 1:
            # One matrix: the 2-D routine itself (the unsharded optimizer's, so bit for bit its result).
            ortho = [_newton_schulz5(s.stack[0], coefficients, steps, eps, ns_dtype, owned=True)]
        else:
            ortho = list(newton_schulz5_batched(s.stack, coefficients, steps, eps, ns_dtype))
        self.ns5_calls += len(s.mine)
        self.ns5_batches += 1
        # A tall matrix's result is the transpose of NS5's wide one: one whole copy to rows (torch's transposing
        # copy) costs less than each destination's rows copied out of the transposed view (cache misses on every
        # element): 16 against 23 ms a refresh on the AMX Xeon, 2 ranks, width 512, under load. Exact.
        return [result if result.is_contiguous() else result.contiguous() for result in ortho]

    def _apply_returned(self, ex: _Exchange) -> None:
        for s in ex.slots:
            s.work.wait()
            offset = 0
            for owner, owned in enumerate(s.by_owner):  # the first exchange's send order: owners in rank order
                if owner == s.rank:
                    continue  # applied as its results came out of NS5
                for it in owned:
                    n = it.local.numel()
                    it.apply_ortho(s.buffer[offset : offset + n].view_as(it.local))
                    offset += n


def _ns5_call_keys(items: list[_Item]) -> list[tuple[Any, ...]]:
    """Which matrices an owner stacks into one NS5 call: same shape and NS settings, and on a CPU only up to
    CPU_BATCH_MAX_SIDE (a larger one is a call of its own)."""
    keys = []
    for j, it in enumerate(items):
        g = it.group
        key: tuple[Any, ...] = (it.layout.rows, it.layout.cols, tuple(g["ns_coefficients"]), g["ns_steps"], g["eps"])
        if it.local.device.type == "cpu" and min(it.layout.rows, it.layout.cols) > CPU_BATCH_MAX_SIDE:
            key = (*key, j)
        keys.append(key)
    return keys


def _peer_rows(s: _Slot) -> Iterator[tuple[int, int, int, int]]:
    """(owned matrix index in the slot, first row, end row, offset in the packed buffer) of every other rank's rows
    of each matrix this rank owns in the slot, in the order both all-to-alls pack them: ranks in order (this one
    skipped), matrices in step order within a rank."""
    offset = 0
    for peer in range(len(s.by_owner)):
        if peer == s.rank:
            continue
        for i, it in enumerate(s.mine):
            start, stop = it.layout.rows_of(peer)
            yield i, start, stop, offset
            offset += (stop - start) * it.layout.cols


class _Slot:
    """One stage of a distributed refresh (`_placement.pipeline_slots`): for each owner rank, the matrices of one
    of its NS5 calls; the split sizes of its two all-to-alls, the one in flight and its buffers."""

    def __init__(self, by_owner: list[list[_Item]], rank: int) -> None:
        self.by_owner = by_owner  # per owner rank, its matrices in this slot, in step order
        self.rank = rank
        self.mine = by_owner[rank]
        # Elements this rank sends each rank in the first all-to-all (its rows of their matrices), and receives
        # from each (their rows of its matrices); the second all-to-all sends back what came and returns what went.
        self.send_splits = [0 if owner == rank else sum(it.local.numel() for it in owned)
                            for owner, owned in enumerate(by_owner)]
        self.recv_splits = [0 if source == rank else sum(_numel_of_rows(it.layout, source) for it in self.mine)
                            for source in range(len(by_owner))]
        self.sent_at = self.received_at = 0  # where its segments start in the exchange's send and receive buffers
        self.buffer = torch.empty(0)  # the receive buffer of the all-to-all in flight
        self.work: Any = None
        self.stack = torch.empty(0)  # (B, m, n): its owned matrices, assembled


@dataclass
class _Exchange:
    """One distributed refresh in flight, slot by slot, and its scratch buffers' names and sizes."""

    slots: list[_Slot]
    ns_dtype: torch.dtype
    index: int  # which scratch buffers it uses (one set per wire dtype)
    sent: int  # elements this rank sends in the first all-to-alls, all slots together (what comes back)
    received: int  # elements it receives in them (what it sends back)
