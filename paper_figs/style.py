"""Shared look and plumbing of the paper figures.

Every figure module draws with these helpers, so all figures share one style: Monte-Carlo
estimates as a line with a 95 % band (``ci_low`` .. ``ci_high`` of the simulator's table),
theory as lines whose dash says what kind of law it is (exact, upper or lower bound,
approximate), numerical blow-up marked at its layer, and each figure written as PNG and
PDF atomically.

>>> sizes = mc_sizes(quick=True)
>>> sizes.width < mc_sizes(quick=False).width
True
>>> LAW_LINESTYLE["exact"], LAW_LINESTYLE["upper"]
('-', '--')
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import pandas as pd  # noqa: E402

from simulate.verify import describe_setting, run_monte_carlo  # noqa: E402
from theory.cli import atomic_write  # noqa: E402
from theory.prediction import predict  # noqa: E402

__all__ = [
    "DEFAULT_OUT_DIR",
    "LLAMA_130M_ALPHA",
    "llama_like",
    "LAW_LINESTYLE",
    "LAW_MARKERS",
    "place_legend",
    "McSizes",
    "mc_sizes",
    "new_figure",
    "save_figure",
    "plot_mc_band",
    "plot_theory",
    "annotate_blowup",
    "monte_carlo",
    "profile_panel",
    "sweep",
    "plot_sweep",
    "describe_setting",
]

DEFAULT_OUT_DIR = Path(__file__).resolve().parent / "out"

# alpha = d s^2 of LLaMA-130M (d = 768, s = 0.02): kept when the figures use smaller widths.
LLAMA_130M_ALPHA = 768 * 0.02**2

# How a theory line is dashed, by the ``kind`` column of theory.predict.
LAW_LINESTYLE = {"exact": "-", "upper": "--", "lower": ":", "approx": "-."}
# Markers that tell apart several laws of one kind in a sweep plot.
LAW_MARKERS = ("", "x", "+", "^", "v", "s")

plt.rcParams.update({
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
})


@dataclass(frozen=True)
class McSizes:
    """Monte-Carlo sizes of one build of the figures.

    Attributes
    ----------
    width : int
        Residual width d of the simulated stacks.
    samples : int
        Monte-Carlo samples S per setting.
    depth : int
        Depth L of the per-layer figures.
    tokens : int
        Sequence length T.
    """

    width: int
    samples: int
    depth: int
    tokens: int


def mc_sizes(quick: bool) -> McSizes:
    """Sizes for a quick (seconds, CPU) or a full (paper) build."""
    if quick:
        return McSizes(width=32, samples=8, depth=16, tokens=8)
    return McSizes(width=128, samples=32, depth=128, tokens=32)


def llama_like(width: int, **overrides):
    """The llama preset at ``width`` with ``s = sqrt(LLAMA_130M_ALPHA / width)`` (LLaMA-130M's alpha).

    >>> round(llama_like(64, depth=2).alpha, 4)
    0.3072
    """
    from theory.setting import Setting

    return Setting.preset("llama", **{"width": width, "init_std": math.sqrt(LLAMA_130M_ALPHA / width), **overrides})


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float = 3.4, height: float = 2.6):
    """A figure with ``nrows x ncols`` axes of one column-width each (inches)."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             constrained_layout=True)
    return fig, axes


def place_legend(ax, fontsize: float = 5) -> None:
    """The legend outside the axes, on the right, so it never hides data."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def save_figure(fig, out_dir: str | os.PathLike, name: str) -> list[Path]:
    """Write ``name.png`` and ``name.pdf`` into ``out_dir`` atomically and close the figure.

    Each file goes through :func:`theory.cli.atomic_write`, so a reader never sees half a file.

    Returns
    -------
    list of Path
        The PNG and the PDF path.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [atomic_write(out / f"{name}.{ext}",
                            lambda temp, ext=ext: fig.savefig(temp, format=ext, bbox_inches="tight"))
               for ext in ("png", "pdf")]
    plt.close(fig)
    return written


def plot_mc_band(ax, table: pd.DataFrame, metric: str, *, label: str, color=None, x: str = "layer"):
    """Monte-Carlo mean as markers+line with its 95 % confidence band.

    Parameters
    ----------
    table : DataFrame
        The simulator's table (``layer, metric, mean, sem, ci_low, ci_high, n``).
    metric : str
        Which metric's rows to draw.
    x : str
        The column on the horizontal axis.
    """
    rows = table[table["metric"] == metric].sort_values(x)
    if rows.empty:
        return None
    (line,) = ax.plot(rows[x], rows["mean"], marker="o", markersize=2.5, linewidth=0.8, color=color,
                      label=f"{label} (MC, n={int(rows['n'].iloc[0])})")
    ax.fill_between(rows[x], rows["ci_low"], rows["ci_high"], color=line.get_color(), alpha=0.25, linewidth=0)
    return line


def plot_theory(ax, prediction: pd.DataFrame, metric: str, *, color=None, laws=None, label_prefix: str = "",
                x: str = "layer"):
    """Theory curves of one metric: one line per law, dashed by its kind.

    Parameters
    ----------
    prediction : DataFrame
        ``theory.predict`` output (``layer, metric, law, kind, value``).
    laws : iterable of str, optional
        Only these law ids (default: every law that predicts ``metric``).
    """
    rows = prediction[prediction["metric"] == metric]
    if laws is not None:
        rows = rows[rows["law"].isin(list(laws))]
    for (law, kind), curve in rows.groupby(["law", "kind"], sort=True):
        if len(curve) < 2:
            continue  # one point (e.g. the input layer alone) draws no line
        curve = curve.sort_values(x)
        ax.plot(curve[x], curve["value"], linestyle=LAW_LINESTYLE.get(kind, "-"), color=color, linewidth=1.2,
                label=f"{label_prefix}{law} ({kind})")


def annotate_blowup(ax, layer: int | None, *, color="crimson", label: str = "") -> None:
    """Mark the layer where the simulator hit inf/nan (nothing when ``layer`` is None)."""
    if layer is None:
        return
    ax.axvline(layer, color=color, linestyle="--", linewidth=0.8)
    ax.annotate(f"{label}numerical blow-up at layer {layer}", xy=(layer, 0.5), xycoords=("data", "axes fraction"),
                rotation=90, fontsize=6, color=color, ha="right", va="center")


def monte_carlo(setting, *, samples: int, metrics=("var",), seed: int = 0):
    """Run (or fetch from the cache) one simulation; see :func:`simulate.verify.run_monte_carlo`.

    Returns
    -------
    (DataFrame, int or None)
        The table measured (up to the blow-up, if any) and the blow-up layer or None.
    """
    return run_monte_carlo(setting, samples=samples, metrics=metrics, seed=seed)


def profile_panel(ax, setting, metric: str, *, samples: int, label: str, color=None, laws=None,
                  theory: bool = True):
    """Draw one setting's per-layer ``metric``: MC band, theory lines, blow-up marker.

    Returns
    -------
    (DataFrame, DataFrame)
        The measured table and the prediction (possibly empty).
    """
    table, blowup = monte_carlo(setting, samples=samples, metrics=(metric,))
    line = plot_mc_band(ax, table, metric, label=label, color=color)
    color = line.get_color() if line is not None else color
    prediction = predict(setting) if theory else pd.DataFrame(columns=["layer", "metric", "law", "kind",
                                                                                 "value"])
    plot_theory(ax, prediction, metric, color=color, laws=laws, label_prefix=f"{label}: ")
    annotate_blowup(ax, blowup, color=color, label=f"{label}: ")
    return table, prediction


def sweep(settings, xs, metric: str, *, samples: int, layer=None):
    """Measure and predict ``metric`` at one layer across settings that differ in one knob.

    Parameters
    ----------
    settings, xs : sequences of equal length
        The settings and the value of the knob each stands for.
    layer : int, optional
        The layer read off (default: each setting's last layer).

    Returns
    -------
    (DataFrame, DataFrame)
        Measured ``x, mean, ci_low, ci_high, blowup`` and predicted ``x, law, kind, value``.
    """
    measured, predicted = [], []
    for setting, x in zip(settings, xs):
        at = setting.depth if layer is None else layer
        table, blowup = monte_carlo(setting, samples=samples, metrics=(metric,))
        row = table[(table["metric"] == metric) & (table["layer"] == at)]
        if len(row):
            measured.append({"x": x, "mean": float(row["mean"].iloc[0]), "ci_low": float(row["ci_low"].iloc[0]),
                             "ci_high": float(row["ci_high"].iloc[0]), "blowup": blowup})
        else:
            measured.append({"x": x, "mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                             "blowup": blowup})
        prediction = predict(setting)
        prediction = prediction[(prediction["metric"] == metric) & (prediction["layer"] == at)]
        predicted += [{"x": x, "law": r.law, "kind": r.kind, "value": float(r.value)}
                      for r in prediction.itertuples(index=False)]
    return (pd.DataFrame(measured, columns=["x", "mean", "ci_low", "ci_high", "blowup"]),
            pd.DataFrame(predicted, columns=["x", "law", "kind", "value"]))


def plot_sweep(ax, measured: pd.DataFrame, predicted: pd.DataFrame, *, label: str, color=None, laws=None):
    """Draw :func:`sweep` output: MC points with 95 % error bars, theory lines by kind."""
    ok = measured.dropna(subset=["mean"])
    bars = ax.errorbar(ok["x"], ok["mean"], yerr=[ok["mean"] - ok["ci_low"], ok["ci_high"] - ok["mean"]],
                       fmt="o", markersize=3, capsize=2, color=color, label=f"{label} (MC)")
    color = bars.lines[0].get_color()
    rows = predicted if laws is None else predicted[predicted["law"].isin(list(laws))]
    for marker, ((law, kind), curve) in zip(LAW_MARKERS, rows.groupby(["law", "kind"], sort=True)):
        curve = curve.sort_values("x")
        ax.plot(curve["x"], curve["value"], linestyle=LAW_LINESTYLE.get(kind, "-"), marker=marker, markersize=4,
                color=color, linewidth=1.1, label=f"{label}: {law} ({kind})")
    for r in measured[measured["blowup"].notna()].itertuples(index=False):
        ax.annotate(f"blow-up at layer {int(r.blowup)}", xy=(r.x, 0.05), xycoords=("data", "axes fraction"),
                    fontsize=5, color="crimson", rotation=90)
    return color
