"""Theory meets training: laws for a trained model's variance profile, and the test of their extrapolation.

Block ``l`` of a trained model moves the stream's mean square by the bridge recursion
``sigma_l^2 = (sigma_{l-1} + a_l)^2 + b_l^2`` (:func:`theory.meanfield.bridge.bridge_profile`,
exact for the measured ``a_l``, ``b_l``; docs/trained.md). A *law* for ``a`` and ``b`` turns
the recursion into a prediction of the whole profile of a model that was never trained. The
law fitted here (derived here, docs/studies.md#extrapolation), by least squares over every
block ``l >= 2`` of the fitting models at their last step:

    a_l / sigma_{l-1}      = x . alpha        (the aligned fraction; it may be negative)
    log(b_l / sigma_{l-1}) = x . beta         (the rest, relative to the stream)
    x = [1, log l, l/L, log sigma_{l-1}, log d, log steps]

and for the first block, which lifts the embedding's small variance in one step,
``log sigma_1^2 = [1, log d, log steps] . gamma``. A regressor that does not vary over the
fitting models (``log d`` in a depth study alone) is left out, and the prediction holds it
at its fitted value. A profile is predicted by running the recursion from ``sigma_1^2``
with the law's ``a`` and ``b`` at each block.

The second law, the **growth law** (:class:`GrowthLaw`), skips the bridge: it fits the
log growth factor of each block ``l >= 2`` at its relative depth,

    log(var_l / var_{l-1}) = x . theta,    x = [1, l/L, log d, log steps]

with the same first-block law, and predicts ``log var_l`` as ``log var_1`` plus the sum of the
factors. Nothing it predicts feeds back into its regressors (the bridge law's ``log sigma``
does), and it says that blocks at the same relative depth grow the stream alike at every
depth (P1 compares layers so, Fig. 1). It was added after the bridge law had missed L=32 in
the atlas: its error at L=32 was known when it was written, its error at L=64 was not
(docs/studies.md#extrapolation). At a fixed recipe its ``log var_L`` is linear in ``L``: it
predicts exponential growth by construction.

The third law, the **increment law** (:class:`IncrementLaw`), does not force the growth class:
it fits the log of each block's variance increment,

    log(var_l - var_{l-1}) = x . psi,    x = [1, l/L, log sigma_{l-1}, log d, log steps]

so that ``var_l - var_{l-1} ~ sigma_{l-1}^k`` with ``k`` the fitted coefficient of
``log sigma``: ``k = 2`` is exponential growth, ``k = 1`` P1 Lemma 3.2's
``sigma^2 (1 + c/sigma)``, ``k = 0`` linear growth (the Pre-LN law at init); the data choose.
Blocks whose variance did not grow have no log increment: they are left out of the fit and
counted (``dropped``).

The **extrapolation test** fits the law on the shallower models and predicts the profile
of the deepest ones without using them: per held-out model, the error of
``log var_L`` (predicted minus measured, the last layer) and the mean over layers of
``|log(predicted/measured)|``, with a t interval over the held-out seeds; the same errors on
the fitted models of the deepest fitted depth say how well the law fits its own data. The
test's verdict needs the law's own uncertainty: the law is refitted on the study's
``bootstrap`` resamples of the fitting models (:class:`~simulate.claims.judgement.Inference`;
whole models, with every block, drawn with replacement), each refit predicts the held-out
models' mean ``log var_L``, and the prediction interval of the held-out mean (at the study's
confidence, 95 % by default) is ``+-z sqrt(var_bootstrap + sem^2)`` about
the law's prediction (the law's spread and the held-out seeds' spread). Each training length of
the held-out models is a blind test of its own (:class:`ExtrapolationTest`; pooled, a law that
misses at one length can pass on the average). The law **passes** a test when the measured mean
lies inside the interval (``passes, uninformative`` when the interval is wider than
:data:`INFORMATIVE`) and **fails** otherwise; only a law that passed every test informatively is
run at the papers' sizes, and only at its own width unless it has a width term
(:func:`fitted_range` says what it was fitted on). The bridge
predicts the mean square; ``var`` differs from it by the token-mean term (docs/trained.md),
which is part of the error reported. At the papers' sizes (:func:`paper_predictions`) the
profile's growth class is that of :func:`simulate.claims.growth.growth_summary`, with
the fitting models' mean embedding variance as layer 0.

>>> import numpy as np
>>> law = BridgeLaw(("1",), np.array([0.0]), np.array([np.log(0.5)]), ("1",), np.array([0.0]), {}, 0.01)
>>> predict_profile(law, depth=3).round(4).tolist()  # a = 0, b = sigma/2: x 1.25 per block after sigma_1^2 = 1
[1.0, 1.25, 1.5625]
>>> growth = GrowthLaw(("1",), np.array([np.log(1.25)]), ("1",), np.array([0.0]), {}, 0.01)
>>> growth.profile(depth=3).round(4).tolist()  # the same profile: x 1.25 per block
[1.0, 1.25, 1.5625]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulate.claims import (BlindTestJudgement, Inference, Interval, blind_test_verdict, describe_growth,
                             growth_summary, t_interval)
from simulate.study.read.point_table import last_step_layers
from theory.meanfield.bridge import bridge_profile
from theory.verdicts import PointStatus

__all__ = ["BLOCK_TERMS", "GROWTH_TERMS", "INCREMENT_TERMS", "FIRST_TERMS", "PAPER_SIZES", "INFORMATIVE",
           "where", "BridgeLaw", "GrowthLaw", "IncrementLaw", "LawError", "ExtrapolationTest", "bridge_samples",
           "fit_law", "fit_growth_law", "fit_increment_law", "formula", "predict_profile", "profile_errors",
           "fitted_range", "extrapolation_test", "error_intervals", "paper_predictions"]

BLOCK_TERMS = ("1", "log l", "l/L", "log sigma", "log d", "log steps")
GROWTH_TERMS = ("1", "l/L", "log d", "log steps")
INCREMENT_TERMS = ("1", "l/L", "log sigma", "log d", "log steps")
FIRST_TERMS = ("1", "log d", "log steps")
# The papers' sizes (P1: LLaMA configs of the official code, 130M trained 20k steps; the steps of the
# 1B and 7B runs are this project's reading, stated in docs/studies.md).
PAPER_SIZES = (("LLaMA-130M", 768, 12, 20_000), ("LLaMA-1B", 2048, 24, 100_000), ("7B", 4096, 32, 150_000))
INFORMATIVE = math.log(10.0)  # a prediction interval wider than +-log 10 on log var_L says nothing: no extrapolation


def where(field: str, value) -> str:
    """A held-out slice in the papers' symbols: ``L=64``, ``d=256``, ``steps=4000``."""
    symbol = {"depth": "L", "width": "d", "steps": "steps"}[field]
    return f"{symbol}={value:g}"


