"""Re-derive the study tables the docs print (docs/studies/, one page per study) from the raw records committed.

`make rederive` (`python benchmarks/rederive.py [--root DIR] [--study NAME ...]`) walks
`benchmarks/studies/*/study.toml`. Each manifest names a study's raw records (CSV, committed), the deriver that
reads them (`DERIVERS`, by name: the project's own functions, the ones that printed the tables) and every printed
table its records give (a file and the heading the table follows). The command prints the re-derived tables, then
checks every figure of every named table against them at the figure's printed digits, and exits 1 naming each figure
that differs, or a row or column the records cannot give. Columns that were printed but never recorded (the load
average) are listed, not checked.

The convention is written in docs/testing.md ("Study records and `make rederive`").
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scaling.claims import ENDPOINTS
from trials.steptime import CLOCKS, PHASES, PairedRatio, StepTimes

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = "study.toml"

# A printed figure: an optionally signed decimal number ("0.836", "31.3", "−0.1"); its digits after the point are
# the precision it claims.
NUMBER = re.compile(r"[-−]?\d+(?:\.\d+)?(?:e[-+]\d+)?")  # "1.26e-07": a Holm p printed in %g
WORD = re.compile(r"[A-Za-z_]+")


class RederiveError(Exception):
    """A study that cannot be read: a bad manifest, a missing file or column, an unknown deriver."""


class PrintedTable(BaseModel):
    """One printed table a study's records re-derive."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(description="The file that prints the table, relative to the repository root.")
    heading: str = Field(description="The heading line the table follows, exactly as the file has it.")
    derived: str = Field(description="Which of the deriver's tables its rows are (the deriver names them).")


