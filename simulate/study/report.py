"""A study's report files in ``DIR/NAME/``: ``points.parquet``, ``levels.csv``, ``trends.csv``, ``study.md``.

The tables are those of :mod:`simulate.study.analysis` (columns: docs/formats.md, section
"study"); ``study.md`` is what a reader wants first: how the study was made (command, code
versions, dates, how many models ran, failed or are pending, warnings), the trend table, each
claim's statistic per cell with its interval, and for a study of two axes the phase diagram
of the trained growth class. Every file is written whole (:func:`theory.files.atomic_write`);
:func:`read_study` reads them back (figures and notebooks read nothing else).

A model that saw its corpus more than :data:`EPOCH_WARNING` times is named in a warning:
it may have overfitted its training text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from simulate.claims import CLAIMS, Interval, Kind
from simulate.study.analysis import levels_table, load_models, points_table, trends_table
from theory.cli import markdown_table
from theory.files import atomic_write, write_text_atomic

__all__ = ["EPOCH_WARNING", "REPORT_FILES", "Written", "StudyResults", "write_reports", "at_full_length",
           "read_study", "study_markdown"]

EPOCH_WARNING = 2.0
REPORT_FILES = ("points.parquet", "levels.csv", "trends.csv", "study.md")


@dataclass(frozen=True)
class Written:
    """What :func:`write_reports` wrote: the folder, models (ok ones), claim rows (trends), warnings."""

    folder: Path
    points: int
    claims: int
    warnings: int


@dataclass(frozen=True)
class StudyResults:
    """A study's report tables read back (:func:`read_study`)."""

    name: str
    points: pd.DataFrame
    levels: pd.DataFrame
    trends: pd.DataFrame


def _warnings(points: pd.DataFrame) -> list[str]:
    lines = []
    over = points[points["epochs"] > EPOCH_WARNING]
    for row in over.itertuples():
        lines.append(f"model {row.point} (scheme {row.scheme}, seed {row.seed}) saw {row.epochs:.2f} epochs of its "
                     f"corpus (more than {EPOCH_WARNING:g}): it may have overfitted")
    for row in points[points["status"] == "failed"].itertuples():
        lines.append(f"model {row.point} (scheme {row.scheme}, seed {row.seed}) failed: {row.error}")
    return lines


def _interval(mean, low, high, spec: str = ".3g") -> str:
    return Interval(mean, low, high).format(spec)


def _p_pair(raw: float, adjusted: float) -> str:
    """``raw (adjusted)`` p-values, '' without a test."""
    return f"{raw:.2g} ({adjusted:.2g})" if raw == raw else ""


def _header(study, points: pd.DataFrame, command: str) -> list[str]:
    counts = points["status"].value_counts()
    codes = sorted(c for c in points["code"].dropna().unique() if c)
    finished = points["finished_at"].replace("", pd.NA).dropna()
    seconds = points[["train_s", "score_s"]].sum().sum()
    lines = [f"# Study `{study.name}`", "",
             f"- Command: `{command}`",
             f"- Models: {len(points)} ({counts.get('ok', 0)} ok, {counts.get('failed', 0)} failed, "
             f"{counts.get('pending', 0)} pending); trend axes: {', '.join(study.axes)}; schemes: "
             f"{', '.join(study.schemes())}; seeds: {points['seed'].nunique()}",
             f"- Code versions of the models: {', '.join(codes) or 'none yet'}",
             f"- Trained between {finished.min()} and {finished.max()}" if len(finished) else "- Not trained yet",
             f"- Training and scoring time of the models: {seconds / 3600:.2f} h of one thread",
             "- Intervals: 95 % t intervals over seeds (a difference of two schemes paired by seed); shares of "
             "blocks: the wider of the t interval over seeds and Wilson's over the blocks pooled. Trends at the level "
             "of the design: the cell means' least-squares slope against log(axis) per e-fold (t on cells - 2 dof) "
             "with the line's lack-of-fit test; a rejected line (p < 0.05) leaves the verdict to the last minus the "
             "first cell (Welch); two axis values give no direction verdict. The family of a report's direction "
             "verdicts is adjusted by Holm's method and the verdicts read the adjusted p; docs/studies.md"]
    if study.tuned:
        beyond = f" (and {', '.join(f'{v:g}' for v in study.tune_lr_beyond)} past an edge where a cell's best was " \
                 "at it)" if study.tune_lr_beyond else ""
        lines.append(f"- Learning rate: tuned per scheme and cell over {', '.join(f'{v:g}' for v in study.tune_lr)}"
                     f"{beyond} on seed{'s' * (len(study.tune_seeds) > 1)} {', '.join(map(str, study.tune_seeds))} "
                     "(lowest mean held-out loss), then trained on every seed; the claims are judged at the chosen rates "
                     "(section \"Tuned learning rates\", tuning.csv)")
    if study.stability:
        lines.append(f"- Stability: every model is also trained for {study.stability[0]} of the {study.stability[1]} "
                     "steps (a whole schedule of its own); each verdict at the full length says whether the shorter "
                     "models give the same (column stability)")
    slopes = points.loc[points["status"] == "ok", "loss_slope"].dropna() if "loss_slope" in points else []
    if len(slopes):
        lines.append(f"- Convergence: training-loss slope over the last quarter of the steps, per 1000 steps: median "
                     f"{slopes.median():.3g}, from {slopes.min():.3g} to {slopes.max():.3g} over {len(slopes)} models")
    warnings = _warnings(points)
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    return lines