def formula(terms, values) -> str:
    """``0.1 1 + -0.2 l/L``: a fitted linear form, for a reader.

    >>> formula(("1", "l/L"), (0.1, -0.2))
    '0.1 1 + -0.2 l/L'
    """
    return " + ".join(f"{v:.3g} {t}" for t, v in zip(terms, values))


@dataclass(frozen=True)
class BridgeLaw:
    """Fitted coefficients of ``a/sigma`` (``alpha``), ``log(b/sigma)`` (``beta``) over ``terms`` and of
    ``log sigma_1^2`` (``gamma``) over ``first_terms``; ``fixed`` holds the value of a left-out regressor;
    ``embedding_var`` is the mean measured ``var_0`` (the profile's layer 0 in a growth fit)."""

    terms: tuple[str, ...]
    alpha: np.ndarray
    beta: np.ndarray
    first_terms: tuple[str, ...]
    gamma: np.ndarray
    fixed: dict
    embedding_var: float = math.nan

    def profile(self, depth: int, width: float | None = None, steps: float | None = None) -> np.ndarray:
        """:func:`predict_profile` of this law."""
        return predict_profile(self, depth, width, steps)

    def coefficients(self) -> tuple:
        """``(name, terms, values)`` of each fitted block law (the report's rows)."""
        return ("alpha", self.terms, self.alpha), ("beta", self.terms, self.beta)

    def describe(self) -> str:
        return f"a/sigma = {formula(self.terms, self.alpha)}; log(b/sigma) = {formula(self.terms, self.beta)}"


