"""A study's report files in ``DIR/NAME/``: ``points.parquet``, ``levels.csv``, ``trends.csv``, ``calibration.csv``,
``study.md``.

The tables are the study's judgement (:func:`simulate.study.judge.analysis.judge_study`), written by
:mod:`simulate.study.judge.tables` (columns: docs/formats.md, section "study"); ``study.md`` formats the same
object (:func:`study_markdown`) and is what a
reader wants first: how the study was made (command, the versions its models rest on and where they
mix, dates, how many models ran, failed or are pending, the inference settings it ran with,
warnings), what its design can resolve (the calibration of its verdict rules on its own design), the
trend table, the tuned rates and each cell's sensitivity to them, each claim's statistic per cell
with its interval, and for a study of two axes the phase diagram of the trained growth class. Every
file is written whole (:func:`theory.files.atomic_write`).

A model that saw its corpus more than :data:`EPOCH_WARNING` times is named in a warning:
it may have overfitted its training text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from simulate.claims import CLAIMS, Kind
from simulate.claims.judgement import level_label
from simulate.study.judge.analysis import judge_study
from simulate.study.judge.rows import interval_words, size_words, stability_words, status_tally, verdict_interval
from simulate.study.judge.tables import StudyJudgement, write_tables
from simulate.study.read.models import VERSION_COLUMNS, candidate_models, load_models
from theory.cli import markdown_table
from theory.files import write_text_atomic
from theory.verdicts import GrowthClass, PointStatus, RateStatus, Verdict

__all__ = ["EPOCH_WARNING", "Written", "write_reports", "study_markdown"]

EPOCH_WARNING = 2.0


@dataclass(frozen=True)
class Written:
    """What :func:`write_reports` wrote: the folder, the judgement it formatted, models (ok ones), claim rows
    (trends), warnings."""

    folder: Path
    judgement: StudyJudgement
    points: int
    claims: int
    warnings: int


def _warnings(points: pd.DataFrame) -> list[str]:
    lines = []
    over = points[points["epochs"] > EPOCH_WARNING]
    for row in over.itertuples():
        lines.append(f"model {row.point} (scheme {row.scheme}, seed {row.seed}) saw {row.epochs:.2f} epochs of its "
                     f"corpus (more than {EPOCH_WARNING:g}): it may have overfitted")
    for row in points[points["status"] == PointStatus.FAILED].itertuples():
        lines.append(f"model {row.point} (scheme {row.scheme}, seed {row.seed}) failed: {row.error}")
    return lines


def _p_pair(raw: float, adjusted: float) -> str:
    """``raw (adjusted)`` p-values; the raw p alone outside the family; '' without a test."""
    if raw != raw:
        return ""
    return f"{raw:.2g} ({adjusted:.2g})" if adjusted == adjusted else f"{raw:.2g} (not in the family)"


def _versions(points: pd.DataFrame) -> list[str]:
    """What the models rest on: each version column's values with their counts, and a warning where they mix."""
    ok = points[points["status"] != PointStatus.PENDING]
    lines, mixed = [], []
    for column in VERSION_COLUMNS:
        counts = ok[column].replace("", "not recorded").value_counts()
        if len(counts):
            lines.append(f"{column}: " + ", ".join(f"{v} ({n} models)" for v, n in counts.items()))
        if (counts.index != "not recorded").sum() > 1:
            mixed.append(column)
    out = [f"- Versions the models rest on: {'; '.join(lines) or 'none yet'}"]
    if mixed:
        out.append(f"- **Mixed versions** ({', '.join(mixed)}): the models of one comparison may come from different "
                   "code or data; a verdict that pairs them rests on both (docs/studies.md#what-a-model-rests-on)")
    return out


def _mixed(levels: pd.DataFrame, trends: pd.DataFrame) -> list[str]:
    """The verdicts whose models rest on more than one version (code, corpus, Python, torch), named."""
    rows = [f"{r.claim} ({'trend along ' + r.axis + ', ' + r.group if 'axis' in table else r.statistic})"
            for table in (levels, trends) if "versions" in table for r in table[table["versions"] > 1].itertuples()]
    if not rows:
        return []
    return [f"- **{len(rows)} verdicts rest on models of several versions**: {'; '.join(rows[:12])}"
            + ("; ..." if len(rows) > 12 else "")]


