"""Drawing helpers shared by the figures: a fresh ``Figure`` per call and stable colours per arm.

Figures are built with ``matplotlib.figure.Figure`` directly, never through pyplot: pyplot keeps every figure
in a global registry (a service that draws per request would leak them) and picks a GUI backend from the
environment. Saving goes through the Agg canvas whatever the process's backend is.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from matplotlib.figure import Figure

from ._records import ARMS

# The arms keep one colour in every figure so a reader learns them once (matplotlib's tab10 order).
ARM_COLORS = {"adamw": "tab:blue", "muon": "tab:orange", "periodic": "tab:green", "rownorm": "tab:red"}


def new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def colors_for(labels: Sequence[str]) -> dict[str, str]:
    """One colour per label: an arm seen under one label keeps its own colour (a transfer; a sweep's baselines);
    an arm seen under several labels (a sweep's periodic cells) gets distinct colours from tab20, skipping
    the colours already taken, so no two labels in a panel share one."""
    import matplotlib
    from matplotlib.colors import to_hex

    arms = [label.split(" ", 1)[0] for label in labels]
    single = {a for a in arms if arms.count(a) == 1 and a in ARMS}
    out = {label: to_hex(ARM_COLORS[arm]) for label, arm in zip(labels, arms, strict=True) if arm in single}
    taken = set(out.values())
    tab20 = matplotlib.colormaps["tab20"]
    palette = [to_hex(tab20(i)) for i in range(tab20.N)]
    free = [c for c in palette if c not in taken] or palette
    rest = [label for label in labels if label not in out]
    out.update({label: free[i % len(free)] for i, label in enumerate(rest)})
    return out


def grid_shape(n: int, max_cols: int = 3) -> tuple[int, int]:
    """(rows, cols) for ``n`` panels: at most ``max_cols`` per row, 2 x 2 for four."""
    cols = 2 if n == 4 else min(max(n, 1), max_cols)
    return (max(n, 1) + cols - 1) // cols, cols


def png_bytes(figure: Figure, dpi: float = 100) -> bytes:
    """The figure as PNG bytes, rendered by Agg whatever backend the process uses."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)  # attaches itself to the figure; no global state involved
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
