"""Laws across depth and width: a statistic of the whole model against ``L`` and ``d``, fitted on the cells.

A law across depth (:mod:`simulate.claims.depth_laws`) has no width term, so it cannot say what another width
gives. A width study trains a grid of depths ``L`` and widths ``d``; a law fitted to its ``(L, d)`` cells predicts
a width no model was trained at, in one of the forms of :data:`WIDTH_LAWS`:

``additive``
    ``y = a + b log L + c log d``: the depth exponent the same at every width, width shifting the whole curve
    (``c``: the change per e-fold of width; for ``y = log var_L`` a power law in both);
``interaction``
    ``y = a + b log L + c log d + e log L log d``: the depth exponent itself moving with width (the alternative a
    referee asks of an additive law);
``no width term``
    ``y = a + b log L``: width does nothing (the null the other two are judged against: a prediction that this
    law's interval also holds says little about width).

**The model and the interval** are the depth laws', with ``q`` coefficients instead of two (derived there;
docs/studies.md#the-atlas-across-width): a cell ``(L_i, d_i)`` has its own effect ``u_i ~ N(0, tau^2)`` beside the
seeds' noise; the law is fitted by least squares to the ``k`` cell means, whose residual variance ``s^2`` (``k -
q`` degrees of freedom) estimates ``tau^2 + sigma^2/n``; a new cell's mean of ``m`` models is predicted with
:func:`simulate.claims.depth_laws.new_cell_interval` at the leverage ``h_0 = x_0' (X'X)^-1 x_0``, Student's t on
``k - q``. The coverage on the width study's design (3 depths x 3 widths, 3 seeds, d = 128 predicted) is tested
by simulation in tests/simulate/test_width_laws.py. The cells, not the seeds, are the units: a width law on
nine cells has 6 (additive), 5 (interaction) or 7 (no width term) degrees of freedom.

>>> depths, widths = np.repeat([8.0, 16.0, 32.0], 6), np.tile(np.repeat([16.0, 32.0, 64.0], 2), 3)
>>> y = 1.0 + 1.5 * np.log(depths) - 0.5 * np.log(widths) + np.tile([-0.01, 0.01], 9)
>>> law = fit_width_law(depths, widths, y, WidthLawForm.ADDITIVE, confidence=0.95)
>>> [round(float(c), 6) for c in law.coefficients], law.cells, law.dof
([1.0, 1.5, -0.5], 9, 6)
>>> round(law.predict(16, 128, models=3).estimate - (1.0 + 1.5 * math.log(16) - 0.5 * math.log(128)), 12)
0.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulate.claims.depth_laws import new_cell_interval
from simulate.claims.judgement import Interval
from simulate.claims.trends import Cells, lack_of_fit_p, within_var
from theory.verdicts import Word

__all__ = ["WidthLawForm", "WIDTH_LAWS", "WidthLaw", "width_law_design", "fit_width_law"]



class WidthLawForm(Word):
    """The form of a law across depth and width (module docstring); a prediction file's ``law`` holds the word."""

    ADDITIVE = "additive"
    INTERACTION = "interaction"
    NO_WIDTH_TERM = "no width term"


WIDTH_LAWS = {WidthLawForm.ADDITIVE: "y = a + b log L + c log d",  # form -> formula
              WidthLawForm.INTERACTION: "y = a + b log L + c log d + e log L log d",
              WidthLawForm.NO_WIDTH_TERM: "y = a + b log L"}
_PREDICTION_METHOD = "a new cell mean, t on cells - coefficients"


def width_law_design(law: WidthLawForm | str, depth, width) -> np.ndarray:
    """The regressors ``(n, q)`` of a law's form (or its word) at ``depth`` and ``width`` (each ``(n,)``).

    >>> width_law_design("interaction", [math.e], [math.e ** 2]).tolist()
    [[1.0, 1.0, 2.0, 2.0]]
    """
    law = WidthLawForm.parse(law, "law")
    log_l, log_d = np.log(np.asarray(depth, dtype=float)), np.log(np.asarray(width, dtype=float))  # (n,) each
    columns = [np.ones_like(log_l), log_l]
    if law is not WidthLawForm.NO_WIDTH_TERM:
        columns.append(log_d)
    if law is WidthLawForm.INTERACTION:
        columns.append(log_l * log_d)
    return np.stack(columns, axis=1)  # (n, q)


