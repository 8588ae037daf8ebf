"""A study's models read back from disk, and its three tables: one row per model, per cell, per trend.

``points``
    One row per model of the study: its key, status, seed, every swept field, the Setting's
    and the options' main fields, epochs, code version, seconds and every statistic of
    :data:`simulate.study.statistics.STATISTICS` (NaN for a model that failed or is pending).
``levels``
    One row per claim and *cell* (one value of each swept field but the scheme): the
    statistic's mean over seeds with its 95 % t interval (a claim on two schemes: the
    difference paired by seed, the first scheme minus the second) and, for a claimed sign,
    its verdict. Growth claims give verify's growth rows (:func:`simulate.scores.growth_claims.growth_rows`)
    pooled over seeds, with the ``growth_class``; ``every_step`` gives the growth class at
    every logged step in its ``detail``.
``trends``
    One row per claim, study axis and group (the values of the swept fields that stay fixed
    along the axis): the slope against log(axis) (:func:`simulate.study.trends.fit_trend`),
    the claimed direction and its verdict, and the zero crossing of a signed claim.

Verdict of the every-step claim at a cell: ``holds`` when the pooled growth class is
exponential with a rate interval above 0 at every logged step after step 0, ``violated``
when it is polynomial at every one, ``inconclusive`` otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulate.scores.growth_claims import growth_rows, growth_summary, t_interval
from simulate.scores.trained_claims import signed_verdict
from simulate.study.claims import CLAIMS, Claim
from simulate.study.stability import stability_column
from simulate.study.statistics import STATISTICS, model_statistics, var_profiles
from simulate.study.trends import describe_crossing, direction_verdict, fit_trend, zero_crossing
from simulate.sweep.store import finished_records, read_point

__all__ = ["Model", "load_models", "distinct_models", "points_table", "levels_table", "trends_table", "GROWTH_LEMMA"]

# The verify lemma whose growth rule judges each growth claim.
GROWTH_LEMMA = {"p1-lemma-3.2-growth": "p1-lemma-3.2", "p1-lns-growth": "p1-lns"}
_POINT_FIELDS = ("depth", "width", "heads", "tokens", "lr", "weight_decay", "input_std")
_OPTION_FIELDS = ("steps", "batch", "log_every", "clip", "data")


@dataclass(frozen=True)
class Model:
    """One trained model of a study: its point, status (ok, failed, pending), record, long table, statistics."""

    point: object
    status: str
    record: dict | None
    table: pd.DataFrame | None
    stats: dict

    @property
    def scheme(self) -> str:
        return self.point.setting.scheme

    @property
    def seed(self) -> int:
        return self.point.seed

    def value(self, name: str):
        """The model's value of a swept field, a Setting field or an option."""
        if name in self.point.axes:
            return self.point.axes[name]
        if hasattr(self.point.setting, name):
            return getattr(self.point.setting, name)
        return self.point.options[name]

    def cell(self, fields) -> tuple:
        return tuple(self.value(f) for f in fields)

    def last_profile(self) -> np.ndarray:
        profiles = var_profiles(self.table, self.point.setting.depth)
        return profiles[max(profiles)]  # (L+1,)


def _load(points, out, statistics: bool) -> list[Model]:
    records = finished_records(out, [p.key for p in points])
    models = []
    for point in points:
        if point.key not in records:
            models.append(Model(point, "pending", None, None, dict.fromkeys(STATISTICS, math.nan)))
            continue
        record, table = read_point(out, point.key)
        ok = record["status"] == "ok"
        stats = (model_statistics(table, point.setting.depth) if ok and statistics
                 else dict.fromkeys(STATISTICS, math.nan))
        models.append(Model(point, record["status"], record, table, stats))
    return models


def load_models(study, out, statistics: bool = True) -> list[Model]:
    """Every model of ``study`` as found in ``out``: finished points read (and measured), the rest pending.

    ``statistics=False`` skips :func:`model_statistics` (about a second per deep model, for its
    growth fits at every logged step): figures that draw the tables need only those.
    """
    return _load(study.sweep.points, out, statistics)


