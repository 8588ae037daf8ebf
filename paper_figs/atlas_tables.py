"""What notebook 08 prints about the atlases, read from the shipped files: what each holds, its trends, their verdicts.

Nothing here is typed in: the counts and hours of a results folder come from the records of its
models (``points/KEY.parquet``, the same records its ``README.md`` is written from,
:mod:`simulate.study.write.provenance`), a study's axes, lengths and seeds from its report's points, the
laws of an extrapolation from its table. Only columns that exist are read, by name, so a report
that gains columns reads the same. Every printed trend names its line (a tuned study judges each
trend on its ``tuned`` and its ``fixed`` line, two trends of one claim), and says so where the
figures do not draw it (they draw a study's levels: :data:`DRAWN_LINES`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from paper_figs.studies import atlas_name, gain_labels
from simulate.study.atlas import atlas_results, atlas_studies
from simulate.study.judge.rows import cell_text, interval_words
from theory.verdicts import PointStatus, RateLine, Verdict

__all__ = ["SHOWN_TREND_COLUMNS", "DRAWN_LINES", "shipped_models", "models_sentence", "study_overview",
           "trend_table", "verdict_counts", "verdict_lines", "gain_trend_lines", "extrapolation_laws"]

# The columns of a trend a reader needs, in order; those a report lacks are left out.
SHOWN_TREND_COLUMNS = ("claim", "scheme", "axis", "group", "line", "slope per e-fold", "direction", "verdict",
                       "stability", "n", "failed", "pending", "shape", "crossing")
# The lines whose cells a study's levels.csv holds, so the lines the atlas figures draw: a tuned study's tuned line
# (its fixed line is judged in the trends alone), an untuned study's one line
# (simulate.study.judge.analysis.levels_table).
DRAWN_LINES = (RateLine.TUNED, RateLine.TRAINED)


def shipped_models(folder) -> dict:
    """The distinct models a results folder ships (one record each in ``points/``, shared models once):
    ``models, ok, failed, train_h, score_h``, as its ``README.md`` counts them."""
    from simulate.sweep.store import finished_records, record_status

    keys = [path.stem for path in sorted((Path(folder) / "points").glob("*.parquet"))]
    records = finished_records(folder, keys).values()
    headlines = [r.get("headline") or {} for r in records]
    statuses = [record_status(r) for r in records]
    return {"models": len(records), "ok": statuses.count(PointStatus.OK), "failed": statuses.count(PointStatus.FAILED),
            "train_h": sum(h.get("train_s", 0.0) for h in headlines) / 3600,
            "score_h": sum(h.get("score_s", 0.0) for h in headlines) / 3600}


def models_sentence(folder) -> str:
    """One line: how many distinct models a results folder ships and what they cost to train and score."""
    shipped = shipped_models(folder)
    return (f"{atlas_name(folder)}: {shipped['models']} distinct models ({shipped['ok']} ok, {shipped['failed']} "
            f"failed), {shipped['train_h'] + shipped['score_h']:.2f} h of one CPU thread (training "
            f"{shipped['train_h']:.2f} h, scores {shipped['score_h']:.2f} h); a model shared by two studies, or a "
            "tuning model also at its cell's chosen rate, is counted once")


def _values(points: pd.DataFrame, field: str) -> str:
    values = sorted(points[field].unique())
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def study_overview(folder) -> pd.DataFrame:
    """One row per study of a results folder: its axes and their values, the fixed sizes, the training lengths,
    seeds, how the learning rate was set, and the models in its report (every length) by status."""
    rows = []
    for name, study in atlas_studies(folder).items():
        points = atlas_results(name, folder).points
        fixed = [f for f in ("depth", "width", "steps") if f not in study.axes and f in points]
        rows.append({"atlas": atlas_name(folder), "study": name,
                     "axis values": "; ".join(f"{axis} = {_values(points, axis)}" for axis in study.axes),
                     "fixed": ", ".join(f"{f} = {_values(points, f)}" for f in fixed),
                     "seeds": points["seed"].nunique(),
                     "learning rate": "tuned per scheme and cell" if study.tuned else _values(points, "lr"),
                     "models in the report": len(points),
                     "ok / failed / pending": "/".join(str((points["status"] == s).sum()) for s in PointStatus),
                     "stability (shorter length)": "yes" if study.stability else "no"})
    return pd.DataFrame(rows)


def trend_table(trends: pd.DataFrame) -> pd.DataFrame:
    """Every trend as a reader reads it: the slope per e-fold with the interval its verdict reads in one column
    (:func:`simulate.study.judge.rows.interval_words`: a family member's at the family's level, named), the columns of
    :data:`SHOWN_TREND_COLUMNS` that the report has, and '' (not NaN) where a trend has no value."""
    out = trends.copy()
    out["slope per e-fold"] = [interval_words(row) for _, row in trends.iterrows()]  # the interval the verdict reads
    out = out[[c for c in SHOWN_TREND_COLUMNS if c in out]]
    return out.astype(object).map(cell_text).reset_index(drop=True)


def verdict_counts(trends: pd.DataFrame) -> str:
    """One sentence counting every verdict on a claimed direction, each kind named (none left out).

    >>> t = pd.DataFrame({"direction": ["rises", "falls", "rises", ""],
    ...                   "verdict": [Verdict.HOLDS, Verdict.TOO_FEW_AXIS_VALUES, Verdict.HOLDS, Verdict.NO_DIRECTION]})
    >>> verdict_counts(t)
    'of 3 trends with a claimed direction, the verdict is holds for 2, too few axis values for 1 (two axis values \
give no direction verdict)'
    """
    claimed = trends[trends["direction"] != ""]
    counts = Counter(Verdict.parse(v) if v is not None and v == v else None for v in claimed["verdict"])
    first = [Verdict.HOLDS, Verdict.VIOLATED, Verdict.INCONCLUSIVE, Verdict.UNRESOLVABLE]
    order = [v for v in first if v in counts] + [v for v in counts if v not in first]
    note = " (two axis values give no direction verdict)" if Verdict.TOO_FEW_AXIS_VALUES in counts else ""
    return (f"of {len(claimed)} trends with a claimed direction, the verdict is "
            + ", ".join(f"{v or 'none'} for {counts[v]}" for v in order) + note)


def verdict_lines(trends: pd.DataFrame) -> list[str]:
    """One line per atlas, study, axis, group and line of the trends with a claimed direction (in the report's
    order): the claims whose direction holds and those violated.

    >>> t = pd.DataFrame({"atlas": "atlas", "study": "depth", "axis": "depth", "group": "all", "claim": "p1-lns-prune",
    ...                   "line": [RateLine.TUNED, RateLine.FIXED], "direction": "rises", "verdict": Verdict.VIOLATED})
    >>> print("\\n".join(verdict_lines(t)))
    atlas/depth, along depth (all), line tuned: holds none; violated p1-lns-prune
    atlas/depth, along depth (all), line fixed (not drawn in the figures): holds none; violated p1-lns-prune
    """
    claimed = trends[trends["direction"] != ""]
    out = []
    for (atlas, study, axis, group, line), rows in claimed.groupby(["atlas", "study", "axis", "group", "line"],
                                                                    sort=False):
        held = ", ".join(rows[rows["verdict"] == Verdict.HOLDS]["claim"]) or "none"
        against = ", ".join(rows[rows["verdict"] == Verdict.VIOLATED]["claim"]) or "none"
        out.append(f"{atlas}/{study}, along {axis} ({group}), {_line_words(line)}: holds {held}; violated {against}")
    return out


def gain_trend_lines(trends: pd.DataFrame) -> list[str]:
    """One line per trend of LNS against Pre-LN (scheme ``lns-pre``), in the report's order: the claim, its line,
    what its statistic is (:func:`paper_figs.studies.gain_labels`), the axis, atlas, study and group, the slope per
    e-fold with its interval (:func:`trend_table`), the verdict, its stability and where the cell means cross 0."""
    gains = trends[trends["scheme"] == "lns-pre"]
    out = []
    for row, slope in zip(gains.itertuples(), trend_table(gains)["slope per e-fold"]):
        stability = f", stability: {row.stability}" if row.stability is not None else ""
        out.append(f"{row.claim}, {_line_words(row.line)}, {gain_labels(row.claim)[0]}, along {row.axis} "
                   f"({row.atlas}/{row.study}, {row.group}): slope {slope} -> {row.verdict}{stability}; "
                   f"{row.crossing}")
    return out


def _line_words(line: RateLine) -> str:
    """``line NAME``, and that the figures do not draw it where they do not (:data:`DRAWN_LINES`)."""
    return f"line {line}" + ("" if line in DRAWN_LINES else " (not drawn in the figures)")


def extrapolation_laws(table: pd.DataFrame) -> list[str]:
    """The laws an ``extrapolation.csv`` tests, in its order.

    >>> extrapolation_laws(pd.DataFrame({"law": ["bridge", "growth", "bridge", "increment"]}))
    ['bridge', 'growth', 'increment']
    """
    return list(dict.fromkeys(table["law"]))
