"""The statistics of one trained model at one stage: one typed record, computed by one function.

Every number a claim judges is a function of one model (one Setting, one seed) at one stage
of its training; intervals come one level up, over seeds (:mod:`simulate.claims.judgement`).
A model gives the claims its :class:`ModelEvidence` (a study point's long table through
:func:`simulate.study.read.point_table.point_evidence`, a run directory through
:func:`simulate.claims.across_runs.judged_run`); :func:`model_statistics` measures it.
Blocks are ``1..L``; the *deep half* is blocks ``floor(L/2)+1..L`` and the *shallow half*
the rest (docs/scores.md). Profiles are the probe batch's ``var`` over layers ``0..L``.

==========================  ====================================================================
``val_loss``                held-out loss of the scores (``loss``), nats/byte
``train_loss``              the last training-batch loss
``loss_slope``              how far from converged: the least-squares slope of the training loss
                            (logged at every step) over the last quarter of the steps, in nats
                            per 1000 steps (the fit smooths the batches' noise; 0: converged)
``var_last``                ``log var_L`` at the last step (P2 Fig. 2(a): last-layer variance)
``var_growth``              ``log(var_L / var_1)`` at the last step (the embedding's own scale left out)
``growth_exponent``         ``p`` of ``var_l ~ c0 + c1 l^p`` at the last step
``growth_rate``             ``r`` of ``var_l ~ c0 + c1 e^(r l)`` at the last step
``growth_step``             ``q`` of the per-layer factor ``1 + c sigma^(-q)`` at the last step
``exponential_step_share``  the share of logged steps after step 0 at which the profile's growth
                            class is exponential (:func:`simulate.claims.growth.growth_summary`)
``blocks``                  ``L``, the number of blocks (the trials of a share of blocks)
``jac_dev_mean``            ``mean_l ||J_l - I||_F / sqrt(T d)``
``jac_dev_total``           ``L * jac_dev_mean``: the whole stack's distance from the identity
``jac_dev_log_ratio``       ``log(jac_dev deep half / shallow half)``
``prune_deep``              deep-half mean pruning drop (nats)
``prune_deep_sem``          its evaluation error over the held-out sequences, at most (the deep blocks'
                            mean paired standard error: their errors taken as fully correlated)
``prune_deep_log``          ``log prune_deep`` (two schemes' difference: the log of their ratio); not
                            resolved where ``prune_deep`` lies within :data:`RESOLVED_DROP` of its
                            ``prune_deep_sem`` of 0 (:func:`drop_resolved`)
``prune_deep_minus_shallow``  deep-half minus shallow-half mean pruning drop
``prune_log_ratio``         ``log(prune deep half / shallow half)``
``removable_share``         the share of blocks whose pruning drop is below
                            :data:`NEGLIGIBLE_FRACTION` of the model's mean block drop
``angular_deep``            deep-half mean angular distance ``d(x_{l-1}, x_l)``, all tokens
``angular_deep_last``       the same, last token (P1's code)
``angular_deep_log``,       ``log angular_deep``, ``log angular_deep_last``
``angular_deep_last_log``
``usefulness_log``          ``mean_l log(L_lin / L)``
``usefulness_log_total``    ``sum_l log(L_lin / L)`` (``L * usefulness_log``)
``usefulness_fraction``     the share of blocks with ``L_lin / L > 1.1`` (P2's global score; its fixed
                            threshold dilutes as ``1/L``: a description)
``useful_share``            the share of blocks whose ``log(L_lin / L)`` is at least
                            :data:`NEGLIGIBLE_FRACTION` of the model's mean block's
``causal_mean``             mean causal score over blocks ``1..L-1``
``causal_total``            their sum over blocks ``1..L-1``
``permutation_mean``        mean permutation score over the blocks (each block: over its pairs)
``permutation_total``       ``L * permutation_mean``
==========================  ====================================================================

A per-block mean shrinks as ``1/L`` when a fixed amount of work is shared over more blocks,
whatever a claim says; a ratio of two halves of one model, a log ratio of two schemes, a share
or a total over the blocks does not (:data:`simulate.claims.definitions.CLAIMS` judges those
along depth; docs/studies.md says which and why). A logarithm of a value that is not positive
is NaN (a model whose deep blocks cost nothing to remove has no ratio).

>>> import pandas as pd
>>> scores = pd.DataFrame({"layer": [1, 2, 3, 4, 0], "score": ["prune"] * 4 + ["loss"],
...                        "value": [0.5, 0.3, 0.1, 0.001, 2.0]})
>>> stats = model_statistics(ModelEvidence(4, {2: np.array([1.0, 2.0, 3.0, 4.0, 5.0])}, scores))
>>> round(stats.prune_deep_minus_shallow, 4), stats.removable_share, round(stats.var_growth, 4)
(-0.3495, 0.25, 0.9163)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np
import pandas as pd

from simulate.claims.growth import growth_summary
from simulate.training.report import loss_slope
from theory.verdicts import GrowthClass

__all__ = ["NEGLIGIBLE_FRACTION", "RESOLVED_DROP", "SHARE_STATISTICS", "LOG_DROP_STATISTICS", "STATISTICS",
           "ModelEvidence", "ModelStatistics", "halves", "model_statistics", "drop_resolved"]

# A block is negligible (removable, not useful) when its effect is below this fraction of the model's mean block
# effect: a threshold relative to the model's own blocks, as P1's "removable" deep layers are (deleting one costs
# little against deleting the others), which does not dilute as 1/L (docs/studies.md#the-claims).
NEGLIGIBLE_FRACTION = 0.1
SHARE_STATISTICS = ("removable_share", "usefulness_fraction", "useful_share")  # shares of blocks (share_interval)
LOG_DROP_STATISTICS = ("prune_deep_log", "prune_log_ratio")  # logs of the deep half's pruning drop
RESOLVED_DROP = 2.0  # a drop's log is resolved where the drop exceeds this many of its evaluation errors


@dataclass(frozen=True)
class ModelEvidence:
    """What one model gives the claims at one stage.

    ``profiles``: ``{step: var over layers 0..L}`` of the logged steps up to the stage (NaN where a
    layer is missing), steps in order; ``scores``: the model's scores at the stage (columns
    ``layer, score, value`` and, where known, ``sem``: the evaluation error over the held-out sequences;
    model-level scores at layer 0); ``train_steps``, ``train_loss``:
    the training-loss log up to the stage (empty at step 0).
    """

    depth: int
    profiles: dict
    scores: pd.DataFrame
    train_steps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    train_loss: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def block_values(self, score: str) -> np.ndarray:
        """A per-block score over blocks ``1..L`` (NaN where missing), ``(L,)``."""
        rows = self.scores[self.scores["score"] == score]
        return rows.set_index("layer")["value"].reindex(range(1, self.depth + 1)).to_numpy(float)  # (L,)

    def block_sems(self, score: str) -> np.ndarray:
        """A per-block score's evaluation error over blocks ``1..L`` (NaN where missing or not recorded), ``(L,)``."""
        if "sem" not in self.scores:
            return np.full(self.depth, math.nan)
        rows = self.scores[self.scores["score"] == score]
        return rows.set_index("layer")["sem"].reindex(range(1, self.depth + 1)).to_numpy(float)  # (L,)

    def model_score(self, score: str) -> float:
        """A model-level score (its row at layer 0), NaN where missing."""
        rows = self.scores[(self.scores["score"] == score) & (self.scores["layer"] == 0)]["value"]
        return float(rows.iloc[0]) if len(rows) else math.nan

    def last_profile(self) -> np.ndarray:
        """The variance profile of the last logged step, ``(L+1,)`` (NaN without one)."""
        return self.profiles[max(self.profiles)] if self.profiles else np.full(self.depth + 1, math.nan)