class StudyManifest(BaseModel):
    """`benchmarks/studies/<name>/study.toml` (strict: unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(description="What the study measured, in one line.")
    command: str = Field(description="The command that wrote the records (and printed the tables).")
    deriver: str = Field(description="The function that re-derives the tables from the records: a key of DERIVERS.")
    records: list[str] = Field(min_length=1, description="The raw records, relative to the repository root.")
    tables: list[PrintedTable] = Field(min_length=1, description="Every printed table the records re-derive.")


@dataclass(frozen=True)
class Figure:
    """One re-derived cell: the values at full precision (compared at a printed cell's digits) and the text the
    study's own script prints for them."""

    values: tuple[float, ...]
    text: str


@dataclass
class DerivedTable:
    """Rows keyed by the text of the `keys` columns; `unrecorded` maps a printed column the records cannot give to
    the reason."""

    keys: tuple[str, ...]
    columns: tuple[str, ...]
    rows: dict[tuple[str, ...], dict[str, Figure]] = field(default_factory=dict)
    unrecorded: dict[str, str] = field(default_factory=dict)


Deriver = Callable[[Sequence[Path]], dict[str, DerivedTable]]


# ----------------------------------------------------------------------------------------------------------
# The step-ratio benchmark (benchmarks/step_ratio.py): every round's per-arm phase costs -> its two tables

STEP_RATIO_COLUMNS = ("rung", "local_batch", "round", "position", "arm", "clock",
                      *(f"{p}_s" for p in PHASES), "redundant_s")
# What the benchmark ran with and did not write into the CSV: benchmarks/step_ratio.py's defaults, which the
# committed run used (its command line in step_ratio.txt sets only --out). No figure depends on the block length.
STEP_RATIO_TARGET = 0.02
STEP_RATIO_MAX_ROUNDS = 60
FULL_COLUMNS = ("rounds", "Muon ms / step (thread)", "Muon optimizer share (paper 44 % at 15B)",
                "periodic / Muon (t, 95 %)", "median [sign-test 95 %]", "wall clock", "positive control (Muon + NS5)",
                "its expected ratio", "negative control (Muon again)")
RANK_COLUMNS = ("rounds", "Muon ms / step", "Muon optimizer share", "periodic / Muon (t, 95 %)",
                "median [sign-test 95 %]", "wall clock")
LOAD_NOT_RECORDED = {"load 1-min": "the load average is printed by the benchmark, not written into its CSV"}


def read_step_times(path: Path) -> dict[tuple[str, int], StepTimes]:
    """(rung, local batch) -> the `StepTimes` the benchmark measured, rebuilt from its CSV round by round."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in STEP_RATIO_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise RederiveError(f"{path}: missing columns {missing}; a step-ratio record has "
                                f"{list(STEP_RATIO_COLUMNS)}")
        rows = list(reader)
    views: dict[tuple[str, int], list[dict[str, str]]] = {}
    for row in rows:
        views.setdefault((row["rung"], int(row["local_batch"])), []).append(row)
    full_batch = {rung: max(lb for r, lb in views if r == rung) for rung, _ in views}
    out = {}
    for (rung, local_batch), view in views.items():
        arms = tuple(dict.fromkeys(r["arm"] for r in view))  # the benchmark writes them in its arms' order
        costs: dict[str, dict[str, dict[str, list[float]]]] = {a: {c: {p: [] for p in PHASES} for c in CLOCKS}
                                                                for a in arms}
        redundant: dict[str, dict[str, list[float]]] = {}
        blocks: dict[int, dict[int, str]] = {}
        for r in sorted(view, key=lambda r: int(r["round"])):  # stable: each round keeps the arms' order
            for p in PHASES:
                costs[r["arm"]][r["clock"]][p].append(float(r[f"{p}_s"]))
            if r["redundant_s"]:
                redundant.setdefault(r["arm"], {c: [] for c in CLOCKS})[r["clock"]].append(float(r["redundant_s"]))
            blocks.setdefault(int(r["round"]), {})[int(r["position"])] = r["arm"]
        times = StepTimes(
            arms=arms, reference="muon", clock="thread", level=0.95, rung=rung, batch_size=full_batch[rung],
            local_batch=local_batch, block_steps=3, periods={}, threads=1, warmup_rounds=2, costs=costs,
            redundant=redundant, blocks=[[b[i] for i in sorted(b)] for _, b in sorted(blocks.items())],
        )
        within = all(times.ratio(a).halfwidth <= STEP_RATIO_TARGET for a in arms if a != times.reference)
        # Why the benchmark stopped adding rounds: its intervals reached the target, or it ran out of rounds; records
        # that show neither could not have come from it as printed.
        times.stopped = ("target" if within else "max_rounds" if times.rounds >= STEP_RATIO_MAX_ROUNDS
                         else f"stopped before its intervals were within ±{100 * STEP_RATIO_TARGET:g} %")
        out[(rung, local_batch)] = times
    return out


def _ratio(r: PairedRatio) -> Figure:
    return Figure((r.mean, r.lo, r.hi, 100 * r.halfwidth),
                  f"{r.mean:.3f} [{r.lo:.3f}, {r.hi:.3f}] ±{100 * r.halfwidth:.1f} %")


def _median(r: PairedRatio) -> Figure:
    if r.median_lo is None or r.median_hi is None:
        return Figure((r.median,), f"{r.median:.3f}")
    return Figure((r.median, r.median_lo, r.median_hi), f"{r.median:.3f} [{r.median_lo:.3f}, {r.median_hi:.3f}]")


def _number(value: float, digits: int, unit: str = "") -> Figure:
    return Figure((value,), f"{value:.{digits}f}{unit}")


def _view_figures(v: StepTimes) -> list[Figure]:
    """rounds, Muon's ms per step, its optimizer share, periodic / Muon (t and median), the wall clock's ratio."""
    muon_ms = 1e3 * sorted(v.step("muon"))[v.rounds // 2]  # the benchmark's median: the upper one of an even count
    return [Figure((v.rounds,), f"{v.rounds} ({v.stopped})"), _number(muon_ms, 1),
            _number(100 * v.optimizer_share("muon"), 1, " %"), _ratio(v.ratio("periodic")),
            _median(v.ratio("periodic")), _number(v.ratio("periodic", clock="wall").mean, 3)]


def derive_step_ratio(records: Sequence[Path]) -> dict[str, DerivedTable]:
    """The benchmark's two tables, `full_batch` (keyed by rung: the full step and the controls, with a compact
    per-rank column for each smaller local batch) and `per_rank` (keyed by rung and local batch)."""
    views = read_step_times(records[0])
    full = DerivedTable(keys=("rung",), columns=FULL_COLUMNS, unrecorded=dict(LOAD_NOT_RECORDED))
    rank = DerivedTable(keys=("rung", "local batch"), columns=RANK_COLUMNS, unrecorded=dict(LOAD_NOT_RECORDED))
    rungs = list(dict.fromkeys(rung for rung, _ in views))  # the records' order: the benchmark's
    for (rung, local_batch), v in sorted(views.items(), key=lambda kv: (rungs.index(kv[0][0]), -kv[0][1])):
        figures = _view_figures(v)
        rank.rows[(rung, str(local_batch))] = dict(zip(RANK_COLUMNS, figures, strict=True))
        if local_batch != v.batch_size:
            continue
        expected = v.expected_ratio("positive")
        full.rows[(rung,)] = dict(zip(FULL_COLUMNS, [*figures, _ratio(v.ratio("positive")),
                                                     _number(expected or float("nan"), 3),
                                                     _ratio(v.ratio("negative"))], strict=True))
    for (rung, local_batch), v in sorted(views.items(), key=lambda kv: -kv[0][1]):  # local batch 8, then 4
        if local_batch == v.batch_size:
            continue
        # The README's compact per-rank view: Muon's share and periodic / Muon at this local batch, one column.
        column = f"local batch {local_batch}: Muon optimizer share, periodic / Muon (t, 95 %)"
        share, ratio = _number(100 * v.optimizer_share("muon"), 1, " %"), _ratio(v.ratio("periodic"))
        full.rows[(rung,)][column] = Figure(share.values + ratio.values, f"{share.text}, {ratio.text}")
        if column not in full.columns:
            full.columns = (*full.columns, column)
    return {"full_batch": full, "per_rank": rank}


# ----------------------------------------------------------------------------------------------------------
# A transfer's records (`scalesweep transfer records`): the controls, the comparisons at each endpoint, the tuning
# budgets and the diagnostic, each computed by the transfer's own analysis on the transfer read back

CONTROL_COLUMNS = ("steps ratio (first crossing)", "per-step ratio", "expected per-step ratio", "time saving",
                   "outcome")
COMPARISON_COLUMNS = ("reached (searched, baseline)", "steps-to-target ratio", "per-step ratio", "time saving",
                      "n", "Holm p")
BUDGET_COLUMNS = ("settings in the sweep", "settings per rung in the transfer", "runs per rung")
TARGET_COLUMNS = ("target", "Muon's seeds below it at the end")


def _interval(doc: dict, digits: int, unit: str = "", signed: bool = False) -> Figure:
    """`mean [lo, hi]` of a ratio or saving document, at `digits` decimals."""
    sign = "+" if signed else ""
    mean, lo, hi = (float(doc[k]) for k in ("mean", "lo", "hi"))
    return Figure((mean, lo, hi), f"{mean:{sign}.{digits}f}{unit} [{lo:{sign}.{digits}f}, {hi:{sign}.{digits}f}]")


def _words(text: str) -> Figure:
    """A verdict's text; its numbers are figures too (compared at their printed digits)."""
    return Figure(tuple(float(n.replace("−", "-")) for n in NUMBER.findall(text)), text)


