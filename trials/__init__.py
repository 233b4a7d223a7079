"""One training run: the model ladder, data, optimizer, train loop, FD evaluation and timing.

Knows nothing of Ray or HTTP. Subpackages: `trials.optim` (optimizers and routing), `trials.models`,
`trials.data`, `trials.text`, `trials.metrics`.
"""

from __future__ import annotations

__all__: list[str] = []
