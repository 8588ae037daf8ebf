"""Theory beside a measurement: z-scores and a verdict per curve (the public comparison API).

:func:`check` runs (or loads from the cache) the simulator for a Setting, puts the result
beside :func:`theory.predict` and returns the verdict table; :func:`compare` does the same
for a measurement already in hand. ``verify``, ``paper_figs`` and the notebooks use these.
The verdict follows the ``kind`` of the predicted curve, with rules fixed here, before
any number is seen:

``holds``
    ``kind == "exact"`` (or ``"approx"``) and ``|z| <= 4`` at every layer, where
    ``z = (measured - predicted) / sem`` and ``sem`` is the Monte-Carlo standard error.
``holds as a bound``
    ``kind`` is ``"upper"`` (``"lower"``) and the measurement is nowhere above
    (below) the bound by more than 4 sem; ``tightness = measured / bound`` at the last
    layer (1 = tight, far from 1 = loose).
``holds approximately``
    ``kind == "approx"``, ``|z| > 4`` somewhere but the relative error stays within
    :data:`APPROX_REL_TOLERANCE` at every layer.
``violated``
    Anything else: the measurement differs from the predicted curve by more than 4 sem
    somewhere (and, for ``approx``, by more than the relative tolerance).
``no prediction``
    ``theory.predict`` has no curve of this lemma for the setting.
``not measured``
    The simulator gave no layer to compare (a numerical blow-up before block 1).

The reported ``predicted``, ``measured``, ``ci_low``, ``ci_high``, ``rel_error`` and
``z`` are those of the last layer compared; the comment names the worst layer with its
``|z|`` beside the last layer's ``z``. :func:`describe_curve` says what curve was compared:
a paper's recursion is evaluated with constants the paper does not state (``c = 1`` in P1
Lemma 3.2), so "violated" there says that the curve with that constant misses the
measurement, not that the paper's growth class is wrong. :func:`verdict_sentence` puts
both in one line for a reader.

>>> describe_setting(Setting(block="linear", width=32))
'block=linear width=32'
>>> str(classify("exact", z=[0.5, -3.9], rel=[0.01, 0.02], excess=[0.0, 0.0]))
'holds'
>>> describe_curve("p1-lemma-3.2", "approx")
"P1's recursion sigma_{l+1}^2 = sigma_l^2 (1 + c/sigma_l) with c = 1 (a constant the paper does not state)"
"""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import pandas as pd

from simulate.cache import cached_simulate
from simulate.engine import NumericalBlowUp
from theory.accuracy import measured_bound
from theory.meanfield.finite_width import resolve_width_law
from theory.setting import Setting
from theory.verdicts import Verdict

__all__ = ["COLUMNS", "Z_LIMIT", "APPROX_REL_TOLERANCE", "CURVE_WORDS", "VERDICT_WORDS", "describe_setting",
           "describe_curve", "verdict_sentence", "run_monte_carlo", "classify", "layer_errors", "compare", "verdict_row", "check"]

COLUMNS = ["id", "setting", "stage", "metric", "kind", "layer", "predicted", "measured", "ci_low", "ci_high", "rel_error", "z",
           "verdict", "tightness", "comment"]
Z_LIMIT = 4.0
APPROX_REL_TOLERANCE = 0.10

