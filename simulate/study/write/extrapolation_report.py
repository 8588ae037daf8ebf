"""``DIR/extrapolation.md`` and ``DIR/extrapolation.csv``: the variance laws of a set of studies, tested and extrapolated.

With a study whose axes include ``depth`` (the atlas's ``depth``), the laws of
:mod:`simulate.study.judge.extrapolation` are fitted per scheme on every model of the given
studies trained with that study's recipe (the same Setting and options but for depth, width
and its linked fields, and training length), except the deepest depth, which is predicted
without being used (the extrapolation test, on the depth study's own models of that depth;
while the study is unfinished, the deepest depth with two finished models of each scheme).
A second blind test holds out another slice where the models have one (:data:`SECOND_SLICES`):
the widest models, fitted on the narrower ones, and the longest-trained, fitted on the shorter.
Every blind test is judged per training length of its held-out models, never pooled. Then the
laws that passed every blind test they had, informatively, and have a width term are run at the
papers' sizes (:data:`simulate.study.judge.extrapolation.PAPER_SIZES`), labelled as extrapolations
beyond the range they were fitted on (read from their models). Beside these laws of one profile,
the laws across depth of ``log var_L`` (:mod:`simulate.claims.depth_laws`) are tested the same way,
on the held-out depth per training length.
``extrapolation.csv`` has one row per scheme, law (``bridge``, ``growth``, ``increment`` or ``across depth``)
and quantity (columns ``scheme, law, kind, name, value, low, high, detail``; kinds ``alpha``, ``beta``
(bridge), ``theta`` (growth), ``psi`` (increment) and ``gamma`` for the coefficients,
``test`` for the held-out models' errors, ``fit`` for the same on the fitted models of the
deepest fitted depth, ``blind test`` for each length's verdict (``passes``, ``passes, uninformative``
where the interval is wider than :data:`simulate.study.judge.extrapolation.INFORMATIVE`, ``fails``, or
``untested``: the held-out mean error with the law's prediction interval), ``blind test (width)``,
``blind test (steps)`` for the second ones and ``blind test (across depth)``, ``paper`` for the
extrapolations, which only informative passes get).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from simulate.claims import BlindTestJudgement, Interval, blind_test_verdict, level_label
from simulate.claims.depth_laws import DEPTH_LAWS, MIN_LAW_DEPTHS, fit_depth_law
from simulate.study.judge.extrapolation import (INFORMATIVE, LawError, bridge_samples, error_intervals,
                                                extrapolation_test, fit_growth_law, fit_increment_law, fit_law,
                                                formula, paper_predictions, where)
from simulate.study.read.models import distinct_models
from theory.cli import markdown_table
from theory.files import atomic_write, write_text_atomic
from theory.verdicts import BlindTest, GrowthClass, PointStatus

__all__ = ["LAWS", "SECOND_SLICES", "recipe_models", "write_extrapolation"]

# the laws reported, in order (simulate.study.judge.extrapolation)
LAWS = {"bridge": fit_law, "growth": fit_growth_law, "increment": fit_increment_law}

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
                       if m.status is PointStatus.OK and m.point.key in keys)
    tested = [depth for depth in sorted({d for d, _ in finished}, reverse=True)
              if all(finished[depth, scheme] >= 2 for scheme in schemes)]
    return (tested[0] if tested else planned), planned


SECOND_SLICES = {"width": "the widest models", "steps": "the longest-trained models"}  # the second blind tests


def _blind_rows(judgements, kind: str) -> list[dict]:
    return [{"kind": kind, "name": str(j.verdict) if j.verdict else "untested", "value": j.error.estimate,
             "low": j.error.low, "high": j.error.high, "detail": f"{j.where}, {j.models} models" +
             (f"; {j.reason}" if j.reason else "")} for j in judgements]


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


def _against(judgements, title: str) -> list[str]:
    """Why a law's blind tests withdraw its extrapolation (empty when each passed informatively)."""
    return [f"it {'failed' if j.verdict is BlindTest.FAILS else 'passed without information'} its blind test "
            f"{title} at {j.where}" for j in judgements
            if j.verdict is not None and j.verdict is not BlindTest.PASSES]


