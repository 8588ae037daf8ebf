"""Laws across depth: a statistic of the whole model against the number of blocks ``L``, fitted on the cells.

P1 states its growth bounds on the last layer's variance *as the stack deepens*
(``Theta(L) <= sigma_L^2 <= Theta(e^L)`` for Pre-LN, ``<= Theta(L^(2-eps))`` with LayerNorm
Scaling): a function of ``L`` across models, not the shape of one model's profile over its own
blocks. A depth study measures it at a few depths, several seeds each, so a law across depth is
fitted to the cells (one per depth) as the trends are (:mod:`simulate.claims.trends`), in one of two
forms (:class:`DepthLawForm`, their formulas in :data:`DEPTH_LAWS`):

``power``
    ``y = a + b log L``: for ``y = log var_L`` a power law ``var_L ~ L^b`` (``b`` the exponent P1
    bounds); for a log ratio or a loss difference, a line in ``log L``;
``exponential in L``
    ``y = a + b L``: for ``y = log var_L`` exponential growth ``var_L ~ e^(b L)``.

**The model** (derived here; docs/studies.md#laws-across-depth). A model at depth ``L_i``, seed
``j``: ``y_ij = a + b f(L_i) + u_i + e_ij``, with a cell effect ``u_i ~ N(0, tau^2)`` (whatever
moves a whole cell off the law: its tuned rate, curvature, a shared seed-0 effect) and seed noise
``e_ij ~ N(0, sigma^2)``. The law is fitted by least squares to the ``k`` cell means; their
residual variance ``s^2`` (``k - 2`` degrees of freedom) estimates ``tau^2 + sigma^2/n`` (``n``
the cells' number of models; unequal ``n`` make this an approximation, said in the docs), and
the pooled within-cell variance ``w^2`` estimates ``sigma^2``. ``s^2`` is not floored at
``w^2 mean(1/n_i)``, though ``tau^2 >= 0`` would allow it: the coverage below is that of the
unfloored ``s^2`` (a floor only widens the interval, and the prediction committed in
``results/atlas/prediction-L64`` was made without one). The slope's interval is Student's
t on ``k - 2`` degrees of freedom (the cells are the units, as in a trend).

**Prediction at a depth not trained**, for the mean of ``m`` new models of one new cell: the law's
value there ``a + b f(L_0)`` with the variance

    s^2 (h_0 + 1) + w^2 max(0, 1/m - mean(1/n_i)),   h_0 = x_0' (X'X)^-1 x_0

(``s^2 h_0``: how much refits of the law on other draws of the fitting cells move its prediction;
``s^2``: a new cell's own effect and the seed noise of a mean of ``n`` models; the last term
corrects the seed noise from ``n`` to ``m`` models), and Student's t: the prediction interval of a
new cell mean (Snedecor and Cochran 1989, Sec. 17.9) on ``k - 2`` degrees of freedom, the seed term
included (it is better known, on ``N - k``; Welch-Satterthwaite's degrees of freedom for the sum
under-cover one model, 0.93, so the ``k - 2`` of the law's part are kept: conservative). Coverage of
the 95 % interval at L = 64 on the atlas's design (depths 4..32, 3 seeds), 2000 synthetic studies
per case, cell effects from 0 to twice the seeds' spread: 0.945-0.954 for a mean of three models,
0.966-0.997 for one model (tests/simulate/test_depth_laws.py).
``lack_of_fit`` is the pure-error F test of the law through the models (seeds as replicates; a
description of how the cells sit on the law, not a licence to judge by seeds).

>>> depths = np.repeat([4.0, 8.0, 16.0, 32.0], 3)
>>> y = 0.2 + 1.4 * np.log(depths) + np.tile([-0.05, 0.0, 0.05], 4)
>>> law = fit_depth_law(depths, y, DepthLawForm.POWER)
>>> round(law.slope.estimate, 6), law.cells, law.models
(1.4, 4, 12)
>>> p = law.predict(64, models=3)
>>> round(p.estimate, 4), round(p.estimate - (0.2 + 1.4 * math.log(64)), 12)
(6.0224, 0.0)
>>> law.predict(64, models=1).high > p.high  # one model spreads more than a mean of three
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from simulate.claims.judgement import Interval
from simulate.claims.trends import cell_means_slope, cells_of, lack_of_fit_p, within_var
from simulate.engine import CONFIDENCE
from theory.verdicts import Word

__all__ = ["DepthLawForm", "DEPTH_LAWS", "MIN_LAW_DEPTHS", "DepthLaw", "fit_depth_law", "law_regressor", "new_cell_interval"]



class DepthLawForm(Word):
    """The form of a law across depth (module docstring); a prediction file's ``law`` holds the word."""

    POWER = "power"
    EXPONENTIAL = "exponential in L"

    @classmethod
    def _missing_(cls, word):
        """``exponential``: this law's word before it was named ``exponential in L`` (issue 40), as
        ``results/atlas/prediction-L64.csv`` was committed with it.

        >>> DepthLawForm("exponential") is DepthLawForm.EXPONENTIAL
        True
        """
        return cls.EXPONENTIAL if word == _FORMER_EXPONENTIAL else None


_FORMER_EXPONENTIAL = "exponential"  # DepthLawForm.EXPONENTIAL's word in files committed before issue 40


