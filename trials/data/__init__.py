"""Captioned image sets for text-to-image trials, behind a registry.

from trials.data import get_dataset, stream_generator
data = get_dataset("shapes", image_size=16, seed=0)     # or get_dataset("folder", root="my_set"), ("scenes", ...)
batch = data.sample(32, stream_generator(0, "train"))   # images (32, 3, 16, 16) in [-1, 1], captions, labels
reference = data.reference_set(4096)                    # fixed, for FD statistics
"""

from __future__ import annotations

from ._base import (
    DATASETS,
    DataError,
    ImageTextBatch,
    ImageTextDataset,
    check_dataset_options,
    get_dataset,
    list_datasets,
    register_dataset,
    stream_generator,
    stream_seed,
)
from ._folder import FolderDataset
from ._scenes import ScenesDataset, ScenesOptions, cell_relation
from ._shapes import COLOURS, POSITIONS, SHAPES, SIZES, ShapesDataset

register_dataset("shapes", ShapesDataset)
register_dataset("folder", FolderDataset)
register_dataset("scenes", ScenesDataset)

__all__ = [
    "COLOURS",
    "DATASETS",
    "POSITIONS",
    "SHAPES",
    "SIZES",
    "DataError",
    "FolderDataset",
    "ImageTextBatch",
    "ImageTextDataset",
    "ScenesDataset",
    "ScenesOptions",
    "ShapesDataset",
    "cell_relation",
    "check_dataset_options",
    "get_dataset",
    "list_datasets",
    "register_dataset",
    "stream_generator",
    "stream_seed",
]