def _reached(comp: dict, a: str, b: str) -> Figure:
    cens = comp["steps_to_target_ratio"]["censoring"]
    n = comp["steps_to_target_ratio"]["n"]
    ra, rb = cens[a]["reached"], cens[b]["reached"]
    return Figure((ra, n, rb, n), f"{ra}/{n}, {rb}/{n}")


def derive_transfer(records: Sequence[Path]) -> dict[str, DerivedTable]:
    """A transfer's tables from its records folder (the folder of the first record): `controls` (rung, control),
    `comparisons` (rung, baseline, crossing), `budgets` (arm) and `targets` (rung)."""
    from sweeper.transfer import read_transfer_records

    result = read_transfer_records(records[0].parent)
    searched = result.searched_arm
    controls = DerivedTable(keys=("rung", "control"), columns=CONTROL_COLUMNS)
    for kind, doc in result.controls().items():
        if not isinstance(doc, dict) or "comparisons" not in doc:
            continue  # the summary lines
        for rung, comp in doc["comparisons"].items():
            verdict = doc["rungs"][rung]
            # Not judged (no seed reached, or no timing) is no failure: its verdict says why, unprefixed.
            prefix = "ok: " if verdict["passed"] else "" if verdict.get("judged", True) is False else "FAILED: "
            outcome = _words(prefix + verdict["verdict"])
            if not isinstance(comp, dict) or "first" not in comp:
                controls.rows[(rung, kind)] = {"outcome": outcome}
                continue
            first = comp["first"]
            row = {"steps ratio (first crossing)": _interval(first["steps_to_target_ratio"], 3), "outcome": outcome}
            saving = first.get("time_saving_pct")
            if saving is not None:
                row["per-step ratio"] = _interval(saving["step_time_ratio"], 3)
                row["time saving"] = _interval(saving, 1, " %", signed=True)
            # The redundant work's cost measured apart by the timing stage: the per-step ratio the control must give.
            expected = (((result.step_timing.get("rungs") or {}).get(rung) or {}).get("expected_step_time_ratio")
                        or {}).get(doc["arm"])
            if expected is not None:
                row["expected per-step ratio"] = Figure((expected,), f"{expected:.3f}")
            controls.rows[(rung, kind)] = row
    comparisons = DerivedTable(keys=("rung", "vs", "crossing"), columns=COMPARISON_COLUMNS)
    claims = result.claims()
    holm = claims.get("p_holm", {})
    for rung, entry in result.targets()["rungs"].items():
        for base, comp in entry["comparisons"].items():
            for crossing in ENDPOINTS:  # the co-primary pair, then the sustained crossing, reported
                doc = comp.get(crossing) or {}
                if "steps_to_target_ratio" not in doc:
                    why = doc.get("error") or "not computed"
                    comparisons.rows[(rung, base, crossing)] = {"steps-to-target ratio": _words(f"refused: {why}")}
                    continue
                steps = doc["steps_to_target_ratio"]
                row = {"reached (searched, baseline)": _reached(doc, searched, base),
                       "steps-to-target ratio": _interval(steps, 3), "n": Figure((steps["n"],), str(steps["n"]))}
                saving = doc.get("time_saving_pct")
                if saving is not None:
                    row["per-step ratio"] = _interval(saving["step_time_ratio"], 3)
                    row["time saving"] = _interval(saving, 1, " %", signed=True)
                p = holm.get(crossing, {}).get(f"{rung} vs {base}")
                if p is not None:
                    row["Holm p"] = Figure((p,), f"{p:.3g}")
                comparisons.rows[(rung, base, crossing)] = row
    budgets = DerivedTable(keys=("arm",), columns=BUDGET_COLUMNS)
    for arm, doc in result.tuning_budgets()["arms"].items():
        budgets.rows[(arm,)] = {c: Figure((doc[k],), str(doc[k])) if doc[k] is not None else _words("not recorded")
                                for c, k in zip(BUDGET_COLUMNS, ("sweep_settings", "transfer_settings_per_rung",
                                                                 "runs_per_rung"), strict=True)}
    targets = DerivedTable(keys=("rung",), columns=TARGET_COLUMNS)
    for rung, entry in result.targets()["rungs"].items():
        muon = entry["arms"].get("muon", {})
        held, seeds = muon.get("held_to_end"), muon.get("seeds")
        targets.rows[(rung,)] = {"target": Figure((entry["target"],), f"{entry['target']:.1f}"),
                                 TARGET_COLUMNS[1]: Figure((held, seeds), f"{held} of {seeds}")}
    return {"controls": controls, "comparisons": comparisons, "budgets": budgets, "targets": targets}


