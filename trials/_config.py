"""The typed, strict configuration of one trial, and its result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._tracking import TrackingConfig
from .optim import OptimizerConfig

__all__ = [
    "CPU_AUX_LR",
    "DataConfig",
    "EvalConfig",
    "TrialConfig",
    "TrialResult",
    "default_eval_steps",
    "default_track_steps",
]

# The paper's AdamW lr for the non-matrix group (1e-4) is for 1.3B+ models at batch 4096. On the small CPU ladder it
# stalls the zero-initialised output layer: 300 steps of the AdamW arm at cpu-xs reached validation loss 1.00 with
# aux lr 1e-4 and 0.067 with 3e-3 (and the AdamW arm was still at 0.73 after 1200 steps). So on CPU rungs the aux lr
# defaults to the AdamW arm's lr (then the AdamW arm is plain AdamW at one lr), unless the config sets it.
CPU_AUX_LR = 3e-3

# Ranges of the numbers a trial takes: far above any real run (the paper: 60k steps, batch 4096, 10k FD samples),
# far below what would tie up a machine for years or overflow a counter.
MAX_STEPS = 10_000_000
MAX_SEED = 2**31 - 1
MAX_SAMPLES = 1_000_000
MAX_BATCH = 65_536


def default_eval_steps(steps: int) -> list[int]:
    """2/3, 5/6 and 6/6 of the horizon: the paper's 20k/25k/30k of 30k, scaled."""
    return sorted({max(1, round(steps * 2 / 3)), max(1, round(steps * 5 / 6)), steps})


def default_track_steps(steps: int, points: int, start: float, eval_steps: list[int] | None = None) -> list[int]:
    """`points` tracking checkpoints evenly spaced from `start` x the horizon to its end, plus the eval steps
    (so the tracking curve also holds the checkpoints that decide the objective). Empty when `points` is 0."""
    if points <= 0:
        return []
    grid = np.linspace(start * steps, steps, points).round().astype(int)
    return sorted({int(s) for s in grid if 1 <= s <= steps} | set(eval_steps or default_eval_steps(steps)))


