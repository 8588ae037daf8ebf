"""Run one or several studies into a directory: each distinct model trained once, then every report.

Layout of ``DIR``::

    DIR/points/KEY.parquet     one trained and scored model (simulate.study.train.point), as a sweep point
    DIR/runs/KEY/              its training run: logs, scores, model.safetensors (not needed by reports)
    DIR/summary.csv            one row per model of all the studies (simulate.sweep.store)
    DIR/NAME/spec.toml         each study's spec, then its reports (simulate.study.write.report)

Studies that share a model (the same Setting, options and seed) share its point: the
union of their points runs as one sweep (:func:`simulate.sweep.run_sweep`: resumable, local
pool or Ray), by default longest first so that the last worker to finish is not the one
holding the deepest model; ``order="cheapest"`` runs the cheapest first instead, so that a
study which spans several sittings has whole cells of its cheaper axis values, and their
reports, early (the deepest models come last); both rank by :func:`point_cost`. A study's
key leaves the code version out (:attr:`simulate.sweep.tasks.Task.versioned`):
a point on disk is reused whatever code made it, its version is in its record, and
the reports say which versions they rest on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from simulate.study.plan.spec import Study, check_names
from simulate.study.plan.tuning import resolve_studies, tuning_points
from simulate.sweep import SweepReport, run_sweep
from simulate.sweep.spec import Sweep
from theory.files import write_text_atomic

__all__ = ["RUNS_DIR", "ORDERS", "union_sweep", "round_sweep", "point_cost", "write_specs", "run_studies"]

RUNS_DIR = "runs"
ORDERS = ("longest", "cheapest")  # the order the points run in (module docstring)


def point_cost(point) -> float:
    """A proportional estimate of a point's work, in block-forwards of one sequence x a block's per-token work.

    Training: 3 passes (forward and backward) of ``batch`` sequences per step through ``L``
    blocks; probes: about 8 (two forward-mode tangents) of ``probe_batch`` sequences per logged
    step; scores (P2's, :mod:`simulate.scores`) on ``sequences`` held-out sequences: the base
    run, three runs from each block onwards (pruning, causal, usefulness) and one from the
    first block of each permuted pair, which at L=64 outweighs 400 training steps.

    >>> from theory.setting import Setting
    >>> from simulate.sweep.spec import Point
    >>> options = {"steps": 400, "batch": 16, "log_every": 25, "probe_batch": None, "sequences": 64, "pairs": "all"}
    >>> point = lambda depth: Point(0, "study", Setting(depth=depth), 0, options, {}, "")
    >>> round(point_cost(point(64)) / point_cost(point(32)), 2)  # the permutation runs grow as L^3
    4.96
    """
    s, options = point.setting, point.options
    depth, scored = s.depth, bool(options.get("scores", True))
    per_token = 4 * s.width**2 + 3 * s.width * s.resolved_ffn_width + 2 * s.tokens * s.width
    logged = options["steps"] // options["log_every"] + 1
    probe_batch = options["probe_batch"] or options["batch"]
    pairs = options["pairs"]
    permuted = sum(depth - first + 1 for first in range(1, depth + 1) for second in range(first + 1, depth + 1)
                   if pairs == "all" or second - first <= pairs)
    score_passes = depth + 3 * depth * (depth + 1) / 2 + permuted if scored else 0
    forwards = (3 * options["steps"] * options["batch"] + 8 * logged * probe_batch) * depth \
        + options["sequences"] * score_passes
    return float(forwards * s.tokens * per_token)


def union_sweep(studies: list[Study], out: Path, order: str = "longest", first=frozenset()) -> Sweep:
    """The distinct points of ``studies`` (by key) in ``order`` (:data:`ORDERS`), those whose key is in ``first``
    ahead of the others, each with its run directory."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    points: dict[str, object] = {}
    for study in studies:
        for point in study.sweep.points:
            points.setdefault(point.key, point)
    sign = -1 if order == "longest" else 1
    ordered = sorted(points.values(), key=lambda p: (p.key not in first, sign * point_cost(p)))
    fields = tuple(dict.fromkeys(f for study in studies for f in study.sweep.axis_fields))
    runs = Path(out) / RUNS_DIR
    return Sweep("+".join(dict.fromkeys(s.name for s in studies)), "study",
                 tuple(dataclasses.replace(p, index=i, workdir=str(runs / p.key)) for i, p in enumerate(ordered)),
                 fields)


def round_sweep(studies: list[Study], out: Path, order: str = "longest") -> Sweep:
    """The points one round of :func:`run_studies` runs, given what ``out`` holds: every study's, a tuned
    study's as far as its cells have chosen (:func:`~simulate.study.plan.tuning.resolve_studies`), the models that
    tune a rate (:func:`~simulate.study.plan.tuning.tuning_points`) ahead of the others."""
    if not any(study.tuned for study in studies):
        return union_sweep(studies, out, order)
    tuning = [dataclasses.replace(study, sweep=dataclasses.replace(study.sweep,
                                                                   points=tuple(tuning_points(study, out))))
              for study in studies if study.tuned]
    return union_sweep([*tuning, *resolve_studies(studies, out)], out, order,
                       first=frozenset(p.key for s in tuning for p in s.sweep.points))


def write_specs(studies: list[Study], out: Path) -> None:
    """Each study's spec text to ``DIR/NAME/spec.toml`` (the record of what ran)."""
    for study in studies:
        folder = Path(out) / study.name
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / "spec.toml", study.text)


def run_studies(studies: list[Study], out: str | Path, *, engine: str = "local", workers: int | None = None,
                address: str | None = None, progress: bool = False, retry_failed: bool = False,
                order: str = "longest") -> SweepReport:
    """Run every point of ``studies`` that has no file in ``out`` yet (module docstring); the sweep's report.

    A tuned study (:mod:`simulate.study.plan.tuning`) runs in rounds: each trains the models that tune its
    rate and that its cells have reached so far (a cell goes on past its grid's edge,
    :func:`~simulate.study.plan.tuning.reached_rates`) first, then every seed of the cells that have chosen
    their rate (the tuning models shared), so that no worker waits for the last cell to choose; the
    rounds end when one has nothing new. The report adds them up.
    """
    out = Path(out)
    check_names(studies)
    write_specs(studies, out)
    engine_options = dict(engine=engine, workers=workers, address=address, progress=progress,
                          retry_failed=retry_failed)
    if not any(study.tuned for study in studies):
        return run_sweep(union_sweep(studies, out, order), out, **engine_options)
    reports, seen = [], set()
    while True:
        sweep = round_sweep(studies, out, order)
        keys = {p.key for p in sweep.points}
        if reports and keys <= seen:
            break
        reports.append(run_sweep(sweep, out, **engine_options))
        seen |= keys
    last = reports[-1]
    ran, lost = sum(r.ran for r in reports), [point for r in reports for point in r.lost]
    return dataclasses.replace(last, total=len(seen), skipped=len(seen) - ran - len(lost), ran=ran,
                               failed=sum(r.failed for r in reports), lost=lost,
                               seconds=sum(r.seconds for r in reports))
