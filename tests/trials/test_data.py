from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trials.data import (
    COLOURS,
    POSITIONS,
    SHAPES,
    DataError,
    FolderDataset,
    ImageTextBatch,
    ImageTextDataset,
    ShapesDataset,
    get_dataset,
    list_datasets,
    stream_generator,
    stream_seed,
)
from trials.data import _shapes as shapes_module
from trials.data._shapes import BACKGROUND


@pytest.fixture(scope="module")
def reference() -> ImageTextBatch:
    return ShapesDataset(seed=0).reference_set(4096)


def _coverage(images: torch.Tensor) -> torch.Tensor:
    """How far each pixel is from the background, (N, H, W), 0 on background."""
    background = torch.tensor(BACKGROUND)[None, :, None, None] * 2 - 1
    return (images - background).norm(dim=1)


# ----------------------------------------------------------------------------------------------------------
# shapes


def test_registry() -> None:
    assert list_datasets() == ["folder", "scenes", "shapes"]
    assert isinstance(get_dataset("shapes", image_size=16), ShapesDataset)
    with pytest.raises(DataError, match=r"valid datasets: \['folder', 'scenes', 'shapes'\]"):
        get_dataset("mnist")


def test_batch_contract(reference: ImageTextBatch) -> None:
    data = ShapesDataset()
    assert isinstance(data, ImageTextDataset)
    assert reference.images.shape == (4096, 3, 16, 16) and reference.images.dtype == torch.float32
    assert -1.0 <= reference.images.min() and reference.images.max() <= 1.0
    assert len(reference.captions) == len(reference) == 4096
    assert data.label_cardinalities() == {"shape": 5, "colour": 6, "position": 9, "size": 2}
    assert len(SHAPES) >= 4 and len(COLOURS) >= 5 and len(POSITIONS) == 9
    for name, card in data.label_cardinalities().items():
        labels = reference.labels[name]
        assert labels.dtype == torch.long and labels.shape == (4096,)
        assert set(labels.tolist()) == set(range(card))  # every value occurs in 4096 draws
    sub = reference[torch.tensor([3, 1])]
    assert sub.captions == [reference.captions[3], reference.captions[1]]
    assert (
        torch.equal(sub.images[1], reference.images[1])
        and sub.labels["shape"][0] == reference.labels["shape"][3]
    )
    assert len(reference[:10]) == 10


def test_captions_match_labels(reference: ImageTextBatch) -> None:
    data = ShapesDataset()
    names = data.label_names()
    for i in range(0, 4096, 7):
        size, colour, shape = (names[k][int(reference.labels[k][i])] for k in ("size", "colour", "shape"))
        position = names["position"][int(reference.labels["position"][i])]
        assert reference.captions[i] == f"a {size} {colour} {shape} {position}"
    every = data.captions()
    assert len(every) == len(set(every)) == 5 * 6 * 9 * 2
    assert set(reference.captions) <= set(every)


def test_pixels_have_the_labelled_colour(reference: ImageTextBatch) -> None:
    images = reference.images
    coverage = _coverage(images).flatten(1)  # (N, H*W)
    brightest = coverage.argmax(dim=1)  # the most covered pixel of each image
    pixels = images.flatten(2)[torch.arange(len(images)), :, brightest]  # (N, 3)
    background = torch.tensor(BACKGROUND) * 2 - 1
    palette = torch.tensor(list(COLOURS.values())) * 2 - 1  # (6, 3)
    # nearest palette colour by direction from the background (brightness jitter scales the colour)
    direction = torch.nn.functional.normalize(pixels - background, dim=1)
    palette_direction = torch.nn.functional.normalize(palette - background, dim=1)
    predicted = (direction @ palette_direction.T).argmax(dim=1)
    assert torch.equal(predicted, reference.labels["colour"])
    red = reference.labels["colour"] == list(COLOURS).index("red")
    # red pixels are red (a small triangle may cover no pixel fully: its reddest pixel is a mix)
    assert (pixels[red, 0] > 0.2).all() and (pixels[red, 1:] < -0.7).all()