# ----------------------------------------------------------------------------------------------------------
# The headroom study (benchmarks/headroom.py): its records' tables, derived by the script that printed them

def derive_headroom(records: Sequence[Path]) -> dict[str, DerivedTable]:
    """`rungs`, `attributes`, `steps` and `fits`, from exactly the record files the manifest lists."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmarks_headroom", ROOT / "benchmarks" / "headroom.py")
    assert spec is not None and spec.loader is not None
    headroom = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, headroom)
    spec.loader.exec_module(headroom)
    out = {}
    for name, (keys, columns, rows) in headroom.headroom_tables(list(records)).items():
        table = DerivedTable(keys=keys, columns=columns)
        for key, cells in rows.items():
            table.rows[key] = {column: Figure(values, text) for column, (values, text) in cells.items()}
        out[name] = table
    return out


DERIVERS: dict[str, Deriver] = {"step_ratio": derive_step_ratio, "transfer": derive_transfer,
                                "headroom": derive_headroom}


# ----------------------------------------------------------------------------------------------------------
# Reading printed tables and comparing them figure by figure


def _cell(text: str) -> str:
    return text.replace("**", "").strip()


def printed_table(path: Path, heading: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the first Markdown table after the line `heading` in `path` (bold marks dropped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == heading.strip()]
    if not starts:
        raise RederiveError(f"{path}: no line {heading!r} (the manifest's heading for this table)")
    table = []
    for line in lines[starts[0] + 1:]:
        if line.strip().startswith("|"):
            table.append([_cell(c) for c in line.strip().strip("|").split("|")])
        elif table or line.strip().startswith("#"):
            break
    if len(table) < 3:
        raise RederiveError(f"{path}: no table after {heading!r}")
    ragged = [" | ".join(row) for row in table[2:] if len(row) != len(table[0])]
    if ragged:  # a row that is not read would be a row that is not checked
        raise RederiveError(f"{path}: rows of the table after {heading!r} without {len(table[0])} cells: {ragged}")
    return table[0], table[2:]


def same_figure(printed: str, figure: Figure) -> bool:
    """True when every number of `printed` equals the figure's value rounded to that number's printed digits, and
    every word of `printed` ("target") is in the figure's text."""
    numbers = NUMBER.findall(printed)
    if len(numbers) != len(figure.values):
        return False
    for text, value in zip(numbers, figure.values, strict=True):
        mantissa, exponent = text.partition("e")[::2]
        digits = len(mantissa.partition(".")[2])
        shown = f"{value:.{digits}e}" if exponent else f"{value:.{digits}f}"
        if shown.replace("-", "−") != text.replace("-", "−"):
            return False
    return set(WORD.findall(printed)) <= set(WORD.findall(figure.text))