DEPTH_LAWS = {DepthLawForm.POWER: "y = a + b log L", DepthLawForm.EXPONENTIAL: "y = a + b L"}  # form -> formula
MIN_LAW_DEPTHS = 3  # cells a law across depth needs: two parameters and at least one residual degree of freedom
_SLOPE_METHOD = "cell means, t on cells - 2"  # the slope's interval (module docstring)
_PREDICTION_METHOD = "a new cell mean, t on cells - 2"  # a new cell mean's interval (module docstring)


def law_regressor(law: DepthLawForm | str, depth) -> np.ndarray:
    """``f(L)`` of a law's form (or its word): ``log L`` (power) or ``L`` (exponential in L).

    >>> law_regressor("power", [1.0, math.e]).tolist(), law_regressor("exponential in L", [2.0]).tolist()
    ([0.0, 1.0], [2.0])
    """
    law = DepthLawForm.parse(law, "law")
    depth = np.asarray(depth, dtype=float)
    return np.log(depth) if law is DepthLawForm.POWER else depth


@dataclass(frozen=True)
class DepthLaw:
    """A law across depth fitted to cell means (module docstring).

    ``depths``, ``means``, ``counts``: the fitted cells ``(k,)``; ``intercept`` and ``slope`` (with
    its interval) of ``y = a + b f(L)``; ``residual_var`` ``s^2`` of the cell means about the law
    (``k - 2`` dof); ``within_var`` ``w^2``, the pooled variance of the models about their cell means
    (NaN without replicates); ``lack_of_fit`` the pure-error F test's p; ``confidence`` of the
    intervals.
    """

    law: DepthLawForm
    depths: np.ndarray
    means: np.ndarray
    counts: np.ndarray
    intercept: float
    slope: Interval
    residual_var: float
    within_var: float
    lack_of_fit: float
    confidence: float = CONFIDENCE

    @property
    def cells(self) -> int:
        return int(self.depths.size)

    @property
    def models(self) -> int:
        return int(self.counts.sum())

    def _leverage(self, depth: float) -> float:
        x = law_regressor(self.law, self.depths)  # (k,)
        design = np.stack([np.ones_like(x), x], axis=1)  # (k, 2)
        x0 = np.array([1.0, float(law_regressor(self.law, [depth])[0])])  # (2,)
        return float(x0 @ np.linalg.inv(design.T @ design) @ x0)

    def value(self, depth: float) -> float:
        """The law's value ``a + b f(L)`` at ``depth``."""
        return self.intercept + self.slope.estimate * float(law_regressor(self.law, [depth])[0])

    def predict(self, depth: float, models: int = 1) -> Interval:
        """The law's prediction of the mean of ``models`` new models at ``depth``, with its prediction interval
        (module docstring); no bounds with fewer than three cells."""
        centre = self.value(depth)
        if self.cells < MIN_LAW_DEPTHS or not math.isfinite(self.residual_var):
            return Interval(centre, confidence=self.confidence)
        return new_cell_interval(centre, self.residual_var, self._leverage(depth), self.within_var, self.counts,
                                 models, self.cells - 2, self.confidence, _PREDICTION_METHOD)


def new_cell_interval(centre: float, residual_var: float, leverage: float, within_var: float, counts: np.ndarray,
                      models: int, dof: int, confidence: float, method: str) -> Interval:
    """The prediction interval of the mean of ``models`` new models of one new cell where a law fitted to cell
    means (``counts`` (k,) models each, ``residual_var`` about the law on ``dof`` degrees of freedom, pooled
    ``within_var``) has the value ``centre`` and the leverage ``leverage``: variance
    ``s^2 (h_0 + 1) + w^2 max(0, 1/m - mean(1/n_i))``, Student's t on ``dof`` (module docstring).

    >>> new_cell_interval(1.0, 0.25, 0.0, 0.0, np.array([3, 3]), 3, 10**9, 0.95, "").format()
    '1 [0.02, 1.98]'
    """
    correction = max(0.0, 1.0 / models - float(np.mean(1.0 / counts)))
    seeds = within_var * correction if math.isfinite(within_var) else 0.0
    variance = residual_var * (leverage + 1.0) + seeds
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * math.sqrt(variance)
    return Interval(centre, centre - half, centre + half, confidence, method, math.sqrt(variance))


def fit_depth_law(depths, values, law: DepthLawForm | str, confidence: float = CONFIDENCE) -> DepthLaw | None:
    """The law of form ``law`` (a :class:`DepthLawForm` or its word) fitted to the cell means of ``values`` by depth
    (module docstring); None with fewer than two depths. Non-finite values are left out."""
    law = DepthLawForm.parse(law, "law")
    cells = cells_of(depths, values)
    if cells.x.size < 2:
        return None
    x = law_regressor(law, cells.x)  # (k,)
    k = cells.x.size
    within = within_var(cells)
    if k < MIN_LAW_DEPTHS:
        centred = x - x.mean()  # (k,) two cells: the line through them, no interval
        slope = float(cells.mean @ centred / (centred @ centred))
        intercept = float(cells.mean.mean() - slope * x.mean())
        return DepthLaw(law, cells.x, cells.mean, cells.n, intercept, Interval(slope, confidence=confidence),
                        math.nan, within, math.nan, confidence)
    slope, se, _, residual_var = (float(v) for v in cell_means_slope(x, cells.mean))  # the trends' one line
    intercept = float(cells.mean.mean() - slope * x.mean())
    slope_interval = Interval.from_t(slope, se, k - 2, confidence, _SLOPE_METHOD)
    return DepthLaw(law, cells.x, cells.mean, cells.n, intercept, slope_interval, residual_var, within,
                    lack_of_fit_p(cells, intercept + slope * x), confidence)

