"""What the paper figures measure and predict: the build sizes, the LLaMA-like settings, the runs behind a panel.

Every Monte-Carlo run goes through the simulator's cache (:func:`simulate.compare.run_monte_carlo`),
every prediction through :func:`predict` (kept per setting in this process); the panels draw
with :mod:`paper_figs.style` and record the :class:`~paper_figs.style.Source` of each line,
so the tests can check a figure's numbers against the simulator and the theory.

>>> sizes = mc_sizes(quick=True)
>>> sizes.width < mc_sizes(quick=False).width
True
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import pandas as pd

from paper_figs.style import Source, annotate_blowup, plot_mc_band, plot_sweep, plot_theory, sources
from simulate.compare import run_monte_carlo
from theory import predict as _predict

__all__ = ["LLAMA_130M_ALPHA", "McSizes", "mc_sizes", "llama_like", "predict", "monte_carlo", "profile_panel",
           "sweep", "with_aliases", "sweep_panel"]

# alpha = d s^2 of LLaMA-130M (d = 768, s = 0.02): kept when the figures use smaller widths.
LLAMA_130M_ALPHA = 768 * 0.02**2


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


@functools.lru_cache(maxsize=256)
def predict(setting) -> pd.DataFrame:
    """:func:`theory.predict`, kept for the settings seen in this process (a figure asks for each several times).

    The table is shared between callers: read it, do not change it in place.
    """
    return _predict(setting)


def monte_carlo(setting, *, samples: int, metrics=("var",), seed: int = 0):
    """Run (or fetch from the cache) one simulation; see :func:`simulate.compare.run_monte_carlo`.

    Returns
    -------
    (DataFrame, int or None)
        The table measured (up to the blow-up, if any) and the blow-up layer or None.
    """
    return run_monte_carlo(setting, samples=samples, metrics=metrics, seed=seed)


def profile_panel(ax, setting, metric: str, *, samples: int, label: str, color=None, laws=None,
                  theory: bool = True, metrics=None, kinds=None, seed: int = 0):
    """Draw one setting's per-layer ``metric``: MC band, theory lines, blow-up marker.

    Parameters
    ----------
    metrics : sequence of str, optional
        What the run measures (default just ``metric``); one set for many panels reuses the cache.
    laws, kinds : iterable of str, optional
        The theory laws / kinds drawn (default every law :func:`theory.predict` has for ``metric``);
        ``laws`` may also be a function of the prediction that returns the ids.

    Returns
    -------
    (DataFrame, DataFrame)
        The measured table and the prediction (possibly empty).
    """
    mc = {"samples": samples, "metrics": tuple(metrics or (metric,)), "seed": seed}
    table, blowup = monte_carlo(setting, **mc)
    line = plot_mc_band(ax, table, metric, label=label, color=color)
    record = sources(ax.figure)
    if line is not None:
        record.append(Source(line, metric, (setting,), mc=mc))
    color = line.get_color() if line is not None else color
    prediction = predict(setting) if theory else pd.DataFrame(columns=["layer", "metric", "law", "kind", "value"])
    laws = laws(prediction) if callable(laws) else laws
    measured = table.loc[table["metric"] == metric, "mean"].abs()
    # past a blow-up a law runs on to 1e300: it is cut at 1e3 times the largest value measured, so the axis
    # shows the measurement (as the explorer does)
    ceiling = None if blowup is None or measured.empty else 1e3 * float(measured.max())
    for law, kind, drawn in plot_theory(ax, prediction, metric, color=color, laws=laws, kinds=kinds,
                                        label_prefix=f"{label}: ", ceiling=ceiling):
        record.append(Source(drawn, metric, (setting,), law=law, kind=kind))
    annotate_blowup(ax, blowup, color=color, label=f"{label}: ")
    return table, prediction


def sweep(settings, xs, metric: str, *, samples: int, layer=None, seed: int = 0):
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
        Measured ``x, layer, mean, ci_low, ci_high, blowup`` and predicted ``x, law, kind, value``.
    """
    measured, predicted = [], []
    for setting, x in zip(settings, xs):
        at = setting.depth if layer is None else layer
        table, blowup = monte_carlo(setting, samples=samples, metrics=(metric,), seed=seed)
        row = table[(table["metric"] == metric) & (table["layer"] == at)]
        values = [float(row[c].iloc[0]) if len(row) else float("nan") for c in ("mean", "ci_low", "ci_high")]
        measured.append({"x": x, "layer": at, **dict(zip(("mean", "ci_low", "ci_high"), values)), "blowup": blowup})
        prediction = predict(setting)
        prediction = prediction[(prediction["metric"] == metric) & (prediction["layer"] == at)]
        predicted += [{"x": x, "law": r.law, "kind": r.kind, "value": float(r.value)}
                      for r in prediction.itertuples(index=False)]
    return (pd.DataFrame(measured, columns=["x", "layer", "mean", "ci_low", "ci_high", "blowup"]),
            pd.DataFrame(predicted, columns=["x", "law", "kind", "value"]))


