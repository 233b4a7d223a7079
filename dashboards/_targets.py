"""The report's section on time to a declared target: the rule, per-rung table (fraction reaching, steps and time
to target, time to best labelled as the paper's), the paired comparisons with their intervals, the plateau flag,
and the fits of steps and time to target with their hold-out error beside the carry-forward baseline.

It renders the plain data of `sweeper.TransferResult.target_summary()` (no computation here), so every number is
the one the REST fits resource and the export carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from scaling.rungs import step_ratio_text

from ._html import escape as _e
from ._html import interval as _interval
from ._html import number as _f
from ._html import text_table as _table

__all__ = ["has_sensitivity", "plot_target_sensitivity", "targets_html"]


def _spread(d: Mapping[str, Any] | None) -> str:
    if not d or d.get("mean") is None:
        return "—"
    return _f(d["mean"]) + (f" ± {_f(d['std'], 2)}" if d.get("std") is not None else "")


def _holm(doc: Mapping[str, Any]) -> str:
    return f"<br>Holm p {doc['p_holm']:.2g}" if doc.get("p_holm") is not None else ""


def targets_html(summary: Mapping[str, Any]) -> str:
    """HTML tables of the target report and its fits (`TransferResult.target_summary()`)."""
    report = summary["report"]
    parts = [f"<p><strong>Target, declared before the runs:</strong> {_e(report['rule_text'])}. A comparison "
             f"needs at least {report['min_paired_seeds']} paired seed(s) reaching it in both arms; otherwise it "
             "is reported as too few, never as a number.</p>"]
    rows = []
    for rung, e in report["rungs"].items():
        p = e["plateau"]
        flags = [f"<strong>undertrained</strong>: {_e(', '.join(p.get('undertrained_arms', [])))}"
                 if p["undertrained"] else "",
                 f"<strong>rising</strong>: {_e(', '.join(p.get('rising_arms', [])))}" if p.get("rising") else ""]
        plateau = ("; ".join(f for f in flags if f) + f" ({p['runs_flagged']}/{p['runs_checked']} falling, "
                   f"{p.get('runs_rising', 0)} rising)") if any(flags) else (
                   f"ok ({p['runs_flagged']}/{p['runs_checked']} flagged)")
        for arm, a in e["arms"].items():
            rows.append([_e(rung), _f(e["horizon"]), _f(e["target"]), _e(e["curve"]), _e(arm),
                         f"{a['reached']}/{a['seeds']}", f"{a.get('held_to_end', 0)}/{a['reached']}",
                         _spread(a["steps_to_target"]),
                         _spread(a["time_to_target_s"]), _spread(a["time_to_best_s"]),
                         _f(1e3 * a["step_time_s"], 3) if a.get("step_time_s") else "—", plateau])
    parts.append(_table(["rung", "horizon", "target", "curve", "arm", "reached", "held to the end",
                         "steps to target", "time to target s", "time to best s (paper's definition)",
                         "ms/step (timing stage)", "plateau"], rows,
                        "per rung and arm, mean ± std over the seeds that reached; held to the end: of those, the "
                        "seeds still at or below the target at their last point (a first crossing alone does not "
                        "see a run that rises again)"))
    comp_rows = []
    for rung, e in report["rungs"].items():
        for base, c in e["comparisons"].items():
            if c["status"] != "ok":
                comp_rows.append([_e(rung), _e(base), _e(c["note"]), "—", "—", "—", "—"])
                continue
            ttb = c.get("time_to_best_saving_pct")
            saving = c.get("time_saving_pct") or {}
            power = "—"
            if saving.get("detectable_pct") is not None:
                needed = saving.get("seeds_for_10pct")
                power = (f"{saving['detectable_pct']:.0f} %; {needed if needed is not None else '> 1000'} seeds "
                         "for 10 %")
            comp_rows.append([_e(rung), _e(base), _interval(c["steps_to_target_ratio"]) + _holm(
                                  c["steps_to_target_ratio"]),
                              step_ratio_text(c) if c.get("step_time_ratio") is not None else "—",
                              _interval(c.get("time_saving_pct"), " %") + _holm(saving), power,
                              _interval(ttb, " %") if ttb else "—"])
    parts.append(_table(["rung", "baseline", "steps-to-target ratio (optimizer)", "per-step time ratio (systems, "
                         "isolated)", "time saving = 1 - product", "detectable saving (80 % power); seeds needed "
                         "for 10 %", "time-to-best saving (paper's definition)"],
                        comp_rows, f"{summary.get('searched_arm', 'searched arm')} against each baseline, paired "
                        "over seeds: mean, 95% interval, n; Holm p: adjusted over every rung and baseline compared "
                        "(a claim stands where it is at most 0.05)"))
    sens_rows = []
    for rung, e in report["rungs"].items():
        for base, rows_ in ((e.get("sensitivity") or {}).get("comparisons") or {}).items():
            cells = [f"{_f(r['target'], 3)}: " + (_interval(r["ratio"]) if r["ratio"] else "— (n=0)") for r in rows_]
            sens_rows.append([_e(rung), _e(base), "<br>".join(cells)])
    if sens_rows:
        parts.append(_table(["rung", "baseline", "target level: steps-to-target ratio [95% interval], n"], sens_rows,
                            "the paired steps-to-target ratio against where the target is drawn, from the best "
                            "arm's mean final value to 1.5 x the worst's: an answer that holds only near the "
                            "declared target depends on it"))
    for metric, fit in (summary.get("fits") or {}).items():
        if "error" in fit:
            parts.append(f"<p>no {_e(metric)} fit: {_e(fit['error'])}</p>")
            continue
        parts.append(_fit_html(metric, fit, ""))
        if fit.get("alternative"):  # the simpler fit that passes the counting rule (e.g. alpha shared by the arms)
            parts.append(_fit_html(metric, fit["alternative"], "alternative "))
    under = summary.get("undertrained_rungs") or []
    if under:
        parts.append(f"<p><strong>Undertrained rungs:</strong> {_e(', '.join(under))}. Every fit over them mixes "
                     "model size with under-training.</p>")
    return "".join(parts)


def _fit_html(metric: str, fit: Mapping[str, Any], label: str) -> str:
    """One fit of `metric`: each arm's parameters with intervals and its hold-out check, then flags and notes."""
    fit_rows = []
    for arm, d in fit["arms"].items():
        cells = "; ".join(f"{_e(k)} = {_f(v)} [{_f(d['intervals'][k][0])}, {_f(d['intervals'][k][1])}]"
                          for k, v in d["params"].items())
        fit_rows.append([_e(arm), cells, _f(d.get("loo_error")), _f(d.get("loo_baseline_error"))])
    shared = f", {'+'.join(fit['share'])} shared by the arms" if fit.get("share") else ""
    parts = [_table(["arm", "parameters", "hold-out error at the largest size", "carry-forward baseline"],
                    fit_rows, f"{label}fit {fit['form']}{shared} of {metric} against size "
                    f"(loss: {fit['loss_function']})")]
    flags = [f"<li><code>{_e(k)}</code>: {_e(fit['flag_details'].get(k, ''))}</li>" for k in fit["flags"]]
    flags += [f"<li>{_e(n)}</li>" for n in fit.get("notes", [])]
    if fit.get("suggestion"):
        flags.append(f"<li>suggestion: {_e(fit['suggestion'])}</li>")
    if flags:
        parts.append(f"<ul>{''.join(flags)}</ul>")
    return "".join(parts)


