"""Module attributes loaded on first use: one `__getattr__`/`__dir__` pair for the packages that defer heavy
imports (torch, Ray, MLflow) until a name is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_attributes(
    package: str,
    namespace: dict[str, Any],
    homes: Mapping[str, str],
    submodules: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return `(__getattr__, __dir__)` for `package`.

    `homes` maps each deferred name to the module it lives in (relative to `package`, or absolute); the first
    lookup imports that module and stores the value in `namespace`, so the next lookup is a plain attribute.
    `submodules` are subpackage names returned as modules.
    """
    subs = tuple(submodules)

    def __getattr__(name: str) -> Any:
        if name in homes:
            value = getattr(importlib.import_module(homes[name], package), name)
            namespace[name] = value
            return value
        if name in subs:
            return importlib.import_module(f".{name}", package)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ()), *subs})

    return __getattr__, __dir__


def homes_of(table: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Invert a module -> names table into name -> module."""
    return {name: module for module, names in table.items() for name in names}
