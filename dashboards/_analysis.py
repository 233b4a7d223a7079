"""The transfer report's sections on how far its answer can be trusted: the controls (first on the page, before
any saving), every comparison at the first crossing, in steps above the target and at the sustained crossing with
its censoring counts (which endpoints are co-primary, which reported only), the claims in one alpha budget, the
effective-step diagnostic's verdict with the fixed arms' comparisons, the time ratio against size (held out, then
extrapolated), and the tuning budget per arm with what the sweep tuned on.

It renders the plain data of the transfer's analysis (`sweeper.TransferResult.analysis()`, the JSON behind
`GET /v1/transfers/{id}/fits`: its `controls`, `targets`, `claims`, `diagnostics`, `tuning_budgets` and
`lr_brackets`, shapes in docs/targets.md); nothing is computed here, so every number is the one the analysis
carries. Every comparison is shown as its mean, 95 % interval and n.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from scaling.claims import CO_PRIMARY, ENDPOINTS

from ._html import escape as _e
from ._html import interval as _interval
from ._html import number as _f
from ._html import text_table as _table

__all__ = ["budgets_html", "claims_html", "controls_html", "controls_lead_html", "crossings_html",
           "diagnostics_html", "time_ratio_html"]

_LABELS = {"first": "first crossing", "steps_above": "steps above the target", "sustained": "sustained crossing"}
# An analysis judged before the steps above the target were an endpoint carries no `co_primary`: it judged these.
_EARLIER_CO_PRIMARY = ("first", "sustained")
_NO_CONTROLS = ("No controls ran in this transfer (the spec's <code>controls: [negative, positive]</code>): a null "
                "below cannot be told from an instrument that would have missed a saving.")


def controls_lead_html(analysis: Mapping[str, Any]) -> str:
    """The page's first lines: whether each control came out as it must (the analysis' `controls.summary`), a
    failed positive control first of all; without controls, that no null on the page is interpretable."""
    controls = analysis.get("controls")
    if not controls:
        return f'<div class="controls"><p>{_NO_CONTROLS}</p></div>'
    items = []
    for line in controls.get("summary") or []:
        text = _e(line.strip())
        failed = "FAILED" in line or "did NOT" in line or "NOT JUDGED" in line
        items.append(f"<li>{'<strong>' + text + '</strong>' if failed else text}</li>")
    return f'<div class="controls"><p><strong>Controls, before any saving:</strong></p><ul>{"".join(items)}</ul></div>'


def _ratio_text(d: Mapping[str, Any] | None) -> str:
    """The per-step time ratio of a saving (`{mean, lo, hi, rounds}`: n counts timing rounds)."""
    if not d or d.get("mean") is None:
        return "—"
    if d.get("lo") is None:
        return f"{_f(d['mean'], 4)} ({d.get('rounds')} round(s), no interval)"
    return f"{_f(d['mean'], 4)} [{_f(d['lo'], 4)}, {_f(d['hi'], 4)}] ({d.get('rounds')} timing rounds)"


def _censoring(counts: Mapping[str, Mapping[str, int]] | None, endpoint: str = "first") -> str:
    """Each arm's seeds that reached, and those censored (right: never reached or did not hold to the horizon;
    left: at or below the target from the first point). In steps above the target a seed is known once observed
    through the horizon (its count is the `reached` one), right-censored when it stopped early."""
    if not counts:
        return "—"
    if endpoint == "steps_above":
        return "<br>".join(f"{_e(arm)}: {c.get('reached', 0)} observed to the horizon, "
                           f"{c.get('right_censored', 0)} right-censored (stopped early)" for arm, c in counts.items())
    return "<br>".join(f"{_e(arm)}: {c.get('reached', 0)} reached, {c.get('right_censored', 0)} right-censored, "
                       f"{c.get('left_censored', 0)} left-censored" for arm, c in counts.items())


def _endpoint_cells(doc: Mapping[str, Any] | None, endpoint: str = "first") -> list[str]:
    """Steps ratio, censoring, time saving and per-step ratio of one endpoint of a crossing comparison."""
    if not doc:
        return ["—", "—", "—", "—"]
    if "error" in doc:
        return [f"not computed: {_e(doc['error'])}", "—", "—", "—"]
    saving = doc.get("time_saving_pct") or {}
    return [_interval(doc.get("steps_to_target_ratio")), _censoring(doc.get("censoring"), endpoint),
            _interval(saving, " %") if saving else "— (not timed)", _ratio_text(saving.get("step_time_ratio"))]


_ENDPOINT_HEADER = ["steps-to-target ratio [95 % interval] (n)", "seeds per arm (censoring)",
                    "time saving [95 % interval] (n)", "per-step time ratio [95 % interval]"]


def _level(alpha: Any) -> str:
    return f"{alpha:.3g}" if isinstance(alpha, float) else str(alpha)


def controls_html(analysis: Mapping[str, Any]) -> str:
    """Each control at each rung: its outcome, the checks behind it (value, interval, p, what it must show) and
    the comparison it was judged on, at the controls' endpoint."""
    controls = analysis.get("controls")
    if not controls:
        return f"<p>{_NO_CONTROLS}</p>"
    endpoint = controls.get("endpoint", "first")
    rows = []
    for kind in ("negative", "positive", "steps"):
        section = controls.get(kind)
        if not section:
            continue
        pair = f"{_e(section.get('arm'))} against {_e(section.get('against'))}"
        for rung, outcome in (section.get("rungs") or {}).items():
            comp = (section.get("comparisons") or {}).get(rung) or {}
            doc = comp.get(endpoint) if "error" not in comp else comp
            checks = "<br>".join(_e(c.get("text", "")) for c in outcome.get("checks") or []) or "—"
            state = ("as it must" if outcome.get("passed") else "<strong>not judged</strong>"
                     if outcome.get("judged") is False else "<strong>FAILED</strong>")
            rows.append([_e(kind), pair, _e(rung), state, *_endpoint_cells(doc), checks, _e(outcome.get("verdict"))])
    searched = _e(analysis.get("searched_arm") or "the searched arm")
    return (_table(["control", "arms", "rung", "outcome", *_ENDPOINT_HEADER, "checks", "verdict"], rows,
                   f"each control at each rung, at the {endpoint} crossing (alpha {_level(controls.get('alpha'))}, the "
                   "level the strongest claim must pass): the negative control must come out null, the positive "
                   "control's known saving and the steps control's known steps ratio must be detected")
            + f"<p>A null on {searched} is read as evidence of no saving only where the positive control's saving was "
              "detected at that rung (each comparison's reading in the next table).</p>")