class DataConfig(BaseModel):
    """The image-text set: a registered dataset name and its options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("shapes", description="Registered dataset (trials.data.list_datasets()).")
    image_size: int = Field(16, ge=8, le=4096, description="Image side in pixels, 8 to 4096 (16: the CPU default).")
    seed: int = Field(
        0, ge=0, le=MAX_SEED,
        description="Dataset seed (0 to 2^31-1): fixes the FD reference and validation sets; the same for every trial.",
    )
    options: dict[str, Any] = Field(default_factory=dict, description="Extra keyword arguments of the dataset.")

    @field_validator("name")
    @classmethod
    def _known_dataset(cls, name: str) -> str:
        from .data import list_datasets

        if name not in list_datasets():
            raise ValueError(f"unknown dataset {name!r}; allowed: {list_datasets()}")
        return name

    @model_validator(mode="after")
    def _options_fit(self) -> DataConfig:
        from .data import check_dataset_options

        check_dataset_options(self.name, self.image_size, dict(self.options))  # a DataError is a ValueError
        return self


class EvalConfig(BaseModel):
    """How quality is measured at each eval step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    extractor: str = Field(
        "shapes-cnn",
        description="Feature extractor for FD (trials.metrics.list_extractors()); only dinov2 gives FD-DINO.",
    )
    extractor_options: dict[str, Any] = Field(
        default_factory=dict, description="Extractor arguments, e.g. {'path': '/weights/dinov2-base'} for dinov2."
    )
    fd_samples: int = Field(
        512,
        ge=16,
        le=MAX_SAMPLES,
        description="Generated images per FD, 16 to a million (fixed per study: FD is biased upward at small N). "
        "512 keeps three evaluations cheap enough for a 1800-step default trial in 3 minutes; the floor's noise "
        "stays far below the seed spread (README).",
    )
    reference_samples: int = Field(
        4096, ge=16, le=MAX_SAMPLES, description="Reference images for the fixed FD statistics (16 to a million)."
    )
    sample_steps: int = Field(
        20, ge=1, le=10_000, description="Euler steps of the sampler, 1 to 10,000 (20: quality saturates at 16x16)."
    )
    guidance_scale: float = Field(
        1.0, ge=0, le=100, description="Classifier-free guidance, 0 to 100; 1.0 = plain conditional."
    )
    ema_decay: float | None = Field(
        0.995,
        gt=0,
        lt=1,
        description="EMA decay of the weights evaluated; None = raw weights. On raw weights FD swings between "
        "checkpoints more than optimizers differ at this scale (docs/design.md); 0.995 showed the paper's ordering.",
    )
    val_samples: int = Field(
        256, ge=1, le=MAX_SAMPLES, description="Held-out images for the validation loss (fixed noise and t; at most a "
        "million)."
    )
    fd_infinity: bool = Field(
        False,
        description="Also extrapolate FD to infinite samples (FD_N = FD_inf + k/N); needs fd_samples > 2x the "
        "feature dimension (subsets below 2d make the extrapolation wrong, so it refuses).",
    )
    batch_size: int = Field(256, ge=1, le=MAX_BATCH, description="Sampling batch size (1 to 65,536).")
    fd_bias: bool = Field(
        True,
        description="Estimate each deciding FD's small-sample bias as FD - FD-infinity (logged as fd_bias and "
        "fd_infinity) whenever fd_samples > 2x the feature dimension; not estimated below that. It reuses the "
        "generated features; its cost grows with N and d (one measurement on a 2-core EPYC, not scripted: 55 ms "
        "at 512 samples x 128-d features, 2.4 s at 2048 x 768-d against 0.17 s for the plain FD).",
    )
    track_points: int = Field(
        12,
        ge=0,
        le=64,
        description="Cheap tracking evaluations (logged as fd_track) evenly spaced from track_from x the horizon "
        "to its end, plus one at each eval step: enough to locate when a run crosses a quality target, where the "
        "three deciding checkpoints alone quantise it to thirds. 0 = off. Its measured cost: docs/targets.md.",
    )
    track_from: float = Field(
        1 / 3, gt=0, lt=1, description="First tracking checkpoint as a fraction of the horizon (1/3)."
    )
    track_samples: int = Field(
        256,
        ge=16,
        le=MAX_SAMPLES,
        description="Generated images per tracking FD, 16 to a million: the first track_samples of the same fixed "
        "captions and noise as the full FD. Biased upward against the full FD (fewer samples), so tracking FD is "
        "its own scale and is only compared with tracking FD.",
    )
    track_sample_steps: int = Field(
        8, ge=1, le=10_000,
        description="Euler steps of the sampler in tracking evaluations, 1 to 10,000 (8; the full FD uses "
        "sample_steps).",
    )


