"""The decisions a sweep recorded (its parent run's `selection.json`), as plain sentences for a report's header:
the choice with its probability of being best, the confirmation on fresh seeds (the winner's curse), each arm's
tuning budget, and the paired comparisons with the baselines (mean difference, interval, n; 'includes zero' said
out loud)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["decision_notes", "load_selection"]


def load_selection(tracking_uri: str, parent_run_id: str) -> dict[str, Any] | None:
    """The sweep's `selection.json` (None when the sweep has not written it, e.g. while it runs)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    try:
        with tempfile.TemporaryDirectory(prefix="scalesweep-selection-") as tmp:
            path = client.download_artifacts(parent_run_id, "selection.json", tmp)
            return dict(json.loads(Path(path).read_text(encoding="utf-8")))
    except Exception:  # no artifact yet (a running sweep): the report simply has no decision notes
        return None


def _interval(d: Mapping[str, Any]) -> str:
    if not d.get("interval"):
        return f"{d['mean']:+.3g} (n={d['n']}, one seed: no interval)"
    lo, hi = d["interval"]
    text = f"{d['mean']:+.3g}, 95% CI [{lo:+.3g}, {hi:+.3g}], n={d['n']}"
    return text + (" (the interval includes zero: no difference shown)" if d.get("includes_zero") else "")


def decision_notes(doc: Mapping[str, Any] | None) -> list[str]:
    """Header lines from a `selection.json` document."""
    if not doc or not doc.get("selection"):
        return []
    sel = doc["selection"]
    chosen = sel["point"]["point_key"]
    unc = sel.get("uncertainty") or {}
    p = (unc.get("p_best") or {}).get(unc.get("chosen", chosen))
    notes = [f"choice: {chosen}" + (f" (P(best) {p:.2f} on the sweep's seeds)" if p is not None else "")
             + f"; rule: {sel.get('rule', '')}"]
    notes += [f"WARNING: {w}" for w in sel.get("warnings", [])]
    ranked = sorted((unc.get("p_best") or {}).items(), key=lambda kv: -kv[1])[:5]
    if ranked:
        notes.append("P(best), paired bootstrap over seeds: " + ", ".join(f"{k} {v:.2f}" for k, v in ranked))
    conf = sel.get("confirmation")
    if conf and conf.get("points"):
        parts = [f"{k}: selected {r['selected_objective']:.4g}, confirmed {r['confirmed_objective']:.4g} "
                 f"(winner's curse {r['winners_curse']:+.3g})"
                 for k, r in conf["points"].items() if r.get("winners_curse") is not None]
        notes.append(f"confirmed on fresh seeds {conf.get('seeds')}: " + "; ".join(parts)
                     + (f"; final choice {conf.get('chosen')}" if conf.get("final") else ""))
        if conf.get("p_best"):
            notes.append("P(best) on the fresh seeds (what made the choice final): " + ", ".join(
                f"{k} {v:.2f}" for k, v in sorted(conf["p_best"].items(), key=lambda kv: -kv[1])))
    for name, d in (sel.get("vs_baselines_paired") or {}).items():
        notes.append(f"{chosen} - {name} (objective, paired over seeds): {_interval(d)}")
    budgets = doc.get("budgets") or {}
    if budgets:
        notes.append("tuning budget per arm: " + "; ".join(f"{arm} {b['settings']} setting(s), {b['trials']} trials"
                                                           for arm, b in budgets.items()))
    return notes
