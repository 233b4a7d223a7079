"""The package boundaries of STYLE.md, checked: imports point one way (api -> sweeper -> trials)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> top-level modules it must never import
FORBIDDEN = {
    "trials": {"sweeper", "api", "scaling", "dashboards", "ray", "fastapi", "uvicorn", "optuna"},
    "sweeper": {"api", "fastapi", "uvicorn"},
    "scaling": {"api", "fastapi", "uvicorn", "dashboards"},
    "dashboards": {"api", "fastapi", "uvicorn"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize(
    "package", ["trials", "trials.optim", "trials.metrics", "scaling", "sweeper", "api", "dashboards"]
)
def test_public_surface_is_explicit(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    assert isinstance(module.__all__, list)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []
