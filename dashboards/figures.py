"""Each figure on its own, as a compute-then-draw pair (docs/guide.md's table): `compute_*` turns a records table
into the figure's data (small typed objects, testable on numbers), `plot_*` draws that data as a
`matplotlib.figure.Figure`. Importing this module loads matplotlib; `import dashboards` alone does not."""

from __future__ import annotations

from ._curves import compute_fd_curves, compute_loss_curves, plot_fd_curves, plot_loss_curves
from ._heatmap import compute_heatmap, plot_heatmap
from ._scaling import compute_scaling_plot, plot_scaling
from ._timing import compute_timing, plot_timing
from ._updates import compute_update_scale, plot_update_scale

__all__ = [
    "compute_fd_curves",
    "compute_heatmap",
    "compute_loss_curves",
    "compute_scaling_plot",
    "compute_timing",
    "compute_update_scale",
    "plot_fd_curves",
    "plot_heatmap",
    "plot_loss_curves",
    "plot_scaling",
    "plot_timing",
    "plot_update_scale",
]