def _header(study, points: pd.DataFrame, command: str) -> list[str]:
    finished = points["finished_at"].replace("", pd.NA).dropna()
    seconds = points[["train_s", "score_s"]].sum().sum()
    inference = study.inference
    level = level_label(inference.confidence)
    lines = [f"# Study `{study.name}`", "",
             f"- Command: `{command}`",
             f"- Models: {len(points)} ({status_tally(points['status'])}); trend axes: {', '.join(study.axes)}; "
             f"schemes: {', '.join(study.schemes())}; seeds: {points['seed'].nunique()}",
             *_versions(points),
             f"- Trained between {finished.min()} and {finished.max()}" if len(finished) else "- Not trained yet",
             f"- Training and scoring time of the models: {seconds / 3600:.2f} h of one thread",
             f"- Inference: {level} intervals (confidence {inference.confidence:g}); levels: t intervals over seeds "
             "(a difference of two schemes over the seeds' pairs; a share of blocks the wider of that and Wilson's over "
             "the blocks pooled), each a statement about its own cell, **unadjusted**. Trends: the cell means' "
             "least-squares slope against log(axis) per e-fold, t on the cells' degrees of freedom (the cells are the "
             "units: a random cell effect; where a line's cells changed rate, each rate's level is in the model and "
             f"the slope is the axis's within runs of one rate); the family of the full-length direction verdicts is "
             f"adjusted by {inference.method_name}'s method ({inference.multiplicity}), and each of its verdicts "
             "prints "
             "the interval it reads (simultaneous over the family under Bonferroni); a claim with the papers' size is "
             "also judged against it from that interval; the shorter length's verdicts are evidence of stability, "
             "unadjusted; docs/studies.md#verdicts"]
    if study.tuned:
        beyond = f" (and {', '.join(f'{v:g}' for v in study.tune_lr_beyond)} past an edge where a cell's best was " \
                 "at it)" if study.tune_lr_beyond else ""
        lines.append(f"- Learning rate: tuned per scheme and cell over {', '.join(f'{v:g}' for v in study.tune_lr)}"
                     f"{beyond} on seed{'s' * (len(study.tune_seeds) > 1)} {', '.join(map(str, study.tune_seeds))} "
                     "(lowest mean held-out loss), then trained on every seed at the chosen rate. The comparisons leave "
                     "the tuning seeds out (they chose the rate: a winner's curse) and run on two lines: `tuned`, each "
                     "cell at its chosen rate, and `fixed`, the cells at each scheme's most chosen rate (section "
                     "\"Tuned learning rates\", tuning.csv, and each cell's rate sensitivity)")
    if study.stability:
        lines.append(f"- Stability: every model is also trained for {study.stability[0]} of the {study.stability[1]} "
                     "steps (a whole schedule of its own); each full-length row gives the change of its statistic from "
                     f"the shorter models, paired by seed, with its {level_label(1 - 2 * inference.alpha)} interval: "
                     "stable where it lies inside the claim's margin, declared before the data "
                     "(simulate.claims.definitions.MARGINS, with its reason), moves where it lies beyond it, cannot "
                     "tell else (two one-sided tests)")
    slopes = points.loc[points["status"] == PointStatus.OK, "loss_slope"].dropna() if "loss_slope" in points else []
    if len(slopes):
        lines.append(f"- Convergence: training-loss slope over the last quarter of the steps, per 1000 steps: median "
                     f"{slopes.median():.3g}, from {slopes.min():.3g} to {slopes.max():.3g} over {len(slopes)} models")
    warnings = _warnings(points)
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    return lines


def _calibration_section(study, calibration: pd.DataFrame) -> list[str]:
    """The verdict rules' error rates and power simulated on this study's design."""
    if calibration.empty:
        return ["", "## What the design can resolve", "", "No direction verdict of the family to calibrate (a trend "
                "needs three axis values and a claimed direction)."]
    shown = calibration.assign(
        rate=[f"{r.rate:.3f} ± {r.rate_se:.3f}" for r in calibration.itertuples()],
        size_rate=[f"{r.size_rate:.3f} ± {r.size_rate_se:.3f}" if r.size_rate == r.size_rate else ""
                   for r in calibration.itertuples()])
    nominal = 1 - study.inference.confidence
    null = calibration[(calibration["scenario"] == "no trend") & (calibration["claim"] == "family")]
    family = f"{null['rate'].iloc[0]:.3f}" if len(null) else "not simulated"
    return ["", "## What the design can resolve", "",
            f"Synthetic studies of this design ({int(calibration['studies'].max())} each; the cells, seeds, rates and "
            "family that ran, a cell effect of the spread the data show beyond the seeds, a share's binomial floor), "
            "judged by the code that wrote this report (simulate.claims.calibration; "
            "docs/studies.md#what-the-design-can-resolve). `rate`: direction verdicts, false under the nulls (at most "
            f"{nominal:g} is nominal: heavy-tailed cells or seeds, and a rate step correlated with the axis), the "
            "power under the papers' effect, and the old rules' false verdicts (negative controls). `size_rate`: the "
            "papers' size rejected by the interval the verdict reads, false under the papers' effect (at most "
            f"{nominal:g}), the power to say \"smaller than the papers say\" under the nulls. The family's error "
            f"under the null: {family}. `detectable`: the smallest slope per e-fold the test detects at 80 % power at "
            "the family's level; a trend not resolved where that exceeds the papers' effect reads \"design cannot "
            "resolve\".", "",
            markdown_table(shown[["scenario", "claim", "statistic", "line", "cells", "seeds", "cell_to_seed", "rates",
                                  "rate", "size_rate", "detectable", "reference"]])]