def with_aliases(predicted: pd.DataFrame, aliases: dict | None, x: str = "x") -> pd.DataFrame:
    """``predicted`` with each law of ``aliases`` (``{law: the id theory.predict gives it elsewhere}``) filled in
    at the knob values where it has no row but its other id has; column ``source_law`` keeps the id read.

    The theory names one law differently at the end of a knob's range (GQA's ``gqa-init`` is
    ``causal-attention`` at G = 1, where no key-value head is shared), so a sweep's line would start
    one value late.

    >>> p = pd.DataFrame({"x": [1, 2], "law": ["a", "b"], "kind": "exact", "value": [1.0, 2.0]})
    >>> with_aliases(p, {"b": "a"})[["x", "law", "source_law"]].values.tolist()
    [[1, 'a', 'a'], [2, 'b', 'b'], [1, 'b', 'a']]
    """
    out = [predicted.assign(source_law=predicted["law"])]
    for law, other in (aliases or {}).items():
        have = set(predicted.loc[predicted["law"] == law, x])
        stand_in = predicted[(predicted["law"] == other) & ~predicted[x].isin(have)]
        out.append(stand_in.assign(law=law, source_law=other))
    return pd.concat(out, ignore_index=True)


def sweep_panel(ax, settings, xs, metric: str, *, samples: int, label: str, layer=None, color=None, laws=None,
                aliases=None):
    """:func:`sweep` and :func:`plot_sweep` for one series, with the :class:`Source` of each line recorded.

    ``aliases``: laws that go by another id at some knob values (:func:`with_aliases`), drawn as one line.

    Returns
    -------
    (DataFrame, DataFrame)
        The measured and predicted frames of :func:`sweep` (the latter with the aliases filled in).
    """
    measured, predicted = sweep(settings, xs, metric, samples=samples, layer=layer)
    predicted = with_aliases(predicted, aliases)
    _, points, drawn = plot_sweep(ax, measured, predicted, label=label, color=color, laws=laws)
    kept = measured["mean"].notna().to_numpy()
    common = dict(metric=metric, xs=tuple(measured["x"][kept]), layers=tuple(measured["layer"][kept]),
                  settings=tuple(s for s, keep in zip(settings, kept) if keep))
    record = sources(ax.figure)
    record.append(Source(points, mc={"samples": samples, "metrics": (metric,), "seed": 0}, **common))
    for law, kind, line in drawn:
        at = predicted[(predicted["law"] == law) & (predicted["kind"] == kind)].sort_values("x")
        chosen = [i for i, x in enumerate(xs) if x in set(at["x"])]
        read = dict(zip(at["x"], at["source_law"]))
        record.append(Source(line, metric, tuple(settings[i] for i in chosen), law=law, kind=kind,
                             xs=tuple(xs[i] for i in chosen),
                             layers=tuple(settings[i].depth if layer is None else layer for i in chosen),
                             point_laws=tuple(read[xs[i]] for i in chosen)))
    return measured, predicted