# What theory.predict draws for a paper statement, in a reader's words (the constants it has to choose).
CURVE_WORDS = {
    "p1-lemma-3.2": "P1's recursion sigma_{l+1}^2 = sigma_l^2 (1 + c/sigma_l) with c = 1 "
                    "(a constant the paper does not state)",
    "p1-lns": "P1's LNS recursion sigma_{l+1}^2 = sigma_l^2 (1 + c/(sqrt(l) sigma_l)) with c = 1 "
              "(a constant the paper does not state)",
    "p1-ln-jacobian": "P1's LayerNorm Jacobian ~ I/sigma (its rank-one projection dropped), read as ||J_l - I||",
    "p1-thm-3.3": "P1 Theorem 3.3's identity limit",
    "p2-thm-1": "P2 Theorem 1's bound (1 + sqrt(alpha rho))^(2L)",
    "p2-thm-2": "P2 Theorem 2's per-branch bound",
    "p2-thm-3": "P2 Theorem 3's weight-decay bound",
    "p2-thm-4": "P2 Theorem 4's uniform attention sigma_V^2/T",
    "p2-thm-5": "P2 Theorem 5's 1/k of top-k gates",
    "p2-gqa": "P2's GQA variance sigma_V^2/(G T)",
}
# What each verdict says about the compared curve, for a reader (``verdict_sentence``).
VERDICT_WORDS = {
    Verdict.HOLDS: f"agrees with the measurement within {Z_LIMIT:g} sem at every layer",
    Verdict.HOLDS_AS_BOUND: f"is never crossed by the measurement by more than {Z_LIMIT:g} sem",
    Verdict.HOLDS_APPROXIMATELY: f"is within {APPROX_REL_TOLERANCE:.0%} of the measurement at every layer "
                           f"(not within {Z_LIMIT:g} sem)",
    Verdict.VIOLATED: "differs from the measurement",
    Verdict.NO_PREDICTION: "is not predicted for this setting",
    Verdict.NOT_MEASURED: "has no measured layer to compare",
}
_KIND_WORDS = {"exact": "exact law", "approx": "approximate law", "upper": "upper bound", "lower": "lower bound"}


def describe_curve(lemma_id: str, kind: str) -> str:
    """What the compared curve of ``lemma_id`` (of this ``kind``) is, in words: the thing a verdict judges.

    >>> describe_curve("preln-init", "exact")
    'the exact law preln-init (derived here)'
    >>> print(describe_curve("p1-lemma-3.2", "growth"))
    the growth class P1 Lemma 3.2 states (fitted to the measured curve, no constant assumed)
    """
    import theory

    lemma = theory.LEMMAS.get(lemma_id)
    if kind == "growth":
        return f"the growth class {lemma.source if lemma else lemma_id} states (fitted to the measured curve, no " \
               "constant assumed)"
    if kind not in _KIND_WORDS:
        return f"{lemma_id} ({kind})"
    if lemma_id in CURVE_WORDS:
        return CURVE_WORDS[lemma_id]
    origin = "derived here" if lemma is not None and lemma.kind != "paper" else (lemma.source if lemma else "")
    return f"the {_KIND_WORDS[kind]} {lemma_id}" + (f" ({origin})" if origin else "")


def verdict_sentence(row: dict) -> str:
    """One line for a reader: what was compared, what the verdict says, and the numbers behind it.

    >>> print(verdict_sentence({"id": "preln-init", "kind": "exact", "verdict": Verdict.HOLDS, "comment": "z 1"}))
    the exact law preln-init (derived here) agrees with the measurement within 4 sem at every layer (z 1)
    """
    verdict = Verdict.parse(row["verdict"])  # a member, or its word read back from verify.csv
    words = VERDICT_WORDS.get(verdict, str(verdict))
    return f"{describe_curve(row['id'], row['kind'])} {words} ({row['comment']})"


def describe_setting(setting: Setting) -> str:
    """The fields of ``setting`` that differ from the default (or its preset), as ``k=v`` words."""
    reference = Setting.preset(setting.preset) if setting.preset else Setting()
    words = [f"preset={setting.preset}"] if setting.preset else []
    for f in fields(Setting):
        value = getattr(setting, f.name)
        if f.name != "preset" and value != getattr(reference, f.name):
            words.append(f"{f.name}={value:g}" if isinstance(value, float) else f"{f.name}={value}")
    return " ".join(words) or "default"


def run_monte_carlo(setting: Setting, *, samples: int, metrics=("var",), seed: int = 0):
    """Simulate through the cache; a numerical blow-up returns what was measured before it.

    Returns
    -------
    (DataFrame, int or None)
        The simulator's table and the layer of the blow-up (None when there was none).
    """
    try:
        table = cached_simulate(setting, samples=samples, seed=seed, metrics=tuple(sorted(set(metrics))))
        return table, None
    except NumericalBlowUp as blowup:
        return blowup.table, int(blowup.layer)