@dataclass(frozen=True)
class GrowthLaw:
    """Fitted coefficients of ``log(var_l/var_{l-1})`` (``theta``) over ``terms`` and of ``log sigma_1^2``
    (``gamma``) over ``first_terms`` (module docstring); ``fixed`` and ``embedding_var`` as in
    :class:`BridgeLaw`."""

    terms: tuple[str, ...]
    theta: np.ndarray
    first_terms: tuple[str, ...]
    gamma: np.ndarray
    fixed: dict
    embedding_var: float = math.nan

    def profile(self, depth: int, width: float | None = None, steps: float | None = None) -> np.ndarray:
        """Predicted ``var`` after blocks ``1..L`` (``(L,)``): ``var_1`` from the first block's law (fitted to
        ``var``), then the summed log factors."""
        first = _regressors(self, self.first_terms, 1, depth, 1.0, width, steps) @ self.gamma
        factors = [_regressors(self, self.terms, layer, depth, 1.0, width, steps) @ self.theta
                   for layer in range(2, depth + 1)]  # (L-1,) log growth factors of blocks 2..L
        with np.errstate(over="ignore"):
            return np.exp(first + np.concatenate([[0.0], np.cumsum(factors)]))  # (L,)

    def coefficients(self) -> tuple:
        """``(name, terms, values)`` of the fitted block law (the report's rows)."""
        return (("theta", self.terms, self.theta),)

    def describe(self) -> str:
        return f"log(var_l/var_(l-1)) = {formula(self.terms, self.theta)}"


@dataclass(frozen=True)
class IncrementLaw:
    """Fitted coefficients of ``log(var_l - var_{l-1})`` (``psi``) over ``terms`` and of ``log sigma_1^2``
    (``gamma``) over ``first_terms`` (module docstring); ``dropped`` of ``blocks`` blocks ``l >= 2`` did not
    grow and are not in the fit; ``fixed`` and ``embedding_var`` as in :class:`BridgeLaw`."""

    terms: tuple[str, ...]
    psi: np.ndarray
    first_terms: tuple[str, ...]
    gamma: np.ndarray
    fixed: dict
    dropped: int
    blocks: int
    embedding_var: float = math.nan

    def profile(self, depth: int, width: float | None = None, steps: float | None = None) -> np.ndarray:
        """Predicted ``var`` after blocks ``1..L`` (``(L,)``): ``var_1`` from the first block's law, then each
        block adds its increment at the stream's variance so far (inf from where it leaves float64)."""
        var = float(np.exp(_regressors(self, self.first_terms, 1, depth, 1.0, width, steps) @ self.gamma))
        profile = [var]
        with np.errstate(over="ignore"):
            for layer in range(2, depth + 1):
                if math.isfinite(var):
                    x = _regressors(self, self.terms, layer, depth, math.sqrt(var), width, steps)
                    var += math.exp(min(float(x @ self.psi), 700.0))  # the bridge's cap: math.exp(710) raises
                profile.append(var)
        return np.array(profile)  # (L,)

    def coefficients(self) -> tuple:
        """``(name, terms, values)`` of the fitted block law (the report's rows)."""
        return (("psi", self.terms, self.psi),)

    def describe(self) -> str:
        return (f"log(var_l - var_(l-1)) = {formula(self.terms, self.psi)} ({self.dropped} of {self.blocks} blocks "
                "l >= 2 did not grow and are left out)")