def _trend_section(trends: pd.DataFrame) -> list[str]:
    if trends.empty:
        return []
    table = pd.DataFrame({
        "claim": trends["claim"], "statistic": trends["statistic"], "scheme": trends["scheme"],
        "axis": trends["axis"], "group": trends["group"], "line": trends["line"], "cells": trends["cells"],
        "rates": trends["rates"],
        "slope per e-fold [the interval the verdict reads]": [interval_words(r) for _, r in trends.iterrows()],
        "p (adjusted)": [_p_pair(r.p_value, r.p_adjusted) for r in trends.itertuples()],
        "claimed": trends["direction"], "verdict": trends["verdict"].map(str),
        "against the papers' size": [size_words(r) for _, r in trends.iterrows()],
        "detectable at 80 %": [f"{v:.3g}" if v == v else "" for v in trends["detectable"]],
        "models": [f"{r.n}" + (f" ({r.failed} failed)" if r.failed else "") + (f" ({r.pending} pending)"
                   if r.pending else "") for r in trends.itertuples()],
        "shape": trends["shape"], "crossing": trends["crossing"],
        "stability": [stability_words(r) for _, r in trends.iterrows()]})
    return ["", "## Trends", "", markdown_table(table)]


def _level_section(study, levels: pd.DataFrame, trends: pd.DataFrame) -> list[str]:
    lines = ["", "## Each claim, cell by cell"]
    fields = list(study.cell_fields())
    for name in study.claims:
        claim = CLAIMS[name]
        rows = levels[levels["claim"] == name] if not levels.empty else levels
        lines += ["", f"### `{name}`: {claim.statement}", "", f"Source: {claim.source}. Statistic `{claim.statistic}`"
                  f" on {claim.describe_sides}" + (f"; claimed sign {'> 0' if claim.sign > 0 else '< 0'}"
                                                   if claim.sign is not None else "")
                  + (f"; the papers' effect: {claim.reference.source}" if claim.reference else "") + "."]
        if len(rows):
            table = rows[fields + ["statistic", "n"]].copy()
            table["mean [CI]"] = [verdict_interval(r).format() for _, r in rows.iterrows()]
            table["verdict"] = rows["verdict"].map(lambda v: "" if v is None or v is Verdict.NO_DIRECTION else str(v))
            table["against the papers' size"] = [size_words(r) for _, r in rows.iterrows()]
            table["detectable at 80 %"] = [f"{v:.3g}" if v == v else "" for v in rows["detectable"]]
            table["stability"] = [stability_words(r) for _, r in rows.iterrows()]
            if rows["growth_class"].notna().any():
                table["growth class"] = rows["growth_class"].map(lambda v: "" if v is None else str(v)).to_numpy()
            if rows["detail"].astype(bool).any():
                table["detail"] = rows["detail"].to_numpy()
            lines += ["", markdown_table(table.loc[:, (table != "").any()])]
        for _, row in (trends[trends["claim"] == name] if len(trends) else trends).iterrows():
            size = size_words(row)
            lines.append(f"\nTrend along {row['axis']} ({row['group']}, line {row['line']}): slope of the cell means "
                         f"{interval_words(row)} per e-fold over {row['cells']} axis values "
                         f"({row['n']} models; {row['shape']})"
                         + (f", claimed: {row['direction']}" if row["direction"] else "")
                         + (f" (p {_p_pair(row['p_value'], row['p_adjusted'])})" if row["p_value"] == row["p_value"]
                            else "")
                         + f" -> **{row['verdict']}**" + (f"; {size}" if size else "")
                         + (f"; needs {row['needs']}" if row["needs"] else "")
                         + (f"; {row['crossing']}" if row["crossing"] else "") + ".")
    return lines


