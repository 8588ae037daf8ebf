"""A results folder's ``README.md``: what is in it, what made it, and how to go on.

``python -m simulate study ... --export DEST`` writes it beside the copy
(:mod:`simulate.study.train.export`), from the copied points alone, so that it cannot disagree with
them: how many of the planned models are there (ok, failed) and how many are pending, the
models per cell of each study, the code versions and hosts of their records, the time span in
which they finished and their CPU time, the command that exported the folder and the one that
goes on from it. ``results/atlas/README.md`` is such a file.

>>> print(_cell_line("depth", {(16, "pre"): (0, 3), (4, "pre"): (3, 3), (4, "lns"): (1, 3)}))
- `depth`: 4 lns: 1/3, 4 pre: 3/3, 16 pre: 0/3
"""

from __future__ import annotations

import dataclasses
import platform
from pathlib import Path

from simulate.study.judge.preregistration import judged_summary
from simulate.study.judge.rows import value_text
from simulate.study.plan.tuning import planned_points, unplanned_points
from simulate.study.read.models import distinct_models
from simulate.study.write.headline import headline_section
from theory.files import atomic_write
from theory.verdicts import PointStatus

__all__ = ["README", "results_readme", "write_results_readme"]

README = "README.md"


def _cell_line(name: str, cells: dict[tuple, tuple[int, int]]) -> str:
    """``- `NAME`: VALUES SCHEME: finished/planned, ...``, the cells in the order of their values."""
    parts = [f"{'/'.join(value_text(v) for v in cell[:-1])} {cell[-1]}: {done}/{planned}"
             for cell, (done, planned) in sorted(cells.items())]
    return f"- `{name}`: {', '.join(parts)}"


