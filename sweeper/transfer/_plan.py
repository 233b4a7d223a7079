"""A transfer's typed plan (`TransferPlan`: its rungs, arms, seeds, horizons and each (rung, arm)'s carried
optimizer, `PlanRow`), the study's size basis, and the small helpers the result's answers share."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["PlanBase", "PlanRow", "TransferPlan", "size_basis"]



class _Keyed(BaseModel):
    """Read by attribute; `plan["rungs"]` and `plan.get("horizons")` still work for readers written against the
    plan as a dict (older callers, and `transfer.json` as it is stored). A key the plan was built without is
    missing, as it was from the dict: plans of older transfers lack the sections added since."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def __getitem__(self, key: str) -> Any:
        if key in self.model_fields_set or key in (self.model_extra or {}):
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _MISSING) is not _MISSING

    def to_dict(self) -> dict[str, Any]:
        """As stored in `transfer.json`: the keys the plan was built with, nothing added."""
        return self.model_dump(mode="json", exclude_unset=True)


_MISSING = object()


class PlanRow(_Keyed):
    """One (rung, arm) of a transfer: its size and the lr and weight decay carried to it, by which rule."""

    rung: str
    arm: str = ""
    width: int | None = None
    parameters: int | None = None
    lr: float | None = None
    lr_rule: str | None = None
    lr_base: float | None = None  # the arm's lr at the sweep's rung
    weight_decay: float | None = None
    weight_decay_rule: str | None = None
    lr_factor: float | None = None  # a diagnostic arm's lr / Muon's carried lr, or an lr bracket's multiple


class PlanBase(_Keyed):
    """The sweep's rung, where the carried values come from: its width, size and every arm's optimizer there."""

    rung: str
    width: int
    parameters: int | None = None
    optimizers: dict[str, dict[str, Any]]


class TransferPlan(_Keyed):
    """What a transfer runs, decided before any run: rungs, arms, seeds, horizons and eval steps, the target and
    plateau rules, the chosen pair and the carried lr per (rung, arm). Optional fields are None in plans of
    transfers started before they existed."""

    rungs: list[str]
    horizon: int  # the first rung's (the sweep's own rung runs there at this horizon)
    seeds: list[int]
    arms: list[str]
    searched_arm: str
    chosen: dict[str, Any]
    runs: list[PlanRow] = []
    source_horizon: int | None = None
    eval_steps: list[int] = []
    horizons: dict[str, int] | None = None  # per rung; None: every rung at `horizon`
    eval_steps_by_rung: dict[str, list[int]] | None = None
    horizon_rule: dict[str, Any] | None = None
    target: dict[str, Any] | None = None
    target_text: str | None = None
    plateau: dict[str, Any] | None = None
    weight_decay_rule: str | None = None
    size_basis: dict[str, Any] | None = None
    base: PlanBase | None = None
    verification: dict[str, Any] | None = None
    # Seeds added in rounds: the rule (`scaling.RoundsSpec`), the deciding rung, the first round's seeds and each
    # look so far (`scaling.rounds_look`); `seeds` above grows with the rounds.
    rounds: dict[str, Any] | None = None
    # The controls (`TransferSpec.controls`): kind -> {arm, against, data_order, order_seed_offset?; the steps
    # control's stretch and expected_steps_ratio (Muon / stretched)}; their (rung, arm) rows, Muon's carried again.
    # Kept apart from `arms` and `runs`: the searched arm is never compared with a control.
    controls: dict[str, dict[str, Any]] | None = None
    # The diagnostics (`TransferSpec.diagnostics`): kind -> {arm, against, reference, lr_factor}; their rows are
    # in `control_runs` beside the controls'.
    diagnostics: dict[str, dict[str, Any]] | None = None
    # The fixed arms (`TransferSpec.fixed_arms`): kind -> {arm, of, refresh_every, gamma}; rows in `control_runs`.
    fixed_arms: dict[str, dict[str, Any]] | None = None
    control_runs: list[PlanRow] = []
    # Equal tuning (`TransferSpec.lr_brackets`): arm -> multiples of its carried lr; the rows of the multiples other
    # than 1, arms named `<arm>@lr_x<multiple>`.
    lr_brackets: dict[str, list[float]] | None = None
    bracket_runs: list[PlanRow] = []
    # Target rule `pilot` (`_pilot`): where, how long and on which seeds the reference arm's pilot trains, and once
    # it finished (before any judged run) its `result`: run ids, curves, the one target and the plateau verdict.
    pilot: dict[str, Any] | None = None
    # Seeds added to the finished transfer (`transfer extend`): one entry per extension (when, the seeds before,
    # the seeds added); `seeds` above holds them all. Each is one more look for the claims' alpha budget.
    extensions: list[dict[str, Any]] | None = None

    def planned_runs(self) -> int:
        """Runs of the transfer's sweep: every row (the arms', an lr bracket's, the controls') on every seed."""
        return (len(self.runs) + len(self.bracket_runs) + len(self.control_runs)) * len(self.seeds)

    def horizon_of(self) -> dict[str, int]:
        """Steps per rung (every rung at `horizon` in plans from before per-rung horizons)."""
        return dict(self.horizons) if self.horizons else {r: self.horizon for r in self.rungs}

    def horizon_rule_doc(self) -> dict[str, Any]:
        return dict(self.horizon_rule) if self.horizon_rule else {"mode": "fixed"}