def has_sensitivity(summary: Mapping[str, Any] | None) -> bool:
    """Whether `summary` (`target_summary()`) holds a target-sensitivity curve with at least one ratio."""
    rungs = ((summary or {}).get("report") or {}).get("rungs") or {}
    return any(r.get("ratio") for e in rungs.values()
               for rows in ((e.get("sensitivity") or {}).get("comparisons") or {}).values() for r in rows)


def plot_target_sensitivity(summary: Mapping[str, Any]) -> Figure:
    """One panel per rung: the paired steps-to-target ratio (searched arm / each baseline, geometric mean over the
    seeds where both reached, with its 95 % interval as a band) against the target level, the declared target as a
    vertical line, 1 (no difference) as a horizontal one. A ratio that crosses 1 as the line moves depends on
    where the target was drawn."""
    from ._draw import ARM_COLORS, grid_shape, new_figure

    report = summary["report"]
    rungs = [r for r, e in report["rungs"].items() if (e.get("sensitivity") or {}).get("comparisons")]
    rows, cols = grid_shape(len(rungs))
    fig = new_figure(4.2 * cols, 3.4 * rows)
    searched = str(summary.get("searched_arm") or "periodic")
    for i, rung in enumerate(rungs, start=1):
        ax = fig.add_subplot(rows, cols, i)
        entry = report["rungs"][rung]
        for base, points in entry["sensitivity"]["comparisons"].items():
            placed = [p for p in points if p.get("ratio")]
            if not placed:
                continue
            xs = [p["target"] for p in placed]
            colour = ARM_COLORS.get(base, "tab:gray")
            ax.plot(xs, [p["ratio"]["mean"] for p in placed], "-o", ms=3, color=colour, label=f"{searched} / {base}")
            banded = [p for p in placed if p["ratio"].get("lo") is not None]
            if banded:
                ax.fill_between([p["target"] for p in banded], [p["ratio"]["lo"] for p in banded],
                                [p["ratio"]["hi"] for p in banded], color=colour, alpha=0.15, lw=0)
        ax.axhline(1.0, color="black", lw=0.8, ls=":")
        if entry.get("target") is not None:
            ax.axvline(entry["target"], color="tab:red", lw=1, ls="--", label="declared target")
        ax.set_title(rung, fontsize=10)
        ax.set_xlabel("target level (FD; lower is stricter)")
        if (i - 1) % cols == 0:
            ax.set_ylabel("steps-to-target ratio")
        ax.legend(fontsize=7)
    fig.suptitle("The answer against where the target is drawn\n(band: 95 % interval over the paired seeds)",
                 fontsize=10)
    return fig