def _co_primary(analysis: Mapping[str, Any]) -> tuple[str, ...]:
    """The endpoints the analysis' claims were judged on (both must show a claim)."""
    claims = analysis.get("claims") or {}
    if "co_primary" in claims:
        return tuple(claims["co_primary"])
    return _EARLIER_CO_PRIMARY if "stands" in claims else CO_PRIMARY


def _role(endpoint: str, co_primary: tuple[str, ...]) -> str:
    return f"{_LABELS.get(endpoint, endpoint)} ({'co-primary' if endpoint in co_primary else 'reported, not judged'})"


def _comparisons(analysis: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for rung, entry in ((analysis.get("targets") or {}).get("rungs") or {}).items():
        for base, comp in (entry.get("comparisons") or {}).items():
            yield rung, base, comp


def crossings_html(analysis: Mapping[str, Any]) -> str:
    """Every comparison of the searched arm at each endpoint it carries (the first crossing, the steps above the
    target, the sustained crossing), each labelled co-primary or reported, every seed kept: the restricted-mean
    steps ratio, the censoring counts per arm, the time saving and how a null reads."""
    co_primary = _co_primary(analysis)
    rows = []
    for rung, base, comp in _comparisons(analysis):
        for endpoint in (e for e in ENDPOINTS if e in comp):  # an earlier analysis has no steps_above
            doc = comp.get(endpoint)
            rows.append([_e(rung), _e(base), _role(endpoint, co_primary), *_endpoint_cells(doc, endpoint),
                         _e((doc or {}).get("reading") or "—")])
    if not rows:
        return ""
    searched = analysis.get("searched_arm") or "the searched arm"
    return _table(["rung", "baseline", "endpoint", *_ENDPOINT_HEADER, "reading"], rows,
                  f"{searched} against each baseline, every seed kept: restricted-mean steps to target, or steps "
                  "spent above it up to the horizon (a seed that does not reach, does not stay at or below the "
                  "target to its horizon, or stopped early, is censored there, not dropped); a claim needs both "
                  f"co-primary endpoints ({' and '.join(_LABELS.get(e, e) for e in co_primary)})"
                  + ("; the sustained crossing is reported, not judged: its 95 % interval covers about 89 % where a "
                     "faster arm hovers near the target" if "sustained" not in co_primary else "")
                  + "; a null is interpretable only when the positive control's saving was detected")


def _pair_powers(claims: Mapping[str, Any], co_primary: tuple[str, ...]) -> dict[str, str]:
    """Comparison -> the power text of its claim, where it was stated for the pair the claims were judged on (an
    analysis judged on another pair states none that describes its claims)."""
    return {key: pair["text"] for key, pair in (claims.get("power_co_primary") or {}).items()
            if tuple(pair.get("endpoints") or ()) == co_primary}


def _power_cell(first: str | None, pair: str | None) -> str:
    """A comparison's power at the claim's level: the pair's a claim needs (bounds: it needs both co-primary
    endpoints), then the first crossing's alone, which overstates it; "—" where neither was stated."""
    if pair is None:
        return _e(first or "—")
    return _e(pair) + (f"<br>first crossing alone: {_e(first)}" if first else "")


def claims_html(analysis: Mapping[str, Any]) -> str:
    """The study's claims in one alpha budget: per comparison whether it stands, its saving at each endpoint with
    the Holm-adjusted p (the co-primary pair first, then the one reported), and its power at the level the
    strongest claim must pass: the claim's (both co-primary endpoints), then the first crossing's alone."""
    claims = analysis.get("claims")
    if not claims:
        return "<p>No claims were judged.</p>"
    savings = {f"{rung} vs {base}": comp for rung, base, comp in _comparisons(analysis)}
    p_holm = claims.get("p_holm") or {}
    co_primary = _co_primary(analysis)
    endpoints = [e for e in ENDPOINTS if e in p_holm]
    pairs = _pair_powers(claims, co_primary)
    rows = []
    for key, stands in (claims.get("stands") or {}).items():
        comp = savings.get(key) or {}
        cells = []
        for endpoint in endpoints:
            saving = (comp.get(endpoint) or {}).get("time_saving_pct")
            p = (p_holm.get(endpoint) or {}).get(key)
            cells.append(_interval(saving, " %") + (f"<br>Holm p {p:.3g}" if p is not None else ""))
        state = f"<strong>stands ({_e(claims['direction'][key])})</strong>" if stands else "does not stand"
        first = ((claims.get("power") or {}).get(key) or {}).get("text")
        rows.append([_e(key), state, *cells, _power_cell(first, pairs.get(key))])
    rows += [[_e(key), "not judged (no comparison)", *(["—"] * len(endpoints)), "—"]
             for key in claims.get("not_judged") or []]
    budget = claims.get("budget_text") or (claims.get("budget") or {}).get("text", "")
    both = " and the ".join(_LABELS.get(e, e) for e in co_primary)
    reported = [_LABELS.get(e, e) for e in endpoints if e not in co_primary]
    return (f"<p><strong>One alpha budget:</strong> {_e(budget)}. A claim of a time saving stands only where the "
            f"{both} both show it, in one direction (co-primary)"
            + (f"; the {' and '.join(reported)} is reported beside them, not judged" if reported else "") + ".</p>"
            + _table(["comparison", "claim",
                      *(f"time saving, {_role(e, co_primary)} [95 % interval] (n)" for e in endpoints),
                      "power at the claim's level" + (": the claim (both co-primary endpoints), then the first "
                                                      "crossing alone" if pairs else "")], rows,
                     "every rung x baseline comparison in the budget, Holm-adjusted over all of them"))


def diagnostics_html(analysis: Mapping[str, Any]) -> str:
    """The effective-step diagnostic per rung: the searched arm against Muon and against Muon at the searched
    arm's mean update size, and the verdict: is a steps penalty the step size or the direction?"""
    parts = []
    for kind, d in (analysis.get("diagnostics") or {}).items():
        endpoint = d.get("endpoint", "first")
        reference, arm = d.get("reference"), d.get("arm")
        rows = []
        for rung, doc in (d.get("rungs") or {}).items():
            cells = []
            for key in (f"vs_{reference}", f"vs_{arm}"):
                comp = doc.get(key) or {}
                cells.append(f"not computed: {_e(comp['error'])}" if "error" in comp else
                             _interval((comp.get(endpoint) or {}).get("steps_to_target_ratio")))
            rows.append([_e(rung), *cells, _e(doc.get("verdict"))])
        parts.append(_table(
            ["rung", f"steps ratio against {reference} [95 % interval] (n)",
             f"steps ratio against {arm} [95 % interval] (n)", "verdict"], rows,
            f"{kind.replace('_', '-')} diagnostic: {d.get('against')} against {reference}, and against {arm} ("
            f"{reference} at lr x {d.get('lr_factor')}, the {d.get('against')} arm's mean update size), at the "
            f"{endpoint} crossing"))
    for kind, d in (analysis.get("fixed_arms") or {}).items():
        parts.append(f"<p>{_e(kind.replace('_', ' '))} ({_e(d.get('arm'))}, reported, not judged):</p><ul>"
                     + "".join(f"<li>{_e(line)}</li>" for line in d.get("lines") or []) + "</ul>")
    return "".join(parts)


def time_ratio_html(analysis: Mapping[str, Any]) -> str:
    """The time ratio at equal quality per rung, the line against size, the largest rung held out (pass or MISS)
    and the extrapolation to the paper's rungs beside the paper's figures; or why there is no fit."""
    doc = analysis.get("time_ratio") or {}
    if not doc:
        return ""
    rows = [[_e(rung), f"{row.get('block_parameters'):,}", _f(row.get("ratio_mean")),
             str(len(row.get("seeds") or []))] for rung, row in (doc.get("per_rung") or {}).items()]
    rows += [[_e(rung), "—", f"no ratio: {_e(why)}", "0"]
             for rung, why in (doc.get("rungs_without_ratio") or {}).items()]
    parts = [_table(["rung", "block parameters", f"time ratio {doc.get('searched')} / {doc.get('against')}", "seeds"],
                    rows, str(doc.get("definition", "")))]
    if doc.get("error"):
        parts.append(f"<p><strong>{_e(doc['error'])}</strong></p>")
    parts.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in doc.get("lines") or []) + "</ul>")
    return "".join(parts)


