"""A small CNN trained on a generated set's labels; its penultimate layer is the embedded default FD feature.

It needs no download and, unlike raw pixels, its features know what the generator is asked to draw
(shape, colour, position). Early pilot (docs/design.md): with such features FD separated learning rates far beyond its
noise (FD 47-116 between runs, real-vs-real noise 15 +- 2.5 at 1024 samples), where pixel FD barely did.
The numbers are in this network's feature space only: it is logged as ``fd_shapes_cnn``, never FD-DINO.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..core.trial_settings import CACHE_DIR_ENV, TrialSettings
from ._errors import FeatureError
from ._extractors import FeatureExtractor, _check_batch_size, as_image_batch

__all__ = [
    "CACHE_DIR_ENV",
    "LabelCNN",
    "SceneCNN",
    "ShapesCNNExtractor",
    "default_cache_dir",
    "label_cnn_cache_key",
    "load_or_train_label_cnn",
    "train_label_cnn",
]


# Part of the cache key. Bump it whenever the architecture, the training loop or the preprocessing changes,
# so that a cached network never silently stands in for a different one. The torch version is deliberately
# not part of the key: one network kept across an upgrade keeps FD numbers comparable within a study.
_CODE_VERSION = "label-cnn-v2"


def default_cache_dir() -> Path:
    """``$SCALESWEEP_CACHE_DIR`` if set, else ``~/.cache/scalesweep``."""
    raw = TrialSettings.from_env().cache_dir
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "scalesweep"


def _conv_block(c_in: int, c_out: int) -> list[nn.Module]:
    # BatchNorm: on the generated shapes (2-3 px radius at 16x16) the shape label sat on a plateau without it
    # (held-out shape accuracy 0.61 after 5 epochs, 0.97 after 12); with it 0.99 after 5. In eval mode it is a
    # fixed affine map from running statistics, so features stay deterministic.
    return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]


class LabelCNN(nn.Module):
    """Three conv-BN-ReLU stages and a ``feature_dim`` linear layer, with one classification head per label.

    Spatial layout is flattened, not globally pooled: position is one of the labels, and global pooling
    would throw it away. Inputs are resized to ``resolution`` (the training images' size) first.
    """

    def __init__(
        self,
        cardinalities: Mapping[str, int],
        *,
        resolution: int = 16,
        width: int = 32,
        feature_dim: int = 128,
    ) -> None:
        super().__init__()
        cards = _check_cardinalities(cardinalities)
        if int(resolution) < 4 or int(width) < 1 or int(feature_dim) < 1:
            raise FeatureError(
                f"need resolution >= 4, width, feature_dim >= 1; got {resolution}, {width}, {feature_dim}"
            )
        self.cardinalities = cards
        self.resolution = int(resolution)
        self.width = int(width)
        self.feature_dim = int(feature_dim)
        w = self.width
        self.body = nn.Sequential(
            *_conv_block(3, w),
            nn.MaxPool2d(2),  # (B, w, R/2, R/2)
            *_conv_block(w, 2 * w),
            nn.MaxPool2d(2),  # (B, 2w, R/4, R/4)
            *_conv_block(2 * w, 2 * w),
            nn.AdaptiveAvgPool2d(4),  # (B, 2w, 4, 4): identity at R = 16, fixes the size at any other R
            nn.Flatten(),  # (B, 2w * 16)
            nn.Linear(2 * w * 16, self.feature_dim),
        )
        self.heads = nn.ModuleDict({name: nn.Linear(self.feature_dim, k) for name, k in cards.items()})
        # Filled by training (or a cache load), recorded with every run that uses the network.
        self.heldout_accuracy: dict[str, float] = {}
        self.cache_key: str | None = None
        self.from_cache = False

    def config(self) -> dict[str, Any]:
        """Constructor arguments, enough to rebuild the module before loading a state_dict."""
        return {
            "cardinalities": dict(self.cardinalities),
            "resolution": self.resolution,
            "width": self.width,
            "feature_dim": self.feature_dim,
        }

    def _resize(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2:] == (self.resolution, self.resolution):
            return x
        size = (self.resolution, self.resolution)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) in [-1, 1] -> (B, feature_dim): the penultimate layer, before its ReLU.

        Before the ReLU because units that are dead on the evaluated images would otherwise give exactly
        zero-variance dimensions and a singular covariance.
        """
        return self.body(self._resize(x))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        hidden = F.relu(self.features(x))
        return {name: head(hidden) for name, head in self.heads.items()}  # name -> (B, cardinality) logits

    def accuracy(self, images: Any, labels: Mapping[str, Any], *, batch_size: int = 1024) -> dict[str, float]:
        """Per-label classification accuracy on (images, labels)."""
        x = as_image_batch(images)
        targets = _check_labels(labels, self.cardinalities, x.shape[0])
        correct = {name: 0 for name in self.cardinalities}
        was_training = self.training
        self.eval()
        with torch.no_grad():
            for start in range(0, x.shape[0], batch_size):
                logits = self(x[start : start + batch_size])
                for name, out in logits.items():
                    correct[name] += int((out.argmax(1) == targets[name][start : start + batch_size]).sum())
        self.train(was_training)
        return {name: c / x.shape[0] for name, c in correct.items()}


class SceneCNN(LabelCNN):
    """For labels per grid cell (`<attribute>_<row>_<col>`, as the scenes set gives): one head per attribute,
    shared by every cell, on a per-cell embedding; the features are those embeddings, cell by cell.

    A linear head per cell (LabelCNN's) sees each cell's few occupied examples only: on scenes (8k images, 21 kinds,
    16 cells) its per-object kind accuracy stayed at chance (0.08) while empty cells kept the per-label figure at
    0.88. Shared heads see every object. Labels without a cell (count, relation) read the flattened embeddings.

        trunk     conv-BN-ReLU (w), pool, (2w), pool, (2w), (2w)         (B, 2w, R/4, R/4)
        cells     adaptive average pool to the grid, 1x1 conv to e       (B, e, G, G): the features, e * G * G
        heads     per attribute: ReLU, 1x1 conv 2w, ReLU, 1x1 conv k      (B, k, G, G) -> one label per cell
    """

    def __init__(self, cardinalities: Mapping[str, int], *, resolution: int = 32, width: int = 32,
                 feature_dim: int = 256) -> None:
        nn.Module.__init__(self)
        cards = _check_cardinalities(cardinalities)
        per_cell: dict[str, list[str]] = {}
        for name in cards:
            attribute, *cell = name.split("_")
            if len(cell) == 2 and all(c.isdigit() for c in cell):
                per_cell.setdefault(attribute, []).append(name)
        grid = math.isqrt(len(next(iter(per_cell.values()), [])))
        if not per_cell or grid < 1 or any(len(names) != grid * grid for names in per_cell.values()):
            raise FeatureError("scene-cnn needs labels named <attribute>_<row>_<col> on a square grid, "
                               f"got {sorted(cards)}")
        if int(feature_dim) % (grid * grid) or int(resolution) < 4 or int(width) < 1:
            raise FeatureError(f"need feature_dim a multiple of the {grid * grid} cells, resolution >= 4, width >= 1; "
                               f"got {feature_dim}, {resolution}, {width}")
        self.cardinalities, self.grid = cards, grid
        self.resolution, self.width, self.feature_dim = int(resolution), int(width), int(feature_dim)
        w, e = self.width, self.feature_dim // (grid * grid)
        self.body = nn.Sequential(
            *_conv_block(3, w), nn.MaxPool2d(2), *_conv_block(w, 2 * w), nn.MaxPool2d(2),
            *_conv_block(2 * w, 2 * w), *_conv_block(2 * w, 2 * w),
            nn.AdaptiveAvgPool2d(grid), nn.Conv2d(2 * w, e, 1),  # (B, e, G, G)
        )
        self.cell_heads = nn.ModuleDict({
            attribute: nn.Sequential(nn.ReLU(), nn.Conv2d(e, 2 * w, 1), nn.ReLU(), nn.Conv2d(2 * w, cards[names[0]], 1))
            for attribute, names in per_cell.items()
        })
        self.heads = nn.ModuleDict({name: nn.Linear(self.feature_dim, k) for name, k in cards.items()
                                    if name.split("_")[0] not in per_cell})
        self.heldout_accuracy = {}
        self.cache_key = None
        self.from_cache = False

    def config(self) -> dict[str, Any]:
        return {**super().config(), "architecture": "scene-cnn"}

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) in [-1, 1] -> (B, e * G * G): the cell embeddings before their ReLU, cell-major."""
        return self.body(self._resize(x)).permute(0, 2, 3, 1).flatten(1)

    def read(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        """Label name -> (B, cardinality) logits, from `features`."""
        n, g = features.shape[0], self.grid
        cells = features.reshape(n, g, g, -1).permute(0, 3, 1, 2)  # (B, e, G, G)
        out: dict[str, torch.Tensor] = {}
        for attribute, head in self.cell_heads.items():
            logits = head(cells)  # (B, k, G, G)
            out |= {f"{attribute}_{r}_{c}": logits[:, :, r, c] for r in range(g) for c in range(g)}
        hidden = F.relu(features)
        return out | {name: head(hidden) for name, head in self.heads.items()}

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.read(self.features(x))


def _check_cardinalities(cardinalities: Mapping[str, int]) -> dict[str, int]:
    if not cardinalities:
        raise FeatureError("cardinalities is empty: need at least one label to train on")
    cards: dict[str, int] = {}
    for name, k in sorted(cardinalities.items()):
        if not isinstance(name, str) or not name or "." in name:
            raise FeatureError(f"label names must be non-empty strings without '.', got {name!r}")
        if int(k) < 2:
            raise FeatureError(f"label {name!r} needs at least 2 classes, got {k}")
        cards[name] = int(k)
    return cards


def _check_labels(labels: Mapping[str, Any], cards: Mapping[str, int], n: int) -> dict[str, torch.Tensor]:
    if set(labels) != set(cards):
        raise FeatureError(f"labels {sorted(labels)} do not match cardinalities {sorted(cards)}")
    out = {}
    for name, k in cards.items():
        raw = labels[name]
        y = (raw if isinstance(raw, torch.Tensor) else torch.as_tensor(np.asarray(raw))).detach().cpu()
        if y.shape != (n,) or y.is_floating_point() or y.is_complex():
            raise FeatureError(
                f"labels[{name!r}] must be integers of shape ({n},), got {y.dtype} {tuple(y.shape)}"
            )
        y = y.long()
        if n and (int(y.min()) < 0 or int(y.max()) >= k):
            raise FeatureError(f"labels[{name!r}] must lie in [0, {k}), got [{int(y.min())}, {int(y.max())}]")
        out[name] = y
    return out


def _hyperparameters(
    *,
    seed: int,
    epochs: int,
    batch_size: int,
    lr: float,
    width: int,
    feature_dim: int,
    val_fraction: float,
    noise_std: float,
    architecture: str = "label-cnn",
) -> dict[str, Any]:
    if architecture not in _ARCHITECTURES:
        raise FeatureError(f"unknown architecture {architecture!r}; allowed: {sorted(_ARCHITECTURES)}")
    if (
        int(epochs) < 1
        or int(batch_size) < 1
        or not lr > 0
        or not 0.0 <= val_fraction < 1.0
        or not 0.0 <= noise_std <= 1.0
    ):
        raise FeatureError(
            f"need epochs >= 1, batch_size >= 1, lr > 0, 0 <= val_fraction < 1, 0 <= noise_std <= 1; "
            f"got {epochs}, {batch_size}, {lr}, {val_fraction}, {noise_std}"
        )
    return {
        "seed": int(seed),
        "epochs": int(epochs),
        "batch_size": int(batch_size),
        "lr": float(lr),
        "width": int(width),
        "feature_dim": int(feature_dim),
        "val_fraction": float(val_fraction),
        "noise_std": float(noise_std),
        # Only a non-default architecture enters the hyper-parameters (and so the cache key): the networks cached
        # before it existed keep their keys.
        **({"architecture": architecture} if architecture != "label-cnn" else {}),
    }


# Measured on trials.data's "shapes" set (16x16; 5 shapes x 6 colours x 9 positions x 2 sizes, radius 2-3 px,
# rotation and brightness jitter), one CPU thread on a shared 2-core machine: Adam at 2e-3 with cosine decay,
# batch 64; clean images reached held-out accuracy >= 0.99 on every label after 5 epochs (~10 s for 4k images,
# ~16 s for 8k). With noise augmentation (below) 5 epochs left shape at 0.984 and 8 epochs reach 0.998 (~37 s
# for 8k images, once per machine: the network is cached). More steps matter more than width here: batch 64 beat
# batch 128 at 4k images.
_DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "epochs": 8,
    "batch_size": 64,
    "lr": 2e-3,
    "width": 32,
    "feature_dim": 128,  # N > d for FD (4x at the default 512 samples), and wide enough for ~20 classes over 3 labels
    "val_fraction": 0.1,
    # Gaussian noise added to each training image, its std drawn per image from U(0, noise_std) (images in [-1, 1]).
    # Trained on clean renders only, the network's features followed the pixel-level noise of generated samples:
    # FD moved by +-50 between neighbouring checkpoints of one run while the content (shape accuracy of the
    # samples) barely changed, and the AdamW-vs-Muon gap was 2.1x the seed spread. Re-scoring the same 36 sample
    # sets (cpu-xs, AdamW and Muon, seeds 0-2, steps 800/1000/1200) with networks trained at noise_std 0.02 to 0.3
    # gave 3.1x to 6.4x, with the real-vs-reference floor at 6-10. On fresh seeds the ratio was lower (1.5x on seeds
    # 3-5): AdamW's spread fell to 5.6, vanilla Muon's did not; the 1800-step default horizon (evaluated after Muon's
    # steep FD drop) brought it to 6.3x on seeds 6-11. README: "What the default trial measures".
    "noise_std": 0.3,
    "architecture": "label-cnn",  # or "scene-cnn" (trials.metrics._scenes_cnn.SceneCNN): shared per-cell heads
}

# Network classes by the `architecture` hyper-parameter; each is built as cls(cardinalities, resolution=, width=,
# feature_dim=) and answers features / forward / accuracy / config like LabelCNN.
_ARCHITECTURES: dict[str, type[LabelCNN]] = {"label-cnn": LabelCNN, "scene-cnn": SceneCNN}


def train_label_cnn(
    images: Any,
    labels: Mapping[str, Any],
    cardinalities: Mapping[str, int],
    *,
    seed: int = _DEFAULTS["seed"],
    epochs: int = _DEFAULTS["epochs"],
    batch_size: int = _DEFAULTS["batch_size"],
    lr: float = _DEFAULTS["lr"],
    width: int = _DEFAULTS["width"],
    feature_dim: int = _DEFAULTS["feature_dim"],
    val_fraction: float = _DEFAULTS["val_fraction"],
    noise_std: float = _DEFAULTS["noise_std"],
    architecture: str = _DEFAULTS["architecture"],
) -> LabelCNN:
    """Train a :class:`LabelCNN` (summed cross-entropy over the labels, Adam with cosine decay).

    ``noise_std`` > 0 adds Gaussian noise to each training image, with a std drawn per image from
    U(0, noise_std): the features then follow what an image shows (shape, colour, position, size) rather than
    its pixel noise, which is what an FD between a generator's samples and real images should compare.

    Deterministic for ``seed`` at a fixed thread count (CPU). A ``val_fraction`` of the images, chosen by
    ``seed``, is held out; the per-label accuracy on it is stored in ``network.heldout_accuracy``. The
    caller's global RNG state is left untouched.
    """
    hp = _hyperparameters(seed=seed, epochs=epochs, batch_size=batch_size, lr=lr, width=width, feature_dim=feature_dim,
                          val_fraction=val_fraction, noise_std=noise_std, architecture=architecture)
    x = as_image_batch(images)
    cards = _check_cardinalities(cardinalities)
    y = _check_labels(labels, cards, x.shape[0])
    if x.shape[-1] != x.shape[-2]:
        raise FeatureError(f"training images must be square, got {tuple(x.shape[-2:])}")
    n = x.shape[0]
    generator = torch.Generator().manual_seed(hp["seed"])
    order = torch.randperm(n, generator=generator)
    n_val = round(hp["val_fraction"] * n)
    val_idx, train_idx = order[:n_val], order[n_val:]
    if train_idx.numel() < 1:
        raise FeatureError(f"no training images left after holding out {n_val} of {n}")

    with torch.random.fork_rng(devices=[]):  # seeded weight init without disturbing the caller's RNG
        torch.manual_seed(hp["seed"])
        net = _ARCHITECTURES[architecture](cards, resolution=x.shape[-1], width=hp["width"],
                                           feature_dim=hp["feature_dim"])
    optimizer = torch.optim.Adam(net.parameters(), lr=hp["lr"])
    steps_per_epoch = max((train_idx.numel() - hp["batch_size"]) // hp["batch_size"] + 1, 1)
    # Cosine decay to zero: with a constant rate the last step landed anywhere in the noise (8k images: colour
    # 0.96, size 0.93 held-out accuracy); decayed, every label reached >= 0.99 at 4k and 8k images.
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=hp["epochs"] * steps_per_epoch)
    x_train = x[train_idx]
    y_train = {name: t[train_idx] for name, t in y.items()}
    net.train()
    for _ in range(hp["epochs"]):
        perm = torch.randperm(x_train.shape[0], generator=generator)
        # Drop the last partial batch (unless it is the only one): a batch of a few images would give noisy
        # BatchNorm statistics, and the epoch's reshuffle uses those images next time.
        last = max(perm.numel() - hp["batch_size"] + 1, 1)
        for start in range(0, last, hp["batch_size"]):
            idx = perm[start : start + hp["batch_size"]]
            batch = x_train[idx]
            if hp["noise_std"] > 0:
                sigma = torch.rand(idx.numel(), 1, 1, 1, generator=generator) * hp["noise_std"]
                batch = batch + sigma * torch.randn(batch.shape, generator=generator)
            logits = net(batch)
            losses = [F.cross_entropy(out, y_train[name][idx]) for name, out in logits.items()]
            loss = torch.stack(losses).sum()  # one head per label, equally weighted
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
    net.eval()
    if n_val:
        net.heldout_accuracy = net.accuracy(x[val_idx], {name: t[val_idx] for name, t in y.items()})
    return net


def label_cnn_cache_key(
    images: Any, labels: Mapping[str, Any], cardinalities: Mapping[str, int], **hyperparameters: Any
) -> str:
    """SHA-256 over (training images, labels, cardinalities, hyper-parameters, code version)."""
    hp = _hyperparameters(**{**_DEFAULTS, **hyperparameters})
    x = as_image_batch(images)
    cards = _check_cardinalities(cardinalities)
    y = _check_labels(labels, cards, x.shape[0])
    digest = hashlib.sha256()
    header = {"code": _CODE_VERSION, "shape": list(x.shape), "cardinalities": cards, "hyperparameters": hp}
    digest.update(json.dumps(header, sort_keys=True).encode())
    digest.update(x.contiguous().numpy().tobytes())
    for name in cards:  # sorted by _check_cardinalities
        digest.update(name.encode())
        digest.update(y[name].contiguous().numpy().astype("<i8").tobytes())
    return digest.hexdigest()


def load_or_train_label_cnn(
    images: Any,
    labels: Mapping[str, Any],
    cardinalities: Mapping[str, int],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    **hyperparameters: Any,
) -> LabelCNN:
    """:func:`train_label_cnn`, cached under ``cache_dir/label_cnn/<key>.pt`` (see :func:`default_cache_dir`).

    A cache hit rebuilds the identical network (``network.from_cache`` is True) and gives bit-identical
    features. Written atomically, so concurrent trials racing to train the same network are safe.
    """
    unknown = set(hyperparameters) - set(_DEFAULTS)
    if unknown:
        raise FeatureError(f"unknown hyper-parameters {sorted(unknown)}; valid: {sorted(_DEFAULTS)}")
    key = label_cnn_cache_key(images, labels, cardinalities, **hyperparameters)
    folder = (Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()) / "label_cnn"
    path = folder / f"{key}.pt"
    if path.is_file():
        net = _load(path)
        if net.cache_key == key:
            net.from_cache = True
            return net
    net = train_label_cnn(images, labels, cardinalities, **hyperparameters)
    net.cache_key = key
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "code_version": _CODE_VERSION,
        "cache_key": key,
        "config": net.config(),
        "heldout_accuracy": dict(net.heldout_accuracy),
        "state_dict": net.state_dict(),
    }
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as handle:
        tmp = Path(handle.name)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return net


def _load(path: Path) -> LabelCNN:
    payload = torch.load(path, map_location="cpu", weights_only=True)
    config = dict(payload["config"])
    net = _ARCHITECTURES[config.pop("architecture", "label-cnn")](**config)
    net.load_state_dict(payload["state_dict"])
    net.eval()
    net.heldout_accuracy = {str(k): float(v) for k, v in payload["heldout_accuracy"].items()}
    net.cache_key = str(payload["cache_key"])
    return net


class ShapesCNNExtractor(FeatureExtractor):
    """Penultimate features of a :class:`LabelCNN` trained on a generated set's labels (``fd_shapes_cnn``)."""

    name = "shapes-cnn"
    metric_name = "fd_shapes_cnn"

    def __init__(
        self, network: LabelCNN, *, batch_size: int = 512, device: str | torch.device = "cpu"
    ) -> None:
        if not isinstance(network, LabelCNN):  # SceneCNN is one
            raise FeatureError(
                f"network must be a LabelCNN, got {type(network).__name__}; build one with train_label_cnn "
                "or ShapesCNNExtractor.from_training_data"
            )
        self.batch_size = _check_batch_size(batch_size)
        self.device = torch.device(device)
        self.network = network.to(self.device).eval()
        self.dim = network.feature_dim

    @classmethod
    def from_training_data(
        cls,
        images: Any,
        labels: Mapping[str, Any],
        cardinalities: Mapping[str, int],
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        training: Mapping[str, Any] | None = None,
        batch_size: int = 512,
        device: str | torch.device = "cpu",
    ) -> ShapesCNNExtractor:
        """Train (or load from the cache) the network on a labelled set and wrap it.

        ``training`` holds :func:`train_label_cnn`'s hyper-parameters (seed, epochs, batch_size, ...), kept in
        their own mapping so that ``batch_size`` here always means the extraction batch, as for every
        extractor.
        """
        network = load_or_train_label_cnn(
            images, labels, cardinalities, cache_dir=cache_dir, **dict(training or {})
        )
        return cls(network, batch_size=batch_size, device=device)

    def _features(self, batch: torch.Tensor) -> torch.Tensor:
        return self.network.features(batch)

    def heldout_accuracy(self) -> dict[str, float]:
        """Per-label accuracy on the images held out from training (empty if none were held out)."""
        return dict(self.network.heldout_accuracy)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "cache_key": self.network.cache_key,
            "heldout_accuracy": self.heldout_accuracy(),
            **{f"network_{k}": v for k, v in self.network.config().items()},
        }