def _second_tests(samples, law_name, fit, inference) -> tuple[list[str], list[dict], list[str]]:
    """The second blind tests (:data:`SECOND_SLICES`) where the samples have two values of the field or more:
    the Markdown lines, the CSV rows and the reasons that withdraw the papers' sizes."""
    lines, rows, against = [], [], []
    for field, title in SECOND_SLICES.items():
        values = sorted(samples[field].unique())
        if len(values) < 2:
            continue
        try:
            result = extrapolation_test(samples, values[-1], fit, inference, field=field, name=law_name)
        except LawError as error:
            lines += [f"**Second blind test, {title} ({where(field, values[-1])}): no law** ({error}).", ""]
            continue
        lines += _blind_lines(result.blind, f"Second blind test, {title}", inference.confidence)
        rows += _blind_rows(result.blind, f"blind test ({field})")
        against += _against(result.blind, f"on {title}")
    return lines, rows, against


def _law_section(samples, held_out: int, law_name: str, fit, inference) -> tuple[list[str], list[dict]]:
    """The Markdown lines and CSV rows (without scheme and law) of one law of one scheme."""
    lines = [f"### The {law_name} law", ""]
    try:
        result = extrapolation_test(samples, held_out, fit, inference, name=law_name)
    except LawError as error:
        return lines + [f"No law: {error}.", ""], []
    law = result.law
    rows = [{"kind": kind, "name": term, "value": float(value)}
            for kind, terms, values in law.coefficients() + (("gamma", law.first_terms, law.gamma),)
            for term, value in zip(terms, values)]
    lines += [f"Law (least squares over blocks l >= 2): {law.describe()}; log var_1 = "
              f"{formula(law.first_terms, law.gamma)}. Fitted on {result.fitted_range}.", ""]
    held, fitted = error_intervals(result, inference.confidence)
    for kind, table, depth, intervals, label in (
            ("test", result.errors, held_out, held, f"Extrapolation test, L={held_out} ({len(result.errors)} "
                                                    "models, never used in the fit)"),
            ("fit", result.fit_errors, result.fit_value, fitted,
             f"The law on its own data, L={result.fit_value} ({len(result.fit_errors)} fitted models, each at "
             "its width and steps)")):
        if not len(table):
            continue
        rows += [{"kind": kind, "name": name, "value": estimate.estimate, "low": estimate.low, "high": estimate.high,
                  "detail": f"L={depth}, {len(table)} models"} for name, estimate in intervals.items()]
        lines += [f"{label}: log(predicted var_L / measured) = {intervals['last_log_error'].format()}; mean "
                  f"over layers of |log ratio| = {intervals['mean_abs_log_error'].format()} "
                  f"({level_label(inference.confidence)} t intervals over models).", "", markdown_table(table), ""]
    rows += _blind_rows(result.blind, "blind test")
    second_lines, second_rows, against = _second_tests(samples, law_name, fit, inference)
    lines += [*_blind_lines(result.blind, "Blind test", inference.confidence), *second_lines]
    rows += second_rows
    if not result.blind or any(j.verdict is None for j in result.blind):
        return lines + ["Predictions at the papers' sizes: **withdrawn**, the law has not passed a blind test "
                        "in depth at every training length.", ""], rows
    against = _against(result.blind, "in depth") + against
    if "log d" not in law.terms:
        against.append(f"it has no width term (its models all have {result.fitted_range.split(',')[0]}): it "
                       "predicts nothing at another width")
    if against:
        return lines + [f"Predictions at the papers' sizes: **withdrawn**, {'; '.join(against)}.", ""], rows
    papers = paper_predictions(law)
    rows += [{"kind": "paper", "name": r.model,
              "value": r.exponent if r.growth_class is GrowthClass.POLYNOMIAL else r.rate, "detail": r.description}
             for r in papers.itertuples()]
    lines += [f"**Extrapolation** far outside the fitted range ({result.fitted_range}), at the papers' sizes, from "
              "a law that passed its blind tests (its interval is not a prediction interval at these sizes):", "",
              markdown_table(papers[["model", "width", "depth", "steps", "var_1", "var_L", "growth_class",
                                     "description"]]), ""]
    return lines, rows