def classify(kind: str, *, z, rel, excess) -> Verdict:
    """Verdict of one curve from per-layer ``z``, relative errors and signed excess in sem.

    ``excess`` is ``(measured - bound)/sem`` for an upper bound and ``(bound - measured)/sem``
    for a lower one (positive = on the wrong side).
    """
    z, rel = np.abs(np.asarray(z, dtype=float)), np.abs(np.asarray(rel, dtype=float))
    excess = np.asarray(excess, dtype=float)
    if kind in ("upper", "lower"):
        return Verdict.HOLDS_AS_BOUND if np.all(excess <= Z_LIMIT) else Verdict.VIOLATED
    if np.all(z <= Z_LIMIT):
        return Verdict.HOLDS
    if kind == "approx" and np.all(rel <= APPROX_REL_TOLERANCE):
        return Verdict.HOLDS_APPROXIMATELY
    return Verdict.VIOLATED


def _z_scores(measured, predicted, sem):
    diff = measured - predicted
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sem > 0, diff / sem, np.where(np.isclose(measured, predicted, rtol=1e-9, atol=0), 0.0,
                                                   np.sign(diff) * np.inf))
        rel = np.abs(diff) / np.abs(predicted)
    return z, rel


def layer_errors(measured: pd.DataFrame, curve: pd.DataFrame) -> pd.DataFrame:
    """One predicted curve beside the measurement, layer by layer (layers >= 1 where both are finite).

    Parameters
    ----------
    measured : DataFrame
        Simulator table (``layer, metric, mean, sem, ci_low, ci_high, n``).
    curve : DataFrame
        Rows of ``theory.predict`` (``layer, metric, law, kind, value``).

    Returns
    -------
    DataFrame
        ``curve``'s columns and the measurement's, sorted by layer, with ``z = (mean - value)/sem``
        (0 where both agree to 1e-9 with ``sem = 0``, else +-inf) and ``rel_error = |mean - value|/|value|``.

    >>> measured = pd.DataFrame({"layer": [0, 1, 2], "metric": "var", "mean": [1.0, 2.1, 2.8], "sem": 0.05})
    >>> curve = pd.DataFrame({"layer": [0, 1, 2], "metric": "var", "kind": "exact", "value": [1.0, 2.0, 3.0]})
    >>> layer_errors(measured, curve)[["layer", "z", "rel_error"]].round(3).values.tolist()
    [[1.0, 2.0, 0.05], [2.0, -4.0, 0.067]]
    """
    both = curve.merge(measured[measured["metric"].isin(curve["metric"].unique())], on=["layer", "metric"],
                       how="inner")
    both = both[(both["layer"] >= 1) & np.isfinite(both["value"]) & np.isfinite(both["mean"])]
    both = both.sort_values("layer").reset_index(drop=True)
    z, rel = _z_scores(both["mean"].to_numpy(float), both["value"].to_numpy(float), both["sem"].to_numpy(float))
    return both.assign(z=z, rel_error=rel)


def compare(lemma_id: str, setting_label: str, measured: pd.DataFrame, predicted: pd.DataFrame,
            blowup_layer: int | None = None, block: str | None = None, scheme: str | None = None,
            width_law: str | None = None) -> list[dict]:
    """Rows of the verify table for one lemma and one setting.

    Parameters
    ----------
    measured : DataFrame
        Simulator table (``layer, metric, mean, sem, ci_low, ci_high, n``).
    predicted : DataFrame
        Rows of ``theory.predict`` for this lemma (``layer, metric, law, kind, value``).
    block, scheme, width_law : str, optional
        The setting's block (``llama`` for the preset), scheme and the width law of ``predicted``
        (``mean-field`` or ``finite-width``): the comment of an approximate curve then gives its errors measured
        by the shipped accuracy map there (:func:`theory.accuracy.measured_bound`).
    """
    rows = []
    for (metric, kind), curve in predicted.groupby(["metric", "kind"], sort=True, observed=True):
        if not (curve["layer"] >= 1).any():
            continue  # a value for the input only: nothing to check
        both = layer_errors(measured, curve)
        if both.empty:
            rows.append(verdict_row(lemma_id, setting_label, metric, kind=kind, verdict=Verdict.NOT_MEASURED,
                             comment=f"no layer >= 1 both predicted and measured for {metric} ({kind})"
                                     + (f"; numerical blow-up at layer {blowup_layer}" if blowup_layer else "")))
            continue
        z, rel = both["z"].to_numpy(), both["rel_error"].to_numpy()
        excess = z if kind == "upper" else -z
        verdict = classify(kind, z=z, rel=rel, excess=excess)
        worst = int(np.argmax(excess if kind in ("upper", "lower") else np.abs(z)))
        last = both.iloc[-1]
        tightness = float(last["mean"] / last["value"]) if kind in ("upper", "lower") and last["value"] else math.nan
        comment = _comment(kind, verdict, both, z, excess, worst, tightness, blowup_layer)
        if kind == "approx" and block is not None and (bound := measured_bound(lemma_id, metric, block, scheme,
                                                                               width_law)):
            comment += f"; {bound.sentence()}"
        rows.append(verdict_row(lemma_id, setting_label, metric, kind=kind, layer=int(last["layer"]),
                         predicted=float(last["value"]), measured=float(last["mean"]), ci_low=float(last["ci_low"]),
                         ci_high=float(last["ci_high"]), rel_error=float(rel[-1]), z=float(z[-1]), verdict=verdict,
                         tightness=tightness, comment=comment))
    return rows