def bridge_samples(models) -> pd.DataFrame:
    """One row per block ``l >= 1`` of each ok model at its last step: scheme, seed, depth, width, steps,
    ``layer``, ``sigma_in`` (``sqrt var_{l-1}``), ``a``, ``b`` and the measured ``var`` after the block."""
    rows = []
    for model in models:
        if model.status is not PointStatus.OK:
            continue
        wide = last_step_layers(model.table)  # (L+1, metrics)
        var = wide["var"].to_numpy(float)  # (L+1,)
        setting = model.point.setting
        for layer in range(1, setting.depth + 1):
            rows.append({"scheme": setting.scheme, "seed": model.seed, "depth": setting.depth,
                         "width": setting.width, "steps": model.point.options["steps"], "layer": layer,
                         "sigma_in": math.sqrt(var[layer - 1]), "a": wide.at[layer, "align_a"],
                         "b": wide.at[layer, "align_b"], "var": var[layer], "var_in": var[layer - 1]})
    return pd.DataFrame(rows)


def _design(frame: pd.DataFrame, terms) -> np.ndarray:
    columns = {"1": np.ones(len(frame)), "log l": np.log(frame["layer"]), "l/L": frame["layer"] / frame["depth"],
               "log sigma": np.log(frame["sigma_in"]),
               "log d": np.log(frame["width"]), "log steps": np.log(frame["steps"])}
    return np.stack([np.asarray(columns[t], dtype=float) for t in terms], axis=1)  # (n, terms)


def _varying(frame: pd.DataFrame, terms) -> tuple[tuple[str, ...], dict]:
    source = {"log d": "width", "log steps": "steps"}
    kept = tuple(t for t in terms if t not in source or frame[source[t]].nunique() > 1)
    fixed = {t: float(np.log(frame[source[t]]).mean()) for t in terms if t in source and t not in kept}
    return kept, fixed


class LawError(ValueError):
    """The fitting models cannot determine the law's regressors (too few rows, or a design without full rank)."""


def _fit_design(frame: pd.DataFrame, terms, what: str) -> np.ndarray:
    """The design of ``terms`` over ``frame``'s rows (``(n, terms)``); :class:`LawError` saying why it cannot fit."""
    design = _design(frame, terms)  # (n, terms)
    rank = int(np.linalg.matrix_rank(design)) if len(design) else 0
    if design.shape[0] > design.shape[1] and rank == design.shape[1]:
        return design
    models = frame[["depth", "width", "steps", "seed"]].drop_duplicates()
    depths = ", ".join(str(d) for d in sorted(models["depth"].unique())) or "none"
    raise LawError(f"{what}: {len(models)} fitting models (depths {depths}) give {design.shape[0]} rows for the "
                   f"{len(terms)} regressors {', '.join(terms)}, of rank {rank}: the law needs more rows than "
                   "regressors and regressors that vary independently over the fitting models")


def _first_block_law(samples: pd.DataFrame) -> tuple[tuple[str, ...], np.ndarray, dict, float]:
    """(terms, gamma, left-out regressors, mean embedding variance) of ``log sigma_1^2`` (module docstring)."""
    first = samples[samples["layer"] == 1]
    terms, fixed = _varying(first, FIRST_TERMS)
    design = _fit_design(first, terms, "the first block")  # (models, terms)
    gamma = np.linalg.lstsq(design, np.log(first["var"]).to_numpy(float), rcond=None)[0]
    return terms, gamma, fixed, float(first["var_in"].mean())


