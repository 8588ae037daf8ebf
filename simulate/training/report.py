"""The files of a training run, and the bridge and growth fits reported at every logged step.

=======================  ==========================================================
loss.csv                 ``step,split,loss``: ``train`` at every step (the batch of
                         step s at the parameters after s updates), ``val`` (the
                         held-out probe batch) at every logged step
train_layers.csv         ``step,layer,metric,mean,sem,ci_low,ci_high,n`` on the probe
                         batch (:data:`simulate.training.probes.LAYER_METRICS`)
train_batch_layers.csv   the same columns on the training batch (the cheap metrics,
                         :data:`simulate.training.probes.BATCH_METRICS`)
bridge.csv               per step and layer: measured ``var`` against the bridge
                         recursion fed the measured ``align_a``/``align_b``
                         (:mod:`theory.meanfield.bridge`), its error and error term
growth.csv               per step: growth of ``var`` over depth (log-log slope with a
                         t interval over layers; offset polynomial and exponential
                         fits with profile intervals; the better class)
=======================  ==========================================================

Rows are kept as CSV text lines, so a resumed run, which reads back the lines of the
steps before its checkpoint, writes byte for byte what an uninterrupted run writes.

>>> logs = RunLogs()
>>> logs.add("loss.csv", pd.DataFrame({"step": [0], "split": ["train"], "loss": [5.5]}))
>>> logs.text("loss.csv")
'step,split,loss\\n0,train,5.5\\n'
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from simulate.engine import COLUMNS
from simulate.training.probes import StreamMoments
from theory.files import write_text_atomic
from theory.meanfield.bridge import aligned_strengths, bridge_profile, var_growth
from theory.verdicts import GrowthClass

__all__ = ["FILES", "BRIDGE_COLUMNS", "GROWTH_COLUMNS", "RunLogs", "bridge_table", "growth_row", "loss_slope"]

BRIDGE_COLUMNS = ["step", "layer", "var", "var_bridge", "rel_error", "token_mean_term", "mean_square",
                  "mean_square_bridge", "align_a", "align_b", "sigma_in", "a_over_sigma"]
GROWTH_COLUMNS = ["step", "growth_class", "loglog_slope", "loglog_low", "loglog_high", "poly_exponent", "poly_low",
                  "poly_high", "exp_rate", "exp_low", "exp_high", "bridge_max_rel_error", "bridge_identity_error"]
FILES = {"loss.csv": ["step", "split", "loss"], "train_layers.csv": ["step", *COLUMNS],
         "train_batch_layers.csv": ["step", *COLUMNS], "bridge.csv": BRIDGE_COLUMNS, "growth.csv": GROWTH_COLUMNS}


class RunLogs:
    """The rows of every file of :data:`FILES`, as CSV lines keyed by their step."""

    def __init__(self):
        self.lines: dict[str, list[tuple[int, str]]] = {name: [] for name in FILES}

    def add(self, name: str, frame: pd.DataFrame) -> None:
        """Append the rows of ``frame`` (columns of ``FILES[name]``) to file ``name``."""
        text = frame[FILES[name]].to_csv(index=False, header=False, lineterminator="\n")
        self.lines[name] += [(int(line.split(",", 1)[0]), line) for line in text.splitlines()]

    def text(self, name: str) -> str:
        return ",".join(FILES[name]) + "\n" + "".join(line + "\n" for _, line in self.lines[name])

    def write(self, directory: Path) -> None:
        """Write every file into ``directory`` (each atomically)."""
        for name in FILES:
            write_text_atomic(Path(directory) / name, self.text(name))

    @classmethod
    def read(cls, directory: Path, before_step: int) -> "RunLogs":
        """The rows of ``directory``'s files with step < ``before_step`` (a resume from that checkpoint)."""
        logs = cls()
        for name in FILES:
            path = Path(directory) / name
            if not path.is_file():
                continue
            for line in path.read_text().splitlines()[1:]:
                step = int(line.split(",", 1)[0])
                if step < before_step:
                    logs.lines[name].append((step, line))
        return logs