def _phase_section(study, levels: pd.DataFrame) -> list[str]:
    """Growth class and exponent per cell of a two-axis study, one table per scheme."""
    if len(study.axes) != 2 or levels.empty:
        return []
    first, second = study.axes
    lines = ["", f"## Phase diagram: trained growth class over {first} x {second} (a description of the profiles)"]
    for claim in (c for c in CLAIMS.values() if c.kind is Kind.GROWTH):
        rows = levels[levels["claim"] == claim.id]
        if rows.empty:
            continue
        cells = {(r[first], r[second]): f"{r['growth_class']} {verdict_interval(r).format('.2g')}"
                 for _, r in rows.iterrows()}
        columns = sorted(rows[second].unique())
        table = pd.DataFrame([{first: value, **{f"{second}={c}": cells.get((value, c), "") for c in columns}}
                              for value in sorted(rows[first].unique())])
        lines += ["", f"{claim.schemes[0]}: class, then the exponent p (polynomial) or the rate r per block "
                      f"(exponential) with its interval ({GrowthClass.NOT_IDENTIFIABLE}: too few blocks)", "",
                  markdown_table(table)]
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
            text = f"{r.val_loss:.4g}" if r.status is RateStatus.OK else str(r.status)
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


def _sensitivity_section(study, candidates) -> list[str]:
    """Each signed claim's statistic on the tuning seed at every rate its cell tried: how the comparison would read
    at the neighbouring rates (one model each, no interval)."""
    if not study.tuned or not candidates:
        return []
    fields = [f for f in study.cell_fields() if f != "steps"]
    full = study.stability[1] if study.stability else None
    tuning = [m for m in candidates if m.status is PointStatus.OK and m.seed in study.tune_seeds
              and (full is None or m.value("steps") == full)]
    rows = []
    for claim in (CLAIMS[n] for n in study.claims if CLAIMS[n].kind is Kind.SIGNED and not CLAIMS[n].paired):
        for cell in sorted({m.cell(fields) for m in tuning if m.scheme == claim.schemes[0]}):
            here = sorted((m for m in tuning if m.scheme == claim.schemes[0] and m.cell(fields) == cell),
                          key=lambda m: m.point.setting.lr)
            values = {f"lr={m.point.setting.lr:g}": m.stats.value(claim.statistic) for m in here}
            signs = {math.copysign(1, v) for v in values.values() if v == v and v != 0}
            rows.append({"claim": claim.id, "scheme": claim.schemes[0], **dict(zip(fields, cell)),
                         **{k: f"{v:.3g}" for k, v in values.items()},
                         "sign": "changes with the rate" if len(signs) > 1 else "same at every rate"})
    if not rows:
        return []
    table = pd.DataFrame(rows).fillna("not tried")
    return ["", "## Rate sensitivity", "", "Each claim's statistic on the tuning seed's model at every rate its cell "
            "tried (one model each: no interval); where the sign changes with the rate, the cell's verdict depends on "
            "the rate tuning chose.", "", markdown_table(table)]


def study_markdown(study, judgement: StudyJudgement, command: str, candidates=()) -> str:
    """The text of ``study.md`` (module docstring): ``judgement`` formatted, with ``candidates``, a tuned study's
    models at every rate it tried, for the rate sensitivity."""
    points, levels, trends = judgement.points, judgement.levels, judgement.trends
    lines = (_header(study, points, command) + _mixed(levels, trends)
             + _calibration_section(study, judgement.calibration) + _trend_section(trends)
             + _tuning_section(study, judgement.tuning) + _sensitivity_section(study, candidates)
             + _phase_section(study, levels) + _level_section(study, levels, trends))
    return "\n".join(lines) + "\n"


def write_reports(study, out, command: str | None = None) -> Written:
    """Read ``study``'s models from ``out``, judge them (:func:`simulate.study.judge.analysis.judge_study`) and write
    the judgement's files and ``study.md`` into ``out/NAME``."""
    from simulate.study.plan.tuning import resolve_tuning, tuning_table

    out = Path(out)
    folder = out / study.name
    folder.mkdir(parents=True, exist_ok=True)
    study = resolve_tuning(study, out)
    candidates = candidate_models(study, out) if study.tuned else []
    chosen = {p.key for p in study.sweep.points}
    models = [m for m in candidates if m.point.key in chosen] if study.tuned else load_models(study, out)
    judgement = judge_study(study, models, tuning_table(study, out) if study.tuned else None,
                            candidates if study.tuned else None)
    write_tables(folder, judgement)
    write_text_atomic(folder / "study.md", study_markdown(
        study, judgement, command or f"python -m simulate study SPEC --out {out}", candidates))
    points = judgement.points
    return Written(folder, judgement, int((points["status"] == PointStatus.OK).sum()), len(judgement.trends),
                   len(_warnings(points)))