def fit_law(samples: pd.DataFrame) -> BridgeLaw:
    """Least-squares :class:`BridgeLaw` of one scheme's samples (module docstring); :class:`LawError` when
    the fitting models are too few for its regressors."""
    blocks = samples[(samples["layer"] >= 2) & (samples["b"] > 0) & (samples["sigma_in"] > 0)]
    terms, fixed = _varying(blocks, BLOCK_TERMS)
    design = _fit_design(blocks, terms, "blocks l >= 2")  # (n, terms)
    alpha = np.linalg.lstsq(design, (blocks["a"] / blocks["sigma_in"]).to_numpy(float), rcond=None)[0]
    beta = np.linalg.lstsq(design, np.log(blocks["b"] / blocks["sigma_in"]).to_numpy(float), rcond=None)[0]
    first_terms, gamma, first_fixed, embedding_var = _first_block_law(samples)
    return BridgeLaw(terms, alpha, beta, first_terms, gamma, {**fixed, **first_fixed}, embedding_var)


def fit_growth_law(samples: pd.DataFrame) -> GrowthLaw:
    """Least-squares :class:`GrowthLaw` of one scheme's samples (module docstring); :class:`LawError` as
    :func:`fit_law`."""
    blocks = samples[(samples["layer"] >= 2) & (samples["var"] > 0) & (samples["var_in"] > 0)]
    terms, fixed = _varying(blocks, GROWTH_TERMS)
    design = _fit_design(blocks, terms, "blocks l >= 2")  # (n, terms)
    theta = np.linalg.lstsq(design, np.log(blocks["var"] / blocks["var_in"]).to_numpy(float), rcond=None)[0]
    first_terms, gamma, first_fixed, embedding_var = _first_block_law(samples)
    return GrowthLaw(terms, theta, first_terms, gamma, {**fixed, **first_fixed}, embedding_var)


def fit_increment_law(samples: pd.DataFrame) -> IncrementLaw:
    """Least-squares :class:`IncrementLaw` of one scheme's samples over the blocks ``l >= 2`` whose variance grew
    (module docstring); :class:`LawError` as :func:`fit_law`."""
    later = samples[(samples["layer"] >= 2) & (samples["var_in"] > 0)]
    blocks = later[later["var"] > later["var_in"]]
    terms, fixed = _varying(blocks, INCREMENT_TERMS)
    design = _fit_design(blocks, terms, "growing blocks l >= 2")  # (n, terms)
    psi = np.linalg.lstsq(design, np.log(blocks["var"] - blocks["var_in"]).to_numpy(float), rcond=None)[0]
    first_terms, gamma, first_fixed, embedding_var = _first_block_law(samples)
    return IncrementLaw(terms, psi, first_terms, gamma, {**fixed, **first_fixed}, len(later) - len(blocks),
                        len(later), embedding_var)


def _regressors(law: BridgeLaw | GrowthLaw | IncrementLaw, terms, layer: int, depth: int, sigma: float, width: float | None,
                steps: float | None):
    values = {"1": 1.0, "log l": math.log(layer), "l/L": layer / depth, "log sigma": math.log(sigma),
              "log d": law.fixed.get("log d") if width is None else math.log(width),
              "log steps": law.fixed.get("log steps") if steps is None else math.log(steps)}
    return np.array([values[t] for t in terms])


def predict_profile(law: BridgeLaw, depth: int, width: float | None = None, steps: float | None = None
                    ) -> np.ndarray:
    """Predicted mean squares after blocks ``1..L`` (``(L,)``): ``sigma_1^2`` from its law, then the recursion.

    ``width`` and ``steps`` None: at the fitted values (for a law that does not depend on them).
    """
    square = float(np.exp(_regressors(law, law.first_terms, 1, depth, 1.0, width, steps) @ law.gamma))
    profile = [square]
    with np.errstate(over="ignore", invalid="ignore"):
        for layer in range(2, depth + 1):
            if not math.isfinite(square) or square <= 0:  # the law left float64: so does the rest
                profile.append(math.inf)
                continue
            sigma = math.sqrt(square)
            x = _regressors(law, law.terms, layer, depth, sigma, width, steps)
            a = sigma * float(x @ law.alpha)
            b = sigma * math.exp(min(float(x @ law.beta), 700.0))
            square = float(bridge_profile(square, np.array([a]), np.array([b]))[-1])
            profile.append(square)
    return np.array(profile)  # (L,) blocks 1..L; inf from the block where the prediction leaves float64