@dataclass(frozen=True)
class WidthLaw:
    """A law across depth and width fitted to cell means (module docstring).

    ``depths``, ``widths``, ``means``, ``counts``: the fitted cells ``(k,)``; ``coefficients`` ``(q,)`` in the
    order of the law's form; ``width_term`` the ``log d`` coefficient with its interval (no bounds for the law
    without one); ``residual_var`` ``s^2`` on ``k - q`` degrees of freedom; ``within_var`` the pooled seeds'
    variance (NaN without replicates); ``lack_of_fit`` the pure-error F test's p.
    """

    law: WidthLawForm
    depths: np.ndarray
    widths: np.ndarray
    means: np.ndarray
    counts: np.ndarray
    coefficients: np.ndarray
    width_term: Interval
    residual_var: float
    within_var: float
    lack_of_fit: float
    confidence: float

    @property
    def cells(self) -> int:
        return int(self.means.size)

    @property
    def models(self) -> int:
        return int(self.counts.sum())

    @property
    def dof(self) -> int:
        return self.cells - self.coefficients.size

    def value(self, depth: float, width: float) -> float:
        """The law's value at ``depth`` and ``width``."""
        return float(width_law_design(self.law, [depth], [width])[0] @ self.coefficients)

    def predict(self, depth: float, width: float, models: int = 1) -> Interval:
        """The law's prediction of the mean of ``models`` new models at ``(depth, width)`` with its prediction
        interval (module docstring)."""
        design = width_law_design(self.law, self.depths, self.widths)  # (k, q)
        x0 = width_law_design(self.law, [depth], [width])[0]  # (q,)
        leverage = float(x0 @ np.linalg.inv(design.T @ design) @ x0)
        return new_cell_interval(self.value(depth, width), self.residual_var, leverage, self.within_var,
                                 self.counts, models, self.dof, self.confidence, _PREDICTION_METHOD)


def fit_width_law(depths, widths, values, law: WidthLawForm | str, confidence: float) -> WidthLaw | None:
    """The law of form ``law`` (a :class:`WidthLawForm` or its word) fitted to the cell means of ``values`` by
    ``(depth, width)`` (module docstring); None without a residual degree of freedom or with a design that cannot
    separate its terms (one width, for a law with a width term). Non-finite values are left out."""
    law = WidthLawForm.parse(law, "law")
    depths, widths, values = (np.asarray(a, dtype=float) for a in (depths, widths, values))
    keep = np.isfinite(depths) & np.isfinite(widths) & np.isfinite(values) & (depths > 0) & (widths > 0)
    pairs, cell = np.unique(np.stack([depths[keep], widths[keep]], axis=1), axis=0, return_inverse=True)  # (k, 2)
    cell = cell.ravel()  # (n,): the cell of each model
    cells = Cells(np.arange(len(pairs), dtype=float), tuple(values[keep][cell == i] for i in range(len(pairs))))
    design = width_law_design(law, pairs[:, 0], pairs[:, 1])  # (k, q)
    k, q = design.shape
    if k <= q or np.linalg.matrix_rank(design) < q:
        return None
    coefficients, *_ = np.linalg.lstsq(design, cells.mean, rcond=None)  # (q,)
    fitted = design @ coefficients  # (k,)
    residual_var = float(np.sum((cells.mean - fitted) ** 2)) / (k - q)
    if law is WidthLawForm.NO_WIDTH_TERM:
        width_term = Interval(0.0, confidence=confidence)
    else:
        se = math.sqrt(residual_var * float(np.linalg.inv(design.T @ design)[2, 2]))
        width_term = Interval.from_t(float(coefficients[2]), se, k - q, confidence, "cell means, t on cells - q")
    return WidthLaw(law, pairs[:, 0], pairs[:, 1], cells.mean, cells.n, coefficients, width_term, residual_var,
                    within_var(cells), lack_of_fit_p(cells, fitted, q), confidence)