def _across_depth_section(samples, held_out: int, inference) -> tuple[list[str], list[dict]]:
    """The laws across depth of ``log var_L`` (:mod:`simulate.claims.depth_laws`), fitted on the shallower
    depths' models and judged on the held-out depth's, per training length: the test of each law and its range
    of validity (the fitted depths)."""
    last = samples[samples["layer"] == samples["depth"]].assign(value=lambda f: np.log(f["var"]))
    lines = ["### Laws across depth: log var_L against L", "",
             "Cell means of log var_L by depth, fitted without the held-out depth; the prediction interval of the "
             "held-out cell's mean (simulate.claims.depth_laws; docs/studies.md#laws-across-depth).", ""]
    rows = []
    for steps, part in last.groupby("steps"):
        fitting, held = part[part["depth"] < held_out], part[part["depth"] == held_out]
        for law_name in DEPTH_LAWS:
            fit = fit_depth_law(fitting["depth"], fitting["value"], law_name, inference.confidence)
            where = f"L={held_out}, steps={steps:g}"
            if fit is None or fit.cells < MIN_LAW_DEPTHS or len(held) == 0:
                lines += [f"- {law_name} law at {where}: untested (fewer than {MIN_LAW_DEPTHS} fitted depths or no "
                          "held-out model).", ""]
                continue
            predicted = fit.predict(held_out, models=len(held))
            error = predicted.estimate - float(held["value"].mean())
            half = predicted.high - predicted.estimate  # the law's own interval, carried to the error
            judgement = BlindTestJudgement(f"{law_name} across depth", where, len(held),
                                           Interval(error, error - half, error + half, inference.confidence,
                                                    "prediction interval of the law across depth"),
                                           blind_test_verdict(error, half, half <= INFORMATIVE))
            fitted = " ".join(f"{d:g}" for d in fit.depths)
            lines += [f"- **{law_name}** ({DEPTH_LAWS[law_name]}, slope {fit.slope.format()}, fitted on L = "
                      f"{fitted}, lack of fit p {fit.lack_of_fit:.2g}) at {where}: {judgement.models} models, "
                      f"predicted minus measured {error:.3g}, interval +-{half:.3g}: **{judgement.verdict}**; "
                      f"valid over L = {fitted} as fitted.", ""]
            rows += _blind_rows([judgement], "blind test (across depth)")
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
                f"L={planned} has fewer so far)") + ". Per scheme, three laws of one model's profile: the bridge "
             "law (a law for the bridge strengths a_l, b_l, run through the bridge recursion), the growth law (each "
             "block's log growth factor at its relative depth; added after the bridge law had missed the atlas's "
             "L=32 models, so its error at L=32 is not a blind test) and the increment law (each block's log "
             "increment; the data choose the growth class); then the laws across depth of log var_L. Every blind "
             "test is judged per training length. Definitions: "
             "docs/studies.md#extrapolation.", ""]
    rows = []
    for scheme in sorted(samples["scheme"].unique()) if len(samples) else []:
        lines += [f"## {scheme}", ""]
        part = samples[samples["scheme"] == scheme]
        for law_name, fit in LAWS.items():
            section, law_rows = _law_section(part, held_out, law_name, fit, depth_study.inference)
            lines += section
            rows += [{"scheme": scheme, "law": law_name, **row} for row in law_rows]
        section, law_rows = _across_depth_section(part, held_out, depth_study.inference)
        lines += section
        rows += [{"scheme": scheme, "law": "across depth", **row} for row in law_rows]
    table = pd.DataFrame(rows, columns=["scheme", "law", "kind", "name", "value", "low", "high", "detail"])
    out = Path(out)
    atomic_write(out / "extrapolation.csv", lambda temp: table.to_csv(temp, index=False))
    return write_text_atomic(out / "extrapolation.md", "\n".join(lines) + "\n")
