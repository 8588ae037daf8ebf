"""``DIR/extrapolation.md`` and ``DIR/extrapolation.csv``: the variance laws of a set of studies, tested and extrapolated.

With a study whose axes include ``depth`` (the atlas's ``depth``), the laws of
:mod:`simulate.study.extrapolation` are fitted per scheme on every model of the given
studies trained with that study's recipe (the same Setting and options but for depth, width
and its linked fields, and training length), except the deepest depth, which is predicted
without being used (the extrapolation test, on the depth study's own models of that depth;
while the study is unfinished, the deepest depth with two finished models of each scheme).
A second blind test holds out another slice where the models have one (:data:`SECOND_SLICES`):
the widest models, fitted on the narrower ones, and the longest-trained, fitted on the shorter.
Then the laws that passed every blind test they had, informatively, are run at the papers' sizes
(:data:`simulate.study.extrapolation.PAPER_SIZES`), labelled as extrapolations.
``extrapolation.csv`` has one row per scheme, law (``bridge``, ``growth`` or ``increment``) and quantity
(columns ``scheme, law, kind, name, value, low, high, detail``; kinds ``alpha``, ``beta`` (bridge),
``theta`` (growth), ``psi`` (increment) and ``gamma`` for the coefficients,
``test`` for the held-out models' errors, ``fit`` for the same on the fitted models of the
deepest fitted depth, ``blind test`` for the verdict (``passes`` or ``fails``: the held-out
mean error with the law's prediction interval; a pass whose interval is wider than
:data:`INFORMATIVE` is ``passes, uninformative``), ``blind test (width)`` and ``blind test (steps)``
for the second ones, ``paper`` for the extrapolations, which only informative passes get).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pandas as pd

from simulate.study.analysis import distinct_models
from simulate.study.extrapolation import (LawError, bridge_samples, extrapolation_test, fit_growth_law,
                                          fit_increment_law, fit_law, formula, paper_predictions)
from theory.cli import markdown_table
from theory.files import atomic_write, write_text_atomic

__all__ = ["LAWS", "INFORMATIVE", "SECOND_SLICES", "recipe_models", "write_extrapolation"]

# the laws reported, in order (simulate.study.extrapolation)
LAWS = {"bridge": fit_law, "growth": fit_growth_law, "increment": fit_increment_law}
INFORMATIVE = math.log(10.0)  # a prediction interval wider than +-log 10 on log var_L says nothing: no extrapolation

_FREE_SETTING = ("depth", "width", "heads", "ffn_width")
_FREE_OPTIONS = ("steps", "log_every", "warmup")


def _recipe(model) -> tuple:
    setting = {k: v for k, v in model.point.setting.to_dict().items() if k not in _FREE_SETTING + ("scheme",)}
    options = {k: v for k, v in model.point.options.items() if k not in _FREE_OPTIONS}
    return repr(sorted(setting.items())), repr(sorted(options.items()))


def recipe_models(studies, out) -> tuple[object, list]:
    """(the depth study, the distinct models of ``studies`` trained with its recipe); (None, []) without one."""
    depth_study = next((s for s in studies if "depth" in s.axes), None)
    if depth_study is None:
        return None, []
    models = distinct_models(studies, out)
    reference = {_recipe(m) for m in models.values() if m.point.key in {p.key for p in depth_study.sweep.points}}
    return depth_study, [m for m in models.values() if _recipe(m) in reference]


def _held_out_depth(depth_study, models, keys: set) -> tuple[int, int]:
    """(the depth the test predicts, the deepest depth of the study, whose points have ``keys``): the deepest
    depth at which every scheme has two finished models (an interval needs two), the deepest planned before any."""
    planned = max(p.setting.depth for p in depth_study.sweep.points)
    schemes = {p.setting.scheme for p in depth_study.sweep.points}
    finished = Counter((m.point.setting.depth, m.point.setting.scheme) for m in models
                       if m.status == "ok" and m.point.key in keys)
    tested = [depth for depth in sorted({d for d, _ in finished}, reverse=True)
              if all(finished[depth, scheme] >= 2 for scheme in schemes)]
    return (tested[0] if tested else planned), planned


_SYMBOL = {"depth": "L", "width": "d", "steps": "steps"}
SECOND_SLICES = {"width": "the widest models", "steps": "the longest-trained models"}  # the second blind tests


def _where(field: str, value) -> str:
    return f"{_SYMBOL[field]}={value:g}"


def _blind_test(result: dict, inference, title: str) -> tuple[str, bool, dict, str]:
    """(verdict, whether it is an informative pass, its CSV row, its Markdown line) of one blind test."""
    where = _where(result["field"], result["held_out"])
    informative = result["half_width"] <= INFORMATIVE
    verdict = ("untested" if result["untested"] else "fails" if not result["passed"] else
               "passes" if informative else "passes, uninformative")
    row = {"kind": "blind test" if result["field"] == "depth" else f"blind test ({result['field']})",
           "name": verdict, "value": result["error"], "low": result["error"] - result["half_width"],
           "high": result["error"] + result["half_width"],
           "detail": f"{where}, {len(result['errors'])} models, prediction interval +-{result['half_width']:.3g} from "
                     f"{result['refits']} bootstrap refits"}
    if result["untested"]:
        return verdict, False, row, f"**{title} at {where}: UNTESTED**, {result['untested']}."
    line = (f"**{title} at {where} ({len(result['errors'])} models): the law {verdict.upper()}.** log(predicted / "
            f"measured var_L), mean over the held-out models: {result['error']:.3g}; {inference.confidence * 100:g} % "
            f"prediction interval of the law +-{result['half_width']:.3g} (its spread over {result['refits']} bootstrap "
            "refits on the fitting models, and the held-out seeds' spread)"
            + (f"; var_L is off by a factor {math.exp(abs(result['error'])):.3g}." if not result["passed"] else "."))
    return verdict, verdict == "passes", row, line


def _second_tests(samples, fit, inference) -> tuple[list[str], list[dict], list[str]]:
    """The second blind tests (:data:`SECOND_SLICES`) where the samples have two values of the field or more:
    the Markdown lines, the CSV rows and the reasons that withdraw the papers' sizes."""
    lines, rows, against = [], [], []
    for field, title in SECOND_SLICES.items():
        values = sorted(samples[field].unique())
        if len(values) < 2:
            continue
        try:
            result = extrapolation_test(samples, values[-1], fit, inference, field=field)
        except LawError as error:
            lines += [f"**Second blind test, {title} ({_where(field, values[-1])}): no law** ({error}).", ""]
            continue
        verdict, informative_pass, row, line = _blind_test(result, inference, f"Second blind test, {title}")
        lines += [line, ""]
        rows.append(row)
        if verdict != "untested" and not informative_pass:
            against.append(f"it {'failed' if verdict == 'fails' else 'passed without information'} its blind test "
                           f"on {title}")
    return lines, rows, against


