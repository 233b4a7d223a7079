"""Every measured figure in the README and docs says where it came from: its section names the command that
measures it, the commit it was measured at, or the date (a one-off measurement is dated, and the machine is named
in the same place). A section reports a measurement when it says so (measured, took, timed) beside a number."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

MEASURED = re.compile(r"\b(measured|took|timed)\b", re.IGNORECASE)
NUMBER = re.compile(r"\d")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"\bcommits? [0-9a-f]{7,40}\b")
# A command in backticks, or a shell block: how to get the figure again.
COMMAND = re.compile(r"`[^`\n]*\b(python|make|scalesweep|pytest|bash|benchmarks/)[^`\n]*`|```bash")


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each section; a `#` line inside a fenced block is a comment, not a heading."""
    out: list[tuple[str, list[str]]] = [("(top)", [])]
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,6} ", line):
            out.append((line.strip("# ").strip(), []))
        else:
            out[-1][1].append(line)
    return [(head, "\n".join(lines)) for head, lines in out]


def unsourced(path: Path) -> list[str]:
    """The headings of `path`'s sections that report a measurement without its source (the heading counts: a
    dated heading dates its section)."""
    return [head for head, body in sections(path.read_text(encoding="utf-8"))
            if MEASURED.search(body) and NUMBER.search(body)
            and not any(p.search(f"{head}\n{body}") for p in (DATE, COMMIT, COMMAND))]


def test_every_measured_figure_names_its_command_commit_or_date() -> None:
    missing = [f"{path.relative_to(ROOT)}: {head}" for path in DOCS for head in unsourced(path)]
    assert not missing, "sections reporting measurements without a command, commit or date:\n" + "\n".join(missing)


def test_the_check_fails_on_an_unsourced_figure(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Speed\n\nThe step measured 1.6 times its floor.\n\n```text\n# not a heading\n```\n")
    assert unsourced(page) == ["Speed"]
    for source in ("(`python benchmarks/optimizer_step.py`)", "(2026-12-03, a 2-core EPYC)", "(commit 84a4bbf)"):
        page.write_text(f"# Speed\n\nThe step measured 1.6 times its floor {source}.\n")
        assert unsourced(page) == []
    page.write_text("# Speed (2026-12-03)\n\nThe step measured 1.6 times its floor.\n")
    assert unsourced(page) == []
