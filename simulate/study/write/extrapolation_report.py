"""``DIR/extrapolation.md`` and ``DIR/extrapolation.csv``: the variance laws of a set of studies
(:class:`simulate.study.judge.variance_laws.VarianceLaws`), formatted.

``extrapolation.csv`` is :attr:`~simulate.study.judge.variance_laws.VarianceLaws.frame`: one row per scheme, law
(``bridge``, ``growth``, ``increment`` or ``across depth``) and quantity (columns ``scheme, law, kind, name, value,
low, high, detail, study``; kinds ``alpha``, ``beta`` (bridge), ``theta`` (growth), ``psi`` (increment) and
``gamma`` for the coefficients, ``test`` for the held-out models' errors, ``fit`` for the same on the fitted models of the
deepest fitted depth, ``blind test`` for each length's verdict (``passes``, ``passes, uninformative``
where the interval is wider than :data:`simulate.study.judge.extrapolation.INFORMATIVE`, ``fails``, or
``untested``: the held-out mean error with the law's prediction interval), ``blind test (width)``,
``blind test (steps)`` for the second ones and ``blind test (across depth)``, ``paper`` for the
extrapolations, which only informative passes get). ``extrapolation.md`` says the same in words, law by law.
"""

from __future__ import annotations

import math
from pathlib import Path

from simulate.claims import level_label
from simulate.claims.depth_laws import DEPTH_LAWS, MIN_LAW_DEPTHS
from simulate.study.judge.extrapolation import formula, where
from simulate.study.judge.variance_laws import LawTest, VarianceLaws
from theory.cli import markdown_table
from theory.files import atomic_write, write_text_atomic
from theory.verdicts import BlindTest

__all__ = ["extrapolation_markdown", "write_extrapolation"]


def _blind_lines(judgements, title: str, confidence: float) -> list[str]:
    """One Markdown line per blind test (one per training length)."""
    lines = []
    for j in judgements:
        if j.verdict is None:
            lines += [f"**{title} at {j.where}: UNTESTED**, {j.reason}.", ""]
            continue
        half = j.half_width
        off = (f"; var_L is off by a factor {math.exp(abs(j.error.estimate)):.3g}" if j.verdict is BlindTest.FAILS
               else "")
        lines += [f"**{title} at {j.where} ({j.models} models): the law {str(j.verdict).upper()}.** log(predicted / "
                  f"measured var_L), mean over the held-out models: {j.error.estimate:.3g}; {level_label(confidence)} "
                  f"prediction interval +-{half:.3g} ({j.error.method}){off}.", ""]
    return lines


def _withdrawn(law: LawTest) -> str:
    """Why a law's predictions at the papers' sizes are withdrawn ('' where they are made)."""
    if law.untested:
        return "the law has not passed a blind test in depth at every training length"
    reasons = [f"it {'failed' if j.verdict is BlindTest.FAILS else 'passed without information'} its blind test "
               f"{slice_} at {j.where}" for slice_, j in law.against]
    if law.no_width_term:
        reasons.append(f"it has no width term (its models all have {law.test.fitted_range.split(',')[0]}): it "
                       "predicts nothing at another width")
    return "; ".join(reasons)


