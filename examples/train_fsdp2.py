"""Periodic Row-wise Muon in an FSDP2 trainer: a runnable example (CPU/gloo or GPUs/nccl).

torchrun --nproc-per-node 2 examples/train_fsdp2.py [--ns-placement distributed]
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

from trials.optim import ShardedPeriodicRowMuon, fast_ns_dtype, route_parameters


class Net(nn.Module):  # stands in for your MMDiT: the 2-D weights under "blocks" go to Muon
    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.inp = nn.Linear(16, d)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)) for _ in range(2)
        )
        self.out = nn.Linear(d, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
# "distributed": each matrix's Newton-Schulz runs once, on an owner rank, instead of on every rank
parser.add_argument("--ns-placement", choices=["replicated", "distributed"], default="replicated")
args = parser.parse_args()

dist.init_process_group("gloo")  # "nccl" on GPUs, with the model and the batches on the rank's device
torch.manual_seed(0)  # the same initial weights on every rank
model = Net()
for block in model.blocks:
    fully_shard(block)  # its weights become DTensors sharded on dim 0
fully_shard(model)
routing = route_parameters(model)  # block matrices -> Muon; biases, input and output layers -> AdamW
muon = ShardedPeriodicRowMuon(
    [p for _, p in routing.muon], lr=0.02, refresh_every=3, gamma=0.15, ns_dtype=fast_ns_dtype(),
    ns_placement=args.ns_placement,
)
adamw = torch.optim.AdamW([p for _, p in routing.aux], lr=1e-3)
gen = torch.Generator().manual_seed(dist.get_rank())  # each rank its own data
x = torch.randn(256, 16, generator=gen)
y = torch.sin(x)
for step in range(31):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    muon.step()
    adamw.step()
    muon.zero_grad()
    adamw.zero_grad()
    if dist.get_rank() == 0 and step % 10 == 0:
        stats = muon.comm_stats  # or mlflow.log_metrics(stats.as_metrics(), step=step)
        print(f"step {step} loss {loss.item():.4f} sent {stats.step_bytes_sent / 1e3:.1f} kB {stats.step_calls}")
dist.destroy_process_group()
