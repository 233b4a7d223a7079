"""A sharded matrix as `ShardedPeriodicRowMuon` sees it: where this rank's rows sit (`_Layout`, read off an FSDP2
DTensor by `_layout_of`) and one matrix's update in flight within a step (`_Item`: its Nesterov direction, the
refresh and row-norm applications, fused where the compiled kernels apply)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ._comm import is_dtensor, local_tensor
from ._native import native_apply_update_, native_momentum_nesterov_


@dataclass(frozen=True)
class _Layout:
    """Where this rank's rows of an m x n matrix sit: rows [start, stop), each rank's shard padded to `chunk` rows."""

    rows: int
    cols: int
    start: int
    stop: int
    chunk: int
    world: int  # ranks sharing the rows; 1 = the whole matrix is here (plain, replicated or a 1-rank mesh)
    group: Any = None  # the ProcessGroup of the shard mesh dimension; None when world == 1
    rank: int = 0  # this rank's index in that group

    @property
    def tall(self) -> bool:
        return self.rows > self.cols

    def rows_of(self, rank: int) -> tuple[int, int]:
        """Rank `rank`'s rows [start, stop) (torch.chunk's split)."""
        start = min(self.rows, rank * self.chunk)
        return start, min(self.rows, start + self.chunk)


def _layout_of(p: Tensor) -> _Layout:
    rows, cols = int(p.shape[0]), int(p.shape[1])
    whole = _Layout(rows, cols, 0, rows, rows, 1)
    if not is_dtensor(p):
        return whole
    placements = p.placements  # type: ignore[attr-defined]
    sharded = [i for i, placement in enumerate(placements) if not placement.is_replicate()]
    if not sharded:
        return whole
    if len(sharded) > 1 or not placements[sharded[0]].is_shard(0):
        raise ValueError(
            f"ShardedPeriodicRowMuon needs matrices sharded on dim 0 on one mesh dimension (FSDP2's Shard(0), "
            f"optionally with Replicate() for HSDP); got placements {tuple(placements)} for shape {(rows, cols)}"
        )
    mesh, mesh_dim = p.device_mesh, sharded[0]  # type: ignore[attr-defined]
    world, rank = mesh.size(mesh_dim), mesh.get_local_rank(mesh_dim)
    chunk = -(-rows // world)
    start = min(rows, rank * chunk)
    stop = min(rows, start + chunk)
    local_shape = tuple(local_tensor(p).shape)
    if local_shape != (stop - start, cols):
        raise ValueError(
            f"rank {rank} of {world} holds a shard of shape {local_shape} of a {(rows, cols)} matrix; "
            f"torch.chunk's split (FSDP2's) gives {(stop - start, cols)}"
        )
    if world == 1:
        return whole
    return _Layout(rows, cols, start, stop, chunk, world, mesh.get_group(mesh_dim), rank)


@dataclass
class _Item:
    """One matrix's update in flight within a step."""

    local: Tensor  # this rank's rows of the parameter (aliases the DTensor's storage)
    grad: Tensor
    buf: Tensor
    layout: _Layout
    group: dict[str, Any]  # its param group (hyperparameters)
    eta: float
    # A refresh whose momentum is left to `nesterov_into`: the compiled kernel updates B and writes U in one pass.
    momentum_pending: bool = False
    native: bool = False  # local, grad and buf fit the compiled refresh kernels

    def nesterov(self) -> Tensor:
        momentum = self.group["momentum"]
        return self.grad.lerp(self.buf, momentum) if self.group["nesterov"] else self.buf

    def nesterov_into(self, out: Tensor) -> None:
        """U written straight into a send buffer: no extra copy when the dtypes match, and with the momentum update
        in the same pass where it was left pending (float32 matrices on a CPU)."""
        momentum = self.group["momentum"]
        if self.momentum_pending:
            self.momentum_pending = False
            if out.is_contiguous() and out.dtype in (torch.float32, torch.bfloat16):
                native_momentum_nesterov_(self.grad, self.buf, out, momentum=momentum, nesterov=self.group["nesterov"])
                return
            self.buf.lerp_(self.grad, 1.0 - momentum)
        if self.group["nesterov"] and out.dtype == self.grad.dtype == self.buf.dtype:
            torch.lerp(self.grad, self.buf, momentum, out=out)
        else:
            out.copy_(self.nesterov())

    @property
    def decay(self) -> float:
        return 1.0 - self.group["lr"] * self.group["weight_decay"]

    def apply_ortho(self, ortho_rows: Tensor) -> None:
        if self.native and ortho_rows.dtype in (torch.float32, torch.bfloat16):
            # One pass, reading a bf16 result (or a tall one's transposed view) in place: torch's mixed-dtype add_
            # first copies it to float32.
            native_apply_update_(self.local, ortho_rows, decay=self.decay, alpha=-self.eta)
            return
        self.local.mul_(self.decay)
        self.local.add_(ortho_rows, alpha=-self.eta)

    def apply_normalized(self, update: Tensor, norms: Tensor) -> None:
        self.local.mul_(self.decay)
        # One fused pass: p -= gamma * eta * U / norms (norms broadcast over rows or columns).
        self.local.addcdiv_(update, norms, value=-self.group["gamma"] * self.eta)


def _numel_of_rows(layout: _Layout, rank: int) -> int:
    start, stop = layout.rows_of(rank)
    return (stop - start) * layout.cols
