"""The one reader of YAML/JSON files and texts that hold a mapping: specs, trial configs, trainer registries and
exports all go through it, so every one answers a bad file the same way, in one line.

JSON is read first: YAML is a superset of JSON, but YAML 1.1 reads JSON's `1e-08` as a string, so a JSON text (a
`.json` file, or any text that parses as JSON) is read as JSON and only the rest as YAML. A parse error is one line
naming where, the line and column when the parser knows them, and the problem; the parser's traceback is dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["parse_mapping", "read_mapping"]

ErrorFactory = Callable[[str], Exception]


def _yaml_problem(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(exc, "problem", None)
    if problem is None:
        lines = str(exc).strip().splitlines()
        problem = lines[0] if lines else type(exc).__name__
    return f"{where}: {problem}"


def parse_mapping(text: str, where: str, *, what: str = "a mapping", error: ErrorFactory = ValueError,
                  json_only: bool = False, empty: dict[str, Any] | None = None) -> dict[str, Any]:
    """The mapping `text` holds (JSON first, else YAML; JSON only with `json_only`). `where` names the source in
    messages; `what` says what the mapping should be. A text that is not YAML/JSON, or holds something other than a
    mapping, raises `error(message)`; an empty text (YAML's null) gives `empty` when one is given."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if json_only:
            raise error(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as yexc:
            raise error(f"{where}: not valid YAML/JSON{_yaml_problem(yexc)}") from None
    if data is None and empty is not None:
        return dict(empty)
    if not isinstance(data, dict):
        raise error(f"{where}: expected {what}, got {type(data).__name__}")
    return data


def read_mapping(path: str | Path, *, what: str = "a mapping", error: ErrorFactory = ValueError,
                 missing: ErrorFactory | None = None, empty: dict[str, Any] | None = None,
                 where: str | None = None) -> dict[str, Any]:
    """The mapping a YAML or JSON file holds (`parse_mapping` on its text; a `.json` file is JSON only). A file that
    is not there raises `missing(message)` (default `FileNotFoundError`), one that cannot be read `error`; messages
    name the file as `where` (default: its path)."""
    where = str(path) if where is None else where
    file = Path(path)
    if not file.is_file():
        raise (missing or FileNotFoundError)(f"no such file: {path}")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{where}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_mapping(text, where, what=what, error=error, json_only=file.suffix.lower() == ".json",
                         empty=empty)