def _comment(kind, verdict, both, z, excess, worst, tightness, blowup_layer) -> str:
    n_layers = len(both)
    worst_layer = int(both["layer"].iloc[worst])
    if kind in ("upper", "lower"):
        ratios = both["mean"].to_numpy(float) / both["value"].to_numpy(float)
        side = "above" if kind == "upper" else "below"
        text = (f"{kind} bound over {n_layers} layers; measured/bound {np.nanmin(ratios):.3g}.."
                f"{np.nanmax(ratios):.3g}, {tightness:.3g} at the last layer")
        if verdict is Verdict.VIOLATED:
            text += f"; measured {excess[worst]:.1f} sem {side} it at layer {worst_layer}"
    else:
        text = (f"{_KIND_WORDS.get(kind, kind)} over {n_layers} layers; worst layer {worst_layer}: "
                f"|z| = {abs(z[worst]):.2f}; last layer: z = {z[-1]:.2f}")
        if verdict is not Verdict.HOLDS:
            rel = np.abs(both["mean"].to_numpy(float) - both["value"].to_numpy(float)) / np.abs(both["value"])
            text += f", max rel. error {np.nanmax(rel):.3g}"
    if blowup_layer is not None:
        text += f"; numerical blow-up at layer {blowup_layer}, compared below it"
    return text


def verdict_row(lemma_id, setting_label, metric, **values) -> dict:
    """One row of the verdict table: :data:`COLUMNS` as NaN/empty, then ``values``.

    ``stage`` is the training step a trained claim is judged at (0: the runs' initialisation), -1 for a
    random-init lemma (no training).
    """
    row = dict.fromkeys(COLUMNS, math.nan)
    row.update(id=lemma_id, setting=setting_label, stage=-1, metric=metric, kind="-", layer=-1, verdict="",
               comment="")
    row.update(values)
    return row


def check(setting: Setting, lemma_ids, *, samples: int, seed: int = 0, width_law: str = "auto") -> list[dict]:
    """Verdict rows of ``lemma_ids`` in ``setting``: simulate (through the cache), predict, compare.

    Parameters
    ----------
    setting : Setting
    lemma_ids : iterable of str
        Ids of :data:`theory.LEMMAS`; each is compared on the curves ``theory.predict`` gives it.
    samples, seed : int
        Monte-Carlo samples and seed of the simulation.
    width_law : str
        The law of the token covariance ``theory.predict`` uses (``mean-field``, ``finite-width``, ``auto``).

    Returns
    -------
    list of dict
        Rows with the keys :data:`COLUMNS`.
    """
    import theory


    label = describe_setting(setting)
    prediction = theory.predict(setting, width_law=width_law)
    curves = {i: prediction[prediction["law"] == i] for i in lemma_ids}
    metrics = sorted({m for curve in curves.values() for m in curve["metric"].unique()})
    measured, blowup = run_monte_carlo(setting, samples=samples, seed=seed, metrics=metrics or ("var",))
    rows = []
    for lemma_id, curve in curves.items():
        if curve.empty:
            rows.append(verdict_row(lemma_id, label, "-", verdict=Verdict.NO_PREDICTION,
                             comment="theory.predict gives no curve for this law in this setting"))
        else:
            rows += compare(lemma_id, label, measured, curve, blowup, block=setting.preset or setting.block,
                            scheme=setting.scheme, width_law=resolve_width_law(width_law, setting.width,
                                                                               setting.tokens))
    return rows