def check_table(path: Path, name: str, header: list[str], rows: list[list[str]],
                derived: DerivedTable) -> tuple[int, list[str]]:
    """(numbers equal, problems): each problem names the file, the row, the column and both values."""
    problems, equal = [], 0
    missing_keys = [k for k in derived.keys if k not in header]
    if missing_keys:
        return 0, [f"{path} {name!r}: no key column {missing_keys} (rows are named by {list(derived.keys)})"]
    for row in rows:
        cells = dict(zip(header, row, strict=True))
        key = tuple(cells[k] for k in derived.keys)
        where = ", ".join(key)
        if key not in derived.rows:
            problems.append(f"{path} {name!r}: row {where} is not in the records")
            continue
        for column, printed in cells.items():
            if column in derived.keys or column in derived.unrecorded:
                continue
            figure = derived.rows[key].get(column)
            if figure is None and printed in ("—", ""):
                continue  # printed as absent, and the records give none: the same answer
            if figure is None:
                problems.append(f"{path} {name!r}: column {column!r} is not a figure the records give "
                                f"(they give {list(derived.rows[key])})")
            elif same_figure(printed, figure):
                equal += len(figure.values)
            else:
                problems.append(f"{where}, {column}: {path} prints {printed}, the records give {figure.text}")
    return equal, problems


