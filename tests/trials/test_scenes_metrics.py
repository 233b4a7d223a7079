"""The scenes set's feature network, FD on its features and the alignment score, on real and on noise images.

The network here learns a smaller set, seeded, once per module: 16 x 16 images on a 2 x 2 grid (8-px cells, the
objects' size in the default 32 px / grid 4 at a quarter of the pixels), 5 kinds, 3 colours, one size, 1,280 steps
of batch 32 (width 16 and 512 steps of batch 64 left the kinds at chance at 32 px). The default network's measured
accuracy is in trials.metrics._scenes_cnn's docstring. Count and relation are read from the cells, as the alignment
score reads them (the network's global count and relation heads are auxiliary)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trials.data import ScenesDataset, stream_generator
from trials.metrics import (
    ALIGNMENT_ATTRIBUTES,
    ScenesCNNExtractor,
    feature_statistics,
    frechet_distance,
    frechet_distance_from_stats,
    get_extractor,
    list_extractors,
    scene_alignment,
)
from trials.record import METRIC

SMALL = {"kinds": ["circle", "square", "cross", "7", "A"], "colours": ["red", "green", "blue"], "sizes": ["large"]}


@pytest.fixture(scope="module")
def data() -> ScenesDataset:
    return ScenesDataset(image_size=16, seed=0, grid=2, **SMALL)  # 8-px cells, as the default 32 px / grid 4


@pytest.fixture(scope="module")
def extractor(data: ScenesDataset) -> ScenesCNNExtractor:
    train = data.sample(4096, stream_generator(0, "feature-net"))
    made = get_extractor("scenes-cnn", images=train.images, labels=train.labels,
                         cardinalities=data.label_cardinalities(),
                         training={"feature_dim": 128, "epochs": 10, "batch_size": 32, "val_fraction": 0.0})
    assert isinstance(made, ScenesCNNExtractor)
    return made


@pytest.fixture(scope="module")
def real(data: ScenesDataset):
    return data.sample(1024, stream_generator(0, "test-real"))


def test_registered_and_named_for_what_it_is() -> None:
    assert "scenes-cnn" in list_extractors()
    assert ScenesCNNExtractor.metric_name == "fd_scenes_cnn" and ScenesCNNExtractor.name == "scenes-cnn"
    assert METRIC.alignment("all") == "alignment" and METRIC.alignment("colour") == "alignment.colour"


def test_the_classifier_reads_real_images(extractor: ScenesCNNExtractor, data: ScenesDataset, real) -> None:
    accuracy = extractor.network.accuracy(real.images, real.labels)
    cells = {name: share for name, share in accuracy.items() if name.split("_")[0] in ("kind", "colour", "size")}
    worst = min(cells, key=cells.get)
    assert cells[worst] >= 0.95, (worst, cells[worst])  # every per-cell head, every cell
    read = extractor.predict(real.images)
    for attribute in ("kind", "colour", "size"):  # the objects alone (empty cells are the easy majority)
        right = total = 0
        for name in (n for n in real.labels if n.startswith(f"{attribute}_")):
            r, c = name.split("_")[1:]
            there = real.labels[f"kind_{r}_{c}"] > 0
            right += int((read[name][there] == real.labels[name][there]).sum())
            total += int(there.sum())
        assert right / total >= 0.95, (attribute, right / total)
    # count and relation as alignment reads them: from the cells read as occupied
    read_scene, true_scene = data.scene_from_labels(read), data.scene_from_labels(real.labels)
    assert float((read_scene.count == true_scene.count).float().mean()) >= 0.95
    two = true_scene.count >= 2
    same = read_scene.relation(data.grid)[two] == true_scene.relation(data.grid)[two]
    assert float(same.float().mean()) >= 0.95


def test_alignment_is_near_one_on_real_images_and_at_chance_on_noise(extractor: ScenesCNNExtractor, data,
                                                                    real) -> None:
    on_real = scene_alignment(extractor.predict(real.images), real.labels, data.grid)
    assert set(on_real) == {*ALIGNMENT_ATTRIBUTES, "all"}
    assert all(on_real[a] >= 0.9 for a in on_real), on_real
    # Chance: a reader that guesses every cell's labels uniformly at random (seeded). Pure noise images read by the
    # network must do no better, and real ones far better.
    cards = data.label_cardinalities()
    guess = torch.Generator().manual_seed(0)
    guessed = {name: torch.randint(card, (len(real),), generator=guess) for name, card in cards.items()}
    chance = scene_alignment(guessed, real.labels, data.grid)
    side = data.image_size
    noise = torch.randn(1024, 3, side, side, generator=torch.Generator().manual_seed(0)).clamp(-1, 1)
    on_noise = scene_alignment(extractor.predict(noise), real.labels, data.grid)
    assert on_noise["all"] <= max(chance["all"], 0.01) + 0.01, (chance, on_noise)
    for attribute in ("count", "position", "kind", "colour"):  # (one size here: whatever is read has it)
        assert on_noise[attribute] <= chance[attribute] + 0.08, (attribute, chance, on_noise)
    for attribute in ("count", "position", "kind", "colour"):
        assert on_real[attribute] - chance[attribute] > 0.5, (attribute, chance, on_real)


def test_alignment_counts_each_attribute_on_hand_made_labels(data: ScenesDataset) -> None:
    # Three images' captions, and readings that get one attribute wrong each.
    scenes = data.sample_scenes(3, stream_generator(1, "x"))
    said = data.labels(scenes)
    counts = (said["count"] + 1).tolist()
    i = counts.index(max(counts))  # an image with a relation
    cell = int(scenes.cell[i, 0])
    r, c = divmod(cell, data.grid)
    wrong_colour = {k: v.clone() for k, v in said.items()}
    wrong_colour[f"colour_{r}_{c}"][i] = wrong_colour[f"colour_{r}_{c}"][i] % len(data.colours) + 1
    shares = scene_alignment(wrong_colour, said, data.grid)
    assert shares["colour"] == pytest.approx(2 / 3) and shares["all"] == pytest.approx(2 / 3)
    assert shares["kind"] == shares["count"] == shares["position"] == 1.0
    extra = {k: v.clone() for k, v in said.items()}
    g = data.grid
    empty = next(e for e in range(g * g) if int(said[f"kind_{e // g}_{e % g}"][i]) == 0)
    extra[f"kind_{empty // g}_{empty % g}"][i] = 1  # an object the caption does not say
    shares = scene_alignment(extra, said, data.grid)
    assert shares["count"] == shares["position"] == pytest.approx(2 / 3) and shares["kind"] == 1.0
    assert scene_alignment(said, said, data.grid)["all"] == 1.0


def test_fd_of_real_against_real_is_near_its_bias_and_noise_is_far(extractor: ScenesCNNExtractor, data) -> None:
    reference = feature_statistics(extractor.extract(data.reference_set(2048).images))
    fds = [frechet_distance_from_stats(
        feature_statistics(extractor.extract(data.sample(512, stream_generator(0, f"floor-{k}")).images)), reference)
        for k in range(3)]
    noise = torch.randn(512, 3, data.image_size, data.image_size, generator=torch.Generator().manual_seed(1))
    noise = noise.clamp(-1, 1)
    fd_noise = frechet_distance_from_stats(feature_statistics(extractor.extract(noise)), reference)
    a = extractor.extract(data.sample(512, stream_generator(0, "bias-a")).images)
    b = extractor.extract(data.sample(512, stream_generator(0, "bias-b")).images)
    bias = frechet_distance(a, b)  # two real sets of the same size: FD is all small-sample bias
    assert max(fds) < 1.5 * bias + 1e-9 and np.std(fds) < 0.25 * np.mean(fds), (fds, bias)
    assert fd_noise > 20 * max(fds), (fd_noise, fds)
