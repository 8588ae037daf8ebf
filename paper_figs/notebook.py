"""What the notebooks share, imported rather than copied into a cell: size modes, progress, verdict tables.

Each notebook runs at one of three sizes (:func:`notebook_mode`): ``quick`` under the tests
(``QUICK=1``: seconds), ``default`` when a researcher opens it (minutes on two cores) and
``full`` (the paper-size runs) when the notebook's ``FULL = True`` switch or ``FULL=1`` in
the environment asks for it. Long loops go through :func:`progress`; a law is put beside a
measurement with :func:`verdict_table`, which adds the worst layer and its ``|z|`` to the
rows of :func:`simulate.compare.compare` and says what curve was compared.

>>> pick("default", quick=1, default=2, full=3)
2
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from simulate.compare import (COLUMNS, Z_LIMIT, compare, describe_curve, describe_setting, run_monte_carlo,
                              verdict_sentence)
from simulate.verify import states_the_lemma
from theory.verdicts import Verdict

__all__ = ["MODES", "notebook_mode", "pick", "progress", "progress_as_output", "setup_display", "verdict_table",
           "worst_layer", "knob_table", "at_layer", "law_at", "verdict_commentary"]

MODES = ("quick", "default", "full")


def notebook_mode(full: bool = False) -> str:
    """``'quick'`` when ``QUICK=1`` (the tests), ``'full'`` when ``full`` or ``FULL=1``, else ``'default'``.

    >>> notebook_mode(full=True) in ("quick", "full")
    True
    """
    if os.environ.get("QUICK") == "1":
        return "quick"
    return "full" if full or os.environ.get("FULL") == "1" else "default"


def pick(mode: str, *, quick, default, full):
    """The value for ``mode`` (one of :data:`MODES`)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not allowed: one of {', '.join(MODES)}")
    return {"quick": quick, "default": default, "full": full}[mode]