def test_shapes_sit_at_the_labelled_position(reference: ImageTextBatch) -> None:
    coverage = _coverage(reference.images)  # (N, H, W)
    coords = torch.arange(16) + 0.5
    mass = coverage.sum(dim=(1, 2))
    cy = (coverage.sum(2) * coords).sum(1) / mass / 16  # fraction of the side
    cx = (coverage.sum(1) * coords).sum(1) / mass / 16
    row = torch.bucketize(cy, torch.tensor([0.375, 0.625]))
    col = torch.bucketize(cx, torch.tensor([0.375, 0.625]))
    assert torch.equal(row * 3 + col, reference.labels["position"])


def test_sizes_and_kinds_are_visible() -> None:
    data = ShapesDataset(image_size=32, jitter=False)
    n = len(SHAPES)
    labels = {
        "shape": torch.arange(n).repeat(2),
        "colour": torch.zeros(2 * n, dtype=torch.long),
        "position": torch.full((2 * n,), 4),
        "size": torch.arange(2).repeat_interleave(n),
    }
    batch = data.render(labels)
    area = _coverage(batch.images).flatten(1).sum(1)
    assert torch.all(area[n:] > 1.8 * area[:n])  # large (0.19) against small (0.125): (0.19/0.125)^2 = 2.3
    centre = _coverage(batch.images)[:, 16, 16]
    corner = _coverage(batch.images)[
        :, 16 - 4, 16 - 4
    ]  # inside the square's corner, outside the cross's arms
    kind = {name: k for k, name in enumerate(SHAPES)}
    assert centre[n + kind["circle"]] > 1.0 and centre[n + kind["ring"]] < 0.05  # a ring has a hole
    assert corner[n + kind["square"]] > 1.0 and corner[n + kind["cross"]] < 0.05


def test_antialiased_edges() -> None:
    batch = ShapesDataset(image_size=16).sample(64, torch.Generator().manual_seed(0))
    coverage = _coverage(batch.images)
    full = coverage.flatten(1).max(1).values[:, None, None]
    fraction = coverage / full
    partial = ((fraction > 0.05) & (fraction < 0.95)).sum(dim=(1, 2))
    assert (partial > 0).all()  # every shape has edge pixels between background and colour


def test_determinism_and_seed_streams() -> None:
    a, b = ShapesDataset(seed=0), ShapesDataset(seed=0)
    assert torch.equal(a.reference_set(64).images, b.reference_set(64).images)
    assert a.validation_set(64).captions == b.validation_set(64).captions
    g1, g2 = stream_generator(0, "train"), stream_generator(0, "train")
    assert torch.equal(a.sample(32, g1).images, a.sample(32, g2).images)
    assert not torch.equal(a.reference_set(64).images, ShapesDataset(seed=1).reference_set(64).images)
    streams = {stream_seed(0, s) for s in ("train", "reference", "validation")} | {stream_seed(1, "train")}
    assert len(streams) == 4
    train = a.sample(64, stream_generator(0, "train")).images
    assert not torch.equal(train, a.reference_set(64).images)
    assert not torch.equal(train, a.validation_set(64).images)
    # the first items of a bigger reference set are the smaller one: "n" only truncates
    assert torch.equal(a.reference_set(4096).images[:64], a.reference_set(64).images)


def test_any_resolution_and_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    for size in (8, 24, 64):
        images = ShapesDataset(image_size=size).sample(4, torch.Generator().manual_seed(0)).images
        assert images.shape == (4, 3, size, size)
    # Speed by counting, not by the clock (a loaded 2-core machine makes timings flake): rendering is vectorised,
    # one batched draw per chunk of 2^22 pixels and one signed-distance call per shape in it, never a call per image.
    draws, distances = [], []
    real_draw, real_distance = ShapesDataset._draw, shapes_module._signed_distance
    monkeypatch.setattr(ShapesDataset, "_draw", lambda self, kind, *a: draws.append(len(kind)) or real_draw(
        self, kind, *a))
    monkeypatch.setattr(shapes_module, "_signed_distance", lambda *a: distances.append(a[0]) or real_distance(*a))
    assert ShapesDataset(image_size=16).reference_set(4096).images.shape == (4096, 3, 16, 16)
    assert draws == [4096] and sorted(distances) == sorted(SHAPES)  # 16,384 images fit one chunk at 16 px
    draws.clear()
    assert ShapesDataset(image_size=64).reference_set(1025).images.shape[0] == 1025
    assert draws == [1024, 1]  # 2^22 / 64² = 1,024 images a chunk: bounded memory at any resolution