def _trend_section(trends: pd.DataFrame) -> list[str]:
    if trends.empty:
        return []
    table = pd.DataFrame({
        "claim": trends["claim"], "statistic": trends["statistic"], "scheme": trends["scheme"],
        "axis": trends["axis"], "group": trends["group"],
        "cells": trends["cells"],
        "slope per e-fold (cell means)": [_interval(r.slope, r.low, r.high) for r in trends.itertuples()],
        "line's lack of fit p": [f"{p:.2g}" if p == p else "" for p in trends["lack_of_fit_p"]],
        "last minus first cell": [_interval(r.contrast, r.contrast_low, r.contrast_high) for r in trends.itertuples()],
        "verdict from": trends["method"], "p (Holm)": [_p_pair(r.p_value, r.p_adjusted) for r in trends.itertuples()],
        "claimed": trends["direction"], "verdict": trends["verdict"],
        "models": [f"{r.n}" + (f" ({r.failed} failed)" if r.failed else "") + (f" ({r.pending} pending)"
                   if r.pending else "") for r in trends.itertuples()],
        "crossing": trends["crossing_note"]})
    if "stability" in trends and trends["stability"].astype(bool).any():
        table["stability"] = trends["stability"].to_numpy()
    return ["", "## Trends", "", markdown_table(table)]


def _level_section(study, levels: pd.DataFrame, trends: pd.DataFrame) -> list[str]:
    lines = ["", "## Each claim, cell by cell"]
    fields = list(study.cell_fields())
    for name in study.claims:
        claim = CLAIMS[name]
        rows = levels[levels["claim"] == name] if not levels.empty else levels
        lines += ["", f"### `{name}`: {claim.statement}", "", f"Source: {claim.source}. Statistic `{claim.statistic}`"
                  f" on {claim.describe_sides}" + (f"; claimed sign {'> 0' if claim.sign > 0 else '< 0'}"
                                                   if claim.sign is not None else "") + "."]
        if len(rows):
            table = rows[fields + ["statistic", "n"]].copy()
            table["mean [95% CI]"] = [_interval(r.mean, r.low, r.high) for r in rows.itertuples()]
            table["verdict"] = rows["verdict"].to_numpy()
            if "stability" in rows and rows["stability"].astype(bool).any():
                table["stability"] = rows["stability"].to_numpy()
            if rows["detail"].astype(bool).any():
                table["detail"] = rows["detail"].to_numpy()
            lines += ["", markdown_table(table)]
        for row in (trends[trends["claim"] == name] if len(trends) else trends).itertuples():
            lines.append(f"\nTrend along {row.axis} ({row.group}): slope of the cell means "
                         f"{_interval(row.slope, row.low, row.high)} per e-fold over {row.cells} axis values "
                         f"({row.n} models), last minus first cell "
                         f"{_interval(row.contrast, row.contrast_low, row.contrast_high)}"
                         + (f", claimed: {row.direction}, judged by the {row.method} (p {_p_pair(row.p_value, row.p_adjusted)})"
                            if row.direction else "")
                         + f" -> **{row.verdict}**" + (f"; {row.crossing_note}" if row.crossing_note else "") + ".")
    return lines


def _phase_section(study, levels: pd.DataFrame) -> list[str]:
    """Growth class and exponent per cell of a two-axis study, one table per scheme."""
    if len(study.axes) != 2 or levels.empty:
        return []
    first, second = study.axes
    lines = ["", f"## Phase diagram: trained growth class over {first} x {second}"]
    for claim in (c for c in CLAIMS.values() if c.kind is Kind.GROWTH):
        rows = levels[(levels["claim"] == claim.id) & (levels["statistic"] == "var_growth")]
        if rows.empty:
            continue
        cells = {(r[first], r[second]): f"{r['growth_class']} {_interval(r['mean'], r['low'], r['high'], '.2g')}"
                 for _, r in rows.iterrows()}
        columns = sorted(rows[second].unique())
        table = pd.DataFrame([{first: value, **{f"{second}={c}": cells.get((value, c), "") for c in columns}}
                              for value in sorted(rows[first].unique())])
        lines += ["", f"{claim.schemes[0]}: class, then the exponent p (polynomial) or the rate r per block "
                      "(exponential) with its interval", "", markdown_table(table)]
    return lines


