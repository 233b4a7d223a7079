"""The text-to-image MMDiT and its size ladder.

from trials.models import build_model, count_parameters, list_rungs
model = build_model("cpu-xs")                      # or build_model(MMDiTConfig(...), depth=3)
v = model(x, t, context, pooled)                   # rectified-flow velocity, same shape as x
count_parameters(model).block_matrix_share         # share of parameters routed to Muon
"""

from __future__ import annotations

from ._ladder import (
    RUNGS,
    ParameterCount,
    Rung,
    build_model,
    check_rung,
    count_parameters,
    get_rung,
    list_rungs,
)
from ._mmdit import MMDiT, MMDiTConfig, ModelError

__all__ = [
    "RUNGS",
    "MMDiT",
    "MMDiTConfig",
    "ModelError",
    "ParameterCount",
    "Rung",
    "build_model",
    "check_rung",
    "count_parameters",
    "get_rung",
    "list_rungs",
]