def test_subsets_and_errors() -> None:
    data = ShapesDataset(shapes=["circle", "ring"], colours=["red", "blue", "green", "yellow", "cyan"])
    assert data.label_cardinalities()["shape"] == 2 and data.label_cardinalities()["colour"] == 5
    batch = data.sample(32, torch.Generator().manual_seed(0))
    assert all(("circle" in c) or ("ring" in c) for c in batch.captions)
    with pytest.raises(DataError, match="valid shapes"):
        ShapesDataset(shapes=["hexagon"])
    with pytest.raises(DataError, match="must be 2 integers"):
        ShapesDataset().render({"shape": [0, 9], "colour": [0, 0], "position": [0, 0], "size": [0, 0]})
    with pytest.raises(DataError, match="lack factors"):
        ShapesDataset().render({"shape": [0]})


# ----------------------------------------------------------------------------------------------------------
# folder


def _write_folder(root: Path, n: int = 10, *, split: bool = False) -> list[tuple[int, int, int]]:
    from PIL import Image

    (root / "img").mkdir(parents=True)
    colours = [(230, 20, 20), (20, 200, 40), (30, 60, 240)]
    names = ["red", "green", "blue"]
    lines = []
    for i in range(n):
        k = i % 3
        Image.new("RGB", (40, 30), colours[k]).save(
            root / "img" / f"{i:03d}.png"
        )  # not square: centre-cropped
        entry = {"file": f"img/{i:03d}.png", "caption": f"a {names[k]} picture", "labels": {"colour": k}}
        if split:
            entry["split"] = "validation" if i < 2 else "train"
        lines.append(json.dumps(entry))
    (root / "captions.jsonl").write_text("\n".join(lines) + "\n")
    return colours


def test_folder_dataset(tmp_path: Path) -> None:
    colours = _write_folder(tmp_path, 10)
    data = get_dataset("folder", root=tmp_path, image_size=8, validation_fraction=0.2)
    assert isinstance(data, FolderDataset) and len(data) == 10
    assert data.label_cardinalities() == {"colour": 3}
    assert data.captions() == ["a blue picture", "a green picture", "a red picture"]
    validation = data.validation_set()
    reference = data.reference_set(4096)
    assert len(validation) == 2 and len(reference) == 8  # all training images, each once
    assert set(validation.captions) | set(reference.captions) <= set(data.captions())
    batch = data.sample(16, torch.Generator().manual_seed(0))
    assert batch.images.shape == (16, 3, 8, 8)
    assert torch.equal(batch.images, data.sample(16, torch.Generator().manual_seed(0)).images)
    for image, label, caption in zip(batch.images, batch.labels["colour"], batch.captions, strict=True):
        expected = torch.tensor(colours[int(label)], dtype=torch.float32) / 127.5 - 1
        assert torch.allclose(image.mean(dim=(1, 2)), expected, atol=0.02)  # a red picture is red
        assert caption == f"a {['red', 'green', 'blue'][int(label)]} picture"
    # the held-out items do not depend on the order of the lines
    lines = (tmp_path / "captions.jsonl").read_text().splitlines()
    (tmp_path / "captions.jsonl").write_text("\n".join(reversed(lines)))
    again = FolderDataset(tmp_path, image_size=8, validation_fraction=0.2)
    assert sorted(again.validation_set().captions) == sorted(validation.captions)


def test_folder_explicit_split_and_errors(tmp_path: Path) -> None:
    _write_folder(tmp_path / "a", 6, split=True)
    data = FolderDataset(tmp_path / "a", image_size=4)
    assert len(data.validation_set()) == 2 and len(data.reference_set()) == 4
    with pytest.raises(DataError, match="not found"):
        FolderDataset(tmp_path / "missing")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "captions.jsonl").write_text('{"file": "x.png"}\n')
    with pytest.raises(DataError, match="'file' and 'caption'"):
        FolderDataset(tmp_path / "b")
    (tmp_path / "b" / "captions.jsonl").write_text('{"file": "x.png", "caption": "c"}\n')
    with pytest.raises(DataError, match="cannot read image"):
        FolderDataset(tmp_path / "b")