def markdown(table: DerivedTable) -> list[str]:
    header = [*table.keys, *table.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, figures in table.rows.items():
        lines.append("| " + " | ".join([*key, *(figures[c].text if c in figures else "—" for c in table.columns)])
                     + " |")
    return lines


def load_manifest(path: Path) -> StudyManifest:
    try:
        manifest = StudyManifest.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, ValidationError) as e:
        raise RederiveError(f"{path}: {e}") from e
    if manifest.deriver not in DERIVERS:
        raise RederiveError(f"{path}: deriver {manifest.deriver!r} is unknown; allowed: {sorted(DERIVERS)}")
    return manifest


def rederive(root: Path = ROOT, studies: Sequence[str] = (), out: Callable[[str], None] = print) -> list[str]:
    """Re-derive and check every study under `root`/studies (or those named); returns the problems, each naming a
    figure, row or column (empty: every printed figure equals its re-derivation)."""
    found = sorted((root / "benchmarks" / "studies").glob(f"*/{MANIFEST}"))
    unknown = sorted(set(studies) - {p.parent.name for p in found})
    if unknown:
        names = [p.parent.name for p in found]
        raise RederiveError(f"no study {unknown} under {root / 'benchmarks' / 'studies'}; there are {names}")
    if not found:
        raise RederiveError(f"no benchmarks/studies/*/{MANIFEST} under {root}")
    problems: list[str] = []
    for path in found:
        if studies and path.parent.name not in studies:
            continue
        manifest = load_manifest(path)
        records = [root / r for r in manifest.records]
        absent = [str(r) for r in records if not r.is_file()]
        if absent:
            raise RederiveError(f"{path}: records not found: {absent}")
        derived = DERIVERS[manifest.deriver](records)
        out(f"# {path.relative_to(root).parent}: {manifest.title}")
        out(f"records: {', '.join(manifest.records)} (written by `{manifest.command}`)")
        for name, table in derived.items():
            out("")
            out(f"## re-derived: {name}")
            out("")
            for line in markdown(table):
                out(line)
        out("")
        for ref in manifest.tables:
            if ref.derived not in derived:
                raise RederiveError(f"{path}: table {ref.heading!r} names derived table {ref.derived!r}; "
                                    f"allowed: {sorted(derived)}")
            header, rows = printed_table(root / ref.file, ref.heading)
            equal, found_problems = check_table(Path(ref.file), ref.heading, header, rows, derived[ref.derived])
            skipped = sorted(set(header) & set(derived[ref.derived].unrecorded))
            verdict = "none differs" if not found_problems else f"{len(found_problems)} problems"
            unchecked = f"; not recorded, not checked: {', '.join(skipped)}" if skipped else ""
            out(f"{ref.file} {ref.heading.lstrip('# ')!r}: {len(rows)} rows, {equal} printed numbers equal their "
                f"re-derivation ({verdict}){unchecked}")
            problems += found_problems
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/rederive.py", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="repository root holding benchmarks/studies/ (default: this one)")
    parser.add_argument("--study", action="append", default=[],
                        help="only this study (a folder of benchmarks/studies/)")
    args = parser.parse_args(argv)
    try:
        problems = rederive(args.root, args.study)
    except RederiveError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"DIFFERS: {problem}", file=sys.stderr)
    print("every printed figure equals its re-derivation" if not problems
          else f"{len(problems)} printed figures differ from the records", file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
