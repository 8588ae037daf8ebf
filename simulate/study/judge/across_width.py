"""A width study read across depth and width: laws with a width term fitted on its ``(L, d)`` cells, and their
predictions at a width no model was trained at (issue 50; docs/studies.md#the-atlas-across-width).

The subjects and lines are the depth study's (:mod:`simulate.study.judge.across_depth`: ``var_last``, ``var_growth``,
``prune_log_ratio`` per scheme, ``val_loss`` of LNS minus Pre-LN paired by seed within a width; the ``fixed`` and
``tuned`` lines of a tuned study, each training length apart). Each is fitted with every law of
:data:`simulate.claims.width_laws.WIDTH_LAWS`: the additive law, the interaction a referee would ask for, and the
law without a width term. Each row also says what "no change from the widest trained width" would give: the mean
of every model of the widest trained cell at the row's depth on its line (``no_change``), and whether that value
lies inside the row's interval (``no_change_inside``): a row whose interval holds it cannot tell a width effect
from none, and its pass is marked uninformative when it is judged.

``python -m simulate study ... --predict width=128`` writes the table (:mod:`simulate.study.judge.preregistration`),
to be committed before any model of that width starts.

:func:`paper_size_table` asks the same laws the question of issue 50 at P1's sizes: LNS minus Pre-LN held-out loss
at LLaMA-130M (L = 12, d = 768) and LLaMA-1B (L = 24, d = 2048), each a prediction interval for one new model there
(P1 reports one run per size), against P1's gain at that size (:data:`simulate.claims.definitions.CLAIMS`'s
``p1-lns-loss`` reference) by :func:`~simulate.claims.judgement.size_verdict`. An extrapolation 12 to 32 times past
the widest trained width, by laws that disagree with each other, at this recipe's 4000 steps where P1 trained 20k
and more: the rows say what each law implies, not what a 130M model would do.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from simulate.claims.definitions import CLAIMS
from simulate.claims.judgement import size_verdict
from simulate.claims.width_laws import WIDTH_LAWS, fit_width_law
from simulate.study.judge.across_depth import (JudgedOn, LawData, PredictionError, check_targets, law_data,
                                               line_rate_pair)
from simulate.study.read.models import candidate_models

__all__ = ["WIDTH_PREDICTION_COLUMNS", "MIN_LAW_WIDTHS", "P1_SIZES", "PAPER_SIZE_COLUMNS", "width_prediction_table",
           "paper_size_table"]

WIDTH_PREDICTION_COLUMNS = ("statistic", "scheme", "law", "form", "line", "lr", "lr_second", "steps", "depth",
                            "width", "models", "judged_on", "estimate", "low", "high", "confidence", "fitted_depths",
                            "fitted_widths", "fitted_models", "width_term", "width_term_low", "width_term_high",
                            "lack_of_fit_p", "residual_sd", "within_sd", "no_change", "no_change_inside")
MIN_LAW_WIDTHS = 3  # widths a law with a width term is fitted on: two would leave the interaction nothing to test
P1_SIZES = (("LLaMA-130M", 12, 768), ("LLaMA-1B", 24, 2048))  # (name, depth, width) of P1's LNS comparison
PAPER_SIZE_COLUMNS = ("line", "steps", "law", "size", "depth", "width", "estimate", "low", "high", "confidence", "p1",
                      "answer", "width_term", "width_term_low", "width_term_high", "fitted_widths", "fitted_models")


def width_prediction_table(study, out, targets) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(predictions, fitted)`` of a resolved study along width and depth: one row per subject, law, line, length,
    target width, trained depth and number of new models (:data:`WIDTH_PREDICTION_COLUMNS`), and every model value
    the laws were fitted on (finished models only).

    Raises :class:`simulate.study.judge.across_depth.PredictionError` for a study not along width and depth, a target
    inside the trained widths, or fewer than :data:`MIN_LAW_WIDTHS` trained widths.
    """
    if not {"width", "depth"} <= set(study.axes):
        raise PredictionError(f"--predict width=... needs a study along width and depth: {study.name!r} runs along "
                              f"{', '.join(study.axes)}")
    data, counts, judged_seed = law_data(study, candidate_models(study, out))
    check_targets(targets, {width for d in data for width in d.samples["width"]}, "width", MIN_LAW_WIDTHS)
    rows = [row for d in data for law in WIDTH_LAWS
            for row in _law_rows(d, law, targets, study.inference.confidence, counts, judged_seed)]
    return (pd.DataFrame(rows, columns=list(WIDTH_PREDICTION_COLUMNS)),
            pd.concat([d.fitted() for d in data], ignore_index=True) if data else pd.DataFrame())