@dataclass(frozen=True)
class ModelStatistics:
    """Every statistic of one model at one stage (module docstring); NaN where its evidence lacks what one
    needs."""

    val_loss: float
    blocks: float
    train_loss: float
    loss_slope: float
    var_last: float
    var_growth: float
    growth_exponent: float
    growth_rate: float
    growth_step: float
    exponential_step_share: float
    jac_dev_mean: float
    jac_dev_total: float
    jac_dev_log_ratio: float
    prune_deep: float
    prune_deep_sem: float
    prune_deep_log: float
    prune_deep_minus_shallow: float
    prune_log_ratio: float
    removable_share: float
    angular_deep: float
    angular_deep_last: float
    angular_deep_log: float
    angular_deep_last_log: float
    usefulness_log: float
    usefulness_log_total: float
    usefulness_fraction: float
    useful_share: float
    causal_mean: float
    causal_total: float
    permutation_mean: float
    permutation_total: float

    def value(self, name: str) -> float:
        """The statistic ``name`` (ValueError naming the allowed ones)."""
        if name not in STATISTICS:
            raise ValueError(f"statistic={name!r} is not allowed: one of {', '.join(STATISTICS)}")
        return getattr(self, name)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def missing(cls) -> "ModelStatistics":
        """Every statistic NaN (a model that failed or is pending)."""
        return cls(**dict.fromkeys(STATISTICS, math.nan))


STATISTICS = tuple(f.name for f in fields(ModelStatistics))


def halves(values: np.ndarray) -> tuple[float, float]:
    """(mean over the shallow half, mean over the deep half) of a per-block array (NaN-aware).

    >>> halves(np.array([1.0, 3.0, np.nan, 5.0]))
    (2.0, 5.0)
    """
    cut = len(values) // 2
    return _mean(values[:cut]), _mean(values[cut:])