def _study_cells(study, models, unknown: int) -> dict[tuple, tuple[int, int]]:
    """(axis values..., scheme) -> (finished models, planned models) of one study; a tuned study's cells that
    have not chosen their rate yet plan ``unknown`` more models between them (simulate.study.plan.tuning)."""
    fields = [f for f in study.axes if f != "scheme"]  # the coupled fields (heads of a width) follow them
    cells: dict[tuple, tuple[int, int]] = {}
    for model in models:
        key = (*model.cell(fields), model.scheme)
        done, planned = cells.get(key, (0, 0))
        cells[key] = (done + (model.status is not PointStatus.PENDING), planned + 1)
    if unknown:
        resolved = {p.key for p in study.sweep.points}
        chosen = {(*m.cell(fields), m.scheme) for m in models if m.point.key in resolved}
        waiting = [key for key in cells if key not in chosen]
        for key in waiting:
            done, planned = cells[key]
            cells[key] = (done, planned + unknown // len(waiting))
    return cells


def results_readme(studies, judgements: dict, folder: str, specs: list[str], out: str, command: str) -> str:
    """The README of the results folder ``folder`` holding ``studies`` (module docstring), with the headline answers
    of each study's judgement in ``judgements`` (``{name: StudyJudgement}``, those just written into ``folder``: a
    study along width and depth with its laws at P1's sizes) and each pre-registration judged against its models
    (its ``blind_tests``).

    ``specs`` are the studies' spec files and ``out`` the study directory, as the user gave
    them; ``command`` the command that exported the folder.
    """
    planned = {study.name: planned_points(study, folder) for study in studies}  # a tuned study: its grid too
    distinct = distinct_models([dataclasses.replace(study, sweep=dataclasses.replace(
        study.sweep, points=tuple(planned[study.name][0]))) for study in studies], Path(folder))
    per_study = {study.name: [distinct[p.key] for p in planned[study.name][0]] for study in studies}
    unknown = sum(count for _, count in planned.values())
    provisional = len({p.key for study in studies for p in unplanned_points(study, folder)[1]} - set(distinct))
    records = [m.record for m in distinct.values() if m.status is not PointStatus.PENDING]
    ok = sum(m.status is PointStatus.OK for m in distinct.values())
    headlines = [r.get("headline") or {} for r in records]
    versions = {name: sorted({h.get(key) or "not recorded" for h in headlines})
                for key, name in (("code", "code"), ("data", "corpus"), ("python", "Python"), ("torch", "torch"))}
    hosts = sorted({f"{r.get('host', '?')} ({r.get('device', '?')})" for r in records})
    times = sorted(r["finished_at"] for r in records if r.get("finished_at"))
    train_h = sum(h.get("train_s", 0.0) for h in headlines) / 3600
    score_h = sum(h.get("score_s", 0.0) for h in headlines) / 3600
    spec_list = " ".join(specs)
    finished = (f"- finished between {times[0]} and {times[-1]} on {', '.join(hosts)};" if times
                else "- no model has finished yet;")
    lines = [
        "# Study results, shipped", "",
        f"**{len(records)} of the {len(distinct) + unknown} models** of the studies "
        f"{', '.join(f'`{s.name}`' for s in studies)} are here ({ok} ok, {len(records) - ok} failed); the other "
        f"{len(distinct) + unknown - len(records)} are pending, and every report, trend and figure says so. A model "
        "shared by two studies is counted once"
        + (f"; {unknown} of the pending models train at a learning rate still being tuned" if unknown else "")
        + (f"; {provisional} more {'model here belongs' if provisional == 1 else 'models here belong'} to cells "
           "still tuning, trained at a rate the cell may not keep" if provisional else "") + ".", "",
        "What is here: each study's spec as it ran (`NAME/spec.toml`), its reports (`study.md`, `levels.csv`, "
        "`trends.csv`, `points.parquet`), the variance laws (`extrapolation.md`, `.csv`) when a study runs along "
        "depth, `summary.csv` (a row per model, finished or pending), and one long table per model "
        "(`points/KEY.parquet`, values in float32, zstd); no weights."
        + (" `reanalysis.md`: the verdicts that changed when these models were re-analysed by a later claims "
           "engine (old -> new, and why)." if (Path(folder) / "reanalysis.md").is_file() else ""), "",
        "## How it was made", "",
        "```bash",
        f"python -m simulate study {spec_list} --out {out}  # --order, --workers: when a model trains, not what",
        command,
        "```", "",
        "- what the models rest on, as their records keep it (code: the hash of the trainer's and the scores' import "
        "closure; corpus: the digest of the training text; older records did not keep the last three): "
        + "; ".join(f"{name} {', '.join(values) or 'none yet'}" for name, values in versions.items()) + ";",
        finished,
        f"- wall time of the shipped models, summed over them: {train_h + score_h:.2f} h "
        f"(training {train_h:.2f} h, scores {score_h:.2f} h);",
        f"- exported with Python {platform.python_version()} on {platform.machine()}.", "",
        "## Models per cell (finished / planned)", "",
        *(_cell_line(study.name, _study_cells(study, per_study[study.name], planned[study.name][1]))
          for study in studies), "",
        *(line for study in studies
          for line in headline_section(judgements[study.name], study)),
        *judged_summary([judged for study in studies for judged in judgements[study.name].blind_tests]),
        "## To go on", "",
        "The points here are finished models: copy them into a study directory and run the same command; only "
        "the pending models train, then export again:", "",
        "```bash",
        f"mkdir -p {out}/points && cp {folder}/points/*.parquet {out}/points/",
        f"python -m simulate study {spec_list} --out {out} --order cheapest",
        f"python -m simulate study {spec_list} --out {out} --report-only --export {folder}",
        "```", ""]
    return "\n".join(lines)


def write_results_readme(studies, judgements: dict, folder: str, specs: list[str], out: str, command: str) -> Path:
    """Write :func:`results_readme` to ``folder/README.md`` whole; its path."""
    text = results_readme(studies, judgements, folder, specs, out, command)
    return atomic_write(Path(folder) / README, lambda path: Path(path).write_text(text))
