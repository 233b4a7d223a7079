"""A folder of real images with captions: the plug for a real image-text set.

Layout:

    root/
      captions.jsonl      one JSON object per line: {"file": "img/0001.png", "caption": "a red bus"}
      img/0001.png ...    any format Pillow reads; centre-cropped to a square and resized to image_size

Optional keys per line: "labels" ({"name": int, ...}, the same names on every line, for a feature
classifier) and "split" ("train" or "validation"). Without "split", a fixed `validation_fraction` of the
items, chosen by a hash of the file name (so independent of line order), is held out. Everything is loaded
into memory once: this is for the small sets a CPU trial uses; a large set belongs in the team's own trainer.
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ._base import DataError, ImageTextBatch, ImageTextDataset, stream_generator

__all__ = ["FolderDataset"]

_SPLITS = ("train", "validation")


def _load_image(path: Path, size: int) -> torch.Tensor:
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow comes with matplotlib
        raise DataError("the folder dataset reads images with Pillow: pip install pillow") from exc
    try:
        with Image.open(path) as opened:
            rgb = opened.convert("RGB")
        side = min(rgb.size)
        left, top = (rgb.width - side) // 2, (rgb.height - side) // 2
        square = rgb.crop((left, top, left + side, top + side)).resize((size, size), Image.Resampling.LANCZOS)
        array = np.asarray(square, dtype=np.float32)  # (S, S, 3) in [0, 255]
    except OSError as exc:
        raise DataError(f"cannot read image {path}: {exc}") from exc
    return torch.from_numpy(array).permute(2, 0, 1) / 127.5 - 1.0  # (3, S, S) in [-1, 1]


class FolderDataset(ImageTextDataset):
    """Images and captions from `root/captions.jsonl`, resized to `image_size`, with a held-out split."""

    def __init__(
        self,
        root: str | Path,
        image_size: int = 16,
        seed: int = 0,
        *,
        captions_file: str = "captions.jsonl",
        validation_fraction: float = 0.1,
    ) -> None:
        if not 0.0 < validation_fraction < 1.0:
            raise DataError(f"validation_fraction must be in (0, 1), got {validation_fraction}")
        self.root = Path(root)
        self.image_size = image_size
        self.seed = seed
        entries = self._read_entries(self.root / captions_file)
        label_names = set(entries[0].get("labels", {}))
        for e in entries:
            if set(e.get("labels", {})) != label_names:
                raise DataError(f"{e['file']}: every line needs the same label names {sorted(label_names)}")
        self._cardinalities = {k: 1 + max(int(e["labels"][k]) for e in entries) for k in sorted(label_names)}

        splits = [e.get("split") for e in entries]
        if all(s is None for s in splits):  # hold out the items whose file-name hash ranks lowest
            order = sorted(range(len(entries)), key=lambda i: (zlib.crc32(entries[i]["file"].encode()), i))
            held_out = set(order[: max(1, math.ceil(validation_fraction * len(entries)))])
            splits = ["validation" if i in held_out else "train" for i in range(len(entries))]
        elif any(s not in _SPLITS for s in splits):
            raise DataError(f"'split' must be one of {list(_SPLITS)} on every line or on none")
        self._train = self._load([e for e, s in zip(entries, splits, strict=True) if s == "train"])
        self._validation = self._load([e for e, s in zip(entries, splits, strict=True) if s == "validation"])
        if len(self._train) == 0:
            raise DataError(f"{self.root}: no training items")

    @staticmethod
    def _read_entries(path: Path) -> list[dict[str, Any]]:
        if not path.is_file():
            raise DataError(f"captions file {path} not found (one JSON object per line: file, caption)")
        entries = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{number}: not JSON: {exc}") from exc
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("file"), str)
                or not isinstance(entry.get("caption"), str)
            ):
                raise DataError(f"{path}:{number}: need string fields 'file' and 'caption'")
            entries.append(entry)
        if not entries:
            raise DataError(f"{path}: no entries")
        return entries

    def _load(self, entries: list[dict[str, Any]]) -> ImageTextBatch:
        s = self.image_size
        images = (
            torch.stack([_load_image(self.root / e["file"], s) for e in entries])
            if entries
            else (torch.empty(0, 3, s, s))
        )
        labels = {
            k: torch.tensor([int(e["labels"][k]) for e in entries], dtype=torch.long)
            for k in self._cardinalities
        }
        return ImageTextBatch(images, [e["caption"] for e in entries], labels)

    def __len__(self) -> int:
        return len(self._train) + len(self._validation)

    def label_cardinalities(self) -> dict[str, int]:
        return dict(self._cardinalities)

    def captions(self) -> list[str]:
        return sorted(set(self._train.captions) | set(self._validation.captions))

    def sample(self, n: int, generator: torch.Generator) -> ImageTextBatch:
        """n training items drawn uniformly with replacement."""
        return self._train[torch.randint(len(self._train), (n,), generator=generator)]

    def reference_set(self, n: int = 4096) -> ImageTextBatch:
        """min(n, training items) distinct training images in a fixed shuffled order (FD against the training
        images, the usual practice for a real set)."""
        order = torch.randperm(len(self._train), generator=stream_generator(self.seed, "reference"))
        return self._train[order[:n]]

    def validation_set(self, n: int = 256) -> ImageTextBatch:
        """The first min(n, held-out items) held-out items."""
        return self._validation[:n]
