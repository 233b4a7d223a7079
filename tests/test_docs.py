"""The README and docs/ as a newcomer reads them: every Python block runs, and every name they give exists.

Python blocks run in a fresh interpreter from the repository root. A block that must not run here starts with a
marker line saying why and naming the test file that runs the same code (it is then no test case of its own, and
`test_a_block_not_run_says_why_and_names_the_test_that_runs_its_code` checks the marker):

    # docs-test: not run (runs a 2-minute sweep; tests/sweeper/test_sweep_local.py runs the same spec)
    # docs-test: needs diffusers          (runs when the module imports, skips otherwise: a failure under CI)

The names are read from the code, never from a list kept here: `make` targets and variables from the Makefile,
CLI verbs and flags from `scalesweep_cli.build_parser()`, REST routes from the FastAPI app's OpenAPI schema,
`SCALESWEEP_*` variables from the `Settings` model (or, for variables read outside the service, from the source
that reads them), and file paths from the tree.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "docker" / "README.md"]
# The README is a front door (what and why, the two commands, the tour, today's answer, the maps): study results live
# in docs/studies/, measurement history in docs/history.md. FastAPI's and Optuna's READMEs are under 200 lines.
README_MAX_LINES = 200
MARKER = re.compile(r"^#\s*docs-test:\s*(?P<kind>not run|needs)\b\s*(?P<rest>.*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _blocks(path: Path) -> list[Block]:
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if m:
            indent, lang, start = len(m.group(1)), m.group(2), i
            body: list[str] = []
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i][indent:])
                i += 1
            out.append(Block(path, start + 1, lang, "\n".join(body) + "\n"))
        i += 1
    return out


def _all_blocks() -> list[Block]:
    return [b for p in DOCS if p.is_file() for b in _blocks(p)]


PYTHON_BLOCKS = [b for b in _all_blocks() if b.lang == "python"]


def _marker(block: Block) -> re.Match[str] | None:
    return MARKER.match(block.code.splitlines()[0].strip() if block.code.strip() else "")


NOT_RUN = [b for b in PYTHON_BLOCKS if (m := _marker(b)) is not None and m["kind"] == "not run"]
RUN = [b for b in PYTHON_BLOCKS if b not in NOT_RUN]


# --- every Python block runs -------------------------------------------------------------------------------------


def test_the_docs_have_python_blocks_to_run() -> None:
    """Guards the collection itself: a broken fence parser would make the block test below pass vacuously."""
    assert len(RUN) >= 3, [b.id for b in PYTHON_BLOCKS]
    assert any(b.path.name == "README.md" for b in RUN)
    assert len(RUN) + len(NOT_RUN) == len(PYTHON_BLOCKS)


def test_a_block_not_run_says_why_and_names_the_test_that_runs_its_code() -> None:
    """A block left out of the run is no skipped test: it says why, and names an existing test file that runs the
    same code (or an example file that such a test runs)."""
    assert NOT_RUN, "no block is marked not run: this test guards nothing (delete it with the marker)"
    problems = []
    for block in NOT_RUN:
        reason = _marker(block)["rest"].strip(" ()")  # type: ignore[index]
        named = re.findall(r"tests/[\w/]+\.py", reason)
        if len(reason) < 10:
            problems.append(f"{block.id}: a not-run block must say why: {reason!r}")
        elif not named:
            problems.append(f"{block.id}: names no test file that runs its code: {reason!r}")
        problems += [f"{block.id}: {path} does not exist" for path in named if not (ROOT / path).is_file()]
    assert problems == []


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    marker = _marker(block)
    if marker and marker["kind"] == "needs":
        modules = marker["rest"].split()
        assert modules, f"{block.id}: 'needs' names no module"
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            pytest.skip(f"{block.id} needs {', '.join(missing)} (not installed)")
    script = tmp_path / "block.py"
    script.write_text(block.code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"{block.id} failed:\n{result.stderr[-3000:]}"


# --- every name the docs give exists -------------------------------------------------------------------------------


def _code_text(path: Path) -> str:
    """The parts of a page a reader would type: fenced blocks and inline code spans."""
    text = path.read_text(encoding="utf-8")
    fenced = [b.code for b in _blocks(path)]
    without_fences = re.sub(r"```.*?```", "", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", without_fences)
    return "\n".join([*fenced, *spans])


def _all_code() -> dict[Path, str]:
    return {p: _code_text(p) for p in DOCS if p.is_file()}


@cache
def _makefile() -> tuple[set[str], set[str]]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = {m for m in re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, flags=re.M)}
    variables = set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*[?:]?=", text, flags=re.M))
    variables |= set(re.findall(r"\$\((?:or |if )?\$?\(?([A-Z][A-Z0-9_]*)\)", text))
    return targets, variables


def test_make_targets_and_variables_named_in_the_docs_exist() -> None:
    targets, variables = _makefile()
    assert {"test", "demo", "venv"} <= targets  # the parser reads this Makefile
    named = 0
    problems = []
    for path, code in _all_code().items():
        for m in re.finditer(r"(?<![\w./-])make((?:[ \t]+[A-Za-z][\w.-]*(?:=\S*)?)+)", code):
            for word in m.group(1).split():
                named += 1
                if "=" in word:
                    if word.split("=")[0] not in variables:
                        problems.append(f"{path.name}: make variable {word.split('=')[0]}")
                elif word not in targets:
                    problems.append(f"{path.name}: make target {word!r}")
    assert named >= 4
    assert not problems, problems


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _cli_lines() -> list[tuple[Path, str]]:
    out = []
    for path, code in _all_code().items():
        for line in code.splitlines():
            for m in re.finditer(r"(?:(?<![\w./-])scalesweep|-m scalesweep_cli)(?![\w.-])((?:[ \t]+[^ \t#]+)*)", line):
                out.append((path, m.group(1)))
    return out


def test_cli_verbs_and_flags_named_in_the_docs_exist() -> None:
    from scalesweep_cli import build_parser

    root = build_parser()
    lines = _cli_lines()
    assert len(lines) >= 20, lines  # the docs name many commands; a broken regex would find none
    problems = []
    checked_flags = 0
    for path, rest in lines:
        tokens = [t.strip("[](),;") for t in rest.split()]
        parsers = [root]
        verbs_done = False
        for tok in tokens:
            if not tok:
                continue
            if tok.startswith("--"):
                flag = tok.split("=")[0]
                checked_flags += 1
                if not any(flag in _flags(p) for p in parsers):
                    problems.append(f"{path.name}: scalesweep{rest}: no flag {flag}")
                continue
            if tok.startswith("-") or verbs_done:
                continue
            subs = [_subparsers(p) for p in parsers]
            if not any(subs):
                verbs_done = True
                continue
            alternatives = tok.split("|")
            found = [s[a] for s in subs for a in alternatives if a in s]
            if len(found) < len(alternatives) or not re.fullmatch(r"[a-z][a-z|-]*", tok):
                if re.fullmatch(r"[a-z][a-z|-]*", tok):
                    problems.append(f"{path.name}: scalesweep{rest}: no command {tok!r}")
                break
            parsers = found
    assert checked_flags >= 15
    assert not problems, problems


@cache
def _routes() -> dict[str, set[str]]:
    import tempfile

    from api.service import Settings, create_app

    with tempfile.TemporaryDirectory() as work:
        app = create_app(Settings(api_token="docs-test-token", workdir=Path(work)))
        paths = app.openapi()["paths"]
    return {re.sub(r"\{[^}]+\}", "{}", p): {m.upper() for m in ops} for p, ops in paths.items()}


def test_rest_routes_named_in_the_docs_exist() -> None:
    routes = _routes()
    problems = []
    named = 0
    for path, code in _all_code().items():
        for m in re.finditer(r"(?:\b(GET|POST|PUT|PATCH|DELETE)\s+)?(?:https?://[\w.:-]+)?(/v1(?:/[\w{}.-]+)*)", code):
            method, route = m.group(1), re.sub(r"\{[^}]+\}", "{}", m.group(2)).rstrip(".")
            route = re.sub(r"/(sw|tr)-[\w.-]*", "/{}", route)
            if route == "/v1":  # the prefix alone, as in "over `/v1`"
                continue
            named += 1
            if route not in routes:
                problems.append(f"{path.name}: {route}")
            elif method and method not in routes[route]:
                problems.append(f"{path.name}: {method} {route} (has {sorted(routes[route])})")
    assert named >= 15
    assert not problems, problems


def _source_reads(name: str) -> bool:
    """Whether code in the repository (not the docs) uses the variable's name."""
    for folder in ("api", "sweeper", "trials", "scaling", "dashboards", "tests", "benchmarks", "examples", "docker",
                   ".ci"):
        for f in (ROOT / folder).rglob("*"):
            if f.is_file() and f.suffix in {".py", ".yaml", ".yml", ".sh", ""} and f.name != "test_docs.py":
                try:
                    if name in f.read_text(encoding="utf-8"):
                        return True
                except UnicodeDecodeError:
                    continue
    return name in (ROOT / "scalesweep_cli.py").read_text(encoding="utf-8")