def distinct_models(studies, out, statistics: bool = False) -> dict[str, Model]:
    """The models of several studies by point key, each read once (a model shared by two studies is one;
    its point is that of the first study that has it). ``statistics`` as in :func:`load_models`."""
    points = {}
    for study in studies:
        for point in study.sweep.points:
            points.setdefault(point.key, point)
    return {model.point.key: model for model in _load(list(points.values()), out, statistics)}


def points_table(study, models: list[Model]) -> pd.DataFrame:
    """One row per model (module docstring)."""
    columns = ["point", "status", "error", "seed", "scheme",
               *dict.fromkeys((*study.cell_fields(), *_POINT_FIELDS, *_OPTION_FIELDS)), "epochs", "code", "train_s",
               "score_s", "finished_at", *STATISTICS]  # also for a study with no model yet (a tuned one, early)
    rows = []
    for model in models:
        record = model.record or {}
        headline = record.get("headline") or {}
        row = {"point": model.point.key, "status": model.status, "error": record.get("error") or "",
               "seed": model.seed, "scheme": model.scheme}
        row.update({name: model.value(name) for name in (*study.cell_fields(), *_POINT_FIELDS, *_OPTION_FIELDS)})
        row.update(epochs=headline.get("epochs", math.nan), code=headline.get("code", ""),
                   train_s=headline.get("train_s", math.nan), score_s=headline.get("score_s", math.nan),
                   finished_at=record.get("finished_at", ""))
        row.update(model.stats)
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def claim_samples(claim: Claim, models: list[Model], fields) -> list[tuple[tuple, float]]:
    """``(cell, value)`` per seed of the claim's statistic among ``models`` (ok ones): one scheme's values,
    or the first scheme's minus the second's, paired by cell and seed."""
    ok = [m for m in models if m.status == "ok"]
    if not claim.paired:
        return [(m.cell(fields), m.stats[claim.statistic]) for m in ok if m.scheme == claim.schemes[0]]
    first, second = ({(m.cell(fields), m.seed): m.stats[claim.statistic] for m in ok if m.scheme == scheme}
                     for scheme in claim.schemes)
    return [(cell, value - second[(cell, seed)]) for (cell, seed), value in first.items() if (cell, seed) in second]


def _cells(study, models) -> list[tuple]:
    return sorted({m.cell(study.cell_fields()) for m in models})


def _level_row(claim: Claim, fields, cell, statistic: str, estimate, n: int, verdict: str, detail: str = "",
               label: str = "") -> dict:
    mean, low, high = estimate
    return {"claim": claim.name, "source": claim.source, "statistic": statistic, "scheme": "-".join(claim.schemes),
            **dict(zip(fields, cell)), "n": n, "mean": mean, "low": low, "high": high, "verdict": verdict,
            "growth_class": label, "detail": detail}


def _growth_levels(claim: Claim, fields, cell, members: list[Model]) -> list[dict]:
    curves = [m.last_profile() for m in members if m.status == "ok" and m.scheme == claim.schemes[0]]
    if len(curves) == 0:
        return []
    summary = growth_summary(np.stack(curves))  # curves: (S, L+1)
    return [_level_row(claim, fields, cell, row["metric"], (row["measured"], row["ci_low"], row["ci_high"]),
                       len(curves), "holds" if row["verdict"] == "holds as a bound" else row["verdict"],
                       row["comment"], summary.label)
            for row in growth_rows(GROWTH_LEMMA[claim.name], "", summary)]


def _every_step_levels(claim: Claim, fields, cell, members: list[Model]) -> list[dict]:
    ok = [m for m in members if m.status == "ok" and m.scheme == claim.schemes[0]]
    if not ok:
        return []
    profiles = [var_profiles(m.table, m.point.setting.depth) for m in ok]
    steps = sorted(set.intersection(*(set(p) for p in profiles)) - {0})
    labels = []
    for step in steps:
        summary = growth_summary(np.stack([p[step] for p in profiles]))  # (S, L+1)
        exponential = summary.label == "exponential" and summary.rate[1] > 0
        labels.append("exponential" if exponential else summary.label)
    count = sum(label == "exponential" for label in labels)
    if steps and count == len(steps):
        verdict = "holds"
    elif steps and all(label == "polynomial" for label in labels):
        verdict = "violated"
    else:
        verdict = "inconclusive"
    classes = ", ".join(f"{step}: {label[:3]}" for step, label in zip(steps, labels))
    share = count / len(steps) if steps else math.nan
    return [_level_row(claim, fields, cell, "exponential_step_share", (share, math.nan, math.nan), len(ok), verdict,
                       f"exponential at {count} of {len(steps)} logged steps after step 0 ({classes})")]


