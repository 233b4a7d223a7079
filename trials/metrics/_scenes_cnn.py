"""The scenes set's feature network (FD logged as ``fd_scenes_cnn``) and its compositional alignment score.

The network is :class:`SceneCNN` (trials.metrics._label_cnn): a conv trunk pooled to the grid, a 16-d embedding per
cell (the 256 features, cell by cell) and heads for kind, colour and size shared by every cell, trained, cached and
seeded by the label CNN's code. Shapes' label CNN (one linear head per label on flattened features) could not learn
the kinds here: 8,192 images, 8 epochs, per-object kind accuracy 0.08 (chance 0.05), since each per-cell head sees
only that cell's few objects. FD on its features is named for what it is: ``fd_scenes_cnn``, never FD-DINO.

Alignment, in the spirit of GenEval: the network reads each generated image back into objects (what is in each
cell), and the share of images whose reading matches their caption is reported per attribute and all-correct:

    alignment.count     as many objects as the caption says
    alignment.position  objects in exactly the cells it says (so also the count)
    alignment.kind      each said cell holds the said shape or glyph
    alignment.colour    ... the said colour
    alignment.size      ... the said size
    alignment.relation  the first two objects read (reading order) stand in the said relation; over the images
                        whose caption says one (two or more objects)
    alignment           every attribute above at once

Measured on real images (2026-12-07; the default network, trained on 8,192 images of seed 0, scored on 2,048 fresh
ones, 32 x 32, default options; one core of a loaded 2-core Xeon, 230 s CPU):

    per label head, worst cell / mean:  kind 0.993 / 0.995, colour 1.000 / 1.000, size 0.999 / 1.000,
                                        count 0.9995, relation 0.955 (a global head; alignment reads cells instead)
    per object (occupied cells only):   kind 0.963, colour 1.000, size 0.997
    alignment of the real images:       count 0.999, position 0.999, kind 0.926, colour 1.000, size 0.994,
                                        relation 1.000, all 0.920

so a generator's alignment is read against a ceiling of about 0.92, limited by the glyphs at the small size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ._errors import FeatureError
from ._label_cnn import SceneCNN, ShapesCNNExtractor

__all__ = ["ALIGNMENT_ATTRIBUTES", "SCENES_CNN_TRAINING", "ScenesCNNExtractor", "scene_alignment"]

# The attributes alignment is reported on, in the order of the docstring.
ALIGNMENT_ATTRIBUTES: tuple[str, ...] = ("count", "position", "kind", "colour", "size", "relation")

# train_label_cnn's hyper-parameters for the scenes set (the _run default trains on this many images).
# Measured (see the module docstring): 8,192 images (trials._run), 12 epochs, noise up to 0.1 (0.3, shapes' value,
# blurs 1-px glyph strokes); 230 s of one core's CPU time, once per machine (cached).
SCENES_CNN_TRAINING: dict[str, Any] = {"architecture": "scene-cnn", "width": 32, "feature_dim": 256, "epochs": 12,
                                       "noise_std": 0.1}


class ScenesCNNExtractor(ShapesCNNExtractor):
    """Penultimate features of a :class:`LabelCNN` trained on the scenes set's labels (``fd_scenes_cnn``), and its
    label predictions for the alignment score."""

    name = "scenes-cnn"
    metric_name = "fd_scenes_cnn"

    def predict_from_features(self, features: np.ndarray | Tensor) -> dict[str, Tensor]:
        """Label -> (N,) predicted class, from `extract`'s features (the heads read their ReLU): no second pass."""
        hidden = torch.as_tensor(np.asarray(features), dtype=torch.float32)
        network = self.network.cpu()
        with torch.no_grad():
            logits = network.read(hidden) if isinstance(network, SceneCNN) else {
                name: head(torch.relu(hidden)) for name, head in network.heads.items()}
        self.network.to(self.device)
        return {name: out.argmax(1) for name, out in logits.items()}

    def predict(self, images: Any) -> dict[str, Tensor]:
        return self.predict_from_features(self.extract(images))


def _cells(labels: Mapping[str, Tensor], attribute: str, grid: int) -> Tensor:
    """(N, grid * grid) per-cell labels of one attribute, cells in reading order."""
    try:
        return torch.stack([torch.as_tensor(labels[f"{attribute}_{c // grid}_{c % grid}"]).long()
                            for c in range(grid * grid)], 1)
    except KeyError as missing:
        raise FeatureError(f"alignment needs the scenes set's per-cell labels; {missing} is missing") from None


def _first_two(occupied: Tensor) -> tuple[Tensor, Tensor]:
    """The first two occupied cells of each row in reading order, -1 where there are fewer."""
    cells = occupied.shape[1]
    index = torch.where(occupied, torch.arange(cells), cells).sort(dim=1).values[:, :2]
    index = torch.where(index < cells, index, -1)
    return index[:, 0], index[:, 1]


def scene_alignment(predicted: Mapping[str, Tensor], caption: Mapping[str, Tensor],
                    grid: int | None = None) -> dict[str, float]:
    """Shares of images whose predicted per-cell labels match their caption's: one per ALIGNMENT_ATTRIBUTES, and
    "all" for every attribute at once (MLflow logs them as ``alignment.<attribute>`` and ``alignment``, names that
    trials.record owns). "relation" is left out when no caption says a relation."""
    from ..data import cell_relation

    grid = grid or math.isqrt(sum(name.startswith("kind_") for name in caption))  # the labels' own grid
    kind_p, kind_t = _cells(predicted, "kind", grid), _cells(caption, "kind", grid)
    said = kind_t > 0  # (N, cells)
    occupied = kind_p > 0
    ok = {
        "count": occupied.sum(1) == said.sum(1),
        "position": (occupied == said).all(1),
        "kind": ((kind_p == kind_t) | ~said).all(1),
    }
    for attribute in ("colour", "size"):
        ok[attribute] = ((_cells(predicted, attribute, grid) == _cells(caption, attribute, grid)) | ~said).all(1)
    has_relation = said.sum(1) >= 2
    relation_p = cell_relation(*_first_two(occupied), grid)
    relation_t = cell_relation(*_first_two(said), grid)
    ok["relation"] = relation_p == relation_t
    everything = torch.stack([ok[a] for a in ALIGNMENT_ATTRIBUTES if a != "relation"], 1).all(1)
    everything &= ok["relation"] | ~has_relation
    n = kind_t.shape[0]
    if n == 0:
        raise FeatureError("alignment of no images")
    out = {a: float(ok[a].float().mean()) for a in ALIGNMENT_ATTRIBUTES if a != "relation"}
    if has_relation.any():  # else not said by any caption: no share to report
        out["relation"] = float(ok["relation"][has_relation].float().mean())
    out["all"] = float(everything.float().mean())
    return out
