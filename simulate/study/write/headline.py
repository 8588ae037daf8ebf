"""The headline answers of a depth study: the questions of :data:`simulate.claims.definitions.QUESTIONS`, each
answered from the study's judgement (:class:`simulate.study.judge.tables.StudyJudgement`) at the full length, with what
it rests on and whether it holds still.

A shipped atlas (``results/atlas/README.md``) answers (docs/studies.md#headline-answers):

1. **Loss.** At each scheme's tuned learning rate, does LNS reach a lower held-out loss than
   Pre-LN, at which depths, and where does the difference change sign? (``p1-lns-loss``: LNS minus
   Pre-LN, over the seeds' pairs; the smallest difference each cell can detect at 80 % power beside it.)
2. **Deep blocks.** Are deep Pre-LN blocks relatively less useful than shallow ones as depth grows?
   (``p1-thm-3.3-prune``: ``log(deep / shallow pruning drop)``, a ratio that does not shrink as ``1/L``.)
3. **Growth.** How does the last layer's variance grow with depth, against P1's bounds? (the growth
   claims across depth: the exponent ``p`` of ``var_L ~ L^p`` over the depth cells, on the tuned and
   the fixed-rate line, with the exponential in ``L`` beside it.)

A study along width and depth adds a fourth: **P1's sizes.** What LNS minus Pre-LN would be at LLaMA-130M and
LLaMA-1B by each law across depth and width (:func:`simulate.study.judge.across_width.paper_size_table`), against
P1's gain there: an extrapolation far past the trained widths, stated as what each law implies.

Each row gives the models it rests on and its stability (the change from the shorter training,
paired by seed, with its interval), and the values of the fields the study also sweeps (``lr`` in a
learning-rate x depth study: one row and one trend per rate). Levels are unadjusted (each a statement
about its cell); the trends' verdicts read the family-adjusted p.
"""

from __future__ import annotations

import pandas as pd

from simulate.claims.definitions import CLAIMS, QUESTIONS
from collections import Counter

from simulate.claims.judgement import Interval, level_label
from simulate.claims.width_laws import WidthLawForm
from simulate.study.judge.rows import interval_words, size_words, stability_words, value_text, verdict_interval
from simulate.study.judge.tables import at_full_length
from theory.cli import markdown_table

__all__ = ["headline_section"]


def _interval(row) -> str:
    """A level's mean or a trend's slope with the interval its verdict reads (a family member's at the family's
    level, named); where there is none, why: a level on one model, a trend over fewer cells than its fit needs (its
    error comes from the cells, not the seeds)."""
    estimate = verdict_interval(row)
    if pd.isna(estimate.estimate):
        return "confounded with the rate" if "slope" in row and int(row["rates"]) > 1 else ""
    if estimate.bounded:
        return interval_words(row)
    return f"{estimate.format()} ({'one model' if 'slope' not in row else f'no interval from {int(row.cells)} cells'})"


def _stability(row) -> str:
    return stability_words(row) or "not compared"


def _rates(tuning: pd.DataFrame | None, held: list[str]) -> dict[tuple, str]:
    """``(scheme, depth, *held values) -> "0.003"`` (with " (at the edge)"); empty for an untuned study."""
    if tuning is None:
        return {}
    chosen = tuning[tuning["chosen"].astype(bool)]
    return {(r["scheme"], int(r["depth"]), *_held_values(r, held).values()):
            f"{r['lr']:g}" + (" (at the edge)" if r["edge"] else "") for _, r in chosen.iterrows()}


def _rate_pair(rates: dict, row, held: list[str]) -> str:
    """``0.01 / 0.003``: LNS's and Pre-LN's chosen rates in a level's cell ("tuning" for a cell still choosing)."""
    cell = (int(row["depth"]), *_held_values(row, held).values())
    return f"{rates.get(('lns', *cell), 'tuning')} / {rates.get(('pre', *cell), 'tuning')}"


def _held_fields(study, table: pd.DataFrame, axis: str = "depth") -> list[str]:
    """The fields held along a trend over ``axis`` that take more than one value in ``table`` (``lr`` of a
    learning rate x depth study, ``width`` and its ``heads`` of a width study along depth; not the stability
    twins' ``steps``, one value at the full length)."""
    return [f for f in study.group_fields(axis) if f in table and table[f].nunique() > 1]


