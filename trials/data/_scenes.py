"""The generated "scenes" set: one to several objects per image on a grid of cells, captioned compositionally.

Each object is a shape (the five of `shapes`) or a glyph (digits and capitals rendered once from the DejaVu Sans
Bold font that matplotlib ships), with a colour and a size, in its own cell of a `grid` x `grid` grid (4 x 4 by
default: 16 positions against shapes' 9). Objects never share a cell and are clipped to their cell, so none hides
another. A caption names every object in reading order (top row first, left to right), its size, colour, kind and
cell, and the relation between the first two:

    "a small red 7 at top far left, left of a large blue ring at top right, and a green A at bottom left"

so every attribute said is true of the image. Within a caption, jitter varies the image: centre within the cell,
scale +-10 %, rotation +-15 degrees, brightness -10 %; an optional graded background varies it further.

Labels (`ImageTextBatch.labels`) are per cell, so a small CNN can read them off its spatial map: `kind_<r>_<c>`
(0 = empty, else 1 + the kind's index), `colour_<r>_<c>` and `size_<r>_<c>` (0 = empty), plus `count` (objects - 1)
and `relation` (0 = one object, else 1 + the index in RELATIONS). `SceneBatch` decodes them back into objects.

Rendering is vectorised: every kind is a coverage mask rendered once (shapes from their signed distance, glyphs from
the font's outline, 4x supersampled) and cached; each object is resampled into its cell with one batched
`grid_sample` per kind at 2x supersampling, averaged down, then composited. 4096 images at 32 x 32 take about
0.3-0.5 s on one core.

Image size and cost: at 32 x 32 use patch 4 (`TrialConfig.patch`), 64 image tokens like shapes at 16 x 16 with patch
2, so a training step costs about what a shapes step does. Measured 2026-12-07 (2-core AMX-BF16 Xeon shared with
other jobs at load 7-10, so these are upper bounds; process CPU per step, batch 32, Muon, 1 thread): cpu-xs 178 ms
on scenes at 32 x 32 / patch 4 against 166 ms on 16 x 16 / patch 2, back to back. At 16 x 16 take grid 2 (8-px
cells, the objects of 32 px / grid 4 on 4 positions) or grid 4 with shapes only (glyphs at 3 px are barely legible).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from torch import Tensor

from ._base import DataError, ImageTextBatch, ImageTextDataset, stream_generator
from ._shapes import BACKGROUND, COLOURS, SHAPES, _signed_distance

__all__ = [
    "GLYPHS",
    "KINDS",
    "RELATIONS",
    "SCENE_COLOURS",
    "SCENE_SIZES",
    "SceneBatch",
    "ScenesDataset",
    "ScenesOptions",
    "cell_relation",
]

# Digits and capitals that stay distinct from each other and from the five shapes at 6-8 px (no 0/O next to the
# ring, no X next to the cross, no I/1 or 5/S pairs).
GLYPHS: tuple[str, ...] = ("1", "2", "3", "4", "5", "7", "8", "A", "E", "F", "H", "K", "L", "R", "T", "Y")
KINDS: tuple[str, ...] = SHAPES + GLYPHS
# shapes' six saturated colours, plus two that stay apart from them in RGB under the -10 % brightness jitter
SCENE_COLOURS: dict[str, tuple[float, float, float]] = {
    **COLOURS,
    "orange": (0.98, 0.52, 0.08),
    "white": (0.95, 0.95, 0.95),
}
SCENE_SIZES: dict[str, float] = {"small": 0.30, "large": 0.42}  # object radius as a fraction of its cell's side
# The first object's place against the second's (the second comes later in reading order, so never "below").
RELATIONS: tuple[str, ...] = ("left of", "right of", "above")

_ROWS = {3: ("top", "middle", "bottom"), 4: ("top", "upper", "lower", "bottom")}
_COLS = {3: ("left", "centre", "right"), 4: ("far left", "left", "right", "far right")}

_MASK_SIDE = 48  # mask pixels over [-_MASK_EXTENT, _MASK_EXTENT] radius units: ~19 per radius, finer than any cell
_MASK_EXTENT = 1.25
_SUPERSAMPLE = 2  # per output pixel and side, averaged down
_CENTRE_JITTER = 0.06  # of the cell side (a large object, +10 %, still fits: 0.42 * 1.1 + 0.06 < 0.5 ... nearly)
_SCALE_JITTER = 0.10
_ANGLE_JITTER = math.radians(15.0)
_BRIGHTNESS_JITTER = 0.10
_OBJECT_DRAWS = 8  # uniforms per object slot: kind, colour, size, centre x, centre y, scale, angle, brightness
_BACKGROUND_DRAWS = 3  # graded background: a tint per channel
_MIN_CELL_PIXELS = 4
_CHUNK_OBJECTS = 16384  # objects resampled per grid_sample call: bounded memory at any batch


class ScenesOptions(BaseModel):
    """The options of `scenes` (`data.options`), checked before anything is drawn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kinds: list[str] | None = Field(None, description=f"Object kinds (a subset of {list(KINDS)}); None = all.")
    colours: list[str] | None = Field(None, description=f"Colours (a subset of {list(SCENE_COLOURS)}); None = all.")
    sizes: list[str] | None = Field(None, description=f"Sizes (a subset of {list(SCENE_SIZES)}); None = both.")
    grid: int = Field(4, ge=2, le=8, description="Cells per side (2 to 8); image_size must divide by it.")
    min_objects: int = Field(1, ge=1, le=64, description="Fewest objects per image (1 to 64).")
    max_objects: int = Field(3, ge=1, le=64, description="Most objects per image: at most grid * grid.")
    jitter: bool = Field(True, description="Vary centre, scale, rotation and brightness within a caption.")
    background: Literal["dark", "graded"] = Field(
        "dark", description="dark: shapes' flat background; graded: a faint tinted gradient drawn per image."
    )

    @field_validator("kinds", "colours", "sizes")
    @classmethod
    def _subset(cls, names: list[str] | None, info: Any) -> list[str] | None:
        catalogue = {"kinds": KINDS, "colours": tuple(SCENE_COLOURS), "sizes": tuple(SCENE_SIZES)}[info.field_name]
        if names is None:
            return None
        unknown = [n for n in names if n not in catalogue]
        if unknown or not names:
            raise ValueError(f"unknown or empty {info.field_name} {unknown or names}; allowed: {list(catalogue)}")
        return list(dict.fromkeys(names))

    def caption_tokens(self) -> int:
        """The most tokens a caption can take: 9 an object (8 words, "a small red 7 at top far left", and one more
        where MiniLM splits a word: the most over every object, counted with its tokenizer), "left of" and "and",
        a comma between objects, and MiniLM's [CLS] and [SEP]. 34 at 3 objects, as the longest of 2,000 drawn."""
        m = self.max_objects
        return 9 * m + (2 if m > 1 else 0) + (1 if m > 2 else 0) + (m - 1) + 2

    def check(self, image_size: int) -> None:
        """Refuse what cannot be drawn at `image_size`: a DataError naming the option and what is allowed."""
        if image_size % self.grid or image_size // self.grid < _MIN_CELL_PIXELS:
            allowed = [g for g in range(2, 9) if image_size % g == 0 and image_size // g >= _MIN_CELL_PIXELS]
            raise DataError(f"options.grid: {self.grid} cells per side do not tile a {image_size}-px image into cells "
                            f"of at least {_MIN_CELL_PIXELS} px; allowed at this image_size: {allowed}")
        cells = self.grid * self.grid
        if self.max_objects > cells:
            raise DataError(f"options.max_objects: {self.max_objects} objects cannot fit on a {self.grid}x{self.grid} "
                            f"grid (one per cell); allowed: 1 to {cells}")
        if self.min_objects > self.max_objects:
            raise DataError(f"options.min_objects: {self.min_objects} is above max_objects {self.max_objects}; "
                            f"allowed: 1 to {self.max_objects}")


def _too_many(count: Any, grid: Any) -> str:
    """An object count past the field's bound, said as the canvas says it: one object per cell of the grid (the
    given one where it is a grid, else the default)."""
    side = grid if isinstance(grid, int) and 2 <= grid <= 8 else ScenesOptions.model_fields["grid"].default
    return f"{count} objects cannot fit on a {side}x{side} grid (one per cell); allowed: 1 to {side * side}"


def check_scenes_options(image_size: int, options: dict[str, Any]) -> ScenesOptions:
    """`options` validated for `image_size`; a DataError whose one line names the field and the allowed values."""
    try:
        parsed = ScenesOptions.model_validate(options)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = f"not an option of scenes; allowed: {list(ScenesOptions.model_fields)}"
        elif field in ("min_objects", "max_objects") and first["type"] == "less_than_equal":
            message = _too_many(first["input"], options.get("grid"))
        raise DataError(f"options.{field}: {message}") from None
    parsed.check(image_size)
    return parsed


# --- the masks: every kind drawn once ----------------------------------------------------------------------------


def _mask_coordinates(side: int, supersample: int) -> tuple[Tensor, Tensor]:
    """(side*ss, side*ss) sample centres over [-extent, extent] in radius units (u right, w down)."""
    n = side * supersample
    c = (torch.arange(n, dtype=torch.float64) + 0.5) / n * 2 * _MASK_EXTENT - _MASK_EXTENT
    return c[None, :].expand(n, n), c[:, None].expand(n, n)


def _shape_mask(kind: str) -> Tensor:
    u, w = _mask_coordinates(_MASK_SIDE, 1)
    pixel = 2 * _MASK_EXTENT / _MASK_SIDE
    return (0.5 - _signed_distance(kind, u, w) / pixel).clamp(0.0, 1.0)  # analytic edge coverage, as in shapes


def _font_path() -> str:
    try:
        import matplotlib
    except ImportError:
        raise DataError("the scenes set draws its glyphs from matplotlib's DejaVu font, and matplotlib is not "
                        "installed: pip install 'scalesweep[figures]' (or matplotlib), or pick kinds from "
                        f"{list(SHAPES)} only") from None
    from pathlib import Path

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans-Bold.ttf")


def _glyph_mask(char: str) -> Tensor:
    """The glyph's filled outline, centred, its larger bounding side 1.7 radius units, 4x supersampled coverage."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.path import Path as MplPath
    from matplotlib.textpath import TextPath

    path = TextPath((0, 0), char, size=1.0, prop=FontProperties(fname=_font_path()))
    vertices = path.vertices
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    scale = 1.7 / float(max(hi - lo))
    centre = (lo + hi) / 2
    ss = 4
    u, w = _mask_coordinates(_MASK_SIDE, ss)
    points = torch.stack([u.reshape(-1), -w.reshape(-1)], dim=1).numpy() / scale + centre  # font y points up
    inside = MplPath(vertices, path.codes).contains_points(points)  # even-odd holes via the path's codes
    mask = torch.as_tensor(inside, dtype=torch.float64).reshape(1, 1, _MASK_SIDE * ss, _MASK_SIDE * ss)
    return F.avg_pool2d(mask, ss)[0, 0]


@functools.cache
def _masks(kinds: tuple[str, ...]) -> Tensor:
    """(K, 1, M, M) float32 coverage masks, one per kind, rendered once per process."""
    return torch.stack([_shape_mask(k) if k in SHAPES else _glyph_mask(k) for k in kinds])[:, None].float()


# --- scenes: objects in cells ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SceneBatch:
    """N scenes of up to M objects each, slots in reading order; a slot past the image's count holds -1.

    cell, kind, colour, size: (N, M) long (cell = row * grid + col); jitter: (N, M, 5) in [-1, 1] (centre x,
    centre y, scale, angle, brightness), background: (N, 3) in [0, 1]."""

    cell: Tensor
    kind: Tensor
    colour: Tensor
    size: Tensor
    jitter: Tensor
    background: Tensor

    @property
    def count(self) -> Tensor:
        return (self.cell >= 0).sum(1)

    def relation(self, grid: int) -> Tensor:
        """(N,) index into RELATIONS of the first object against the second; -1 for one object."""
        return cell_relation(self.cell[:, 0], self.cell[:, 1], grid)


def cell_relation(first: Tensor, second: Tensor, grid: int) -> Tensor:
    """RELATIONS index of cell `first` against a later cell `second` (reading order): the axis of the larger
    offset, ties to the horizontal; -1 where either is empty."""
    dy = second // grid - first // grid  # >= 0: the second is never above the first
    dx = second % grid - first % grid
    rel = torch.where(dx.abs() >= dy, torch.where(dx > 0, 0, 1), 2)
    return torch.where((first >= 0) & (second >= 0), rel, -1)


def _per_cell(values: Tensor, cell: Tensor, cells: int) -> Tensor:
    """(N, cells) long: 1 + values[slot] at each occupied cell, 0 at empty cells."""
    out = torch.zeros(cell.shape[0], cells + 1, dtype=torch.long)
    out.scatter_(1, torch.where(cell >= 0, cell, cells), torch.where(cell >= 0, values + 1, 0))
    return out[:, :cells]


class ScenesDataset(ImageTextDataset):
    """Generated captioned scenes, deterministic by seed, unlimited (32 x 32 by default)."""

    check_options = staticmethod(check_scenes_options)  # trials.data.check_dataset_options: at the config edge

    def __init__(self, image_size: int = 32, seed: int = 0, **options: Any) -> None:
        if image_size < 8:
            raise DataError(f"image_size must be >= 8 pixels, got {image_size}")
        self.options = check_scenes_options(image_size, options)
        o = self.options
        self.image_size, self.seed = image_size, seed
        self.kinds = tuple(o.kinds or KINDS)
        self.colours = tuple(o.colours or SCENE_COLOURS)
        self.sizes = tuple(o.sizes or SCENE_SIZES)
        self.grid, self.cell_side = o.grid, image_size // o.grid
        self.min_objects, self.max_objects = o.min_objects, o.max_objects
        self.rows = _ROWS.get(o.grid, tuple(f"row {r + 1}" for r in range(o.grid)))
        self.cols = _COLS.get(o.grid, tuple(f"column {c + 1}" for c in range(o.grid)))
        if any(k in GLYPHS for k in self.kinds):
            _font_path()  # the install hint now, not at the first draw

    # --- labels and captions -----------------------------------------------------------------------------------

    def label_cardinalities(self) -> dict[str, int]:
        cards = {"count": self.max_objects, "relation": len(RELATIONS) + 1}
        for r in range(self.grid):
            for c in range(self.grid):
                cards |= {f"kind_{r}_{c}": len(self.kinds) + 1, f"colour_{r}_{c}": len(self.colours) + 1,
                          f"size_{r}_{c}": len(self.sizes) + 1}
        return cards

    def position(self, cell: int) -> str:
        return f"{self.rows[cell // self.grid]} {self.cols[cell % self.grid]}"

    def describe(self, kind: int, colour: int, size: int, cell: int) -> str:
        return f"a {self.sizes[size]} {self.colours[colour]} {self.kinds[kind]} at {self.position(cell)}"

    def scene_captions(self, scene: SceneBatch) -> list[str]:
        """One caption per scene: objects in reading order, the first two joined by their relation
        ("..., left of a ..."), the last after "and"."""
        rows = zip(scene.kind.tolist(), scene.colour.tolist(), scene.size.tolist(), scene.cell.tolist(),
                   scene.relation(self.grid).tolist(), strict=True)
        out = []
        for kinds, colours, sizes, cells, relation in rows:
            parts = [self.describe(k, c, s, cell) for k, c, s, cell in zip(kinds, colours, sizes, cells, strict=True)
                     if cell >= 0]
            if len(parts) > 1:
                parts[:2] = [f"{parts[0]}, {RELATIONS[relation]} {parts[1]}"]
            if len(parts) > 1:
                parts[-1] = f"and {parts[-1]}"
            out.append(", ".join(parts))
        return out

    def captions(self) -> list[str]:
        """Captions that hold every word the set can say: each one-object caption, and one per relation.

        Not every caption: with two or more objects there are far too many to list (and training draws are
        nearly all new), so this serves what `captions()` is for here, the learned encoder's vocabulary."""
        one = [self.describe(k, c, s, cell) for k in range(len(self.kinds)) for c in range(len(self.colours))
               for s in range(len(self.sizes)) for cell in range(self.grid * self.grid)]
        return one + [f"{one[0]}, {relation} {one[-1]}, and {one[0]}" for relation in RELATIONS]

    def labels(self, scene: SceneBatch) -> dict[str, Tensor]:
        cells = self.grid * self.grid
        out = {"count": scene.count - 1, "relation": scene.relation(self.grid) + 1}
        per = {name: _per_cell(getattr(scene, name), scene.cell, cells) for name in ("kind", "colour", "size")}
        for cell in range(cells):
            r, c = divmod(cell, self.grid)
            out |= {f"{name}_{r}_{c}": per[name][:, cell] for name in per}
        return out

    def scene_from_labels(self, labels: dict[str, Tensor]) -> SceneBatch:
        """The objects behind per-cell labels (no jitter, dark background): how predictions are read back."""
        cells = self.grid * self.grid
        kind = torch.stack([labels[f"kind_{c // self.grid}_{c % self.grid}"] for c in range(cells)], 1) - 1
        colour = torch.stack([labels[f"colour_{c // self.grid}_{c % self.grid}"] for c in range(cells)], 1) - 1
        size = torch.stack([labels[f"size_{c // self.grid}_{c % self.grid}"] for c in range(cells)], 1) - 1
        occupied = kind >= 0
        # occupied cells first, each group in reading order: a stable sort on "empty"
        order = torch.sort((~occupied).long(), dim=1, stable=True).indices
        cell = torch.where(occupied, torch.arange(cells).expand_as(kind), -1).gather(1, order)
        n = kind.shape[0]
        return SceneBatch(cell, kind.gather(1, order), colour.gather(1, order), size.gather(1, order),
                          torch.zeros(n, cells, 5), torch.tensor(BACKGROUND, dtype=torch.float64).expand(n, 3))

    # --- drawing -----------------------------------------------------------------------------------------------

    def draw_scenes(self, u: Tensor) -> SceneBatch:
        """Scenes from a (N, D) uniform draw (D = `_draws()`): count, distinct cells, attributes, jitter."""
        n, m, cells = u.shape[0], self.max_objects, self.grid * self.grid
        span = self.max_objects - self.min_objects + 1
        count = self.min_objects + (u[:, 0] * span).long().clamp(max=span - 1)  # (N,)
        chosen = u[:, 1 : 1 + cells].argsort(dim=1)[:, :m]  # (N, M) distinct random cells
        chosen = torch.where(torch.arange(m) < count[:, None], chosen, cells)  # unused slots sort last
        cell = chosen.sort(dim=1).values  # reading order
        cell = torch.where(cell < cells, cell, -1)
        obj = u[:, 1 + cells : 1 + cells + m * _OBJECT_DRAWS].reshape(n, m, _OBJECT_DRAWS)

        def index(j: int, card: int) -> Tensor:
            return torch.where(cell >= 0, (obj[..., j] * card).long().clamp(max=card - 1), -1)

        jitter = obj[..., 3:8] * 2 - 1 if self.options.jitter else torch.zeros(n, m, 5, dtype=u.dtype)
        back = torch.tensor(BACKGROUND, dtype=u.dtype).expand(n, 3)
        if self.options.background == "graded":
            back = back + 0.10 * u[:, -_BACKGROUND_DRAWS:]  # a faint tint per channel: every channel stays < 0.2
        return SceneBatch(cell, index(0, len(self.kinds)), index(1, len(self.colours)), index(2, len(self.sizes)),
                          jitter, back)

    def _draws(self) -> int:
        return 1 + self.grid * self.grid + self.max_objects * _OBJECT_DRAWS + _BACKGROUND_DRAWS

    def render_scenes(self, scene: SceneBatch) -> Tensor:
        """(N, 3, S, S) images in [-1, 1]: every object resampled into its cell, then composited."""
        n, side, cell_px = scene.cell.shape[0], self.image_size, self.cell_side
        coverage, rgb = self._objects(scene)  # (B, P, P) and (B, 3) for the B occupied slots, in slot order
        slot_n, slot_j = (scene.cell >= 0).nonzero(as_tuple=True)
        cells = scene.cell[slot_n, slot_j]
        canvas_cov = torch.zeros(n, self.grid, self.grid, cell_px, cell_px)
        canvas_rgb = torch.zeros(n, self.grid, self.grid, 3)
        canvas_cov[slot_n, cells // self.grid, cells % self.grid] = coverage
        canvas_rgb[slot_n, cells // self.grid, cells % self.grid] = rgb
        # (N, G, G, p, p) -> (N, G*p, G*p): rows of cells, then pixel rows within a cell
        cov = canvas_cov.permute(0, 1, 3, 2, 4).reshape(n, side, side)[:, None]  # (N, 1, S, S)
        colour = canvas_rgb.permute(0, 3, 1, 2).repeat_interleave(cell_px, 2).repeat_interleave(cell_px, 3)
        background = scene.background.float()[:, :, None, None]  # (N, 3, 1, 1)
        if self.options.background == "graded":
            ramp = (torch.arange(side, dtype=torch.float32) + 0.5) / side  # a vertical gradient, darker below
            background = background * (1.25 - 0.5 * ramp)[None, None, :, None]
        image = background * (1 - cov) + colour * cov  # (N, 3, S, S) in [0, 1]
        return image * 2 - 1

    def _objects(self, scene: SceneBatch) -> tuple[Tensor, Tensor]:
        occupied = scene.cell >= 0
        kind, size = scene.kind[occupied], scene.size[occupied]  # (B,)
        jitter = scene.jitter[occupied].float()  # (B, 5)
        radius = torch.tensor([SCENE_SIZES[s] for s in self.sizes])[size] * (1 + _SCALE_JITTER * jitter[:, 2])
        angle = _ANGLE_JITTER * jitter[:, 3]
        centre = _CENTRE_JITTER * jitter[:, :2]  # (B, 2) in cell sides
        rgb = torch.tensor([SCENE_COLOURS[c] for c in self.colours])[scene.colour[occupied]]
        rgb = rgb * (1 - _BRIGHTNESS_JITTER * (jitter[:, 4:5] + 1) / 2)
        p = self.cell_side * _SUPERSAMPLE
        s = (torch.arange(p, dtype=torch.float32) + 0.5) / p - 0.5  # sample centres in cell sides, (-0.5, 0.5)
        dx = s[None, None, :] - centre[:, 0, None, None]  # (B, 1, P)
        dy = s[None, :, None] - centre[:, 1, None, None]  # (B, P, 1)
        cos, sin = torch.cos(angle)[:, None, None], torch.sin(angle)[:, None, None]
        r = radius[:, None, None] * _MASK_EXTENT  # the mask spans +-extent radii: grid_sample's [-1, 1]
        grid = torch.stack([(cos * dx + sin * dy) / r, (cos * dy - sin * dx) / r], dim=-1)  # (B, P, P, 2)
        masks = _masks(self.kinds)
        coverage = torch.empty(kind.numel(), p, p)
        for k in kind.unique().tolist():
            at = (kind == k).nonzero(as_tuple=True)[0]
            for start in range(0, at.numel(), _CHUNK_OBJECTS):
                idx = at[start : start + _CHUNK_OBJECTS]
                source = masks[k : k + 1].expand(idx.numel(), -1, -1, -1)
                coverage[idx] = F.grid_sample(source, grid[idx], mode="bilinear", padding_mode="zeros",
                                              align_corners=False)[:, 0]
        coverage = F.avg_pool2d(coverage[:, None], _SUPERSAMPLE)[:, 0]  # (B, cell, cell)
        return coverage, rgb

    def _batch(self, scene: SceneBatch) -> ImageTextBatch:
        return ImageTextBatch(self.render_scenes(scene), self.scene_captions(scene), self.labels(scene))

    def sample_scenes(self, n: int, generator: torch.Generator) -> SceneBatch:
        """n scenes from one (n, D) draw, row i for item i: the first k of `sample(n, g)` are `sample(k, g)`."""
        return self.draw_scenes(torch.rand(n, self._draws(), generator=generator, dtype=torch.float64))

    def sample(self, n: int, generator: torch.Generator) -> ImageTextBatch:
        return self._batch(self.sample_scenes(n, generator))

    def render(self, labels: dict[str, Tensor]) -> ImageTextBatch:
        """Images and captions for given per-cell labels, drawn without jitter on the dark background."""
        return self._batch(self.scene_from_labels(labels))

    def reference_set(self, n: int = 4096) -> ImageTextBatch:
        """n items from this seed's "reference" stream (independent of the training and validation draws)."""
        return self.sample(n, stream_generator(self.seed, "reference"))

    def validation_set(self, n: int = 256) -> ImageTextBatch:
        """n items from this seed's "validation" stream."""
        return self.sample(n, stream_generator(self.seed, "validation"))
