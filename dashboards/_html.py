"""The report pages' HTML pieces that more than one page uses: escaping, a table, a number and an interval."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["escape", "interval", "number", "table", "text_table"]


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def table(header: Sequence[str], rows: Iterable[Sequence[str]], caption: str = "") -> str:
    """``header`` and cells are already-escaped HTML fragments."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{caption}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def text_table(header: Sequence[str], rows: Iterable[Sequence[str]], caption: str = "") -> str:
    """`table` with a plain-text header and caption, escaped here (the cells still arrive as HTML)."""
    return table([escape(h) for h in header], rows, escape(caption))


def number(value: Any, digits: int = 4) -> str:
    """`value` to `digits` significant digits; "—" for none or a value that is not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}g}"


def interval(d: Mapping[str, Any] | None, suffix: str = "") -> str:
    """An analysis estimate (`{mean, lo, hi, n}`) as "mean [lo, hi] (n=N)" (`suffix`, e.g. " %", after the
    interval), or "mean (n=1, one run)" without one; "—" for none."""
    if not d:
        return "—"
    mean = number(d["mean"], 3)
    if d.get("lo") is None:
        return f"{mean}{suffix} (n={d.get('n')}, one run)"
    return f"{mean} [{number(d['lo'], 3)}, {number(d['hi'], 3)}]{suffix} (n={d.get('n')})"
