"""Module attributes loaded on first use: one `__getattr__`/`__dir__` pair for the packages that defer heavy
imports (torch, Ray, MLflow) until a name is asked for, and `lazy_face`, which writes a package's face once.

A face written by hand named each lazy name three times (a `TYPE_CHECKING` import for type checkers, a table for
the loader, `__all__`). `lazy_face` reads the package's own `if TYPE_CHECKING:` imports instead, as SPEC 1's
`lazy_loader.attach_stub` reads a stub: those imports are what type checkers see, what `__getattr__` loads and
what `__all__` lists, so each name is written once.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["homes_of", "lazy_attributes", "lazy_face"]


def lazy_attributes(
    package: str,
    namespace: dict[str, Any],
    homes: Mapping[str, str],
    submodules: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return `(__getattr__, __dir__)` for `package`.

    `homes` maps each deferred name to the module it lives in (relative to `package`, or absolute); the first
    lookup imports that module and stores the value in `namespace`, so the next lookup is a plain attribute.
    `submodules` are subpackage names returned as modules. Nothing else answers: a name that is not on the face is
    imported from the module that owns it (tests/test_layout.py checks every package).
    """
    subs = tuple(submodules)

    def __getattr__(name: str) -> Any:
        if name in subs:
            return importlib.import_module(f".{name}", package)
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name], package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ()), *subs})

    return __getattr__, __dir__


def homes_of(table: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Invert a module -> names table into name -> module."""
    return {name: module for module, names in table.items() for name in names}


def lazy_face(
    package: str, namespace: dict[str, Any]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """`(__all__, __getattr__, __dir__)` of `package` from the imports in its `__init__`'s `if TYPE_CHECKING:`
    block: `from .mod import a, b` puts `a` and `b` on the face, loaded from `.mod` on first use; `from . import
    sub` makes the subpackage `sub` an attribute (not on the face)."""
    homes, subs = _checking_imports(Path(namespace["__file__"]))
    getattr_, dir_ = lazy_attributes(package, namespace, homes, subs)
    return sorted(homes), getattr_, dir_


def _checking_imports(init: Path) -> tuple[dict[str, str], list[str]]:
    homes: dict[str, str] = {}
    subs: list[str] = []
    for block in ast.parse(init.read_text(), filename=str(init)).body:
        if not (isinstance(block, ast.If) and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")):
            continue
        for node in block.body:
            if not isinstance(node, ast.ImportFrom):
                raise ImportError(f"{init}: only `from ... import ...` belongs in the TYPE_CHECKING face")
            if node.module is None:  # `from . import sub`
                subs += [alias.name for alias in node.names]
                continue
            if any(alias.asname not in (None, alias.name) for alias in node.names):
                raise ImportError(f"{init}:{node.lineno}: a face name is the name its module gives it (no `as`)")
            homes.update(dict.fromkeys((alias.name for alias in node.names), "." * node.level + node.module))
    return homes, subs
