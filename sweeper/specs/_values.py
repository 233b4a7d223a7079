"""The sweep spec's values and names: the searchable parameters and their caps, canonical values and their text,
the optimizer overrides' check, and the tags a spec may set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, ValidationError

from trials.record import TAG

from .checks import (
    _nested_errors,
    check_numbers,
)

# Searchable names -> the OptimizerConfig field they set and their type. K and gamma are the paper's names.
SEARCH_PARAMS: dict[str, tuple[str, type]] = {
    "K": ("refresh_every", int),
    "gamma": ("gamma", float),
    "lr": ("lr", float),
    "aux_lr": ("aux_lr", float),
    "weight_decay": ("weight_decay", float),
    "momentum": ("momentum", float),
}


_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

# Searchable and optimizer values: K beyond 100k steps never refreshes; lr, gamma and decay above 10 diverge.
_PARAM_MAX: dict[str, float] = {"refresh_every": 100_000, "gamma": 10.0, "lr": 10.0, "aux_lr": 10.0,
                                "weight_decay": 10.0, "aux_weight_decay": 10.0, "adamw_eps": 1.0,
                                "betas[0]": 1.0, "betas[1]": 1.0}
# Searched values lie within +-the largest cap (K's); each value's own range (lr > 0, momentum < 1, ...) is
# then checked by the optimizer's config, with its own message.
_SPACE_MAX = 100_000


def canonical_value(name: str, value: float | int) -> float | int:
    """One value per point: K is an int; floats keep 6 significant digits so a point's key and value agree."""
    if SEARCH_PARAMS[name][1] is int:
        return int(value)
    return float(f"{float(value):.6g}")


def _format_value(value: float | int) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def format_params(params: Mapping[str, float | int]) -> str:
    """`{"gamma": 0.15, "K": 3}` -> `"K=3,gamma=0.15"`: the paper's names first, then the rest in registry order."""
    order = list(SEARCH_PARAMS)
    keys = sorted(params, key=lambda k: order.index(k) if k in order else len(order))
    return ",".join(f"{k}={_format_value(canonical_value(k, params[k]))}" for k in keys)


def _check_optimizer(overrides: Mapping[str, Any], where: str, *, with_field: bool = True) -> None:
    """Validate optimizer overrides through trials' own OptimizerConfig, re-raised with the spec's field path."""
    from trials.optim import OptimizerConfig

    check_numbers(dict(overrides), where, _PARAM_MAX if with_field else None)
    if not with_field:  # one searched value, named in `where`
        for field, cap in _PARAM_MAX.items():
            value = overrides.get(field)
            if isinstance(value, int | float) and value > cap:
                raise ValueError(f"{where}: {value:g} is above the largest allowed value {cap:g}")

    try:
        OptimizerConfig.model_validate(dict(overrides))
    except ValidationError as exc:
        raise ValueError(_nested_errors(exc, where, with_field=with_field)) from None



# Tags and names are checked here, where the spec enters, rather than by MLflow in the driver: there a 600-
# character experiment name or a NUL failed the sweep after it was accepted and queued (issue 53, L2). MLflow takes
# keys of 250 characters and experiment names of 500 (its PostgreSQL column holds 256); values are lineage, short.
MAX_TAGS = 32
MAX_TAG_KEY = 250
MAX_TAG_VALUE = 1000
MAX_EXPERIMENT_NAME = 250


def _printable(text: str, what: str, limit: int) -> str:
    """`text` if it has at most `limit` characters and no control character (NUL, newline, ...)."""
    if len(text) > limit:
        raise ValueError(f"{what} has {len(text):,} characters; at most {limit} are accepted")
    bad = sorted({repr(c) for c in text if ord(c) < 32 or ord(c) == 127})
    if bad:
        raise ValueError(f"{what} holds control characters {bad}; use printable text")
    return text


def _check_tags(tags: dict[str, str]) -> dict[str, str]:
    """Extra tags may not set the ledger's own (TAG) or MLflow's: the ledger reads them back as its record. At most
    `MAX_TAGS`, each key and value of bounded size and printable."""
    reserved = {v for k, v in vars(TAG).items() if k.isupper()}
    prefixes = ("mlflow.", TAG.BEST)
    bad = sorted(k for k in tags if k in reserved or k.startswith(prefixes) or not k.strip())
    if bad:
        raise ValueError(f"tags {bad} are set by the sweeper itself (or empty); choose other names")
    if len(tags) > MAX_TAGS:
        raise ValueError(f"{len(tags)} tags; at most {MAX_TAGS} are accepted")
    for key, value in tags.items():
        _printable(key, f"tag key {key[:40]!r}", MAX_TAG_KEY)
        _printable(value, f"the value of tag {key[:40]!r}", MAX_TAG_VALUE)
    return tags


Tags = Annotated[dict[str, str], AfterValidator(_check_tags)]  # MLflow tags: the rule on the field