def profile_errors(law: BridgeLaw | GrowthLaw | IncrementLaw, models: pd.DataFrame) -> pd.DataFrame:
    """Per model in ``models``: the law's profile against the measured one (``last_log_error``,
    ``mean_abs_log_error``, ``measured_last``, ``predicted_last``; module docstring)."""
    errors = []
    for (seed, depth, width, steps), rows in models.groupby(["seed", "depth", "width", "steps"]):
        rows = rows.sort_values("layer")
        predicted = law.profile(depth, width, steps)  # (L,)
        log_ratio = np.log(predicted / rows["var"].to_numpy(float))  # (L,)
        errors.append({"seed": seed, "depth": depth, "width": width, "steps": steps,
                       "last_log_error": float(log_ratio[-1]),
                       "mean_abs_log_error": float(np.mean(np.abs(log_ratio))),
                       "measured_last": float(rows["var"].iloc[-1]), "predicted_last": float(predicted[-1])})
    return pd.DataFrame(errors, columns=["seed", "depth", "width", "steps", "last_log_error", "mean_abs_log_error",
                                         "measured_last", "predicted_last"])


def _intervals(errors: pd.DataFrame, confidence: float) -> dict:
    return {name: t_interval(errors[name], confidence) if len(errors) else None
            for name in ("last_log_error", "mean_abs_log_error")}


def fitted_range(samples: pd.DataFrame) -> str:
    """``d = 64, L = 4..32, steps = 2000..4000``: the range of the models a law was fitted on, read from them."""
    def span(column: str) -> str:
        values = sorted(samples[column].unique())
        return f"{values[0]:g}" if len(values) == 1 else f"{values[0]:g}..{values[-1]:g}"

    return f"d = {span('width')}, L = {span('depth')}, steps = {span('steps')}"


def _bootstrap_predictions(fit, fitting: pd.DataFrame, slices: dict, inference: Inference,
                           seed: int = 0) -> dict:
    """``{slice: predictions}``: each bootstrap refit's predicted mean log var_L over each slice's held-out
    models (``slices``: ``{slice: [(depth, width, steps) per model]}``); whole models resampled with
    replacement; a resample whose design cannot be fitted is not counted."""
    models = [rows for _, rows in fitting.groupby(["scheme", "seed", "depth", "width", "steps"])]
    rng = np.random.default_rng(seed)
    out = {name: [] for name in slices}
    for _ in range(inference.bootstrap):
        chosen = rng.integers(len(models), size=len(models))  # (M,) whole models, with replacement
        try:
            law = fit(pd.concat([models[i] for i in chosen], ignore_index=True))
        except LawError:
            continue
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for name, targets in slices.items():
                last = [law.profile(int(depth), width, steps)[-1] for depth, width, steps in targets]  # (H,)
                out[name].append(float(np.mean(np.log(last))))
    return {name: np.array(values, dtype=float) for name, values in out.items()}


def _judge_slice(name: str, where: str, errors: pd.DataFrame, predictions: np.ndarray,
                 inference: Inference) -> BlindTestJudgement:
    """The blind test of one held-out slice (one training length): the mean error of its models with the law's
    prediction interval ``+-z sqrt(var_bootstrap + sem^2)`` about it (module docstring)."""
    finite = predictions[np.isfinite(predictions)]  # (B,)
    error = float(errors["last_log_error"].mean()) if len(errors) else math.nan
    sem2 = float(errors["last_log_error"].var(ddof=1) / len(errors)) if len(errors) > 1 else 0.0
    half = inference.z * math.sqrt(float(finite.var(ddof=1)) + sem2) if finite.size > 1 else math.nan
    reason = ("fewer than two held-out models" if len(errors) < 2 else
              f"{finite.size} of {inference.bootstrap} bootstrap refits succeeded (too few fitting models)"
              if finite.size < inference.bootstrap // 2 or not half > 0 else
              "the law's prediction is not finite" if not math.isfinite(error) else "")
    interval = Interval(error, error - half, error + half, inference.confidence,
                        f"prediction interval from {finite.size} bootstrap refits and the held-out seeds")
    verdict = None if reason else blind_test_verdict(error, half, half <= INFORMATIVE)
    return BlindTestJudgement(name, where, len(errors), interval, verdict, reason, int(finite.size))