def levels_table(study, models: list[Model]) -> pd.DataFrame:
    """One row per claim and cell (module docstring)."""
    fields = study.cell_fields()
    rows = []
    for name in study.claims:
        claim = CLAIMS[name]
        for cell in _cells(study, models):
            members = [m for m in models if m.cell(fields) == cell]
            if claim.kind == "growth":
                rows += _growth_levels(claim, fields, cell, members)
            elif claim.kind == "every_step":
                rows += _every_step_levels(claim, fields, cell, members)
            else:
                values = [v for _, v in claim_samples(claim, members, fields)]
                estimate = t_interval(values)
                verdict = signed_verdict(estimate, claim.sign) if claim.sign is not None else ""
                rows.append(_level_row(claim, fields, cell, claim.statistic, estimate,
                                       int(np.isfinite(values).sum()), verdict))
    levels = pd.DataFrame(rows, columns=None if rows else ["claim", "source", "statistic", "scheme", *fields, "n",
                                                           "mean", "low", "high", "verdict", "growth_class", "detail"])
    levels["stability"] = ""
    if len(levels):
        pairing = ["claim", "statistic", "scheme", *(f for f in fields if f != "steps")]
        levels["stability"] = stability_column(levels, pairing, study.stability)
    return levels


def _trend_row(claim: Claim, axis: str, group: dict, members: list[Model]) -> dict:
    samples = claim_samples(claim, members, (axis,))
    x = np.array([cell[0] for cell, _ in samples], dtype=float)  # (n,)
    y = np.array([value for _, value in samples], dtype=float)  # (n,)
    trend = fit_trend(x, y)
    direction = claim.direction(axis)
    failed = sum(m.status == "failed" for m in members if m.scheme in claim.schemes)
    pending = sum(m.status == "pending" for m in members if m.scheme in claim.schemes)
    row = {"claim": claim.name, "source": claim.source, "statistic": claim.statistic,
           "scheme": "-".join(claim.schemes), "axis": axis, **group,
           "group": ", ".join(f"{k}={v}" for k, v in group.items()) or "all", "n": trend.n, "failed": failed,
           "pending": pending, "slope": trend.slope, "low": trend.low, "high": trend.high,
           "direction": {1: "rises", -1: "falls", None: ""}[direction],
           "verdict": direction_verdict(trend, direction), "crossing": math.nan, "crossing_low": math.nan,
           "crossing_high": math.nan, "crossing_note": ""}
    if claim.sign is not None and x.size:
        crossing = zero_crossing(trend, float(x.min()), float(x.max()))
        row.update(crossing=crossing.estimate, crossing_low=crossing.low, crossing_high=crossing.high,
                   crossing_note=describe_crossing(crossing, axis))
    return row


def trends_table(study, models: list[Model]) -> pd.DataFrame:
    """One row per claim, study axis and group (module docstring)."""
    rows = []
    for name in study.claims:
        claim = CLAIMS[name]
        for axis in study.axes:
            fields = study.group_fields(axis)
            for group in sorted({m.cell(fields) for m in models}):
                members = [m for m in models if m.cell(fields) == group]
                rows.append(_trend_row(claim, axis, dict(zip(fields, group)), members))
    trends = pd.DataFrame(rows, columns=None if rows else [
        "claim", "source", "statistic", "scheme", "axis", "group", "n", "failed", "pending", "slope", "low", "high",
        "direction", "verdict", "crossing", "crossing_low", "crossing_high", "crossing_note"])
    trends["stability"] = ""
    if len(trends):
        pairing = ["claim", "statistic", "scheme", "axis",
                   *(f for axis in study.axes for f in study.group_fields(axis) if f != "steps")]
        trends["stability"] = stability_column(trends, list(dict.fromkeys(pairing)), study.stability)
    return trends
