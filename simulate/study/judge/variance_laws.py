"""The variance laws of a set of studies, judged: fitted, tested blind and extrapolated, one record per law.

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

:func:`judge_variance_laws` returns a :class:`VarianceLaws`, records only: each law's test
(:class:`~simulate.study.judge.extrapolation.ExtrapolationTest`), what withdraws its extrapolation, its
predictions at the papers' sizes; :meth:`VarianceLaws.frame` is its table (``extrapolation.csv``, columns:
docs/formats.md), and :mod:`simulate.study.write.extrapolation_report` formats it. Definitions:
docs/studies.md#extrapolation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from simulate.claims import BlindTestJudgement, Interval, blind_test_verdict
from simulate.claims.depth_laws import DEPTH_LAWS, MIN_LAW_DEPTHS, fit_depth_law
from simulate.study.judge.extrapolation import (INFORMATIVE, ExtrapolationTest, LawError, bridge_samples,
                                                error_intervals, extrapolation_test, fit_growth_law,
                                                fit_increment_law, fit_law, paper_predictions)
from simulate.study.read.models import distinct_models
from theory.verdicts import BlindTest, GrowthClass, PointStatus

__all__ = ["LAWS", "SECOND_SLICES", "LAW_COLUMNS", "SecondTest", "LawTest", "AcrossDepthTest", "VarianceLaws",
           "recipe_models", "judge_variance_laws"]

# the laws reported, in order (simulate.study.judge.extrapolation)
LAWS = {"bridge": fit_law, "growth": fit_growth_law, "increment": fit_increment_law}
SECOND_SLICES = {"width": "the widest models", "steps": "the longest-trained models"}  # the second blind tests
LAW_COLUMNS = ("scheme", "law", "kind", "name", "value", "low", "high", "detail", "study")  # extrapolation.csv

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


@dataclass(frozen=True)
class SecondTest:
    """A law's second blind test on one slice of :data:`SECOND_SLICES`: the field, the value held out and the test
    (None where no law could be fitted without that slice: ``error`` says why)."""

    field: str
    held_out: float
    test: ExtrapolationTest | None
    error: str = ""

    @property
    def title(self) -> str:
        return SECOND_SLICES[self.field]


@dataclass(frozen=True)
class LawTest:
    """One law of one scheme: its extrapolation test in depth (None where no law could be fitted: ``error`` says
    why) with the intervals of its errors (``errors``: at the held-out depth, then on its own data at the deepest
    fitted depth, each ``{name: Interval}`` by
    :func:`~simulate.study.judge.extrapolation.error_intervals`), its second tests, and its predictions at the papers'
    sizes (``papers``; None where withdrawn).

    A law's predictions are withdrawn where it has not passed a blind test in depth at every training length
    (``untested``), where a blind test it had was not an informative pass (``against``: each ``(slice, judgement)``,
    the slice ``in depth`` or ``on`` a second slice's title) or where it has no width term (``no_width_term``)."""

    scheme: str
    law: str
    test: ExtrapolationTest | None
    error: str = ""
    errors: tuple[dict, dict] = ({}, {})
    second: tuple[SecondTest, ...] = ()
    untested: bool = False
    against: tuple[tuple[str, BlindTestJudgement], ...] = ()
    no_width_term: bool = False
    papers: pd.DataFrame | None = None


@dataclass(frozen=True)
class AcrossDepthTest:
    """A law across depth of ``log var_L`` of one scheme at one training length, fitted without the held-out depth
    (``fit``: :class:`simulate.claims.depth_laws.DepthLaw`, None where untested) and its blind test there
    (``judgement``)."""

    scheme: str
    law: object  # a DepthLawForm
    steps: float
    where: str
    fit: object | None
    judgement: BlindTestJudgement | None


@dataclass(frozen=True)
class VarianceLaws:
    """The variance laws of ``studies`` (module docstring): the depth study whose recipe they share, the depth held
    out (``held_out``; ``planned``: the study's deepest), the models fitted, the confidence of every interval, and
    per scheme its laws' tests and its laws across depth."""

    studies: tuple[str, ...]
    depth_study: str
    held_out: int
    planned: int
    fitted_models: int
    confidence: float
    laws: tuple[LawTest, ...]
    across_depth: tuple[AcrossDepthTest, ...]

    def schemes(self) -> list[str]:
        return sorted({law.scheme for law in self.laws} | {law.scheme for law in self.across_depth})

    @cached_property
    def frame(self) -> pd.DataFrame:
        """One row per scheme, law and quantity (:data:`LAW_COLUMNS`; kinds in docs/formats.md; ``study`` the depth
        study whose recipe the laws share): what ``extrapolation.csv`` holds, and its study's judgement
        (``variance_laws``). Built once (the writer and the judgement read the same table)."""
        rows = []
        for scheme in self.schemes():
            for law in (law for law in self.laws if law.scheme == scheme):
                rows += [{"scheme": scheme, "law": law.law, **row} for row in _law_rows(law, self)]
            rows += [{"scheme": scheme, "law": "across depth", **row} for test in self.across_depth
                     if test.scheme == scheme and test.judgement is not None
                     for row in _blind_rows([test.judgement], "blind test (across depth)")]
        return pd.DataFrame(rows, columns=list(LAW_COLUMNS)).assign(study=self.depth_study)


def _blind_rows(judgements, kind: str) -> list[dict]:
    return [{"kind": kind, "name": str(j.verdict) if j.verdict else "untested", "value": j.error.estimate,
             "low": j.error.low, "high": j.error.high, "detail": f"{j.where}, {j.models} models" +
             (f"; {j.reason}" if j.reason else "")} for j in judgements]


def _law_rows(law: LawTest, laws: VarianceLaws) -> list[dict]:
    """The rows of one law (without scheme and law): its coefficients, its errors at the held-out depth and on its
    own data, its blind tests, the second ones, and its predictions at the papers' sizes."""
    if law.test is None:
        return []
    result, fitted = law.test, law.test.law
    rows = [{"kind": kind, "name": term, "value": float(value)}
            for kind, terms, values in fitted.coefficients() + (("gamma", fitted.first_terms, fitted.gamma),)
            for term, value in zip(terms, values)]
    for kind, table, depth, intervals in (("test", result.errors, laws.held_out, law.errors[0]),
                                          ("fit", result.fit_errors, result.fit_value, law.errors[1])):
        if len(table):
            rows += [{"kind": kind, "name": name, "value": estimate.estimate, "low": estimate.low,
                      "high": estimate.high, "detail": f"L={depth}, {len(table)} models"}
                     for name, estimate in intervals.items()]
    rows += _blind_rows(result.blind, "blind test")
    rows += [row for second in law.second if second.test is not None
             for row in _blind_rows(second.test.blind, f"blind test ({second.field})")]
    if law.papers is not None:
        rows += [{"kind": "paper", "name": r.model,
                  "value": r.exponent if r.growth_class is GrowthClass.POLYNOMIAL else r.rate,
                  "detail": r.description} for r in law.papers.itertuples()]
    return rows


def _not_informative_passes(judgements, where: str) -> list[tuple[str, BlindTestJudgement]]:
    return [(where, j) for j in judgements if j.verdict is not None and j.verdict is not BlindTest.PASSES]


def _judge_law(scheme: str, samples, held_out: int, law_name: str, fit, inference) -> LawTest:
    """One law of one scheme (:class:`LawTest`)."""
    try:
        result = extrapolation_test(samples, held_out, fit, inference, name=law_name)
    except LawError as error:
        return LawTest(scheme, law_name, None, str(error))
    second = []
    for field in SECOND_SLICES:
        values = sorted(samples[field].unique())
        if len(values) < 2:
            continue
        try:
            second.append(SecondTest(field, values[-1], extrapolation_test(samples, values[-1], fit, inference,
                                                                           field=field, name=law_name)))
        except LawError as error:
            second.append(SecondTest(field, values[-1], None, str(error)))
    errors = error_intervals(result, inference.confidence)
    if not result.blind or any(j.verdict is None for j in result.blind):
        return LawTest(scheme, law_name, result, errors=errors, second=tuple(second), untested=True)
    against = _not_informative_passes(result.blind, "in depth") + [
        pair for test in second if test.test is not None
        for pair in _not_informative_passes(test.test.blind, f"on {test.title}")]
    no_width_term = "log d" not in result.law.terms
    papers = None if against or no_width_term else paper_predictions(result.law)
    return LawTest(scheme, law_name, result, errors=errors, second=tuple(second), against=tuple(against),
                   no_width_term=no_width_term, papers=papers)


def _judge_across_depth(scheme: str, samples, held_out: int, inference) -> list[AcrossDepthTest]:
    """The laws across depth of ``log var_L`` of one scheme, fitted on the shallower depths' models and judged on
    the held-out depth's, per training length."""
    last = samples[samples["layer"] == samples["depth"]].assign(value=lambda f: np.log(f["var"]))
    tests = []
    for steps, part in last.groupby("steps"):
        fitting, held = part[part["depth"] < held_out], part[part["depth"] == held_out]
        for law_name in DEPTH_LAWS:
            fit = fit_depth_law(fitting["depth"], fitting["value"], law_name, inference.confidence)
            where = f"L={held_out}, steps={steps:g}"
            if fit is None or fit.cells < MIN_LAW_DEPTHS or len(held) == 0:
                tests.append(AcrossDepthTest(scheme, law_name, steps, where, None, None))
                continue
            predicted = fit.predict(held_out, models=len(held))
            error = predicted.estimate - float(held["value"].mean())
            half = predicted.high - predicted.estimate  # the law's own interval, carried to the error
            judgement = BlindTestJudgement(f"{law_name} across depth", where, len(held),
                                           Interval(error, error - half, error + half, inference.confidence,
                                                    "prediction interval of the law across depth"),
                                           blind_test_verdict(error, half, half <= INFORMATIVE))
            tests.append(AcrossDepthTest(scheme, law_name, steps, where, fit, judgement))
    return tests


def judge_variance_laws(studies, out) -> VarianceLaws | None:
    """Fit, test and extrapolate the variance laws of ``studies``' models in ``out`` (module docstring); None without
    a study along depth, or for a tuned one none of whose cells has chosen its rate yet."""
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
    inference, laws, across = depth_study.inference, [], []
    for scheme in sorted(samples["scheme"].unique()) if len(samples) else []:
        part = samples[samples["scheme"] == scheme]
        laws += [_judge_law(scheme, part, held_out, name, fit, inference) for name, fit in LAWS.items()]
        across += _judge_across_depth(scheme, part, held_out, inference)
    return VarianceLaws(tuple(s.name for s in studies), depth_study.name, held_out, planned, fitted,
                        inference.confidence, tuple(laws), tuple(across))
