"""The curve forms ``fit_scaling`` knows, written in log space with their gradients.

Sizes enter as ``x = log(N / N0)`` with ``N0`` the geometric mean of the fitted sizes: at parameter counts of
1e9
``A * N^-alpha`` would need ``A`` near ``y * 1e9^alpha`` and the fit would be ill-conditioned, so the
optimizer works with ``a = log(A0)``, ``A0 = A * N0^-alpha`` the amplitude at ``N0``, and converts back to
``A`` at the end.
``E`` enters as ``e = log(E)`` so it stays positive without a constraint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["FORMS", "INTERNAL", "Form"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Form:
    """One curve form: its public name, parameter names, and the log-model with its gradient."""

    name: str
    params: tuple[str, ...]  # public names; internal ones are "a" for A, "alpha", "e" for E
    has_offset: bool

    def log_model(self, p: Mapping[str, Array | float], x: Array) -> Array:
        """log y at x = log(N / N0) for internal parameters ``p`` ("a", "alpha", and "e" when there is an
        offset)."""
        z = p["a"] - p["alpha"] * x
        if not self.has_offset:
            return np.asarray(z, dtype=np.float64)
        return np.logaddexp(p["e"], z)

    def log_model_and_grad(self, p: Mapping[str, Array], x: Array) -> tuple[Array, dict[str, Array]]:
        """log y and its partial derivatives with respect to each internal parameter, elementwise."""
        z = p["a"] - p["alpha"] * x
        if not self.has_offset:
            return z, {"a": np.ones_like(z), "alpha": -x * np.ones_like(z)}
        f = np.logaddexp(p["e"], z)
        w = np.exp(z - f)  # share of the power-law term in y; the offset's share is 1 - w
        return f, {"a": w, "alpha": -x * w, "e": 1.0 - w}


# Public parameter name -> internal (optimised) name.
INTERNAL = {"A": "a", "alpha": "alpha", "E": "e"}

FORMS: dict[str, Form] = {
    "E+A*N^-alpha": Form("E+A*N^-alpha", ("E", "A", "alpha"), has_offset=True),
    "A*N^-alpha": Form("A*N^-alpha", ("A", "alpha"), has_offset=False),
}
