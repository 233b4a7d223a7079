"""One typed config and one factory for every optimizer arm a trial can run.

Arms (the registry `OPTIMIZERS`):
- `adamw`: AdamW on the block matrices (the paper's baseline), AdamW on the rest.
- `muon`: vanilla `torch.optim.Muon` on the block matrices, AdamW on the rest.
- `periodic`: `PeriodicRowMuon` (K, gamma) on the block matrices, AdamW on the rest.
- `rownorm`: `RowNormMuon` (row norm every step, the paper's ablation) on the block matrices, AdamW on the rest.
- `muon_extra_ns` (a control arm, `CONTROL_ARMS`): `muon` plus one discarded Newton-Schulz per matrix per step, the
  positive control of a timing (identical updates, a known extra cost; `_control.py`).
- `muon_stretched` (a control arm): `muon` itself; the trial's loop adds a null step after every `stretch` steps,
  the positive control of the steps half (its steps ratio to Muon is exactly (stretch + 1) / stretch; `_control.py`).

Every arm gives the non-matrix parameters the same AdamW ("aux") group, so arms differ only in the matrix rule.

Newton-Schulz precision (`ns_dtype`): torch.optim.Muon hard-codes bf16, which is right on GPUs and on CPUs with
native bf16 matmul, but on an AVX2-only CPU a bf16 matmul is 10-30x slower than fp32 and would make every Muon-family
trial crawl. With `ns_dtype="auto"` (the default) the factory picks bf16 where it is fast and fp32 elsewhere; the
`muon` arm is then `torch.optim.Muon` itself when the dtype is bf16, and `PeriodicRowMuon(refresh_every=1,
ns_dtype=float32)` otherwise (the same rule, tested equal to torch.optim.Muon in bf16). The two arms always share the
dtype; they share the Newton-Schulz code only in fp32 (in bf16 the periodic arm runs its own, torch.optim.Muon its
own), so where bf16 is picked their optimizer times come from two implementations. The resolved dtype is recorded
(`HybridOptimizer.ns_dtype`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator
from torch import Tensor, nn
from torch.optim import Optimizer

from ._arms import ArmName, ControlArmName
from ._control import MuonExtraNS, PeriodicMuonExtraNS
from ._periodic import PeriodicRowMuon, RowNormMuon
from ._routing import ParameterRouting, route_parameters
from ._sharded import ShardedPeriodicRowMuon
from .functional import fast_ns_dtype

__all__ = [
    "DEFAULT_LR",
    "OPTIMIZERS",
    "HybridOptimizer",
    "OptimizerConfig",
    "build_optimizer",
    "list_optimizers",
]

# The arms this factory builds, the control arms after them: the registry below has one builder per name.
OptimizerName = Literal[ArmName, ControlArmName]

# Main (matrix) learning rates when the config gives none. Muon's lr sits an order of magnitude above AdamW's under
# the "original" lr convention; 0.02 is Muon's customary value and 3e-3 was AdamW's best in a pilot lr scan on the
# small CPU ladder (docs/design.md). Under "match_rms_adamw" Muon reuses AdamW-scale lrs: set lr explicitly then.
DEFAULT_LR: dict[str, float] = {"adamw": 3e-3, "muon": 0.02, "periodic": 0.02, "rownorm": 0.02, "muon_extra_ns": 0.02,
                                "muon_stretched": 0.02}
# The steps control's default stretch: a null step after every 8th, a true steps ratio of exactly 9/8 (+12.5 %),
# the size of the steps penalties the evidence study measured (+10-14 %).
DEFAULT_STRETCH = 8


class OptimizerConfig(BaseModel):
    """Everything that defines one optimizer arm; recorded with every run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: OptimizerName = Field(
        "periodic",
        description="Matrix optimizer arm: adamw, muon, periodic or rownorm; or a control, muon_extra_ns or "
        "muon_stretched.",
    )
    lr: float | None = Field(
        None, gt=0, description="Main lr for the block matrices; None = the arm's default (DEFAULT_LR)."
    )
    aux_lr: float = Field(1e-4, gt=0, description="AdamW lr of the non-matrix group (the paper's 1e-4).")
    weight_decay: float = Field(
        0.1, ge=0, description="Decoupled weight decay of the matrix group (torch.optim.Muon's default 0.1)."
    )
    aux_weight_decay: float = Field(0.0, ge=0, description="Weight decay of the aux group (biases, norms).")
    momentum: float = Field(0.95, ge=0, lt=1, description="Muon momentum (torch.optim.Muon's 0.95).")
    nesterov: bool = Field(True, description="Nesterov momentum for the Muon family (torch's default).")
    refresh_every: int = Field(3, ge=1, description="K: full Newton-Schulz every K steps (the paper's 3).")
    gamma: float = Field(0.15, gt=0, description="Row-norm step ratio to Muon's lr (the paper's 0.15).")
    adjust_lr_fn: Literal["original", "match_rms_adamw"] | None = Field(
        None, description="Muon lr shape rule; None = 'original' (torch.optim.Muon's semantics)."
    )
    ns_steps: int = Field(5, ge=1, le=99, description="Newton-Schulz iterations (NS5).")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas, both groups (torch's default).")
    adamw_eps: float = Field(1e-8, gt=0, description="AdamW epsilon, both groups (torch's default).")
    ns_dtype: Literal["auto", "bfloat16", "float32"] = Field(
        "auto", description="Newton-Schulz dtype; auto = bf16 where bf16 matmul is fast (GPU, AVX512-BF16), else fp32."
    )
    ns_placement: Literal["replicated", "distributed"] = Field(
        "replicated",
        description="Under FSDP2 (sharded matrices): replicated (every rank gathers each whole matrix and runs "
        "Newton-Schulz on it, as the paper and Moonlight do) or distributed (each matrix's shards go to one owner "
        "rank over an all-to-all, Newton-Schulz runs once there, the rows come back). Unsharded: no effect.",
    )
    rownorm_kernel: Literal["auto", "native", "streamed", "unfused"] = Field(
        "auto",
        description="How the periodic and rownorm arms run their row-norm step: native (a compiled CPU kernel that "
        "reads and writes each matrix once, built on first use), streamed (torch operations in cache-sized chunks), "
        "auto (native where it can be built and the matrix is contiguous float32 on a CPU, else streamed) or unfused "
        "(the earlier whole-matrix code, kept to time against). Same update up to float rounding.",
    )
    stretch: StrictInt | None = Field(
        None, ge=1, le=1000,
        description="muon_stretched only: a null step (no batch, no update) after every `stretch` steps, so the "
        "arm's true steps ratio to Muon is (stretch + 1) / stretch; an integer (default 8: 9/8). None for every "
        "other arm.",
    )

    @model_validator(mode="after")
    def _stretch_belongs_to_the_steps_control(self) -> OptimizerConfig:
        if self.name == "muon_stretched" and self.stretch is None:
            object.__setattr__(self, "stretch", DEFAULT_STRETCH)  # frozen model: set once, at validation
        elif self.name != "muon_stretched" and self.stretch is not None:
            raise ValueError(f"optimizer.stretch applies to the steps control muon_stretched only, not to "
                             f"{self.name!r}; leave it unset")
        return self

    @property
    def resolved_lr(self) -> float:
        """The main lr actually used: `lr`, or the arm's default."""
        return self.lr if self.lr is not None else DEFAULT_LR[self.name]


def _adamw(params: list[Tensor], lr: float, weight_decay: float, cfg: OptimizerConfig) -> Optimizer:
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=cfg.betas, eps=cfg.adamw_eps)