def _held_values(row, held: list[str]) -> dict[str, str]:
    return {field: value_text(row[field]) for field in held}


def _at(row, held: list[str]) -> str:
    """`` at width = 16, heads = 1``: the values a trend's row holds fixed ('' where none varies)."""
    values = _held_values(row, held)
    return " at " + ", ".join(f"{field} = {value}" for field, value in values.items()) if values else ""


def _trend_axes(study) -> list[str]:
    """The axes the headline reads trends along: depth, then width where the study runs along it."""
    return [axis for axis in ("depth", "width") if axis in study.axes]


def _trend_line(trends: pd.DataFrame, claim: str, answers: dict, held: dict[str, list[str]]) -> list[str]:
    lines = []
    for axis, fields in held.items():
        for _, t in trends[(trends["claim"] == claim) & (trends["axis"] == axis)].iterrows():
            start = f"- As {axis} grows, line `{t['line']}`{_at(t, fields)}: "
            if int(t["n"]) == 0:
                lines.append(start + "no models yet.")
                continue
            answer = answers.get(t["verdict"], str(t["verdict"]))
            interval = _interval(t)
            if not interval:
                lines.append(start + f"**{answer}** ({t['n']} models in {int(t['cells'])} cell(s): no slope yet).")
                continue
            p = f", adjusted p {t['p_adjusted']:.2g}" if pd.notna(t["p_adjusted"]) else ""
            rates = f"; within runs of one rate ({int(t['rates'])} rates along {axis})" if int(t["rates"]) > 1 else ""
            size = size_words(t)
            size = f" Against P1's size: **{size}**." if size else ""
            detectable = f"; detectable at 80 % power: {t['detectable']:.3g}" if pd.notna(t["detectable"]) else ""
            needs = f"; to resolve it: {t['needs']}" if t["needs"] else ""
            shape = f"; along the cells, {t['shape']}" if t["shape"] else ""
            lines.append(start + f"**{answer}** (slope per e-fold of {axis} {interval}{p}{rates}{detectable}{needs}; "
                         f"{t['n']} models{shape}; {_stability(t)})" + (f"; {t['crossing']}" if t["crossing"] else "")
                         + f".{size}")
    return lines


def _level_question(question, levels, trends, rates, held) -> list[str]:
    claim = question.claims[0]
    rows = levels[(levels["claim"] == claim)]
    if rows.empty:
        return []
    cells = held["depth"]
    table = pd.DataFrame([{**_held_values(r, cells), "depth": int(r["depth"]), "estimate [CI]": _interval(r),
                           "answer": question.answers.get(r["verdict"], str(r["verdict"])),
                           **({"against P1's size": size_words(r)} if CLAIMS[claim].reference else {}),
                           "detectable at 80 %": f"{r['detectable']:.3g}" if pd.notna(r["detectable"]) else "",
                           "stability": _stability(r), "models": int(r["n"]),
                           **({"rate LNS / Pre-LN": _rate_pair(rates, r, cells)} if rates else {})}
                          for _, r in rows.iterrows()])
    return [*_size_answer(trends, claim, held), markdown_table(table), "", *_trend_line(trends, claim, question.answers,
                                                                                        held)]


def _size_answer(trends: pd.DataFrame, claim: str, held: dict[str, list[str]]) -> list[str]:
    """The claim's answer against the papers' size along each axis, one line per trend with models, before its
    table (none for a claim without a size): what a reader of the papers came for."""
    reference = CLAIMS[claim].reference
    if reference is None:
        return []
    lines = []
    for axis, fields in held.items():
        for _, t in trends[(trends["claim"] == claim) & (trends["axis"] == axis)].iterrows():
            if int(t["n"]) == 0 or not _interval(t):
                continue
            along = f"along {axis}, " if len(held) > 1 else ""
            lines.append(f"- {along}line `{t['line']}`{_at(t, fields)}: "
                         f"{size_words(t) or f'no size along {axis}'}; slope per e-fold of {axis} {_interval(t)}.")
    return [f"**Against the papers' size** ({reference.source}):", "", *lines, ""] if lines else []