def bridge_table(step: int, moments: StreamMoments, var_mean: np.ndarray) -> pd.DataFrame:
    """Per layer: measured ``var`` and mean square against the bridge recursion from the pooled ``a_l, b_l``.

    ``var_bridge = d/(d-1) * mean_square_bridge``; ``rel_error = var_bridge/var - 1``; the
    error term ``token_mean_term = d/(d-1) E xbar^2`` accounts for it exactly
    (``var = var_bridge - token_mean_term`` up to rounding, :mod:`theory.meanfield.bridge`).
    """
    d = moments.width
    mean_square = moments.mean_square.mean(-1)  # (L+1,) pooled over sequences (equal token counts)
    cross, branch = moments.cross[1:].mean(-1), moments.branch_ms[1:].mean(-1)  # (L,) each
    a, b = aligned_strengths(mean_square[:-1], cross, branch)  # (L,) each
    profile = bridge_profile(mean_square[0], a, b)  # (L+1,)
    var_bridge = d / (d - 1) * profile
    sigma_in = np.concatenate([[np.nan], np.sqrt(mean_square[:-1])])  # (L+1,) rms of each block's input
    nan = np.array([np.nan])
    return pd.DataFrame({
        "step": step, "layer": np.arange(len(mean_square)), "var": var_mean, "var_bridge": var_bridge,
        "rel_error": var_bridge / var_mean - 1.0, "token_mean_term": d / (d - 1) * moments.feature_mean_sq.mean(-1),
        "mean_square": mean_square, "mean_square_bridge": profile, "align_a": np.concatenate([nan, a]),
        "align_b": np.concatenate([nan, b]), "sigma_in": sigma_in, "a_over_sigma": np.concatenate([nan, a]) / sigma_in,
    })


def growth_row(step: int, var_mean: np.ndarray, bridge: pd.DataFrame) -> pd.DataFrame:
    """One row of growth.csv: :func:`theory.meanfield.bridge.var_growth` of the measured profile, the bridge errors."""
    growth = var_growth(var_mean)
    loglog, power, expo = growth["loglog"], growth[GrowthClass.POLYNOMIAL], growth[GrowthClass.EXPONENTIAL]
    identity = (bridge.mean_square_bridge / bridge.mean_square - 1.0).abs().max()
    return pd.DataFrame([{
        "step": step, "growth_class": str(growth["class"]), "loglog_slope": loglog.slope, "loglog_low": loglog.ci_low,
        "loglog_high": loglog.ci_high, "poly_exponent": power.slope, "poly_low": power.ci_low,
        "poly_high": power.ci_high, "exp_rate": expo.slope, "exp_low": expo.ci_low, "exp_high": expo.ci_high,
        "bridge_max_rel_error": bridge.rel_error.abs().max(), "bridge_identity_error": identity,
    }])


def loss_slope(steps: np.ndarray, losses: np.ndarray) -> float:
    """Least-squares slope of ``losses`` over the last quarter of ``steps``, per 1000 steps (NaN with < 3 points).

    How far a run is from converged: the training loss of ``loss.csv`` (every step; the fit smooths the
    batches' noise) goes in; 0 is converged.

    >>> round(loss_slope(np.arange(0, 401), 3.0 - 0.001 * np.arange(0, 401)), 6)  # 1e-3 nats a step
    -1.0
    """
    steps, losses = np.asarray(steps, dtype=float), np.asarray(losses, dtype=float)
    late = (steps >= 0.75 * steps.max()) & np.isfinite(losses) if steps.size else steps.astype(bool)  # (n,)
    if late.sum() < 3:
        return math.nan
    x, y = steps[late] - steps[late].mean(), losses[late]  # (k,) each
    return float(1000.0 * (x * (y - y.mean())).sum() / (x * x).sum())
