"""Sweeps on Ray Tune with Optuna: a sweep spec becomes trials, results land in MLflow. Knows nothing of HTTP.

Not built yet (issue: "Sweeps on Ray Tune with Optuna"); the public surface will be named here.
"""

from __future__ import annotations

__all__: list[str] = []