@dataclass(frozen=True)
class ExtrapolationTest:
    """A law fitted on the models below ``held_out`` of ``field`` and its blind tests on those at it: the law,
    the held-out models' errors, the same errors on the fitted models at the largest fitted value, one
    :class:`~simulate.claims.judgement.BlindTestJudgement` per training length of the held-out models (never
    pooled: a law may pass at one length and fail at another), and the range it was fitted on."""

    law: object
    field: str
    held_out: float
    errors: pd.DataFrame
    fit_value: float
    fit_errors: pd.DataFrame
    blind: tuple
    fitted_range: str


def extrapolation_test(samples: pd.DataFrame, held_out: float, fit=fit_law, inference: Inference = Inference(),
                       field: str = "depth", name: str = "law") -> ExtrapolationTest:
    """Fit on the models whose ``field`` is below ``held_out`` and predict those at it, one blind test per
    training length (module docstring). ``fit``: :func:`fit_law`, :func:`fit_growth_law` or
    :func:`fit_increment_law`; ``name`` names the law in its judgements. :class:`LawError` where the fitting
    models cannot give a law."""
    fitting = samples[samples[field] < held_out]
    law = fit(fitting)
    fit_value = fitting[field].max()
    held = samples[samples[field] == held_out]
    errors = profile_errors(law, held)
    lengths = sorted(errors["steps"].unique()) if len(errors) else []
    slices = {steps: list(held[held["steps"] == steps].groupby(["seed", "depth", "width", "steps"]).size().index
                          .droplevel("seed")) for steps in lengths}
    predictions = _bootstrap_predictions(fit, fitting, slices, inference) if slices else {}
    blind = tuple(_judge_slice(name, where(field, held_out) + (f", steps={steps:g}" if field != "steps" else ""),
                               errors[errors["steps"] == steps], predictions[steps], inference) for steps in lengths)
    return ExtrapolationTest(law, field, held_out, errors, fit_value,
                             profile_errors(law, fitting[fitting[field] == fit_value]), blind, fitted_range(fitting))


def error_intervals(result: ExtrapolationTest, confidence: float) -> tuple[dict, dict]:
    """The t intervals over models of the held-out and of the fitted models' errors."""
    return _intervals(result.errors, confidence), _intervals(result.fit_errors, confidence)


def paper_predictions(law: BridgeLaw | GrowthLaw | IncrementLaw, sizes=PAPER_SIZES) -> pd.DataFrame:
    """Extrapolations at the papers' sizes: the predicted profile's growth class, exponent or rate."""
    rows = []
    for name, width, depth, steps in sizes:
        profile = law.profile(depth, width, steps)  # (L,)
        row = {"model": name, "width": width, "depth": depth, "steps": steps, "var_1": profile[0],
               "var_L": profile[-1]}
        if not np.isfinite(profile).all():
            first = int(np.argmax(~np.isfinite(profile))) + 1
            rows.append({**row, "growth_class": None, "exponent": math.nan, "rate": math.inf,
                         "description": f"the law's variance leaves float64 at block {first}"})
            continue
        summary = growth_summary(np.concatenate([[law.embedding_var], profile]))  # layers 0..L
        rows.append({**row, "growth_class": summary.label, "exponent": summary.exponent.estimate,
                     "rate": summary.rate.estimate, "description": describe_growth(summary)})
    return pd.DataFrame(rows)
