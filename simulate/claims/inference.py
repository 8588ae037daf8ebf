"""The inference settings of a report: confidence level, multiplicity method, bootstrap resamples.

One :class:`Inference` record carries them from a study's ``[study]`` table (``confidence``,
``multiplicity``, ``bootstrap``) or ``verify --trained``'s flags to every interval, test and
bootstrap of the claims engine; its fields are declared once (:data:`INFERENCE_FIELDS`), so a
level outside (0, 1), an unknown method or fewer than 100 resamples is refused with the
workbench's one line. The multiplicity methods adjust the p-values of one family (every direction
verdict of a report; docs/studies.md#verdicts):

``holm`` (the default)
    Holm's step-down method: controls the family-wise error rate under any dependence between
    the verdicts (the trends of one study share models, so they are dependent).
``bh``
    Benjamini-Hochberg: controls the false discovery rate, assuming independent or positively
    dependent tests; more verdicts for a large family, at the price of that assumption.

>>> Inference().adjust([0.01, 0.04, 0.03]).round(3).tolist()
[0.03, 0.06, 0.06]
>>> Inference(multiplicity="bh").adjust([0.01, 0.04, 0.03, math.nan]).round(3).tolist()
[0.03, 0.04, 0.04, nan]
>>> round(Inference(confidence=0.9).z, 4)
1.6449
>>> Inference(bootstrap=50)
Traceback (most recent call last):
...
theory.constraints.ConstraintError: bootstrap=50 is not allowed: an integer >= 100
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
from scipy import stats

from simulate.claims.trends import holm
from simulate.engine import CONFIDENCE
from theory.constraints import Choice, Integer, Real, check_fields

__all__ = ["MULTIPLICITY_METHODS", "INFERENCE_FIELDS", "Inference"]

MULTIPLICITY_METHODS = ("holm", "bh")
INFERENCE_FIELDS = {"confidence": Real(0.0, 1.0, low_open=True, high_open=True),
                    "multiplicity": Choice(*MULTIPLICITY_METHODS), "bootstrap": Integer(100)}


@dataclass(frozen=True)
class Inference:
    """Confidence level of every interval, multiplicity method of a family, bootstrap resamples."""

    confidence: float = CONFIDENCE
    multiplicity: str = "holm"
    bootstrap: int = 200

    def __post_init__(self) -> None:
        check_fields({f.name: getattr(self, f.name) for f in fields(self)}, INFERENCE_FIELDS)

    @property
    def z(self) -> float:
        """The two-sided normal quantile of :attr:`confidence` (1.959964 at 0.95)."""
        return float(stats.norm.ppf(0.5 + self.confidence / 2))

    def adjust(self, p_values) -> np.ndarray:
        """The family's adjusted p-values (NaN entries stay NaN and are not counted)."""
        if self.multiplicity == "holm":
            return holm(p_values)
        p = np.asarray(p_values, dtype=float)
        out = np.full(p.shape, math.nan)
        finite = np.isfinite(p)
        if finite.any():
            out[finite] = stats.false_discovery_control(p[finite], method="bh")
        return out
