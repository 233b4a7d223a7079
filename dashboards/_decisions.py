"""The decisions a sweep recorded (its parent run's `selection.json`), as plain sentences for a report's header:
the choice with its probability of being best (a probability only from 5 seeds: `scaling.claims.p_best_text`) and
its warnings (a choice worse than every baseline, significant or not, with the per-seed count), the confirmation on
fresh seeds (the winner's curse), each arm's tuning budget, and the paired comparisons with the baselines (mean
difference, interval, n; 'includes zero' said out loud)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scaling.claims import MIN_SEEDS_P_BEST, p_best_text

__all__ = ["choice_notes", "decision_notes", "load_selection"]


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


def _seeds(doc: Mapping[str, Any]) -> int | None:
    """How many seeds the sweep's P(best) was bootstrapped over (None when the document does not say)."""
    sel = doc["selection"]
    n = (sel.get("uncertainty") or {}).get("n")
    if isinstance(n, int):
        return n
    seeds = doc.get("seeds") or (sel.get("point") or {}).get("seed_objectives")
    return len(seeds) if seeds else None


def _p_best(p: float | None, n: int | None) -> str:
    if n is None:
        return "-" if p is None else "not stated (the number of seeds is not recorded)"
    return p_best_text(p, n)


def _ranked(label: str, p_best: Mapping[str, float], n: int | None) -> str:
    """Every point's P(best), highest first, or why it is withheld."""
    if n is None or n < MIN_SEEDS_P_BEST:
        seeds = f"n={n}" if n is not None else "the number of seeds is not recorded"
        return (f"{label}: too few seeds ({seeds}): a paired bootstrap over fewer than {MIN_SEEDS_P_BEST} seeds "
                "has too few distinct resamples to state a probability")
    ranked = sorted(p_best.items(), key=lambda kv: -kv[1])
    return f"{label}, paired bootstrap over {n} seeds: " + ", ".join(f"{k} {_p_best(v, n)}" for k, v in ranked)


def choice_notes(doc: Mapping[str, Any] | None) -> list[str]:
    """The chosen line and, right under it, its warnings: worse than every baseline on the mean (with the per-seed
    count, significant or not: `selection.json`'s `choice_warning`), worse than a baseline with confidence."""
    if not doc or not doc.get("selection"):
        return []
    sel = doc["selection"]
    chosen = sel["point"]["point_key"]
    unc = sel.get("uncertainty") or {}
    p = (unc.get("p_best") or {}).get(unc.get("chosen", chosen))
    n = _seeds(doc)
    notes = [f"choice: {chosen}" + (f" (P(best) {_p_best(p, n)} on the sweep's seeds)" if p is not None else "")
             + f"; rule: {sel.get('rule', '')}"]
    if doc.get("choice_warning"):
        notes.append(f"WARNING: {doc['choice_warning']}")
    return notes + [f"WARNING: {w}" for w in sel.get("warnings", [])]


def decision_notes(doc: Mapping[str, Any] | None) -> list[str]:
    """Header lines from a `selection.json` document."""
    notes = choice_notes(doc)
    if not notes or doc is None:
        return notes
    sel = doc["selection"]
    chosen = sel["point"]["point_key"]
    unc = sel.get("uncertainty") or {}
    if unc.get("p_best"):
        notes.append(_ranked("P(best)", unc["p_best"], _seeds(doc)))
    conf = sel.get("confirmation")
    if conf and conf.get("points"):
        parts = [f"{k}: selected {r['selected_objective']:.4g}, confirmed {r['confirmed_objective']:.4g} "
                 f"(winner's curse {r['winners_curse']:+.3g})"
                 for k, r in conf["points"].items() if r.get("winners_curse") is not None]
        notes.append(f"confirmed on fresh seeds {conf.get('seeds')}: " + "; ".join(parts)
                     + (f"; final choice {conf.get('chosen')}" if conf.get("final") else ""))
        if conf.get("p_best"):
            fresh = len(conf["seeds"]) if conf.get("seeds") else None
            notes.append(_ranked("P(best) on the fresh seeds (what made the choice final)", conf["p_best"], fresh))
    for name, d in (sel.get("vs_baselines_paired") or {}).items():
        notes.append(f"{chosen} - {name} (objective, paired over seeds): {_interval(d)}")
    budgets = doc.get("budgets") or {}
    if budgets:
        notes.append("tuning budget per arm: " + "; ".join(f"{arm} {b['settings']} setting(s), {b['trials']} trials"
                                                           for arm, b in budgets.items()))
    return notes