def test_scalesweep_settings_named_in_the_docs_exist() -> None:
    from api.service import Settings

    fields = set(Settings.variables().values())
    assert fields and all(variable.startswith("SCALESWEEP_") for variable in fields)
    named: set[str] = set()
    for path in DOCS:
        if path.is_file():
            named |= set(re.findall(r"\bSCALESWEEP_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")))
    assert len(named) >= 10
    unknown = sorted(n for n in named if n not in fields and not _source_reads(n))
    assert not unknown, f"named in the docs but neither a Settings field nor read by the code: {unknown}"


def test_files_named_in_the_docs_exist() -> None:
    problems = []
    for path, code in _all_code().items():
        for m in re.finditer(r"(?<![\w/.-])((?:benchmarks|examples|tests|docker|api|sweeper|trials|scaling|dashboards)"
                             r"/[\w/.-]*\w)", code):
            name = m.group(1)
            # Files a reader creates (docker/.env from .env.example) have no suffix of the tree's own kinds.
            if "*" in name or "<" in name or Path(name).suffix not in {".py", ".yaml", ".yml", ".md", ".sh", ".png",
                                                                         ".toml", ".example", ".json"}:
                continue
            if not (ROOT / name).exists():
                problems.append(f"{path.name}: {name}")
    assert not problems, problems


