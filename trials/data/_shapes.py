"""The generated "shapes" set: one coloured shape per image on a dark background, captioned from its labels.

Factors (each a label, each a word or two in the caption "a {size} {colour} {shape} {position}"):
    shape     circle, square, triangle, cross, ring
    colour    red, green, blue, yellow, cyan, magenta
    position  a 3 x 3 grid of centres at 1/4, 1/2, 3/4 of the side ("top left", "top", ... "center" ...)
    size      small, large (radius 0.125 and 0.19 of the side: 2 and 3 px at 16 x 16, still recognisable)
so 540 distinct captions. Within each caption, jitter varies the image: centre +-3% of the side, radius +-10%,
rotation +-15 degrees, brightness -10%.

Rendering is vectorised over the batch: each shape is a signed distance field in pixel units, and a pixel's
coverage is clamp(0.5 - distance, 0, 1), the analytic area coverage of a straight edge crossing the pixel, so
the images are antialiased at any resolution without supersampling. 4096 images at 16 x 16 take about 0.2 s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ._base import DataError, ImageTextBatch, ImageTextDataset, stream_generator

__all__ = ["COLOURS", "POSITIONS", "SHAPES", "SIZES", "ShapesDataset"]

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "cross", "ring")
# saturated and far apart in RGB, so a small classifier (and a human) tells them apart at 16 x 16
COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.90, 0.12, 0.12),
    "green": (0.15, 0.78, 0.20),
    "blue": (0.15, 0.35, 0.95),
    "yellow": (0.95, 0.85, 0.15),
    "cyan": (0.15, 0.85, 0.90),
    "magenta": (0.88, 0.20, 0.85),
}
POSITIONS: tuple[str, ...] = (
    "top left", "top", "top right",
    "left", "center", "right",
    "bottom left", "bottom", "bottom right",
)  # fmt: skip
SIZES: dict[str, float] = {"small": 0.125, "large": 0.19}  # shape radius as a fraction of the image side
BACKGROUND: tuple[float, float, float] = (0.08, 0.08, 0.10)  # dark, so every colour stands out

# jitter amplitudes: enough variety that a model cannot memorise 540 images, small enough to keep labels exact
_CENTRE_JITTER = 0.03  # of the side
_RADIUS_JITTER = 0.10  # relative
_ANGLE_JITTER = math.radians(15.0)
_BRIGHTNESS_JITTER = 0.10  # colour scaled by U(1 - this, 1)
_JITTER_DRAWS = 5  # uniforms per image: centre x, centre y, radius, angle, brightness
_CHUNK_PIXELS = 1 << 22  # images rendered per chunk = this / (side * side): bounded memory at any resolution


def _box(u: Tensor, w: Tensor, half_u: float, half_w: float) -> Tensor:
    qu, qw = u.abs() - half_u, w.abs() - half_w
    outside = torch.sqrt(qu.clamp(min=0) ** 2 + qw.clamp(min=0) ** 2)
    return outside + torch.maximum(qu, qw).clamp(max=0)


def _triangle(u: Tensor, w: Tensor) -> Tensor:
    """Equilateral triangle pointing up (w is image-down), circumradius 1.25 (Inigo Quilez's exact SDF)."""
    k = math.sqrt(3.0)
    r = 1.25 * k / 2  # half the side; a larger circumradius than the circle to match its area
    x, y = u.abs() - r, -w + r / k
    fold = (x + k * y) > 0
    x, y = torch.where(fold, (x - k * y) / 2, x), torch.where(fold, (-k * x - y) / 2, y)
    x = x - x.clamp(-2 * r, 0)
    return -torch.sqrt(x**2 + y**2) * torch.sign(y)


def _signed_distance(kind: str, u: Tensor, w: Tensor) -> Tensor:
    """Signed distance (negative inside) of a unit-size shape at local coordinates (u, w), in radius units."""
    if kind == "circle":
        return torch.sqrt(u**2 + w**2) - 1.0
    if kind == "square":
        return _box(u, w, 0.85, 0.85)  # half-side 0.85: about the circle's area
    if kind == "triangle":
        return _triangle(u, w)
    if kind == "cross":
        return torch.minimum(_box(u, w, 1.0, 0.34), _box(u, w, 0.34, 1.0))
    if kind == "ring":
        return (torch.sqrt(u**2 + w**2) - 0.72).abs() - 0.28  # inner radius 0.44: a visible hole at 2 px
    raise DataError(f"unknown shape {kind!r}; valid shapes: {list(SHAPES)}")


def _select(names: Sequence[str] | None, catalogue: Sequence[str], what: str) -> tuple[str, ...]:
    if names is None:
        return tuple(catalogue)
    unknown = [n for n in names if n not in catalogue]
    if unknown or not names:
        raise DataError(f"unknown or empty {what} {list(names)!r}; valid {what}: {list(catalogue)}")
    return tuple(dict.fromkeys(names))


class ShapesDataset(ImageTextDataset):
    """Generated captioned shapes, deterministic by seed, at any resolution (16 x 16 by default)."""

    def __init__(
        self,
        image_size: int = 16,
        seed: int = 0,
        *,
        shapes: Sequence[str] | None = None,
        colours: Sequence[str] | None = None,
        jitter: bool = True,
    ) -> None:
        if image_size < 8:
            raise DataError(f"image_size must be >= 8 pixels, got {image_size}")
        self.image_size = image_size
        self.seed = seed
        self.jitter = jitter
        self.shapes = _select(shapes, SHAPES, "shapes")
        self.colours = _select(colours, list(COLOURS), "colours")
        self.positions = POSITIONS
        self.sizes = tuple(SIZES)

    def label_names(self) -> dict[str, tuple[str, ...]]:
        """The words behind each label value: `label_names()["colour"][labels["colour"][i]]`."""
        return {"shape": self.shapes, "colour": self.colours, "position": self.positions, "size": self.sizes}

    def label_cardinalities(self) -> dict[str, int]:
        return {name: len(values) for name, values in self.label_names().items()}

    def caption(self, shape: int, colour: int, position: int, size: int) -> str:
        return f"a {self.sizes[size]} {self.colours[colour]} {self.shapes[shape]} {self.positions[position]}"

    def captions(self) -> list[str]:
        ranges = (range(len(v)) for v in self.label_names().values())
        return [self.caption(*idx) for idx in itertools.product(*ranges)]

    def render(self, labels: dict[str, Tensor], generator: torch.Generator | None = None) -> ImageTextBatch:
        """Images and captions for given labels; jitter is drawn from `generator` (none without one)."""
        n = len(next(iter(labels.values()))) if labels else 0
        jitter = None
        if self.jitter and generator is not None:
            jitter = torch.rand(n, _JITTER_DRAWS, generator=generator, dtype=torch.float64)
        return self._render(labels, jitter)

    def _render(self, labels: dict[str, Tensor], jitter: Tensor | None) -> ImageTextBatch:
        missing = set(self.label_cardinalities()) - set(labels)
        if missing:
            raise DataError(f"labels lack factors {sorted(missing)}; need {list(self.label_cardinalities())}")
        labels = {
            k: torch.as_tensor(labels[k], dtype=torch.long).reshape(-1) for k in self.label_cardinalities()
        }
        n = labels["shape"].numel()
        for name, card in self.label_cardinalities().items():
            if labels[name].numel() != n or (
                n and not 0 <= int(labels[name].min()) <= int(labels[name].max()) < card
            ):
                raise DataError(f"labels[{name!r}] must be {n} integers in [0, {card})")

        side = float(self.image_size)
        row, col = labels["position"] // 3, labels["position"] % 3
        cx = (0.25 + 0.25 * col.double()) * side  # (N,) pixels
        cy = (0.25 + 0.25 * row.double()) * side
        radius = torch.tensor([SIZES[s] for s in self.sizes], dtype=torch.float64)[labels["size"]] * side
        angle = torch.zeros(n, dtype=torch.float64)
        rgb = torch.tensor([COLOURS[c] for c in self.colours], dtype=torch.float64)[
            labels["colour"]
        ]  # (N, 3)
        if self.jitter and jitter is not None:
            u = jitter * 2 - 1  # (N, 5) in [-1, 1]
            cx = cx + _CENTRE_JITTER * side * u[:, 0]
            cy = cy + _CENTRE_JITTER * side * u[:, 1]
            radius = radius * (1 + _RADIUS_JITTER * u[:, 2])
            angle = _ANGLE_JITTER * u[:, 3]
            rgb = rgb * (1 - _BRIGHTNESS_JITTER * (u[:, 4:5] + 1) / 2)

        images = torch.empty(n, 3, self.image_size, self.image_size)
        chunk = max(1, _CHUNK_PIXELS // self.image_size**2)
        for start in range(0, n, chunk):
            sl = slice(start, start + chunk)
            images[sl] = self._draw(labels["shape"][sl], cx[sl], cy[sl], radius[sl], angle[sl], rgb[sl])
        captions = [
            self.caption(*idx)
            for idx in zip(
                *(labels[k].tolist() for k in ("shape", "colour", "position", "size")), strict=True
            )
        ]
        return ImageTextBatch(images, captions, labels)

    def _draw(
        self, kind: Tensor, cx: Tensor, cy: Tensor, radius: Tensor, angle: Tensor, rgb: Tensor
    ) -> Tensor:
        """(N, 3, S, S) images in [-1, 1] from per-image shape parameters (pixel units, float64)."""
        centres = torch.arange(self.image_size, dtype=torch.float64) + 0.5  # pixel centres
        dx = centres[None, None, :] - cx[:, None, None]  # (N, 1, S)
        dy = centres[None, :, None] - cy[:, None, None]  # (N, S, 1)
        cos, sin = torch.cos(angle)[:, None, None], torch.sin(angle)[:, None, None]
        r = radius[:, None, None]
        u, w = (cos * dx + sin * dy) / r, (cos * dy - sin * dx) / r  # (N, S, S) local coordinates, unit size
        distance = torch.empty_like(u)
        for k, name in enumerate(self.shapes):
            mask = kind == k
            if mask.any():
                distance[mask] = _signed_distance(name, u[mask], w[mask]) * r[mask]  # pixels
        coverage = (0.5 - distance).clamp(0.0, 1.0)[:, None]  # (N, 1, S, S)
        background = torch.tensor(BACKGROUND, dtype=torch.float64)[None, :, None, None]  # (1, 3, 1, 1)
        image = background * (1 - coverage) + rgb[:, :, None, None] * coverage  # (N, 3, S, S) in [0, 1]
        return (image * 2 - 1).float()

    def sample(self, n: int, generator: torch.Generator) -> ImageTextBatch:
        """n items with independent uniform labels and jitter.

        One (n, 9) draw, row i for item i, so the first k items of `sample(n, g)` are `sample(k, g)` for a
        generator in the same state (FD sets nest)."""
        cards = self.label_cardinalities()
        u = torch.rand(n, len(cards) + _JITTER_DRAWS, generator=generator, dtype=torch.float64)  # (n, 9)
        labels = {
            name: (u[:, j] * card).long().clamp(max=card - 1) for j, (name, card) in enumerate(cards.items())
        }
        return self._render(labels, u[:, len(cards) :])

    def reference_set(self, n: int = 4096) -> ImageTextBatch:
        """n items from this seed's "reference" stream (independent of the training and validation draws)."""
        return self.sample(n, stream_generator(self.seed, "reference"))

    def validation_set(self, n: int = 256) -> ImageTextBatch:
        """n items from this seed's "validation" stream."""
        return self.sample(n, stream_generator(self.seed, "validation"))
