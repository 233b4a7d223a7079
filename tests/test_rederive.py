"""`make rederive` (benchmarks/rederive.py): every study table the docs print (docs/studies/, one page per study)
re-derives from the records committed in the repository, and a record changed by one value fails the check, naming
the figure."""

from __future__ import annotations

import csv
import importlib.util
import shutil
import sys
import tomllib
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@cache
def rederive() -> ModuleType:
    """benchmarks/rederive.py, loaded from the tree (benchmarks/ is the repository's, not an installed package)."""
    spec = importlib.util.spec_from_file_location("benchmarks_rederive", ROOT / "benchmarks" / "rederive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def copy_studies(tmp_path: Path) -> Path:
    """A copy of benchmarks/studies/ and every file its manifests name, at the same paths under `tmp_path`."""
    shutil.copytree(ROOT / "benchmarks" / "studies", tmp_path / "benchmarks" / "studies",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for manifest in (ROOT / "benchmarks" / "studies").glob("*/study.toml"):
        spec = tomllib.loads(manifest.read_text(encoding="utf-8"))
        for name in [*spec["records"], *(t["file"] for t in spec["tables"])]:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, tmp_path / name)
    return tmp_path


def test_every_printed_study_figure_equals_its_rederivation() -> None:
    lines: list[str] = []
    assert rederive().rederive(ROOT, out=lines.append) == []
    checked = [line for line in lines if "printed numbers equal their re-derivation (none differs)" in line]
    # The evidence transfer's four tables in its study page (controls 6 rows, comparisons 18, target 3, budgets 3),
    # the first evidence run's four in its page, then the step-ratio benchmark's two tables in its own output and the
    # same two in the study page (4 + 12 rows each): studies in name order; the counts are the printed numbers each
    # table's check compared.
    assert [line.split(":")[0] for line in checked] == [
        "docs/studies/evidence.md 'The controls first'",
        "docs/studies/evidence.md 'Its comparisons, paired over seeds 6-14 (n = 9 per row)'",
        "docs/studies/evidence.md 'Its target'",
        "docs/studies/evidence.md 'Its tuning budgets'",
        'docs/studies/evidence-2026-12-06a.md "The first run\'s controls"',
        'docs/studies/evidence-2026-12-06a.md "The first run\'s comparisons, paired over seeds 6-9 (n = 4 per row)"',
        'docs/studies/evidence-2026-12-06a.md "The first run\'s target"',
        'docs/studies/evidence-2026-12-06a.md "The first run\'s tuning budgets"',
        "docs/studies/headroom.md 'The records so far, one or two seeds a rung (no claim)'",
        "benchmarks/results/step_ratio.txt 'periodic (K=3, γ=0.15) / Muon per step, full batch 16, and the controls "
        "through the same timing'",
        "benchmarks/results/step_ratio.txt 'The per-rank view",
        "docs/studies/step-ratio.md 'At the full batch of 16, with the controls'",
        "docs/studies/step-ratio.md 'The per-rank view'",
    ]
    # (the controls' outcome texts carry the level each control was judged at, since every control is judged at the
    # claims' level: 62 and 50 numbers where the verdicts printed 63 and 48 before)
    assert [int(line.split("rows, ")[1].split()[0]) for line in checked] == [62, 270, 9, 9, 50, 222, 9, 9, 51, 80,
                                                                              132, 80, 132]
    assert all("not recorded, not checked: load 1-min" in line for line in checked[9:])


def test_the_step_ratio_records_give_the_printed_ratios() -> None:
    tables = rederive().derive_step_ratio([ROOT / "benchmarks" / "results" / "step_ratio.csv"])
    cpu_m = tables["full_batch"].rows[("cpu-m",)]
    assert cpu_m["periodic / Muon (t, 95 %)"].text == "0.851 [0.841, 0.860] ±1.1 %"
    assert cpu_m["positive control (Muon + NS5)"].text == "1.214 [1.193, 1.236] ±1.8 %"
    assert cpu_m["its expected ratio"].text == "1.214"
    assert cpu_m["negative control (Muon again)"].text == "1.011 [0.995, 1.027] ±1.6 %"
    assert cpu_m["rounds"].text == "16 (target)"
    rank = tables["per_rank"].rows[("cpu-m", "8")]
    assert rank["Muon optimizer share"].text == "39.8 %" and rank["periodic / Muon (t, 95 %)"].values[0] == \
        pytest.approx(0.772, abs=5e-4)
    assert len(tables["per_rank"].rows) == 12 and len(tables["full_batch"].rows) == 4


def test_a_record_changed_by_one_value_fails_naming_the_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    root = copy_studies(tmp_path)
    record = root / "benchmarks" / "results" / "step_ratio.csv"
    with record.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    # periodic's thread-clock forward/backward at cpu-m, full batch, round 0: 50 % slower
    (hit,) = [i for i, r in enumerate(rows) if r[:6] == ["cpu-m", "16", "0", r[3], "periodic", "thread"]]
    rows[hit][6] = f"{1.5 * float(rows[hit][6]):.7f}"
    with record.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)

    assert rederive().main(["--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert ("DIFFERS: cpu-m, periodic / Muon (t, 95 %): benchmarks/results/step_ratio.txt prints 0.851 [0.841, 0.860] "
            "±1.1 %, the records give 0.8") in err
    assert "DIFFERS: cpu-m, periodic / Muon (t, 95 %): docs/studies/step-ratio.md prints 0.851" in err
    # its interval is now wider than the benchmark's ±2 % target, so "16 (target)" is no longer what the records say
    assert ("DIFFERS: cpu-m, rounds: docs/studies/step-ratio.md prints 16 (target), the records give 16 (stopped "
            "before its intervals were within ±2 %)") in err
    assert "cpu-xs" not in err and "cpu-s," not in err and "cpu-l" not in err  # one rung's round changed, one rung
    assert "printed figures differ from the records" in err


def test_a_printed_figure_changed_fails_naming_it(tmp_path: Path) -> None:
    root = copy_studies(tmp_path)
    page = root / "docs" / "studies" / "step-ratio.md"
    text = page.read_text(encoding="utf-8")
    assert text.count("| 1.214 |") == 1
    page.write_text(text.replace("| 1.214 |", "| 1.215 |"), encoding="utf-8")
    assert rederive().rederive(root, out=lambda _: None) == [
        "cpu-m, its expected ratio: docs/studies/step-ratio.md prints 1.215, the records give 1.214"]


def test_a_figure_is_compared_at_its_printed_digits() -> None:
    mod = rederive()
    figure = mod.Figure((0.83449, 0.8231, 0.8491, 1.56), "0.834 [0.823, 0.849] ±1.6 %")
    assert mod.same_figure("0.834 [0.823, 0.849] ±1.6 %", figure)
    assert mod.same_figure("0.83 [0.82, 0.85] ±2 %", figure)  # fewer digits, each rounded from the full value
    assert not mod.same_figure("0.835 [0.823, 0.849] ±1.6 %", figure)
    assert not mod.same_figure("0.834 [0.823, 0.849]", figure)  # a number missing is a different figure
    assert not mod.same_figure("16 (max_rounds)", mod.Figure((16,), "16 (target)"))
    # A p printed in %g: compared at its printed significant digits, the exponent included.
    p = mod.Figure((1.2601e-7,), "1.26e-07")
    assert mod.same_figure("1.26e-07", p) and mod.same_figure("1.3e-07", p)
    assert not mod.same_figure("1.27e-07", p) and not mod.same_figure("1.26e-06", p)


def test_a_bad_manifest_is_refused_naming_the_field(tmp_path: Path) -> None:
    mod = rederive()
    root = copy_studies(tmp_path)
    manifest = root / "benchmarks" / "studies" / "step_ratio" / "study.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace('deriver = "step_ratio"', 'deriver = "steps"'), encoding="utf-8")
    allowed = r"allowed: \['headroom', 'step_ratio', 'transfer'\]"
    with pytest.raises(mod.RederiveError, match=r"deriver 'steps' is unknown; " + allowed):
        mod.rederive(root, out=lambda _: None)
    manifest.write_text('colour = "red"\n' + text, encoding="utf-8")
    with pytest.raises(mod.RederiveError, match="colour"):
        mod.rederive(root, out=lambda _: None)


def _transfer_study(root: Path) -> Path:
    """A study of a transfer's records (a tiny real transfer with both controls, two seeds, one rung:
    tests/data/transfer_records, written by `scalesweep transfer records`) whose printed tables are the deriver's own
    Markdown, under `root`."""
    records = root / "benchmarks" / "studies" / "tiny" / "records"
    shutil.copytree(ROOT / "tests" / "data" / "transfer_records", records)
    paths = [records / n for n in ("transfer_record.json", "runs.csv", "curves.csv")]
    tables = rederive().derive_transfer(paths)
    lines = []
    for name, table in tables.items():
        lines += [f"### {name}", "", *rederive().markdown(table), ""]
    (root / "STUDY.md").write_text("\n".join(lines), encoding="utf-8")
    manifest = ['title = "tiny"', 'command = "scalesweep transfer records"', 'deriver = "transfer"',
                "records = [" + ", ".join(f'"{p.relative_to(root)}"' for p in paths) + "]"]
    for name in tables:
        manifest += ["", "[[tables]]", 'file = "STUDY.md"', f'heading = "### {name}"', f'derived = "{name}"']
    (records.parent / "study.toml").write_text("\n".join(manifest) + "\n", encoding="utf-8")
    return records


def test_a_transfer_study_rederives_from_its_records_and_a_changed_curve_fails(tmp_path: Path) -> None:
    records = _transfer_study(tmp_path)
    tables = rederive().derive_transfer([records / "transfer_record.json"])
    controls = tables["controls"].rows
    # the controls read as the transfer read them: identical curves give a steps ratio of exactly 1; the positive
    # control's per-step ratio within reach of its separately measured cost
    assert controls[("cpu-xs", "negative")]["steps ratio (first crossing)"].values == (1.0, 1.0, 1.0)
    positive = controls[("cpu-xs", "positive")]
    assert positive["outcome"].text.startswith("ok: positive control: saving")
    lo, hi = positive["per-step ratio"].values[1:]
    assert lo <= positive["expected per-step ratio"].values[0] <= hi
    assert set(tables["comparisons"].rows) == {("cpu-xs", b, c) for b in ("muon", "adamw")
                                               for c in ("first", "steps_above", "sustained")}
    assert rederive().rederive(tmp_path, out=lambda _: None) == []

    # One evaluation of Muon's tracking curve (seed 0, mid-run) doubled: Muon no longer holds below the target from
    # there, so its sustained crossing and its steps above the target move and the comparison against Muon changes.
    runs = list(csv.DictReader((records / "runs.csv").open(encoding="utf-8")))
    (muon,) = [r["run_id"] for r in runs if r["arm"] == "muon" and r["seed"] == "0"]
    rows = list(csv.reader((records / "curves.csv").open(encoding="utf-8")))
    hits = [i for i, r in enumerate(rows) if r[0] == muon and r[1] == "track"]
    rows[hits[len(hits) // 2]][4] = repr(2 * float(rows[hits[len(hits) // 2]][4]))
    with (records / "curves.csv").open("w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    problems = rederive().rederive(tmp_path, out=lambda _: None)
    assert problems
    assert any(p.startswith("cpu-xs, muon, sustained, steps-to-target ratio:") for p in problems), problems
    assert any(p.startswith("cpu-xs, muon, steps_above, steps-to-target ratio:") for p in problems), problems
    # AdamW's own figures hold; only its Holm-adjusted p moves, as it must when another p of the family moved
    assert not any(", adamw," in p and ", Holm p:" not in p for p in problems), problems


def test_the_extended_evidence_study_counts_its_extension_as_a_look() -> None:
    # The evidence study (docs/studies/evidence.md): seeds 6-10, then 11-14 added after a look (`scalesweep transfer
    # extend`). Its claims and its complete-case table's Holm flags are both at alpha 0.05 over two looks.
    from sweeper.transfer import read_transfer_records

    result = read_transfer_records(ROOT / "benchmarks" / "studies" / "evidence" / "records")
    [extension] = result.plan.extensions
    assert extension["seeds_before"] == [6, 7, 8, 9, 10] and extension["added"] == [11, 12, 13, 14]
    assert result.plan.seeds == list(range(6, 15))
    budget = result.claims()["budget"]
    assert budget["looks"] == 2 and budget["per_look"] == pytest.approx(0.025)
    multiplicity = result.targets()["multiplicity"]
    assert multiplicity["alpha"] == pytest.approx(0.025) and multiplicity["looks"] == 2
    # the steps ratio against Muon is shown at every rung at that level; no time saving is
    against_muon = [entry["comparisons"]["muon"] for entry in result.targets()["rungs"].values()]
    assert len(against_muon) == 3 and all(c["steps_to_target_ratio"]["rejected"] for c in against_muon)
    assert not any(c["time_saving_pct"]["rejected"] for c in against_muon)


def test_every_study_page_prints_tables_a_manifest_rederives() -> None:
    """A page of docs/studies/ is a re-derivable study: some manifest names it as the file of a printed table (a table
    whose records were not kept belongs in docs/history.md)."""
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "studies").glob("*.md"))
    assert len(pages) >= 2, pages
    checked = {table.file for manifest in (ROOT / "benchmarks" / "studies").glob(f"*/{rederive().MANIFEST}")
               for table in rederive().load_manifest(manifest).tables}
    assert [page for page in pages if page not in checked] == []
