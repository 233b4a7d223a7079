"""The image-text dataset interface, its batch type, seed streams and the registry."""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..core.errors import InputError
from ..core.registry import Registry

# What this module offers is listed once, on the package's face (`trials.data.__all__`), which names all of it.


class DataError(InputError):  # a ValueError, as before
    """Base error of `trials.data`: an unknown dataset name, a bad argument, or a malformed dataset folder."""


@dataclass(frozen=True)
class ImageTextBatch:
    """N images in [-1, 1] (N, 3, H, W) float32, their N captions, integer labels per factor (name -> N)."""

    images: Tensor
    captions: list[str]
    labels: dict[str, Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.captions)

    def __getitem__(self, index: slice | Tensor | list[int]) -> ImageTextBatch:
        """A sub-batch: by slice, index list or index tensor."""
        if isinstance(index, slice):
            captions = self.captions[index]
        else:
            index = torch.as_tensor(index, dtype=torch.long)
            captions = [self.captions[i] for i in index.tolist()]
        return ImageTextBatch(self.images[index], captions, {k: v[index] for k, v in self.labels.items()})

    def to(self, device: torch.device | str) -> ImageTextBatch:
        return ImageTextBatch(
            self.images.to(device), self.captions, {k: v.to(device) for k, v in self.labels.items()}
        )


def stream_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for the named stream ("train", "reference", "validation", ...) derived from `seed`.

    Streams of one seed are statistically independent (numpy's SeedSequence), so the FD reference set and the
    validation set never overlap with the training draws by construction.
    """
    state = np.random.SeedSequence([seed, zlib.crc32(stream.encode())]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def stream_generator(seed: int, stream: str) -> torch.Generator:
    """A CPU `torch.Generator` seeded from `stream_seed(seed, stream)`."""
    return torch.Generator().manual_seed(stream_seed(seed, stream))


class ImageTextDataset(ABC):
    """A captioned image source for text-to-image training and FD evaluation.

    Three disjoint views: `sample` (training draws, from a generator the caller owns; seed it with
    `stream_generator(seed, "train")`), `reference_set` (fixed, for FD statistics) and `validation_set`
    (fixed, held out, for the validation loss).
    """

    #: image side in pixels
    image_size: int
    #: image channels (3: RGB)
    channels: int = 3

    @abstractmethod
    def sample(self, n: int, generator: torch.Generator) -> ImageTextBatch:
        """n training items drawn with `generator`."""

    @abstractmethod
    def reference_set(self, n: int = 4096) -> ImageTextBatch:
        """A fixed set of n items for FD reference statistics (the same on every call)."""

    @abstractmethod
    def validation_set(self, n: int = 256) -> ImageTextBatch:
        """A fixed held-out set of n items (the same on every call)."""

    @abstractmethod
    def label_cardinalities(self) -> dict[str, int]:
        """Classes per label factor, e.g. {"shape": 5, "colour": 6}; empty when there are no labels."""

    @abstractmethod
    def captions(self) -> list[str]:
        """Every distinct caption the dataset can produce (for text-encoder caches and vocabularies)."""


DATASETS: Registry[ImageTextDataset] = Registry(
    lambda name, names: DataError(f"unknown dataset {name!r}; valid datasets: {names}"))
register_dataset = DATASETS.register  # register_dataset(name, factory): get_dataset(name, **kw) calls factory(**kw)
list_datasets = DATASETS.names
get_dataset = DATASETS.build  # an unknown name raises DataError listing the valid ones


def check_dataset_options(name: str, image_size: int, options: dict[str, Any]) -> None:
    """Refuse a registered dataset's options that cannot work at `image_size` before anything is built: a DataError
    naming the option and the allowed values. A dataset opts in with a static `check_options(image_size, options)`
    (scenes does); the others are checked when built."""
    check = getattr(DATASETS.factory(name), "check_options", None)
    if check is not None:
        check(image_size, options)
