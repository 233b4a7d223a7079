"""Undoing a queued extension (issue 64, N5): an extension is applied to the job's folder at once (its spec, state
and MLflow parent run say what it is now: `sweeper.jobs._extend`) and run later by a driver; cancelled before that
driver starts, the job must be given back as it was, every answer with it.

`ExtensionUndo(folder).save(keep)` keeps, before the extension is applied, the folder's top-level files, the parent
run's spec tags and what the caller needs to restore its own record (`keep`); `undo()` puts them back. A driver that
starts the extension turns what was kept into a mark (`started()`), which it removes when it ends (`drop()`): a
cancel meanwhile keeps the runs it finished and can say how to resume.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..jobfiles import SPEC_FILE, read_json, read_state, write_json
from ..specs import SweepSpec

__all__ = ["ExtensionUndo"]

UNDO_DIR = ".extension-undo"
_UNDO_FILE = "undo.json"
_RUNNING_FILE = "running"  # the extension's driver has started


class ExtensionUndo:
    """What it takes to give the job in `folder` back as it was before its queued extension."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / UNDO_DIR

    def save(self, keep: Mapping[str, Any]) -> None:
        """Before the extension is applied: keep the folder's top-level files, its parent run's spec tags, and
        `keep` (the caller's record as it was: state, spec)."""
        from trials.record import TAG

        from ..ledger import SweepLedger

        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir()
        files = sorted(f.name for f in self.folder.glob("*.json") if f.is_file())
        for name in files:
            shutil.copy2(self.folder / name, self.path / name)  # with its times: a transfer's version is its files'
        tags: dict[str, str | None] = {}
        state = read_state(self.folder)
        if state is not None and state.get("parent_run_id"):
            run_tags = SweepLedger(state["tracking_uri"], state["experiment"]).client.get_run(
                state["parent_run_id"]).data.tags
            tags = {name: run_tags.get(name) for name in (TAG.FINGERPRINT, TAG.EXTENSIONS)}
        write_json(self.path / _UNDO_FILE, {"keep": dict(keep), "files": files, "tags": tags})

    def undo(self) -> dict[str, Any] | None:
        """Put the job back as it was (its files, its parent run's spec and tags); returns what the caller kept, or
        None when no extension is waiting (none was queued, or its driver started)."""
        from ..ledger import SweepLedger

        saved = read_json(self.path / _UNDO_FILE)
        if saved is None:
            return None
        for name in saved["files"]:
            shutil.copy2(self.path / name, self.folder / name)
        state = read_state(self.folder)
        stored = read_json(self.folder / SPEC_FILE)
        if state is not None and state.get("parent_run_id") and saved["tags"]:
            ledger = SweepLedger(state["tracking_uri"], state["experiment"])
            run_id = state["parent_run_id"]
            if stored is not None:
                ledger.log_spec(run_id, SweepSpec.model_validate(stored))
            for name, value in saved["tags"].items():
                if value is None:
                    ledger.client.delete_tag(run_id, name)
                else:
                    ledger.client.set_tag(run_id, name, value)
        shutil.rmtree(self.path, ignore_errors=True)
        return dict(saved["keep"])

    def started(self) -> bool:
        """A driver starts the queued extension: it can no longer be undone, only resumed. What was kept goes; a
        mark stays while the driver runs. True when an extension was waiting."""
        if not (self.path / _UNDO_FILE).is_file():
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir()
        (self.path / _RUNNING_FILE).write_text("")
        return True

    def drop(self) -> bool:
        """Forget the extension (queued or running): True when there was one."""
        found = self.path.is_dir()
        shutil.rmtree(self.path, ignore_errors=True)
        return found