def progress(iterable, desc: str, total: int | None = None):
    """A progress bar over a long loop (a widget in Jupyter, text elsewhere)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, leave=False)


def progress_as_output():
    """A context in which text progress bars (tqdm on stderr: the simulator's, verify's) print as plain output.

    Jupyter shows stderr as an error stream; a bar there looks like a failure.
    """
    import contextlib
    import sys

    return contextlib.redirect_stderr(sys.stdout)


def setup_display() -> None:
    """Wide pandas tables, as the notebooks print them."""
    pd.set_option("display.width", 170)
    pd.set_option("display.max_columns", 20)
    pd.set_option("display.max_colwidth", 70)


def worst_layer(measured: pd.DataFrame, curve: pd.DataFrame) -> tuple[int, float]:
    """The layer >= 1 where ``z = (measured - predicted)/sem`` is largest in magnitude, and that ``|z|``.

    ``curve`` holds the rows of one law, metric and kind of ``theory.predict``; for an upper
    (lower) bound the worst layer is where the measurement is furthest above (below) it.

    >>> m = pd.DataFrame({"layer": [1, 2], "metric": "var", "mean": [1.0, 3.0], "sem": [0.5, 0.5]})
    >>> c = pd.DataFrame({"layer": [1, 2], "metric": "var", "kind": "exact", "value": [1.0, 2.0]})
    >>> worst_layer(m, c)
    (2, 2.0)
    """
    both = curve.merge(measured, on=["layer", "metric"], how="inner")
    both = both[(both["layer"] >= 1) & (both["sem"] > 0) & np.isfinite(both["value"]) & np.isfinite(both["mean"])]
    if both.empty:
        return -1, float("nan")
    z = ((both["mean"] - both["value"]) / both["sem"]).to_numpy(float)  # (n,)
    kind = both["kind"].iloc[0]
    score = z if kind == "upper" else -z if kind == "lower" else np.abs(z)
    worst = int(np.argmax(score))
    return int(both["layer"].iloc[worst]), float(abs(z[worst]))


def verdict_table(table: pd.DataFrame, prediction: pd.DataFrame, law: str, label: str = "",
                  metric: str | None = None) -> pd.DataFrame:
    """The comparison rows of one law against a measured table, with what was compared and the worst layer.

    Parameters
    ----------
    table : DataFrame
        The simulator's table.
    prediction : DataFrame
        ``theory.predict`` of the same setting.
    metric : str, optional
        Only this metric (default: every measured metric the law predicts).

    Returns
    -------
    DataFrame
        :data:`simulate.compare.COLUMNS` plus ``compared`` (in words), ``worst layer`` and ``worst |z|``.
    """
    curve = prediction[(prediction["law"] == law) & prediction["metric"].isin(table["metric"].unique())]
    if metric is not None:
        curve = curve[curve["metric"] == metric]
    rows = pd.DataFrame(compare(law, label, table, curve), columns=COLUMNS)
    worst = [worst_layer(table, curve[(curve["metric"] == r.metric) & (curve["kind"] == r.kind)])
             for r in rows.itertuples(index=False)]
    rows["compared"] = [describe_curve(r.id, r.kind) for r in rows.itertuples(index=False)]
    rows["worst layer"] = [layer for layer, _ in worst]
    rows["worst |z|"] = [z for _, z in worst]
    return rows


def at_layer(frame: pd.DataFrame, metric: str, layer: int, column: str) -> float:
    """One value of a long table (measured: ``column`` 'mean', 'sem', ...), NaN when absent."""
    rows = frame[(frame["metric"] == metric) & (frame["layer"] == layer)]
    return float(rows[column].iloc[0]) if len(rows) else float("nan")


def law_at(prediction: pd.DataFrame, law: str, metric: str, layer: int) -> float:
    """One predicted value of ``law`` (NaN when ``theory.predict`` has none at that layer)."""
    rows = prediction[(prediction["law"] == law) & (prediction["metric"] == metric) & (prediction["layer"] == layer)]
    return float(rows["value"].iloc[0]) if len(rows) else float("nan")


def verdict_commentary(table: pd.DataFrame) -> list[str]:
    """Lines for a verify table (``simulate.verify``), by verdict, then lemma and kind of curve, each saying what
    its verdict means there: a law that holds is within :data:`simulate.compare.Z_LIMIT` sem at every layer (its
    largest last-layer ``|z|`` shown); a bound gives its tightness; a growth class or a claim (whose ``z`` is no
    distance from a curve) one line per setting with its fit in words; every other verdict one line per setting.

    The verdicts are those of the curves that state each lemma (:func:`simulate.verify.states_the_lemma`, as the
    summary table counts them); a lemma's approximate curves beside its exact law come after, apart, by verdict
    too (the summary's ``approx_curves``), so a lemma that holds is never listed under "violated".

    >>> t = pd.DataFrame({"id": ["moe-gates", "p1-lemma-3.2", "moe-gates"], "kind": ["exact", "growth", "approx"],
    ...                   "verdict": ["holds", "holds", "violated"], "z": [1.5, 14.1, 5.0], "setting": ["a", "b", "a"],
    ...                   "metric": ["var_mlp", "var_growth", "token_cos"], "layer": 4,
    ...                   "comment": ["", "exponent 1.2 [1.1, 1.3]: Theta(L) holds", "|z| = 5"]})
    >>> print("\\n".join(line for line in verdict_commentary(t) if "theory's note" not in line))  # doctest: +ELLIPSIS
    === holds: 2 rows, lemmas moe-gates, p1-lemma-3.2
      moe-gates (derived here ...), exact curve, 1 settings: within 4 sem at every layer (last-layer |z| <= 1.50)
      p1-lemma-3.2 (P1 Lemma 3.2), growth class, 1 settings, judged by the growth class of the measured curve (no |z| ...
        [b] var_growth L=4: exponent 1.2 [1.1, 1.3]: Theta(L) holds
    === approximate curves beside an exact law (not the lemma's statement: the summary's approx_curves): 1 rows, ...
    --- violated: 1 rows, lemmas moe-gates
      moe-gates (derived here ...), approximate curve, 1 settings:
        [a] token_cos L=4: the approximate law moe-gates (derived here) differs from the measurement (|z| = 5)
    """
    table = table.assign(verdict=[Verdict.parse(v) for v in table["verdict"]])  # words read from verify.csv too
    states = states_the_lemma(table)
    noted: set = set()
    lines = _commentary_by_verdict(table[states], "===", noted)
    beside = table[~states]
    if len(beside):
        lines.append(f"=== approximate curves beside an exact law (not the lemma's statement: the summary's "
                     f"approx_curves): {len(beside)} rows, lemmas {', '.join(sorted(beside.id.unique()))}")
        lines += _commentary_by_verdict(beside, "---", noted)
    return lines


def _commentary_by_verdict(table: pd.DataFrame, mark: str, noted: set) -> list[str]:
    """:func:`verdict_commentary`'s lines for ``table`` (verdicts parsed), each verdict headed by ``mark``; a
    lemma's note once, the first time it is named (``noted``: the lemmas noted so far, updated)."""
    import theory

    words = {"exact": "exact curve", "approx": "approximate curve", "upper": "upper bound", "lower": "lower bound",
             "growth": "growth class", "claim": "claimed sign"}
    lines = []
    for verdict, group in table.groupby("verdict", sort=False):
        lines.append(f"{mark} {verdict}: {len(group)} rows, lemmas {', '.join(sorted(group.id.unique()))}")
        for (lemma_id, kind), rows in group.groupby(["id", "kind"], sort=False):
            lemma = theory.LEMMAS.get(lemma_id)
            head = f"  {lemma_id} ({lemma.source if lemma else ''}), {words.get(kind, kind)}, {len(rows)} settings"
            if kind in ("growth", "claim"):  # a fit's verdict, not a distance from a curve: its own words
                lines.append(f"{head}, judged by the {words[kind]} of the measured curve (no |z| from a curve):")
                lines += [f"    [{r['setting']}] {r['metric']} L={r['layer']}: {r['comment']}"
                          for r in rows.to_dict("records")]
            elif verdict is Verdict.HOLDS and kind in ("exact", "approx"):
                lines.append(f"{head}: within {Z_LIMIT:g} sem at every layer "
                             f"(last-layer |z| <= {rows.z.abs().max():.2f})")
            elif verdict is Verdict.HOLDS_AS_BOUND:
                lines.append(f"{head}: tightness {rows.tightness.min():.3g}..{rows.tightness.max():.3g} (1 = tight)")
            elif verdict in (Verdict.NOT_APPLICABLE, Verdict.NO_PREDICTION):
                lines.append(f"{head}: {rows.comment.iloc[0]}")
            else:
                lines.append(f"{head}:")
                lines += [f"    [{r['setting']}] {r['metric']} L={r['layer']}: {verdict_sentence(r)}"
                          for r in rows.to_dict("records")]
            if lemma is not None and lemma.notes and lemma_id not in noted:
                noted.add(lemma_id)
                lines.append(f"      theory's note: {lemma.notes}")
    return lines


def knob_table(settings, xs, metric: str, layer, laws, *, samples: int, aliases=None):
    """Measured and predicted ``metric`` at ``layer`` for settings that differ in one knob, and their verdicts.

    Parameters
    ----------
    settings, xs : sequences of equal length
        The settings and the knob value each stands for.
    layer : int or None
        The layer read off (None: each setting's last; a blow-up before it: the last measured).
    laws : sequence of str
        Law ids of ``theory.predict`` to put beside the measurement (one column each).
    aliases : dict, optional
        Laws that go by another id at some settings (:func:`paper_figs.measure.with_aliases`).

    Returns
    -------
    (DataFrame, list of dict)
        Columns ``x, measured, mc_sem, blow-up layer`` and one per law; the
        :func:`simulate.compare.compare` rows of each law at that layer.
    """
    from paper_figs.measure import predict, with_aliases

    rows, verdicts = [], []
    for setting, x in zip(settings, xs):
        table, blowup = run_monte_carlo(setting, samples=samples, metrics=(metric,))
        prediction = with_aliases(predict(setting), aliases, x="layer")
        at = min(layer or setting.depth, int(table["layer"].max()))
        row = {"x": x, "measured": at_layer(table, metric, at, "mean"), "mc_sem": at_layer(table, metric, at, "sem"),
               "blow-up layer": blowup}
        for law in laws:
            row[law] = law_at(prediction, law, metric, at)
            curve = prediction[(prediction["law"] == law) & (prediction["metric"] == metric)
                               & (prediction["layer"] == at)]
            verdicts += compare(law, describe_setting(setting), table[table["layer"].isin([0, at])], curve, blowup)
        rows.append(row)
    return pd.DataFrame(rows), verdicts
