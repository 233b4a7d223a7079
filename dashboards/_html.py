"""The report pages' HTML pieces that more than one page uses: escaping and a table."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["escape", "table"]


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def table(header: Sequence[str], rows: Iterable[Sequence[str]], caption: str = "") -> str:
    """``header`` and cells are already-escaped HTML fragments."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{caption}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