def _anchors(path: Path) -> set[str]:
    """The heading anchors of a Markdown file as GitHub renders them (headings inside code fences are not
    headings: a fence left open swallows the sections after it, and their links break)."""
    anchors, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*)", line)):
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return anchors


def test_links_between_the_docs_resolve() -> None:
    problems = []
    for path in DOCS:
        if not path.is_file():
            continue
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", path.read_text(encoding="utf-8")):
            if "://" in target or (not target and not anchor):
                continue
            linked = path.parent / target if target else path
            if not linked.exists():
                problems.append(f"{path.relative_to(ROOT)} -> {target}")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                problems.append(f"{path.relative_to(ROOT)} -> {target}#{anchor} (no such heading)")
    assert not problems, problems


# --- the README is a front door, and its docs map lists every page ----------------------------------------------


def test_the_readme_stays_within_its_line_budget() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: a study's results go to a page of "
        "docs/studies/, dated measurements to docs/history.md")


def _docs_map() -> set[str]:
    """The pages the README's docs map (its "## Documentation" section) links to, relative to the root."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    return {target for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)", section)}


def test_every_docs_page_is_in_the_readmes_docs_map() -> None:
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
    studies = [p for p in pages if p.startswith("docs/studies/")]
    assert len(studies) >= 2, pages  # the walk finds the study pages: otherwise this test would guard nothing
    missing = [page for page in pages if page not in _docs_map()]
    assert not missing, f"pages under docs/ that the README's docs map does not list: {missing}"