def budgets_html(analysis: Mapping[str, Any]) -> str:
    """The tuning budget per arm: settings tried in the sweep, lr multiples tried at each rung here and runs per
    rung, whether they are equal across the arms, and the multiple each bracketed arm was judged at."""
    budgets = analysis.get("tuning_budgets") or {}
    if not budgets.get("arms"):
        return ""
    brackets = analysis.get("lr_brackets") or {}
    multiples = brackets.get("multiples") or {}
    rows = []
    for arm, b in (budgets.get("arms") or {}).items():
        tried = multiples.get(arm)
        lrs = ", ".join(f"x{m:g}" for m in tried) if tried else "x1 (the carried lr)"
        sweep = b.get("sweep_settings")
        rows.append([_e(arm), str(sweep) if sweep is not None else "not known", _e(lrs),
                     str(b.get("transfer_settings_per_rung")), str(b.get("runs_per_rung"))])
    words = {True: "equal", False: "<strong>NOT equal</strong>", None: "not known"}
    parts = [_table(["arm", "settings tried in the sweep", "lr multiples tried per rung", "settings per rung",
                     "runs per rung (settings x seeds)"], rows, "tuning budget per arm"),
             f"<p>Budgets in the sweep: {words[budgets.get('equal_in_sweep')]}; in the transfer: "
             f"{words[budgets.get('equal_in_transfer')]}. A searched arm tuned on more settings than the baselines "
             "has an advantage no test sees.</p>"]
    sel = budgets.get("selection") or {}
    if sel:
        curse = (sel.get("winners_curse") or {}).get("winners_curse")
        judged = ("the judged quantity" if sel.get("on_judged_quantity") else
                  "<strong>not</strong> the judged steps to target")
        cursed = _f(curse) if curse is not None else _e(sel.get("winners_curse_note", "—"))
        parts.append(f"<p>The sweep tuned on {_e(sel.get('objective'))} ({judged}); selection standard error "
                     f"{_f(sel.get('selection_se'))}; winner's curse {cursed}.</p>")
    choice_rows = []
    for rung, per in (brackets.get("choices") or {}).items():
        for arm, choice in per.items():
            tried = "; ".join(f"x{m}: {_f(d.get('mean_final'))} ({d.get('finished')}/{d.get('runs')} finished)"
                              for m, d in (choice.get("multiples") or {}).items())
            choice_rows.append([_e(rung), _e(arm), f"x{_f(choice.get('chosen'))}", _e(tried)])
    if choice_rows:
        parts.append(_table(["rung", "arm", "judged at", "each multiple: mean final quality (runs finished)"],
                            choice_rows, "each bracketed arm judged at its best lr multiple per rung"))
    return "".join(parts)