class TrialConfig(BaseModel):
    """One training run: model rung, optimizer, data, horizon, evaluation, seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rung: str = Field("cpu-xs", description="Model size from the ladder (trials.models.list_rungs()).")
    optimizer: OptimizerConfig = Field(default_factory=lambda: OptimizerConfig(), description="The optimizer arm.")
    steps: int = Field(
        1800,
        ge=1,
        le=MAX_STEPS,
        description="Training horizon in steps (at most 10 million). 1800 at cpu-xs: evals at 1200/1500/1800 come "
        "after vanilla Muon's steepest FD drop and before AdamW's, so the arms separate by 4-6x their seed spread "
        "(1200: ~2x; README).",
    )
    eval_steps: list[Annotated[int, Field(ge=1, le=MAX_STEPS)]] | None = Field(
        None, max_length=1000,
        description="Steps at which FD and validation loss are measured; default 2/3, 5/6, 6/6 of steps.",
    )
    batch_size: int = Field(32, ge=1, le=MAX_BATCH, description="Training batch size (1 to 65,536).")
    warmup_steps: int = Field(
        50, ge=0, le=MAX_STEPS, description="Linear lr warm-up, then constant (time-to-best needs no decay)."
    )
    grad_clip: float | None = Field(1.0, gt=0, le=1e6, description="Global gradient-norm clip (up to 1e6); None = off.")
    cond_dropout: float = Field(0.0, ge=0, le=1, description="Null-caption probability in training (for CFG).")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Model init, batch draws and noise (0 to 2^31-1).")
    order_seed: int | None = Field(
        None, ge=0, le=MAX_SEED,
        description="Batch draws and diffusion noise from this seed instead (0 to 2^31-1), the model's init still "
        "from `seed`: the same run on another data order (a transfer's controls use it, so their steps ratio has "
        "the spread of a real comparison). None = seed.",
    )
    data: DataConfig = Field(default_factory=lambda: DataConfig())
    patch: int | None = Field(
        None, ge=1, le=64,
        description="Patch side in pixels (1 to 64; data.image_size must divide by it); None = the rung's (2 on "
        "every rung). scenes at 32x32 takes 4: 64 image tokens, as shapes at 16x16 with patch 2.",
    )
    text_encoder: Literal["minilm", "learned"] = Field(
        "minilm", description="Frozen all-MiniLM-L6-v2 (offline) or a learned embedding fallback."
    )
    text_max_length: int = Field(16, ge=2, le=4096, description="Caption tokens (the shapes captions use at most 9).")
    eval: EvalConfig = Field(default_factory=lambda: EvalConfig())
    threads: int = Field(1, ge=1, le=1024, description="torch threads (1 to 1024); match the CPUs given to the trial.")
    device: Literal["cpu", "cuda", "auto"] = Field("cpu", description="auto = cuda when available.")
    precision: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="fp32, or bf16: forward and backward of the training step under bf16 autocast (master weights, "
        "gradients' accumulation into them, optimizer state and evaluation stay fp32; Newton-Schulz keeps "
        "optimizer.ns_dtype). bf16 runs only where the device computes bf16 natively (CUDA with bf16, CPUs with "
        "AMX or AVX512-BF16) and is refused elsewhere, where emulated bf16 is slower than fp32.",
    )
    workers: int = Field(
        1,
        ge=1,
        le=1024,
        description="Ranks the trial trains on (FSDP2, one process each; sweeper's execution.workers_per_trial). "
        "batch_size is the global batch, split evenly across them, so it must divide by workers.",
    )
    log_every: int = Field(25, ge=1, le=MAX_STEPS, description="Steps between train-loss points (batched to MLflow).")
    checkpoint_dir: str | None = Field(
        None, description="Save a checkpoint here at every eval step and resume from it when present."
    )
    tracking: TrackingConfig | None = Field(None, description="MLflow destination; None = no logging.")

    @model_validator(mode="before")
    @classmethod
    def _cpu_aux_lr(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not str(data.get("rung", "cpu-xs")).startswith("cpu-"):
            return data
        opt = data.get("optimizer", {})
        if isinstance(opt, OptimizerConfig):
            if "aux_lr" not in opt.model_fields_set:
                data = {**data, "optimizer": opt.model_copy(update={"aux_lr": CPU_AUX_LR})}
        elif isinstance(opt, dict) and "aux_lr" not in opt:
            data = {**data, "optimizer": {**opt, "aux_lr": CPU_AUX_LR}}
        return data

    @field_validator("rung")
    @classmethod
    def _known_rung(cls, rung: str) -> str:
        from .models import check_rung

        return check_rung(rung)

    @model_validator(mode="after")
    def _check_eval_steps(self) -> TrialConfig:
        from .metrics import list_extractors

        if self.eval_steps is not None:
            bad = [s for s in self.eval_steps if not 1 <= s <= self.steps]
            if bad or not self.eval_steps:
                raise ValueError(f"eval_steps must be a non-empty list of steps in [1, steps={self.steps}], got {bad}")
        if self.eval.extractor not in list_extractors():
            raise ValueError(f"unknown eval.extractor {self.eval.extractor!r}; allowed: {list_extractors()}")
        if self.eval.extractor == "scenes-cnn" and self.data.name != "scenes":
            raise ValueError(f"eval.extractor 'scenes-cnn' reads the scenes set's per-cell labels; data.name is "
                             f"{self.data.name!r}: allowed extractors there: "
                             f"{[e for e in list_extractors() if e != 'scenes-cnn']}")
        return self

    @model_validator(mode="after")
    def _patches_tile(self) -> TrialConfig:
        patch = self.resolved_patch
        if self.data.image_size % patch:
            allowed = [p for p in range(1, 65) if self.data.image_size % p == 0]
            raise ValueError(f"patch: data.image_size {self.data.image_size} does not divide into {patch}-px patches"
                             f"{'' if self.patch else f' (rung {self.rung} patch; set patch)'}; allowed patches at "
                             f"this image_size: {allowed}")
        return self

    @model_validator(mode="after")
    def _captions_fit(self) -> TrialConfig:
        if self.data.name == "scenes":  # a truncated caption would no longer say every object it shows
            from .data import ScenesOptions

            need = ScenesOptions.model_validate(self.data.options).caption_tokens()
            if self.text_max_length < need:
                raise ValueError(f"text_max_length: {self.text_max_length} tokens cut scenes captions of up to "
                                 f"{self.data.options.get('max_objects', 3)} objects, which take up to {need}; "
                                 f"allowed: {need} to 4096")
        return self

    @model_validator(mode="after")
    def _batch_splits(self) -> TrialConfig:
        if self.batch_size % self.workers:
            raise ValueError(f"batch_size {self.batch_size} (the global batch) does not split evenly across "
                             f"workers={self.workers}; use a multiple of {self.workers}")
        return self

    @property
    def resolved_patch(self) -> int:
        """The patch side the model is built with: `patch`, else the rung's."""
        from .models import get_rung

        return self.patch or get_rung(self.rung).config.patch

    @property
    def data_order_seed(self) -> int:
        """The seed of the batch draws and the diffusion noise: order_seed, else seed."""
        return self.seed if self.order_seed is None else self.order_seed

    @property
    def resolved_eval_steps(self) -> list[int]:
        return sorted(set(self.eval_steps)) if self.eval_steps else default_eval_steps(self.steps)

    @property
    def resolved_track_steps(self) -> list[int]:
        """Steps with a tracking evaluation (fd_track): empty when eval.track_points is 0."""
        return default_track_steps(self.steps, self.eval.track_points, self.eval.track_from, self.resolved_eval_steps)