def _law_section(samples, held_out: int, law_name: str, fit, inference) -> tuple[list[str], list[dict]]:
    """The Markdown lines and CSV rows (without scheme and law) of one law of one scheme."""
    lines = [f"### The {law_name} law", ""]
    try:
        result = extrapolation_test(samples, held_out, fit, inference)
    except LawError as error:
        return lines + [f"No law: {error}.", ""], []
    law = result["law"]
    rows = [{"kind": kind, "name": term, "value": float(value)}
            for kind, terms, values in law.coefficients() + (("gamma", law.first_terms, law.gamma),)
            for term, value in zip(terms, values)]
    blocks = law.describe()
    lines += [f"Law (least squares over blocks l >= 2): {blocks}; log var_1 = "
              f"{formula(law.first_terms, law.gamma)}.", ""]
    for kind, table, depth, label in (
            ("test", result["errors"], held_out, f"Extrapolation test, L={held_out} ({len(result['errors'])} models, "
                                                 "never used in the fit)"),
            ("fit", result["fit_errors"], result["fit_value"],
             f"The law on its own data, L={result['fit_value']} ({len(result['fit_errors'])} fitted models, each at "
             "its width and steps)")):
        if not len(table):
            continue
        intervals = result[kind]
        rows += [{"kind": kind, "name": name, "value": estimate.estimate, "low": estimate.low, "high": estimate.high,
                  "detail": f"L={depth}, {len(table)} models"} for name, estimate in intervals.items()]
        lines += [f"{label}: log(predicted var_L / measured) = {intervals['last_log_error'].format()}; mean "
                  f"over layers of |log ratio| = {intervals['mean_abs_log_error'].format()} "
                  f"({inference.confidence * 100:g} % t intervals over models).", "", markdown_table(table), ""]
    verdict, informative_pass, row, line = _blind_test(result, inference, "Blind test")
    rows.append(row)
    second_lines, second_rows, against = _second_tests(samples, fit, inference)
    lines += [line, "", *second_lines]
    rows += second_rows
    if verdict == "untested":
        return lines + ["Predictions at the papers' sizes: **withdrawn**, the law has not passed a blind test "
                        "in depth.", ""], rows
    if not informative_pass:
        against.insert(0, "the law failed its blind test in depth" if verdict == "fails" else
                       f"its prediction interval in depth is wider than a factor {math.exp(INFORMATIVE):.3g} on var_L")
    if against:
        return lines + [f"Predictions at the papers' sizes: **withdrawn**, {'; '.join(against)}.", ""], rows
    papers = paper_predictions(law)
    rows += [{"kind": "paper", "name": r.model, "value": r.exponent if r.growth_class == "polynomial" else r.rate,
              "detail": r.description} for r in papers.itertuples()]
    lines += ["**Extrapolation** far outside the fitted range (d <= 128, L <= 64, steps <= 6400, T = 64), "
              "at the papers' sizes, from a law that passed its blind tests (its interval is not a "
              "prediction interval at these sizes):", "",
              markdown_table(papers[["model", "width", "depth", "steps", "var_1", "var_L", "growth_class",
                                     "description"]]), ""]
    return lines, rows


