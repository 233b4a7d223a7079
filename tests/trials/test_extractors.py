"""Feature extractors: the registry, the pixel baseline, DINOv2 from a local directory, the label CNN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from trials.core.trial_settings import DINOV2_PATH_ENV
from trials.metrics import (
    ExtractorUnavailableError,
    FeatureError,
    UnknownExtractorError,
    frechet_distance,
    get_extractor,
    list_extractors,
)
from trials.metrics import _label_cnn as label_cnn_module
from trials.metrics._label_cnn import (
    LabelCNN,
    ShapesCNNExtractor,
    label_cnn_cache_key,
    load_or_train_label_cnn,
    train_label_cnn,
)

# Tiny labelled shapes, drawn with numpy: 3 shapes x 4 colours x 4 positions (quadrants) on 16x16, in [-1, 1].
_MASKS = [
    np.ones((6, 6)),  # filled square
    np.pad(np.zeros((4, 4)), 1, constant_values=1),  # frame
    np.add.outer(np.r_[0, 0, 1, 1, 0, 0], np.r_[0, 0, 1, 1, 0, 0]) > 0,  # plus
]
_RGB = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], dtype=np.float32) * 2 - 1
_CARDINALITIES = {"shape": 3, "colour": 4, "position": 4}
# Small enough to train in a few seconds in a test; more steps (batch 64) matter more than width here.
_FAST = {"epochs": 8, "batch_size": 32, "lr": 3e-3, "width": 16, "feature_dim": 64, "seed": 0}


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    # Tiny convolutions on a shared 2-core machine: a second intra-op thread made training 7x slower under
    # load, and one thread keeps the trained weights independent of the machine's core count.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def make_shapes(
    n: int, seed: int, colours: tuple[int, ...] = (0, 1, 2, 3)
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    rng = np.random.default_rng(seed)
    shape = rng.integers(0, len(_MASKS), n)
    colour = rng.choice(np.asarray(colours), n)
    position = rng.integers(0, 4, n)
    images = np.full((n, 3, 16, 16), -1.0, dtype=np.float32)
    for i in range(n):
        top = 1 + 8 * (position[i] // 2) + rng.integers(0, 2)
        left = 1 + 8 * (position[i] % 2) + rng.integers(0, 2)
        mask = _MASKS[shape[i]] > 0
        images[i, :, top : top + 6, left : left + 6] = np.where(mask, _RGB[colour[i]][:, None, None], -1.0)
    images = np.clip(images + rng.normal(0.0, 0.1, images.shape).astype(np.float32), -1.0, 1.0)
    labels = {"shape": shape, "colour": colour, "position": position}
    return torch.from_numpy(images), {k: torch.from_numpy(v) for k, v in labels.items()}


def test_registry_lists_and_rejects_unknown_names() -> None:
    assert {"dinov2", "pixels", "shapes-cnn"} <= set(list_extractors())
    with pytest.raises(UnknownExtractorError, match="valid names: dinov2, pixels, scenes-cnn, shapes-cnn"):
        get_extractor("inception")


def test_pixels_any_resolution() -> None:
    extractor = get_extractor("pixels")
    assert extractor.metric_name == "fd_pixels" and extractor.dim == 192
    images = torch.rand(5, 3, 32, 32) * 2 - 1
    features = extractor.extract(images)
    assert features.shape == (5, 192) and features.dtype == np.float64
    # 32 -> 8 by area: each feature is the mean of a 4x4 block
    assert features[0, 0] == pytest.approx(float(images[0, 0, :4, :4].mean()), abs=1e-6)


@pytest.mark.parametrize(
    ("images", "match"),
    [
        (torch.zeros(2, 1, 16, 16), r"\(N, 3, H, W\)"),
        (torch.zeros(2, 3, 16, 16, dtype=torch.uint8), "floating point"),
        (torch.full((2, 3, 16, 16), float("nan")), "NaN"),
    ],
)
def test_extract_rejects_bad_images(images: torch.Tensor, match: str) -> None:
    with pytest.raises(FeatureError, match=match):
        get_extractor("pixels").extract(images)


# --- DINOv2 ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_dinov2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    transformers = pytest.importorskip("transformers")
    config = transformers.Dinov2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        mlp_ratio=2,
        patch_size=14,
        image_size=56,  # position embeddings for 4x4 patches; the extractor interpolates them to 224
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("dinov2")
    transformers.Dinov2Model(config).save_pretrained(path)
    return path


def test_dinov2_cls_features_from_local_directory(tiny_dinov2: Path) -> None:
    extractor = get_extractor("dinov2", path=tiny_dinov2, batch_size=3)
    assert extractor.metric_name == "fd_dinov2" and extractor.dim == 32
    images = torch.rand(5, 3, 16, 16) * 2 - 1
    features = extractor.extract(images)
    assert features.shape == (5, 32) and features.dtype == np.float64 and np.isfinite(features).all()
    # batching does not change the result, and the CLS token is after the final layer norm (zero mean, unit
    # variance over the hidden dimension before the norm's affine weights, which start at 1 and 0)
    np.testing.assert_allclose(get_extractor("dinov2", path=tiny_dinov2).extract(images), features, atol=1e-5)
    np.testing.assert_allclose(features.mean(axis=1), 0.0, atol=1e-4)
    assert extractor.describe()["weights"] == str(tiny_dinov2)


def test_dinov2_path_from_environment(tiny_dinov2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DINOV2_PATH_ENV, str(tiny_dinov2))
    assert get_extractor("dinov2").dim == 32


def test_dinov2_without_path_says_how_to_provide_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DINOV2_PATH_ENV, raising=False)
    with pytest.raises(ExtractorUnavailableError, match=DINOV2_PATH_ENV):
        get_extractor("dinov2")
    with pytest.raises(ExtractorUnavailableError, match=r"no config\.json"):
        get_extractor("dinov2", path=tmp_path)


# --- shapes-cnn --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shapes_data() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    return make_shapes(1000, seed=0)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scalesweep-cache")


def _counting_trainings(mp: pytest.MonkeyPatch) -> list[int]:
    """Count the label CNN's trainings from here on (one entry per call): a counter, not a clock, tells a cache hit
    from a training on a loaded machine."""
    calls: list[int] = []
    real = label_cnn_module.train_label_cnn
    mp.setattr(label_cnn_module, "train_label_cnn", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    return calls


@pytest.fixture(scope="module")
def trained(shapes_data, cache_dir: Path) -> tuple[ShapesCNNExtractor, int]:
    """The extractor, and how many networks its creation trained (1: the cache was empty)."""
    images, labels = shapes_data
    with pytest.MonkeyPatch.context() as mp:
        trainings = _counting_trainings(mp)
        extractor = get_extractor(
            "shapes-cnn",
            images=images,
            labels=labels,
            cardinalities=_CARDINALITIES,
            cache_dir=cache_dir,
            training=_FAST,
            batch_size=100,  # extraction batch, not the training one
        )
    return extractor, len(trainings)


def test_shapes_cnn_learns_the_labels(trained) -> None:
    extractor, trainings = trained
    assert not extractor.network.from_cache and trainings == 1
    assert extractor.metric_name == "fd_shapes_cnn" and extractor.dim == 64
    accuracy = extractor.heldout_accuracy()
    assert set(accuracy) == set(_CARDINALITIES)
    assert min(accuracy.values()) >= 0.9, accuracy
    fresh_images, fresh_labels = make_shapes(300, seed=1)
    assert min(extractor.network.accuracy(fresh_images, fresh_labels).values()) >= 0.9


def test_shapes_cnn_cache_hit_gives_identical_features(trained, shapes_data, cache_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    extractor, _ = trained
    images, labels = shapes_data
    trainings = _counting_trainings(monkeypatch)
    cached = ShapesCNNExtractor.from_training_data(
        images, labels, _CARDINALITIES, cache_dir=cache_dir, training=_FAST
    )
    assert cached.network.from_cache and trainings == []  # loaded, not trained again
    assert cached.network.cache_key == extractor.network.cache_key
    assert cached.heldout_accuracy() == extractor.heldout_accuracy()
    probe = make_shapes(64, seed=2)[0]
    np.testing.assert_array_equal(cached.extract(probe), extractor.extract(probe))
    assert len(list((cache_dir / "label_cnn").glob("*.pt"))) == 1


def test_cache_key_covers_data_and_hyperparameters(shapes_data) -> None:
    images, labels = shapes_data
    key = label_cnn_cache_key(images, labels, _CARDINALITIES, **_FAST)
    assert key == label_cnn_cache_key(images.clone(), labels, _CARDINALITIES, **_FAST)
    assert key != label_cnn_cache_key(images, labels, _CARDINALITIES, **{**_FAST, "seed": 1})
    changed = images.clone()
    changed[0, 0, 0, 0] += 0.01
    assert key != label_cnn_cache_key(changed, labels, _CARDINALITIES, **_FAST)
    with pytest.raises(FeatureError, match="unknown hyper-parameters"):
        load_or_train_label_cnn(images, labels, _CARDINALITIES, cache_dir="unused", epoch=3)


def test_shapes_cnn_features_separate_distributions(trained) -> None:
    extractor, _ = trained
    warm_a = extractor.extract(make_shapes(400, seed=10, colours=(0, 3))[0])
    warm_b = extractor.extract(make_shapes(400, seed=11, colours=(0, 3))[0])
    cold = extractor.extract(make_shapes(400, seed=12, colours=(1, 2))[0])
    same, different = frechet_distance(warm_a, warm_b), frechet_distance(warm_a, cold)
    assert different > 20 * same, (same, different)  # measured: ~3 vs ~400


def test_training_is_deterministic_and_leaves_global_rng_alone(shapes_data) -> None:
    images, labels = shapes_data
    small = {**_FAST, "epochs": 1}
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = train_label_cnn(images[:200], {k: v[:200] for k, v in labels.items()}, _CARDINALITIES, **small)
    assert torch.rand(1) == expected_next
    second = train_label_cnn(images[:200], {k: v[:200] for k, v in labels.items()}, _CARDINALITIES, **small)
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_shapes_cnn_wraps_a_network_and_validates_arguments() -> None:
    network = LabelCNN(_CARDINALITIES, feature_dim=8)
    extractor = get_extractor("shapes-cnn", network=network)
    assert extractor.extract(torch.zeros(2, 3, 24, 24)).shape == (2, 8)  # resized to the network's 16x16
    with pytest.raises(FeatureError, match="network=<LabelCNN>"):
        get_extractor("shapes-cnn")
    images, labels = make_shapes(10, seed=0)
    with pytest.raises(FeatureError, match="do not match"):
        train_label_cnn(images, {"shape": labels["shape"]}, _CARDINALITIES)
    with pytest.raises(FeatureError, match=r"lie in \[0, 2\)"):
        train_label_cnn(images, labels, {**_CARDINALITIES, "shape": 2})


def test_noise_augmentation_makes_features_follow_content_not_pixel_noise() -> None:
    # Generated samples carry pixel noise that real renders do not. A network trained on clean renders only moves
    # its features with that noise; trained with noise augmentation, FD keeps separating content (colours) and
    # barely reacts to noise.
    from trials.data import ShapesDataset, stream_generator

    data = ShapesDataset(seed=0)
    train = data.sample(1500, stream_generator(0, "train"))
    cards = data.label_cardinalities()
    real_a = data.sample(500, stream_generator(0, "a")).images
    real_b = data.sample(500, stream_generator(0, "b")).images
    noisy_b = real_b + 0.15 * torch.randn(real_b.shape, generator=torch.Generator().manual_seed(0))
    few_colours = data.render(
        {k: v % 2 if k == "colour" else v for k, v in data.sample(500, stream_generator(0, "c")).labels.items()}
    ).images
    shifts, contents = {}, {}
    for noise_std in (0.0, 0.3):
        net = train_label_cnn(train.images, train.labels, cards, **{**_FAST, "noise_std": noise_std})
        extractor = ShapesCNNExtractor(net)
        a, b, nb, fc = (extractor.extract(x) for x in (real_a, real_b, noisy_b, few_colours))
        same = frechet_distance(a, b)
        shifts[noise_std] = frechet_distance(a, nb) - same  # what pixel noise alone adds to FD
        contents[noise_std] = frechet_distance(a, fc) / same  # how far a change of content stands above noise
    assert shifts[0.3] < 0.1 * shifts[0.0], shifts  # measured: 1.3 vs 1211
    assert contents[0.3] > 10, contents  # measured: 25