@dataclass
class TrialResult:
    """What one run measured. FD values are on `metric_name`'s features with `fd_samples` generated images."""

    status: Literal["SUCCEEDED", "DIVERGED"]
    metric_name: str
    fd_samples: int
    fd: dict[int, float] = field(default_factory=dict)
    val_loss: dict[int, float] = field(default_factory=dict)
    effective_time_s: dict[int, float] = field(default_factory=dict)
    objective: float | None = None
    best_fd: float | None = None
    best_step: int | None = None
    endpoint_fd: float | None = None
    time_to_best_s: float | None = None
    total_effective_time_s: float = 0.0
    optimizer_time_s: float = 0.0
    mean_step_time_s: float = 0.0
    steps_done: int = 0
    ns5_calls: int = 0
    rownorm_calls: int = 0
    rownorm_kernel: str = "none"  # the row-norm kernels that ran (trials.optim: native, streamed, unfused)
    parameters: int = 0
    muon_parameters: int = 0
    diverged_at: int | None = None
    run_id: str | None = None
    wall_time_s: float = 0.0
    fd_infinity: dict[int, float] = field(default_factory=dict)
    # Dense tracking evaluations (eval.track_*): FD on track_samples images with track_sample_steps sampler steps,
    # its own scale (never mixed with `fd`), and the effective training time at each of those steps.
    fd_track: dict[int, float] = field(default_factory=dict)
    track_effective_time_s: dict[int, float] = field(default_factory=dict)
    track_samples: int = 0
    track_sample_steps: int = 0
    # With the scenes-cnn extractor: step -> {"alignment": all-correct share, "alignment.<attribute>": ...}, carried by
    # the checkpoint like FD (a resumed trial has every eval step's shares).
    alignment: dict[int, dict[str, float]] = field(default_factory=dict)
    eval_time_s: float = 0.0  # wall time in the full (deciding) evaluations
    track_eval_time_s: float = 0.0  # wall time in the tracking evaluations

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