def _law_lines(law: LawTest, held_out: int, confidence: float) -> list[str]:
    """The Markdown lines of one law of one scheme."""
    lines = [f"### The {law.law} law", ""]
    if law.test is None:
        return lines + [f"No law: {law.error}.", ""]
    result, fitted = law.test, law.test.law
    lines += [f"Law (least squares over blocks l >= 2): {fitted.describe()}; log var_1 = "
              f"{formula(fitted.first_terms, fitted.gamma)}. Fitted on {result.fitted_range}.", ""]
    for table, intervals, label in (
            (result.errors, law.errors[0],
             f"Extrapolation test, L={held_out} ({len(result.errors)} models, never used in the fit)"),
            (result.fit_errors, law.errors[1],
             f"The law on its own data, L={result.fit_value} ({len(result.fit_errors)} fitted models, each at its "
             "width and steps)")):
        if len(table):
            lines += [f"{label}: log(predicted var_L / measured) = {intervals['last_log_error'].format()}; mean "
                      f"over layers of |log ratio| = {intervals['mean_abs_log_error'].format()} "
                      f"({level_label(confidence)} t intervals over models).", "", markdown_table(table), ""]
    lines += _blind_lines(result.blind, "Blind test", confidence)
    for second in law.second:
        if second.test is None:
            lines += [f"**Second blind test, {second.title} ({where(second.field, second.held_out)}): no law** "
                      f"({second.error}).", ""]
        else:
            lines += _blind_lines(second.test.blind, f"Second blind test, {second.title}", confidence)
    if law.papers is None:
        return lines + [f"Predictions at the papers' sizes: **withdrawn**, {_withdrawn(law)}.", ""]
    return lines + [f"**Extrapolation** far outside the fitted range ({result.fitted_range}), at the papers' sizes, "
                    "from a law that passed its blind tests (its interval is not a prediction interval at these "
                    "sizes):", "",
                    markdown_table(law.papers[["model", "width", "depth", "steps", "var_1", "var_L", "growth_class",
                                               "description"]]), ""]


def _across_depth_lines(laws: VarianceLaws, scheme: str) -> list[str]:
    """The laws across depth of ``log var_L`` of one scheme: the test of each law and its range of validity (the
    fitted depths)."""
    lines = ["### Laws across depth: log var_L against L", "",
             "Cell means of log var_L by depth, fitted without the held-out depth; the prediction interval of the "
             "held-out cell's mean (simulate.claims.depth_laws; docs/studies.md#laws-across-depth).", ""]
    for test in (t for t in laws.across_depth if t.scheme == scheme):
        if test.judgement is None:
            lines += [f"- {test.law} law at {test.where}: untested (fewer than {MIN_LAW_DEPTHS} fitted depths or no "
                      "held-out model).", ""]
            continue
        j, fit = test.judgement, test.fit
        fitted = " ".join(f"{d:g}" for d in fit.depths)
        lines += [f"- **{test.law}** ({DEPTH_LAWS[test.law]}, slope {fit.slope.format()}, fitted on L = "
                  f"{fitted}, lack of fit p {fit.lack_of_fit:.2g}) at {test.where}: {j.models} models, "
                  f"predicted minus measured {j.error.estimate:.3g}, interval +-{j.half_width:.3g}: "
                  f"**{j.verdict}**; valid over L = {fitted} as fitted.", ""]
    return lines


def extrapolation_markdown(laws: VarianceLaws) -> str:
    """The text of ``extrapolation.md`` (module docstring)."""
    lines = ["# Theory meets training: variance laws, their extrapolation test, the papers' sizes", "",
             f"Laws fitted on {laws.fitted_models} trained models of {', '.join(laws.studies)} (the recipe of study "
             f"`{laws.depth_study}`) without depth L={laws.held_out}, which is predicted"
             + ("" if laws.held_out == laws.planned else f" (the deepest depth with two finished models of each "
                f"scheme: L={laws.planned} has fewer so far)") + ". Per scheme, three laws of one model's profile: "
             "the bridge law (a law for the bridge strengths a_l, b_l, run through the bridge recursion), the growth "
             "law (each block's log growth factor at its relative depth; added after the bridge law had missed the "
             "atlas's L=32 models, so its error at L=32 is not a blind test) and the increment law (each block's log "
             "increment; the data choose the growth class); then the laws across depth of log var_L. Every blind "
             "test is judged per training length. Definitions: "
             "docs/studies.md#extrapolation.", ""]
    for scheme in laws.schemes():
        lines += [f"## {scheme}", ""]
        for law in (law for law in laws.laws if law.scheme == scheme):
            lines += _law_lines(law, laws.held_out, laws.confidence)
        lines += _across_depth_lines(laws, scheme)
    return "\n".join(lines) + "\n"


def write_extrapolation(laws: VarianceLaws, out) -> Path:
    """``extrapolation.csv`` and ``extrapolation.md`` of ``laws`` in ``out``, each whole; the Markdown's path."""
    out = Path(out)
    table = laws.frame
    atomic_write(out / "extrapolation.csv", lambda temp: table.to_csv(temp, index=False))
    return write_text_atomic(out / "extrapolation.md", extrapolation_markdown(laws))
