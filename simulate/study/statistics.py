"""The statistics of one trained model, read off its study point's long table (:mod:`simulate.study.point`).

Every number a study judges is a function of one model (one Setting, one seed); intervals
come one level up, over seeds (:mod:`simulate.study.trends`). Blocks are ``1..L``; the
*deep half* is blocks ``floor(L/2)+1..L`` and the *shallow half* the rest, as in ``verify
--trained`` (docs/scores.md). Profiles are the probe batch's ``var`` over layers ``0..L``
(``train_layers.csv``); the scores are those of the trained model (``scores.csv``).

==========================  ====================================================================
``val_loss``                held-out loss of the scores (64 sequences by default), nats/byte
``train_loss``              the last training-batch loss
``loss_slope``              how far from converged: the least-squares slope of the training loss
                            (logged at every step) over the last quarter of the steps, in nats
                            per 1000 steps (the fit smooths the batches' noise; 0: converged)
``var_last``                ``log var_L`` at the last step (P2 Fig. 2(a): last-layer variance)
``var_growth``              ``log(var_L / var_1)`` at the last step (verify's P2 statistic)
``growth_exponent``         ``p`` of ``var_l ~ c0 + c1 l^p`` at the last step
``growth_rate``             ``r`` of ``var_l ~ c0 + c1 e^(r l)`` at the last step
``growth_step``             ``q`` of the per-layer factor ``1 + c sigma^(-q)`` at the last step
``exponential_step_share``  the share of logged steps after step 0 at which the profile's growth
                            class is exponential (:func:`simulate.scores.growth_claims.growth_summary`)
``jac_dev_mean``            ``mean_l ||J_l - I||_F / sqrt(T d)``
``jac_dev_log_ratio``       ``log(jac_dev deep half / shallow half)``
``prune_deep``              deep-half mean pruning drop (nats)
``prune_deep_minus_shallow``  deep-half minus shallow-half mean pruning drop
``removable_share``         the share of blocks whose pruning drop is below
                            :data:`REMOVABLE_FRACTION` of the base loss
``angular_deep``            deep-half mean angular distance ``d(x_{l-1}, x_l)``, all tokens
``angular_deep_last``       the same, last token (P1's code)
``usefulness_log``          ``mean_l log(L_lin / L)`` (verify's P2 statistic)
``usefulness_fraction``     the share of blocks with ``L_lin / L > 1.1`` (P2's global score)
``causal_mean``             mean causal score over blocks ``1..L-1``
``permutation_mean``        mean permutation score over the blocks (each block: over its pairs)
==========================  ====================================================================

>>> import pandas as pd
>>> rows = [("layers", 2, l, "var", v) for l, v in enumerate([1.0, 2.0, 3.0, 4.0, 5.0])]
>>> rows += [("scores", 2, l, "prune", p) for l, p in enumerate([0.5, 0.3, 0.1, 0.001], 1)]
>>> rows += [("scores", 2, 0, "loss", 2.0)]
>>> table = pd.DataFrame(rows, columns=["table", "step", "layer", "name", "value"])
>>> stats = model_statistics(table, depth=4)
>>> round(stats["prune_deep_minus_shallow"], 4), stats["removable_share"], round(stats["var_growth"], 4)
(-0.3495, 0.25, 0.9163)
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from simulate.scores.growth_claims import growth_summary
from simulate.training.report import loss_slope

__all__ = ["REMOVABLE_FRACTION", "STATISTICS", "var_profiles", "block_values", "halves", "model_statistics"]

REMOVABLE_FRACTION = 0.01  # a block is removable when deleting it costs less than 1 % of the base loss
STATISTICS = ("val_loss", "train_loss", "loss_slope", "var_last", "var_growth", "growth_exponent", "growth_rate", "growth_step",
              "exponential_step_share", "jac_dev_mean", "jac_dev_log_ratio", "prune_deep",
              "prune_deep_minus_shallow", "removable_share", "angular_deep", "angular_deep_last", "usefulness_log",
              "usefulness_fraction", "causal_mean", "permutation_mean")


def var_profiles(table: pd.DataFrame, depth: int) -> dict[int, np.ndarray]:
    """``{step: var over layers 0..L}`` of every logged step (NaN where a layer is missing), steps in order."""
    rows = table[(table["table"] == "layers") & (table["name"] == "var")]
    return {int(step): group.set_index("layer")["value"].reindex(range(depth + 1)).to_numpy(float)  # (L+1,)
            for step, group in sorted(rows.groupby("step"))}


def block_values(table: pd.DataFrame, score: str, depth: int) -> np.ndarray:
    """A per-block score of the trained model over blocks ``1..L`` (NaN where missing), ``(L,)``."""
    rows = table[(table["table"] == "scores") & (table["name"] == score)]
    return rows.set_index("layer")["value"].reindex(range(1, depth + 1)).to_numpy(float)  # (L,)


def halves(values: np.ndarray) -> tuple[float, float]:
    """(mean over the shallow half, mean over the deep half) of a per-block array (NaN-aware)."""
    cut = len(values) // 2
    with np.errstate(all="ignore"):
        shallow = float(np.nanmean(values[:cut])) if np.isfinite(values[:cut]).any() else math.nan
        deep = float(np.nanmean(values[cut:])) if np.isfinite(values[cut:]).any() else math.nan
    return shallow, deep


def _model_score(table: pd.DataFrame, score: str) -> float:
    rows = table[(table["table"] == "scores") & (table["name"] == score) & (table["layer"] == 0)]["value"]
    return float(rows.iloc[0]) if len(rows) else math.nan


def _mean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan


def _log(value: float) -> float:
    return math.log(value) if value > 0 else math.nan


def _growth_statistics(profiles: dict[int, np.ndarray]) -> dict[str, float]:
    if not profiles:
        return dict.fromkeys(("var_last", "var_growth", "growth_exponent", "growth_rate", "growth_step",
                              "exponential_step_share"), math.nan)
    last = profiles[max(profiles)]
    summary = growth_summary(last)
    later = [growth_summary(var).label for step, var in profiles.items() if step > 0]
    return {"var_last": _log(last[-1]), "var_growth": _log(last[-1] / last[1]) if len(last) > 1 else math.nan,
            "growth_exponent": summary.exponent[0], "growth_rate": summary.rate[0], "growth_step": summary.step[0],
            "exponential_step_share": float(np.mean([label == "exponential" for label in later])) if later
            else math.nan}


def model_statistics(table: pd.DataFrame, depth: int) -> dict[str, float]:
    """Every statistic of :data:`STATISTICS` for one model (NaN where its table lacks what one needs)."""
    stats = _growth_statistics(var_profiles(table, depth))
    train = table[(table["table"] == "loss") & (table["name"] == "train")].sort_values("step")
    loss = train["value"]
    base = _model_score(table, "loss")
    prune = block_values(table, "prune", depth)  # (L,)
    prune_shallow, prune_deep = halves(prune)
    jac = block_values(table, "jac_dev", depth)  # (L,)
    jac_shallow, jac_deep = halves(jac)
    usefulness = block_values(table, "usefulness", depth)  # (L,)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_use = np.log(usefulness)  # (L,)
    stats.update(
        val_loss=base, train_loss=float(loss.iloc[-1]) if len(loss) else math.nan,
        loss_slope=loss_slope(train["step"].to_numpy(), loss.to_numpy()),
        jac_dev_mean=_mean(jac), jac_dev_log_ratio=_log(jac_deep / jac_shallow) if jac_shallow > 0 else math.nan,
        prune_deep=prune_deep, prune_deep_minus_shallow=prune_deep - prune_shallow,
        removable_share=float(np.mean(prune[np.isfinite(prune)] < REMOVABLE_FRACTION * base))
        if np.isfinite(prune).any() and np.isfinite(base) else math.nan,
        angular_deep=halves(block_values(table, "angular_all", depth))[1],
        angular_deep_last=halves(block_values(table, "angular_last", depth))[1],
        usefulness_log=_mean(log_use), usefulness_fraction=_model_score(table, "usefulness_fraction"),
        causal_mean=_mean(block_values(table, "causal", depth)),
        permutation_mean=_mean(block_values(table, "permutation", depth)))
    return {name: float(stats[name]) for name in STATISTICS}
