"""A depth study read across depth: each whole-model statistic against ``L``, a law fitted on the cells, and
its predictions at depths no model was trained at.

The subjects (:data:`SUBJECTS`) are the statistics P1 and P2 state as functions of depth:
``var_last`` (``log var_L``, P1's ``sigma_L^2``) and ``var_growth`` (``log(var_L / var_1)``, the
embedding's scale left out), each with a power law and an exponential in ``L``
(:mod:`simulate.claims.depth_laws`); ``prune_log_ratio`` (deep over shallow pruning drop, P1 Theorem
3.3) and ``val_loss`` of LNS minus Pre-LN (paired by seed; P1 Sec. 5), each as a line in ``log L``.

A tuned study is read along two *lines*, since its rate moves with depth:

``fixed``
    every model at one rate per scheme, the rate most of its depths chose
    (:func:`simulate.study.plan.tuning.fixed_rates`; the tuning seeds train it at every depth, so every
    depth has at least one model there);
``tuned``
    every model at its own cell's chosen rate (depth and rate move together), the tuning seed
    included. The comparisons of :mod:`simulate.study.judge.analysis` leave that seed out (it won its
    cell's tuning, so its ``val_loss`` is the grid's minimum); a law across depth keeps it because
    the prediction committed in ``results/atlas/prediction-L64`` was fitted so, and a judged
    prediction must be read as it was made. The selection is on ``val_loss`` alone, and the
    ``val_loss`` subject is a difference of two schemes' tuning winners, so it partly cancels.

An untuned study has one line, ``trained``. Each line is read at each training length the study
trained (``steps``): laws are never pooled over lengths.

:func:`prediction_table` fits every law on the finished cells and predicts each target depth, for one
new model (the tuning seed's, which trains every rate of the grid, so the fixed line is tested whatever
the new cell chooses) and for the mean of the study's seeds (tested where the new cell has them on that
line); ``python -m simulate study ... --predict DEPTH ...`` writes it
(:mod:`simulate.study.judge.preregistration`).

>>> [s.label for s in subjects(("pre", "lns"))][:3]
['var_last pre', 'var_last lns', 'var_growth pre']
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from simulate.claims.depth_laws import DEPTH_LAWS, MIN_LAW_DEPTHS, DepthLawForm, fit_depth_law
from simulate.study.plan.tuning import fixed_rates
from simulate.study.read.models import candidate_models
from theory.verdicts import PointStatus, RateLine

__all__ = ["SUBJECTS", "PREDICTION_COLUMNS", "Subject", "JudgedOn", "PredictionError", "LawData", "subjects",
           "line_rates", "line_models", "subject_samples", "check_targets", "law_data", "line_rate_pair",
           "prediction_table"]

SUBJECTS = (("var_last", 1, tuple(DepthLawForm)), ("var_growth", 1, tuple(DepthLawForm)),
            ("prune_log_ratio", 1, (DepthLawForm.POWER,)),
            ("val_loss", 2, (DepthLawForm.POWER,)))  # (statistic, schemes, law forms)
PREDICTION_COLUMNS = ("statistic", "scheme", "law", "form", "line", "lr", "lr_second", "steps", "depth", "models",
                      "judged_on", "estimate", "low", "high", "confidence", "fitted_depths", "fitted_models", "slope",
                      "slope_low", "slope_high", "lack_of_fit_p", "residual_sd", "within_sd")


class JudgedOn(NamedTuple):
    """What a prediction row is judged on: the model of one ``seed``, or the mean of ``models`` seeds' models
    (``seed`` None); written ``seed 0`` or ``mean of 3 seeds`` in a prediction file and read back by :meth:`parse`.

    >>> str(JudgedOn(0)), str(JudgedOn(None, 3)), JudgedOn.parse("mean of 3 seeds") == JudgedOn(None, 3)
    ('seed 0', 'mean of 3 seeds', True)
    """

    seed: int | None
    models: int = 1

    def __str__(self) -> str:
        return f"seed {self.seed}" if self.seed is not None else f"mean of {self.models} seeds"

    @classmethod
    def parse(cls, text: str) -> "JudgedOn":
        """The record of ``seed N`` or ``mean of M seeds`` (ValueError naming the text otherwise)."""
        words = str(text).split()
        if len(words) == 2 and words[0] == "seed" and words[1].isdigit():
            return cls(int(words[1]))
        if len(words) == 4 and words[:2] == ["mean", "of"] and words[2].isdigit() and words[3] == "seeds":
            return cls(None, int(words[2]))
        raise ValueError(f"judged_on={text!r} is not allowed: 'seed N' or 'mean of M seeds'")


class PredictionError(ValueError):
    """A prediction that cannot be made (a depth inside the fitted range, too few depths): one line."""


class Subject(NamedTuple):
    """A statistic read across depth: on one scheme, or the first scheme minus the second paired by seed."""

    statistic: str
    schemes: tuple[str, ...]
    laws: tuple[str, ...]

    @property
    def scheme(self) -> str:
        return "-".join(self.schemes)

    @property
    def label(self) -> str:
        return f"{self.statistic} {self.scheme}"


def subjects(schemes) -> list[Subject]:
    """The subjects a study of ``schemes`` has (:data:`SUBJECTS`; LNS minus Pre-LN where it trains both)."""
    found = []
    for statistic, count, laws in SUBJECTS:
        if count == 1:
            found += [Subject(statistic, (scheme,), laws) for scheme in schemes]
        elif {"lns", "pre"} <= set(schemes):
            found.append(Subject(statistic, ("lns", "pre"), laws))
    return found


def line_rates(study, models) -> dict[RateLine, dict[str, float]]:
    """``{line: {scheme: rate}}``: the fixed line's rates (:func:`simulate.study.plan.tuning.fixed_rates` of the
    resolved study's ``models``); an untuned study's one line holds no rate."""
    if not study.tuned:
        return {RateLine.TRAINED: {}}
    return {RateLine.FIXED: fixed_rates(study, models), RateLine.TUNED: {}}


def line_models(models, chosen: set, line: RateLine, rates: dict[str, float]) -> list:
    """The finished models of ``line`` among ``models`` (every model of a tuned study's grid): those at their
    cells' chosen rates (keys ``chosen``; tuned, trained), or at each scheme's fixed rate whatever its cell chose."""
    if line is RateLine.FIXED:
        return [m for m in models if m.status is PointStatus.OK and rates.get(m.scheme) == m.point.setting.lr]
    return [m for m in models if m.status is PointStatus.OK and m.point.key in chosen]


def subject_samples(subject: Subject, models) -> pd.DataFrame:
    """One row per model (or per seed's pair of models, paired within a width): ``depth, width, steps, seed, value,
    points`` of ``subject``."""
    values = {(m.scheme, m.value("depth"), m.point.setting.width, m.value("steps"), m.seed):
              (m.stats.value(subject.statistic), m.point.key) for m in models if m.scheme in subject.schemes}
    rows = []
    for (scheme, depth, width, steps, seed), (value, key) in values.items():
        if scheme != subject.schemes[0]:
            continue
        if len(subject.schemes) == 2:
            other = values.get((subject.schemes[1], depth, width, steps, seed))
            if other is None:
                continue
            value, key = value - other[0], f"{key}-{other[1]}"
        rows.append({"depth": depth, "width": width, "steps": steps, "seed": seed, "value": value, "points": key})
    return pd.DataFrame(rows, columns=["depth", "width", "steps", "seed", "value", "points"])


def check_targets(targets, trained, axis: str, minimum: int) -> None:
    """Refuse (:class:`PredictionError`) targets of ``axis`` inside the ``trained`` values, or fewer than
    ``minimum`` trained values to fit a law on."""
    values = sorted(trained)
    flag = "" if axis == "depth" else f"{axis}="
    if len(values) < minimum:
        raise PredictionError(f"--predict {flag + '... ' if flag else ''}needs at least {minimum} trained {axis}s to "
                              f"fit a law on: the study has {len(values)} ({', '.join(map(str, values)) or 'none'})")
    for target in targets:
        if values[0] <= target <= values[-1]:
            raise PredictionError(f"--predict {flag}{target} is not allowed: it lies inside the trained {axis}s "
                                  f"{values[0]}..{values[-1]}; predict a {axis} below {values[0]} or above "
                                  f"{values[-1]}")


class LawData(NamedTuple):
    """The values one law is fitted on: a line (with its fixed rates), a subject, a training length."""

    line: RateLine
    rates: dict
    subject: Subject
    steps: int
    samples: pd.DataFrame  # subject_samples' rows of that line and length

    def fitted(self) -> pd.DataFrame:
        """The samples labelled with their statistic, scheme and line (a prediction file's data)."""
        return self.samples.assign(statistic=self.subject.statistic, scheme=self.subject.scheme, line=self.line)


def law_data(study, every) -> tuple[list[LawData], tuple[int, int], int]:
    """``(data, counts, judged_seed)`` of a resolved study (:func:`simulate.study.plan.tuning.resolve_tuning`) and
    ``every`` model of it (:func:`simulate.study.read.models.candidate_models`): the finished models' values per line,
    subject and length; the numbers of new models each prediction is for (one, the study's seeds); the seed a
    one-model prediction is judged on (the tuning seed's: it trains every rate)."""
    seeds = sorted({p.seed for p in study.sweep.points})
    judged_seed = study.tune_seeds[0] if study.tuned else seeds[0]
    chosen = {p.key for p in study.sweep.points}
    data = []
    for line, rates in line_rates(study, [m for m in every if m.point.key in chosen]).items():
        models = line_models(every, chosen, line, rates)
        for subject in subjects(study.schemes()):
            for steps, part in subject_samples(subject, models).groupby("steps"):
                data.append(LawData(line, rates, subject, int(steps), part))
    return data, (1, len(seeds)), judged_seed


def prediction_table(study, out, targets) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(predictions, fitted)`` of a resolved study (:func:`simulate.study.plan.tuning.resolve_tuning`): one row per
    subject, law, line, length, target depth and number of new models
    (:data:`PREDICTION_COLUMNS`), and every model value the laws were fitted on (their data).

    Raises :class:`PredictionError` for a target inside the trained depths or fewer than three of them.
    """
    if "depth" not in study.axes:
        raise PredictionError(f"--predict needs a study along depth: {study.name!r} runs along "
                              f"{', '.join(study.axes)}")
    data, counts, judged_seed = law_data(study, candidate_models(study, out))
    check_targets(targets, {depth for d in data for depth in d.samples["depth"]}, "depth", MIN_LAW_DEPTHS)
    rows = [row for d in data for law in d.subject.laws
            for row in _law_rows(d, law, targets, study.inference.confidence, counts, judged_seed)]
    return (pd.DataFrame(rows, columns=list(PREDICTION_COLUMNS)),
            pd.concat([d.fitted() for d in data], ignore_index=True) if data else pd.DataFrame())


def line_rate_pair(data: LawData) -> tuple[float, float]:
    """The fixed line's rates of a subject's first and second scheme (NaN on the other lines, NaN second for one
    scheme)."""
    schemes = data.subject.schemes
    return (data.rates.get(schemes[0], math.nan),
            data.rates.get(schemes[1], math.nan) if len(schemes) == 2 else math.nan)


def _law_rows(data: LawData, law, targets, confidence, counts, judged_seed) -> list[dict]:
    subject, line, steps = data.subject, data.line, data.steps
    fit = fit_depth_law(data.samples["depth"], data.samples["value"], law, confidence)
    if fit is None or fit.cells < MIN_LAW_DEPTHS:
        return []
    rate, second = line_rate_pair(data)
    rows = []
    for depth in targets:
        for models in counts:
            predicted = fit.predict(depth, models)
            rows.append({"statistic": subject.statistic, "scheme": subject.scheme, "law": law,
                         "form": DEPTH_LAWS[law], "line": line, "lr": rate, "lr_second": second, "steps": int(steps),
                         "depth": int(depth),
                         "models": models,
                         "judged_on": str(JudgedOn(judged_seed) if models == 1 else JudgedOn(None, models)),
                         "estimate": predicted.estimate, "low": predicted.low, "high": predicted.high,
                         "confidence": confidence,
                         "fitted_depths": " ".join(f"{d:g}" for d in fit.depths), "fitted_models": fit.models,
                         "slope": fit.slope.estimate, "slope_low": fit.slope.low, "slope_high": fit.slope.high,
                         "lack_of_fit_p": fit.lack_of_fit, "residual_sd": math.sqrt(fit.residual_var),
                         "within_sd": math.sqrt(fit.within_var) if np.isfinite(fit.within_var) else math.nan})
    return rows