# ----------------------------------------------------------------------------------------------------------
# Sizes


def size_basis(trial: Mapping[str, Any] | None) -> tuple[dict[str, int], str]:
    """(denoiser overrides, description) of a study's size basis: a rung's parameters counted as the study's
    trials build its denoiser (the text encoder's context and pooled widths, the image size and channels), the
    same count every run logs as `model.parameters`. The sweep export, the transfer's plan, fits and predictions
    all count sizes this way, so one study never mixes two counts of one rung."""
    from trials import TrialConfig
    from trials.data import DATASETS

    cfg = TrialConfig.model_validate({**dict(trial or {}), "rung": "cpu-xs"})  # any rung: these fields are shared
    if cfg.text_encoder == "minilm":
        from trials.text import MiniLMEncoder

        context, pooled = int(MiniLMEncoder.context_dim), int(MiniLMEncoder.pooled_dim)
    else:
        from trials.text import LearnedTextEncoder

        encoder = LearnedTextEncoder(max_length=cfg.text_max_length)
        context, pooled = int(encoder.context_dim), int(encoder.pooled_dim)
    # The dataset class's channel count (3: RGB); building the dataset itself would cost seconds.
    factory = DATASETS.factory(cfg.data.name) if cfg.data.name in DATASETS else None
    channels = int(getattr(factory, "channels", 3))
    overrides = {"image_size": cfg.data.image_size, "in_channels": channels, "context_dim": context,
                 "pooled_dim": pooled}
    text = (f"trainable denoiser parameters as this study's trials build them ({cfg.text_encoder} text encoder: "
            f"context {context}, pooled {pooled}; {cfg.data.image_size}px images, {channels} channels); frozen "
            "text encoders are not counted")
    return overrides, text


def _rung_shape(rung: str, trial: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """(width, parameters) of a rung's denoiser on the study's size basis (`size_basis(trial)`), counted on the
    meta device (no memory, any size)."""
    return _count(rung, json.dumps(dict(trial or {}), sort_keys=True))


@cache
def _count(rung: str, trial_json: str) -> tuple[int, int]:
    from trials.models import build_model, count_parameters, get_rung

    overrides, _ = size_basis(json.loads(trial_json))
    return get_rung(rung).config.width, count_parameters(build_model(rung, device="meta", **overrides)).total



def _clean(value: Any) -> Any:
    """JSON-able: NaN and inf -> None, tuples -> lists, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_clean(v) for v in (sorted(value) if isinstance(value, set) else value)]
    return value