def write_extrapolation(studies, out) -> Path | None:
    """Fit, test and extrapolate the variance laws (module docstring); the Markdown's path (None: no depth study,
    or a tuned one none of whose cells has chosen its rate yet)."""
    depth_study, models = recipe_models(studies, out)
    if depth_study is None or not depth_study.sweep.points:
        return None
    depth_keys = {p.key for p in depth_study.sweep.points}
    held_out, planned = _held_out_depth(depth_study, models, depth_keys)
    # fitted: every recipe model shallower than the held-out depth; tested: the depth study's own models at
    # that depth (a width or steps model of the same depth lies outside the fitted range of d or steps)
    samples = bridge_samples([m for m in models if m.point.setting.depth < held_out
                              or (m.point.setting.depth == held_out and m.point.key in depth_keys)])
    fitted = samples[samples["depth"] < held_out].groupby(["scheme", "depth", "width", "steps", "seed"]).ngroups \
        if len(samples) else 0
    lines = ["# Theory meets training: variance laws, their extrapolation test, the papers' sizes", "",
             f"Laws fitted on {fitted} trained models of {', '.join(s.name for s in studies)} (the recipe of study "
             f"`{depth_study.name}`) without depth L={held_out}, which is predicted"
             + ("" if held_out == planned else f" (the deepest depth with two finished models of each scheme: "
                f"L={planned} is not trained yet)") + ". Two laws per scheme: the bridge law (a law for the bridge "
             "strengths a_l, b_l, run through the bridge recursion) and the growth law (a law for each block's log "
             "growth factor at its relative depth), which was added after the bridge law had missed the atlas's "
             "L=32 models, so that its error at L=32 is not a blind test. Definitions: "
             "docs/studies.md#extrapolation.", ""]
    rows = []
    for scheme in sorted(samples["scheme"].unique()) if len(samples) else []:
        lines += [f"## {scheme}", ""]
        for law_name, fit in LAWS.items():
            section, law_rows = _law_section(samples[samples["scheme"] == scheme], held_out, law_name, fit,
                                             depth_study.inference)
            lines += section
            rows += [{"scheme": scheme, "law": law_name, **row} for row in law_rows]
    table = pd.DataFrame(rows, columns=["scheme", "law", "kind", "name", "value", "low", "high", "detail"])
    out = Path(out)
    atomic_write(out / "extrapolation.csv", lambda temp: table.to_csv(temp, index=False))
    return write_text_atomic(out / "extrapolation.md", "\n".join(lines) + "\n")