def _growth_question(question, trends, held) -> list[str]:
    rows = []
    for claim in question.claims:
        rule = CLAIMS[claim].growth
        tested = (f"p >= {rule.min_exponent:g} (P1's lower bound); its upper bound e^L bounds no exponent: not tested"
                  if rule.max_exponent == float("inf") else
                  f"{rule.min_exponent:g} <= p < {rule.max_exponent:g} (both of P1's bounds)")
        for _, t in trends[(trends["claim"] == claim) & (trends["axis"] == "depth")].iterrows():
            rows.append({"scheme": t["scheme"], "line": t["line"], **_held_values(t, held["depth"]),
                         "exponent p of var_L ~ L^p [CI]": _interval(t) + (
                             f" (within runs of one rate: {int(t['rates'])} rates)" if int(t["rates"]) > 1 else ""),
                         "answer": question.answers.get(t["verdict"], str(t["verdict"])), "bound tested": tested,
                         "depths": int(t["cells"]), "models": int(t["n"]), "stability": _stability(t),
                         "shape and the exponential in L": t["shape"]})
    return [markdown_table(pd.DataFrame(rows))] if rows else []


def _paper_size_question(table: pd.DataFrame | None) -> list[str]:
    """The laws' answers at P1's sizes (module docstring): a sentence, the table, and the answers counted per size."""
    if table is None or table.empty:
        return []
    rows = [{"line": r.line, "law": r.law, "size": f"{r.size} (L = {r.depth}, d = {r.width})",
             "LNS - Pre-LN": Interval(r.estimate, r.low, r.high, r.confidence).format(), "P1": f"{r.p1:.3g}",
             "answer": str(r.answer), "log d term": f"{r.width_term:.3g}" if r.law is not WidthLawForm.NO_WIDTH_TERM else ""}
            for r in table.itertuples()]
    counts = [f"{size}: " + ", ".join(f"{answer} {n}" for answer, n in Counter(map(str, part["answer"])).items())
              for size, part in table.groupby("size", sort=False)]
    widths = table["fitted_widths"].iloc[0]
    return [f"Each law across depth and width (fitted per line on d = {widths} at {int(table['steps'].iloc[0])} "
            f"steps) extrapolated to P1's LNS comparison: a {level_label(float(table['confidence'].iloc[0]))} "
            "prediction interval for one model at each size, against P1's gain there. That is 12 to 32 times past "
            "the widest trained width, at this recipe's length where P1 trained 20k steps and more, by laws that "
            "disagree with one another: what each law implies, not a measurement of a 130M model. The interaction "
            "law's width effect at a depth is its log d term plus its log L log d term.", "",
            markdown_table(pd.DataFrame(rows)), "", *[f"- {line}." for line in counts], ""]


def headline_section(judgement, study) -> list[str]:
    """Markdown lines answering :data:`~simulate.claims.definitions.QUESTIONS` from ``study``'s ``judgement``
    (:class:`~simulate.study.judge.tables.StudyJudgement`), and for a study along width and depth its laws at P1's
    sizes (its ``paper_sizes``); empty for a study that does not run along depth."""
    if "depth" not in study.axes:
        return []
    levels, trends = at_full_length(judgement.levels), at_full_length(judgement.trends)
    held = {axis: _held_fields(study, levels, axis) for axis in _trend_axes(study)}
    rates = _rates(judgement.tuning, held["depth"])
    body = []
    for number, question in enumerate(QUESTIONS, start=1):
        lines = (_growth_question(question, trends, held) if len(question.claims) > 1
                 else _level_question(question, levels, trends, rates, held))
        if lines:
            body += [f"### {number}. {question.title}", "", *lines, ""]
    sizes = _paper_size_question(judgement.paper_sizes)
    if sizes:
        body += [f"### {len(QUESTIONS) + 1}. What would LNS minus Pre-LN be at P1's sizes, by the laws across depth "
                 "and width?", "", *sizes]
    if not body:
        return []
    return [f"## Headline answers of `{study.name}` (at the full length; docs/studies.md#headline-answers)", "",
            "Read from this study's reports at its longest training, each with the models it rests on and the change "
            f"from the shorter training (stability, against each claim's declared margin). Intervals at "
            f"{level_label(study.inference.confidence)}; levels are unadjusted, each a statement about its cell; each "
            f"trend prints the interval its verdict reads, adjusted by {study.inference.method_name}'s method over the "
            "report's full-length direction verdicts (simultaneous under Bonferroni), and where the papers give a size "
            "it answers both questions from that interval: is there an effect in their direction, and is it as large "
            "as they say? Pending models are not in them.", "", *body]