def _tuning_section(study, tuning: pd.DataFrame | None) -> list[str]:
    """Each tuning cell: the held-out loss of every rate, the chosen one (bold), edge and failure flags."""
    if tuning is None or tuning.empty:
        return []
    fields = [c for c in tuning.columns if c not in ("lr", "n", "val_loss", "status", "chosen", "edge", "cell_status")]
    rows = []
    for cell, group in tuning.groupby(fields, sort=True):
        row = dict(zip(fields, cell if isinstance(cell, tuple) else (cell,)))
        for r in group.itertuples():
            text = {"pending": "pending", "diverged": "diverged"}.get(r.status, f"{r.val_loss:.4g}")
            row[f"lr={r.lr:g}"] = f"**{text}**" if r.chosen else text
        chosen = group[group["chosen"]]
        status = group["cell_status"].iloc[0]
        row["chosen"] = (f"{chosen['lr'].iloc[0]:g}" + (" (at the edge)" if chosen["edge"].iloc[0] else "")
                         if len(chosen) else status)
        rows.append(row)
    rates = [f"lr={rate:g}" for rate in sorted(tuning["lr"].unique())]
    table = pd.DataFrame(rows).reindex(columns=[*fields, *rates, "chosen"]).fillna({r: "not tried" for r in rates})
    beyond = (f" A cell whose best rate was at an edge of the grid went on past it to the next of "
              f"{', '.join(f'{v:g}' for v in study.tune_lr_beyond)}, one at a time while its best stayed at the edge "
              "(\"not tried\": it did not)." if study.tune_lr_beyond else "")
    return ["", "## Tuned learning rates", "", "Held-out loss (nats/byte, mean over the tuning seeds) per rate; the "
            f"chosen rate in bold. A rate chosen at the edge of what its cell tried may not be the best one.{beyond}",
            "", markdown_table(table)]


def study_markdown(study, points, levels, trends, command: str, tuning: pd.DataFrame | None = None) -> str:
    """The text of ``study.md`` (module docstring)."""
    lines = (_header(study, points, command) + _trend_section(trends) + _tuning_section(study, tuning)
             + _phase_section(study, levels) + _level_section(study, levels, trends))
    return "\n".join(lines) + "\n"


def write_reports(study, out, command: str | None = None) -> Written:
    """Read ``study``'s models from ``out`` and write its report files into ``out/NAME`` (``tuning.csv`` too
    for a tuned study)."""
    from simulate.study.tuning import resolve_tuning, tuning_table

    out = Path(out)
    folder = out / study.name
    folder.mkdir(parents=True, exist_ok=True)
    study = resolve_tuning(study, out)
    tuning = tuning_table(study, out) if study.tuned else None
    if tuning is not None:
        atomic_write(folder / "tuning.csv", lambda temp: tuning.to_csv(temp, index=False))
    models = load_models(study, out)
    points, levels, trends = points_table(study, models), levels_table(study, models), trends_table(study, models)
    command = command or f"python -m simulate study SPEC --out {out}"
    atomic_write(folder / "points.parquet", lambda temp: points.to_parquet(temp, index=False))
    atomic_write(folder / "levels.csv", lambda temp: levels.to_csv(temp, index=False))
    atomic_write(folder / "trends.csv", lambda temp: trends.to_csv(temp, index=False))
    write_text_atomic(folder / "study.md", study_markdown(study, points, levels, trends, command, tuning))
    return Written(folder, int((points["status"] == "ok").sum()), len(trends), len(_warnings(points)))


def at_full_length(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a report table at the study's full length (its longest ``steps``; every row of a study
    without that column): the verdicts a run reports, a stability study's shorter twins apart."""
    if "steps" not in table or table["steps"].isna().all():
        return table
    return table[table["steps"] == table["steps"].max()]


def read_study(out, name: str) -> StudyResults:
    """The report tables of study ``name`` in ``out`` (FileNotFoundError naming the missing file)."""
    folder = Path(out) / name
    for file in REPORT_FILES:
        if not (folder / file).is_file():
            raise FileNotFoundError(f"{folder / file}: no such study report (run python -m simulate study)")
    return StudyResults(name, pd.read_parquet(folder / "points.parquet"), pd.read_csv(folder / "levels.csv"),
                        pd.read_csv(folder / "trends.csv", keep_default_na=False, na_values=[""]))