def _mean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan


def _total(values: np.ndarray) -> float:
    """The sum over the blocks (NaN when any block is missing: a total needs every block)."""
    return float(values.sum()) if values.size and np.isfinite(values).all() else math.nan


def drop_resolved(stats: "ModelStatistics") -> bool | None:
    """Whether a model's deep-half pruning drop is resolved from 0 by its evaluation error (more than
    :data:`RESOLVED_DROP` of ``prune_deep_sem``): where not, the log of the drop (and a ratio built on it) reads
    noise; None where the error was not recorded.

    >>> stats = ModelStatistics.missing()
    >>> drop_resolved(replace(stats, prune_deep=0.0006, prune_deep_sem=0.0004)), drop_resolved(stats)
    (False, None)
    """
    if not math.isfinite(stats.prune_deep_sem):
        return None
    return bool(stats.prune_deep > RESOLVED_DROP * stats.prune_deep_sem)


def _log(value: float) -> float:
    return math.log(value) if value > 0 else math.nan


def _negligible_share(effects: np.ndarray) -> float:
    """The share of blocks whose effect is below :data:`NEGLIGIBLE_FRACTION` of the mean block's (NaN unless
    every block has one and the mean is positive).

    >>> _negligible_share(np.array([1.0, 0.5, 0.02, 0.01]))
    0.5
    """
    if not (effects.size and np.isfinite(effects).all()) or effects.mean() <= 0:
        return math.nan
    return float(np.mean(effects < NEGLIGIBLE_FRACTION * effects.mean()))


def _growth_statistics(profiles: dict) -> dict[str, float]:
    if not profiles:
        return dict.fromkeys(("var_last", "var_growth", "growth_exponent", "growth_rate", "growth_step",
                              "exponential_step_share"), math.nan)
    last = profiles[max(profiles)]  # (L+1,)
    summary = growth_summary(last)
    later = [growth_summary(var, intervals=False).label for step, var in profiles.items() if step > 0]  # classes
    return {"var_last": _log(last[-1]), "var_growth": _log(last[-1] / last[1]) if len(last) > 1 else math.nan,
            "growth_exponent": summary.exponent.estimate, "growth_rate": summary.rate.estimate,
            "growth_step": summary.step.estimate,
            "exponential_step_share": float(np.mean([label is GrowthClass.EXPONENTIAL for label in later])) if later
            else math.nan}


def model_statistics(evidence: ModelEvidence) -> ModelStatistics:
    """Every statistic of :data:`STATISTICS` for one model at one stage (module docstring)."""
    base = evidence.model_score("loss")
    prune = evidence.block_values("prune")  # (L,)
    prune_shallow, prune_deep = halves(prune)
    prune_deep_sem = halves(evidence.block_sems("prune"))[1]  # the deep blocks' mean error: an upper bound
    jac_shallow, jac_deep = halves(evidence.block_values("jac_dev"))
    with np.errstate(invalid="ignore", divide="ignore"):
        log_use = np.log(evidence.block_values("usefulness"))  # (L,)
    jac_dev, causal = evidence.block_values("jac_dev"), evidence.block_values("causal")  # (L,) each
    angular_deep = halves(evidence.block_values("angular_all"))[1]
    angular_deep_last = halves(evidence.block_values("angular_last"))[1]
    permutation = _mean(evidence.block_values("permutation"))
    return ModelStatistics(
        **_growth_statistics(evidence.profiles),
        val_loss=base, blocks=float(evidence.depth),
        train_loss=float(evidence.train_loss[-1]) if len(evidence.train_loss) else math.nan,
        loss_slope=loss_slope(evidence.train_steps, evidence.train_loss),
        jac_dev_mean=_mean(jac_dev), jac_dev_total=_total(jac_dev),
        jac_dev_log_ratio=_log(jac_deep / jac_shallow) if jac_shallow > 0 else math.nan,
        prune_deep=prune_deep, prune_deep_sem=prune_deep_sem, prune_deep_log=_log(prune_deep),
        prune_deep_minus_shallow=prune_deep - prune_shallow,
        prune_log_ratio=_log(prune_deep / prune_shallow) if prune_shallow > 0 else math.nan,
        removable_share=_negligible_share(prune),
        angular_deep=angular_deep, angular_deep_last=angular_deep_last, angular_deep_log=_log(angular_deep),
        angular_deep_last_log=_log(angular_deep_last),
        usefulness_log=_mean(log_use), usefulness_log_total=_total(log_use),
        usefulness_fraction=evidence.model_score("usefulness_fraction"),
        useful_share=1.0 - _negligible_share(log_use),
        causal_mean=_mean(causal), causal_total=_total(causal[:-1]),  # block L has no causal score
        permutation_mean=permutation, permutation_total=evidence.depth * permutation)