def _law_rows(data: LawData, law, targets, confidence, counts, judged_seed) -> list[dict]:
    subject, line, steps, samples = data.subject, data.line, data.steps, data.samples
    fit = fit_width_law(samples["depth"], samples["width"], samples["value"], law, confidence)
    if fit is None or len(set(fit.widths)) < MIN_LAW_WIDTHS:
        return []
    widest = samples[samples["width"] == fit.widths.max()].groupby("depth")["value"].mean()  # (depths,)
    rate, second = line_rate_pair(data)
    rows = []
    for width in targets:
        for depth in sorted(set(fit.depths)):
            no_change = float(widest.get(depth, math.nan))
            for models in counts:
                predicted = fit.predict(depth, width, models)
                rows.append({"statistic": subject.statistic, "scheme": subject.scheme, "law": law,
                             "form": WIDTH_LAWS[law], "line": line, "lr": rate, "lr_second": second, "steps": steps,
                             "depth": int(depth), "width": int(width), "models": models,
                             "judged_on": str(JudgedOn(judged_seed) if models == 1 else JudgedOn(None, models)),
                             "estimate": predicted.estimate, "low": predicted.low, "high": predicted.high,
                             "confidence": confidence,
                             "fitted_depths": " ".join(f"{d:g}" for d in sorted(set(fit.depths))),
                             "fitted_widths": " ".join(f"{d:g}" for d in sorted(set(fit.widths))),
                             "fitted_models": fit.models, "width_term": fit.width_term.estimate,
                             "width_term_low": fit.width_term.low, "width_term_high": fit.width_term.high,
                             "lack_of_fit_p": fit.lack_of_fit, "residual_sd": math.sqrt(fit.residual_var),
                             "within_sd": math.sqrt(fit.within_var) if np.isfinite(fit.within_var) else math.nan,
                             "no_change": no_change,
                             "no_change_inside": bool(predicted.low <= no_change <= predicted.high)})
    return rows


def paper_size_table(study, every) -> pd.DataFrame:
    """LNS minus Pre-LN held-out loss at P1's sizes (:data:`P1_SIZES`) by each law of a resolved study along width
    and depth, fitted on ``every`` model of it (:func:`~simulate.study.read.models.candidate_models`), per line, at
    its longest training (module docstring): one row per line, law and size (:data:`PAPER_SIZE_COLUMNS`; ``p1`` P1's
    gain at that size, ``answer`` the size verdict); empty for a study without both axes or without both schemes,
    and without a law where fewer than :data:`MIN_LAW_WIDTHS` widths are trained."""
    claim = CLAIMS["p1-lns-loss"]
    if not {"width", "depth"} <= set(study.axes) or not set(claim.schemes) <= set(study.schemes()):
        return pd.DataFrame(columns=list(PAPER_SIZE_COLUMNS))
    data, _, _ = law_data(study, every)
    losses = [d for d in data if d.subject.statistic == claim.statistic and d.subject.schemes == claim.schemes]
    full = max((d.steps for d in losses), default=None)
    p1 = {"LLaMA-130M": claim.reference.level, "LLaMA-1B": claim.reference.level + claim.reference.change}
    rows = []
    for data_part in (d for d in losses if d.steps == full):
        samples = data_part.samples
        for law in WIDTH_LAWS:
            fit = fit_width_law(samples["depth"], samples["width"], samples["value"], law, study.inference.confidence)
            if fit is None or len(set(fit.widths)) < MIN_LAW_WIDTHS:
                continue
            for name, depth, width in P1_SIZES:
                predicted = fit.predict(depth, width, models=1)
                rows.append({"line": data_part.line, "steps": data_part.steps, "law": law, "size": name,
                             "depth": depth, "width": width, "estimate": predicted.estimate, "low": predicted.low,
                             "high": predicted.high, "confidence": predicted.confidence, "p1": p1[name],
                             "answer": size_verdict(predicted, p1[name]), "width_term": fit.width_term.estimate,
                             "width_term_low": fit.width_term.low, "width_term_high": fit.width_term.high,
                             "fitted_widths": " ".join(f"{w:g}" for w in sorted(set(fit.widths))),
                             "fitted_models": fit.models})
    return pd.DataFrame(rows, columns=list(PAPER_SIZE_COLUMNS))