def _muon_kwargs(cfg: OptimizerConfig) -> dict[str, Any]:
    return {
        "lr": cfg.resolved_lr,
        "weight_decay": cfg.weight_decay,
        "momentum": cfg.momentum,
        "nesterov": cfg.nesterov,
        "adjust_lr_fn": cfg.adjust_lr_fn,
    }


def _build_adamw(params: list[Tensor], cfg: OptimizerConfig, ns_dtype: torch.dtype) -> Optimizer:
    return _adamw(params, cfg.resolved_lr, cfg.weight_decay, cfg)


def _sharded(params: list[Tensor]) -> bool:
    """FSDP2 parameters are DTensors: they need the sharded class (explicit, accounted communication)."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in params)


def _build_muon(params: list[Tensor], cfg: OptimizerConfig, ns_dtype: torch.dtype) -> Optimizer:
    if _sharded(params):  # the sharded vanilla-Muon baseline: all-gather and NS5 on every step
        return ShardedPeriodicRowMuon(
            params, refresh_every=1, ns_steps=cfg.ns_steps, ns_dtype=ns_dtype, ns_placement=cfg.ns_placement,
            **_muon_kwargs(cfg),
        )
    if ns_dtype == torch.bfloat16:
        return torch.optim.Muon(params, ns_steps=cfg.ns_steps, **_muon_kwargs(cfg))
    return PeriodicRowMuon(params, refresh_every=1, ns_steps=cfg.ns_steps, ns_dtype=ns_dtype, **_muon_kwargs(cfg))


def _build_periodic(params: list[Tensor], cfg: OptimizerConfig, ns_dtype: torch.dtype) -> Optimizer:
    if _sharded(params):
        return ShardedPeriodicRowMuon(
            params, refresh_every=cfg.refresh_every, gamma=cfg.gamma, ns_steps=cfg.ns_steps, ns_dtype=ns_dtype,
            rownorm_kernel=cfg.rownorm_kernel, ns_placement=cfg.ns_placement, **_muon_kwargs(cfg),
        )
    return PeriodicRowMuon(
        params,
        refresh_every=cfg.refresh_every,
        gamma=cfg.gamma,
        ns_steps=cfg.ns_steps,
        ns_dtype=ns_dtype,
        rownorm_kernel=cfg.rownorm_kernel,
        **_muon_kwargs(cfg),
    )


def _build_rownorm(params: list[Tensor], cfg: OptimizerConfig, ns_dtype: torch.dtype) -> Optimizer:
    return RowNormMuon(params, gamma=cfg.gamma, rownorm_kernel=cfg.rownorm_kernel, **_muon_kwargs(cfg))


def _build_muon_extra_ns(params: list[Tensor], cfg: OptimizerConfig, ns_dtype: torch.dtype) -> Optimizer:
    if _sharded(params):
        raise ValueError("optimizer.name 'muon_extra_ns' (the positive control) runs in one process only; FSDP2-"
                         "sharded parameters are not supported: allowed there: adamw, muon, periodic, rownorm")
    if ns_dtype == torch.bfloat16:  # the muon arm's own class at each dtype, plus the redundant work
        return MuonExtraNS(params, ns_steps=cfg.ns_steps, **_muon_kwargs(cfg))
    return PeriodicMuonExtraNS(params, ns_steps=cfg.ns_steps, ns_dtype=ns_dtype, **_muon_kwargs(cfg))


# name -> builder of the matrix-group optimizer, given the resolved Newton-Schulz dtype.
OPTIMIZERS: dict[str, Callable[[list[Tensor], OptimizerConfig, torch.dtype], Optimizer]] = {
    "adamw": _build_adamw,
    "muon": _build_muon,
    "periodic": _build_periodic,
    "rownorm": _build_rownorm,
    "muon_extra_ns": _build_muon_extra_ns,
    "muon_stretched": _build_muon,  # Muon's own optimizer: the null steps are the trial loop's
}


def list_optimizers() -> list[str]:
    """The optimizer arm names `build_optimizer` accepts."""
    return sorted(OPTIMIZERS)


class HybridOptimizer:
    """The matrix-group optimizer and the aux AdamW group, stepped, zeroed, saved and loaded as one.

    Also keeps the counters a trial logs: `ns5_calls`, `rownorm_calls`, `steps`, and optimizer wall time
    (`last_step_time_s`, `total_step_time_s`).
    """

    def __init__(
        self,
        config: OptimizerConfig,
        matrix: Optimizer,
        aux: Optimizer | None,
        routing: ParameterRouting,
        ns_dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        self.config = config
        self.ns_dtype = ns_dtype
        self.matrix = matrix
        self.aux = aux
        self.routing = routing
        self.steps = 0
        self.last_step_time_s = 0.0
        self.total_step_time_s = 0.0
        self._vanilla_ns5_calls = 0
        self._cuda = any(p.is_cuda for _, p in routing.muon)
        for group in self.param_groups:
            group.setdefault("initial_lr", group["lr"])

    @property
    def optimizers(self) -> list[Optimizer]:
        return [self.matrix] if self.aux is None else [self.matrix, self.aux]

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for opt in self.optimizers for g in opt.param_groups]

    @property
    def comm_stats(self) -> Any:
        """Logical communication of a sharded matrix optimizer (`CommStats`), or None when unsharded."""
        return getattr(self.matrix, "comm_stats", None)

    @property
    def ns5_calls(self) -> int:
        return int(getattr(self.matrix, "ns5_calls", 0)) + self._vanilla_ns5_calls

    @property
    def rownorm_calls(self) -> int:
        return int(getattr(self.matrix, "rownorm_calls", 0))

    @property
    def rownorm_kernels_used(self) -> str:
        """The row-norm kernels that ran ("native", "streamed", "unfused", comma-joined), "none" for arms without
        a row-norm step or before one ran."""
        return ",".join(sorted(getattr(self.matrix, "rownorm_kernels_used", ()))) or "none"

    def set_lr_scale(self, scale: float) -> None:
        """Set every group's lr to `scale` times its initial lr (warm-up and decay schedules)."""
        for group in self.param_groups:
            group["lr"] = group["initial_lr"] * scale

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self) -> None:
        """One step of both groups, timed (wall clock; synchronised first on CUDA so the time is the step's)."""
        if isinstance(self.matrix, torch.optim.Muon):
            # torch's Muon keeps no counter: it runs NS5 once per matrix that has a gradient.
            self._vanilla_ns5_calls += sum(
                1 for g in self.matrix.param_groups for p in g["params"] if p.grad is not None
            )
        if self._cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for opt in self.optimizers:
            opt.step()
        if self._cuda:
            torch.cuda.synchronize()
        self.last_step_time_s = time.perf_counter() - start
        self.total_step_time_s += self.last_step_time_s
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.model_dump(),
            "matrix": self.matrix.state_dict(),
            "aux": None if self.aux is None else self.aux.state_dict(),
            "counters": {
                "steps": self.steps,
                "total_step_time_s": self.total_step_time_s,
                "ns5_calls": self.ns5_calls,
                "rownorm_calls": self.rownorm_calls,
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = OptimizerConfig.model_validate(state["config"])
        if saved.name != self.config.name:
            raise ValueError(f"state is for optimizer {saved.name!r}, this one is {self.config.name!r}")
        self.matrix.load_state_dict(state["matrix"])
        if (state["aux"] is None) != (self.aux is None):
            raise ValueError("state and optimizer disagree on whether an aux AdamW group exists")
        if self.aux is not None:
            self.aux.load_state_dict(state["aux"])
        counters = state["counters"]
        self.steps = int(counters["steps"])
        self.total_step_time_s = float(counters["total_step_time_s"])
        if isinstance(self.matrix, PeriodicRowMuon):
            self.matrix.ns5_calls = int(counters["ns5_calls"])
            self.matrix.rownorm_calls = int(counters["rownorm_calls"])
        elif isinstance(self.matrix, torch.optim.Muon):
            self._vanilla_ns5_calls = int(counters["ns5_calls"])


def build_optimizer(
    model: nn.Module,
    config: OptimizerConfig | Mapping[str, Any],
    block_prefixes: Sequence[str] = ("blocks",),
) -> HybridOptimizer:
    """Build the complete optimizer of one arm for `model`: the matrix rule on block matrices, AdamW elsewhere.

    `config` may be an `OptimizerConfig` or a plain mapping of its fields (validated strictly: unknown keys and
    out-of-range values raise `pydantic.ValidationError`, a `ValueError`, naming the field and what is allowed).
    """
    cfg = config if isinstance(config, OptimizerConfig) else OptimizerConfig.model_validate(dict(config))
    routing = route_parameters(model, block_prefixes)
    muon_params = [p for _, p in routing.muon]
    if cfg.ns_dtype == "auto":
        ns_dtype = fast_ns_dtype(muon_params[0].device)
    else:
        ns_dtype = getattr(torch, cfg.ns_dtype)
    matrix = OPTIMIZERS[cfg.name](muon_params, cfg, ns_dtype)
    aux_params = [p for _, p in routing.aux]
    aux = _adamw(aux_params, cfg.aux_lr, cfg.aux_weight_decay, cfg) if aux_params else None
    return HybridOptimizer(cfg, matrix, aux, routing, ns_dtype)
