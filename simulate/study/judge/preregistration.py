"""A prediction written down before the models that test it train, and its judgement, without refitting.

``python -m simulate study SPEC --out DIR --predict DEPTH [DEPTH ...]`` fits the laws across depth
of a depth study on its finished cells (:mod:`simulate.study.judge.across_depth`) and writes
``DIR/prediction-LDEPTH.csv`` and ``.md`` (named by the first depth given); ``--predict width=D ...`` fits the
laws across depth and width of a width study (:mod:`simulate.study.judge.across_width`) and writes
``DIR/prediction-dD.csv`` and ``.md``. Either holds every prediction with
its interval, and what made it (:data:`PROVENANCE_COLUMNS`: the commit and the code digest of the
modules that fitted the laws, the digest of the values they were fitted on, when). Committed alone,
before any model of the predicted depths (widths) starts, it is a pre-registration
(docs/studies.md#pre-registered-predictions).

Whenever the reports of a study are written into a folder holding such a file
(:func:`write_judgements`), each is judged against the models found there (a depth prediction against the depth
study, a width prediction against the width study), reading the file *as first committed* (``git show``), never
refitting:

- the file's first commit must precede the start of every model at a predicted depth (width) (each point
  records ``started_at``, kept across resumes; an older record without it is taken to start at
  ``finished_at - wall_s``), else the judgement says so and judges nothing;
- each row is judged on the model it names (``judged_on``: the tuning seed's model, or the mean
  of every seed's), on its line (the fixed rate written in the file, or the cell's chosen rate), at its depth
  (and, along width, its predicted width):
  :class:`BlindTest` ``passes`` when the measured value lies inside the interval, ``fails`` when
  not, ``pending`` while a model is missing, ``not testable`` where its models will never be
  trained (the fixed line in a cell that chose another rate: only the tuning seed, at the
  full length, trains the fixed rate there).

Each row is a prediction interval at the study's confidence (95 % by default) of its own. A row
that could not have failed is marked so (``passes, uninformative``; ``informative`` False): its
interval also holds the value measured at the nearest fitted depth (width) on the same line, length, scheme
and seeds ("no change from the deepest (widest) fitted cell") or a rival law's prediction of the same row (a
depth law has one rival, a width law two: the additive law, the interaction and the law without a width term),
so its pass tells no law from no change or from another law. The count of failures is set
against a simulated reference that knows rows share models (:func:`chance_failures`): rows judged
on the same seed's model (every law and line) share one draw, a mean of seeds shares each seed's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from simulate.claims.along_axes import unresolved_drops
from simulate.claims.depth_laws import DepthLawForm
from simulate.claims.judgement import blind_test_verdict, level_label
from simulate.claims.width_laws import WidthLawForm
from simulate.runtime.versions import ROOT, closure_version
from simulate.study.judge.across_depth import JudgedOn, Subject, prediction_table, subject_samples
from simulate.study.judge.across_width import width_prediction_table
from simulate.study.read.models import candidate_models
from theory.cli import markdown_table
from theory.files import atomic_write, write_text_atomic
from theory.verdicts import BlindTest, PointStatus, RateLine

__all__ = ["PREFIX", "WIDTH_PREFIX", "PROVENANCE_COLUMNS", "FITTED_SUFFIX", "REFIT_RTOL", "values_moved", "Commit",
           "Judged", "prediction_axis", "read_prediction", "prediction_name", "write_prediction", "first_commit",
           "model_start", "judge_prediction", "chance_failures", "judged_markdown", "write_judgements",
           "read_judgements", "judged_summary"]

PREFIX = "prediction-L"  # a depth study's predictions at other depths (judged here)
WIDTH_PREFIX = "prediction-d"  # a width study's predictions at another width
PROVENANCE_COLUMNS = ("commit", "code", "data", "made_at")


def prediction_axis(name: str) -> str:
    """The axis a prediction file predicts along, from its name: ``depth`` (``prediction-L64``) or ``width``
    (``prediction-d128``).

    >>> prediction_axis("prediction-L64.csv"), prediction_axis("prediction-d128-judged")
    ('depth', 'width')
    """
    return "width" if Path(name).name.startswith(WIDTH_PREFIX) else "depth"


def read_prediction(source) -> pd.DataFrame:
    """A prediction file (or its judged copy) read back: a path or a text buffer, empty cells missing, each row's
    ``line`` parsed into its :class:`~theory.verdicts.RateLine` and its ``law`` into its form (a depth prediction's
    :class:`~simulate.claims.depth_laws.DepthLawForm`, a width prediction's
    :class:`~simulate.claims.width_laws.WidthLawForm`; ValueError naming an unknown word).

    >>> rows = read_prediction(StringIO("law,line,lr\\npower,fixed,0.003\\nadditive,tuned,\\n"))
    >>> [str(word) for word in rows["line"]], rows["law"].tolist()[1]
    (['fixed', 'tuned'], <WidthLawForm.ADDITIVE: 'additive'>)
    """
    rows = pd.read_csv(source, keep_default_na=False, na_values=[""])
    return rows.assign(line=_words(rows["line"], RateLine.parse), law=_words(rows["law"], _law_form))


def _law_form(word: str) -> DepthLawForm | WidthLawForm:
    """The form a law's word names, across depth or across depth and width."""
    for forms in (DepthLawForm, WidthLawForm):
        try:
            return forms(word)
        except ValueError:
            continue
    allowed = ", ".join(form.value for forms in (DepthLawForm, WidthLawForm) for form in forms)
    raise ValueError(f"law={word!r} is not allowed: one of {allowed}")


def _words(column: pd.Series, parse) -> pd.Series:
    """A column's cells each parsed by ``parse``, as objects."""
    return pd.Series([parse(word) for word in column], index=column.index, dtype=object)


def prediction_name(targets, axis: str = "depth") -> str:
    """``prediction-L64`` for the depths ``(64, 2)``, ``prediction-d128`` for the width 128: the file is named by
    the first target given.

    >>> prediction_name((64, 2)), prediction_name([128], "width")
    ('prediction-L64', 'prediction-d128')
    """
    return f"{PREFIX if axis == 'depth' else WIDTH_PREFIX}{int(targets[0])}"


def _git(folder: Path, *args: str) -> str | None:
    """``git -C folder ARGS``'s output, or None where git or the repository is missing or the command fails."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout


def _head(folder: Path) -> str:
    head = _git(folder, "rev-parse", "HEAD")
    dirty = _git(folder, "status", "--porcelain", "--", "simulate", "theory")
    if head is None:
        return "not a git checkout"
    return head.strip() + (" (with uncommitted changes to the code)" if dirty else "")


FITTED_SUFFIX = "-fitted"  # prediction-d128-fitted.csv: the values its laws were fitted on, committed with it
REFIT_RTOL = 1e-6  # fitted values this close (relative) are the same models' values (test_atlas.REPORT_RTOL's meaning)


def _fitted_rows(fitted: pd.DataFrame, axis: str = "depth") -> pd.DataFrame:
    """The fitted values a prediction rests on, one row per model, statistic, line and length, sorted; a width
    prediction's also by width."""
    columns = ["statistic", "scheme", "line", "steps", "depth", *(["width"] if axis == "width" else []), "seed",
               "points", "value"]
    return fitted[columns].astype({"line": str, "value": float}).sort_values(columns[:-2]).reset_index(drop=True)


def _data_digest(fitted: pd.DataFrame, axis: str = "depth") -> str:
    """sha256 (16 hex digits) of the fitted values as CSV, rows sorted (17 significant digits: every bit, the same text
    whatever numpy's repr of a float)."""
    text = _fitted_rows(fitted, axis).to_csv(index=False, float_format="%.17g")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def values_moved(committed: pd.DataFrame, now: pd.DataFrame) -> float:
    """The largest relative change of a fitted value between the committed table and the one read now (both
    :func:`_fitted_rows`); ``inf`` where a row is in one and not the other.

    >>> then = pd.DataFrame({"points": ["a", "b"], "statistic": ["v", "v"], "value": [1.0, 2.0]})
    >>> values_moved(then, then.assign(value=[1.0, 2.0 + 2e-12])), values_moved(then, then.iloc[:1])
    (1e-12, inf)
    """
    keys = [column for column in committed.columns if column != "value"]
    both = committed.astype({key: str for key in keys}).merge(now.astype({key: str for key in keys}), on=keys,
                                                              how="outer", suffixes=("_then", "_now"))  # (rows,)
    if both[["value_then", "value_now"]].isna().any().any():
        return math.inf
    return float((np.abs(both["value_now"] - both["value_then"]) / np.abs(both["value_then"]).clip(1e-300)).max())


def write_prediction(study, out, targets, command: str, axis: str = "depth") -> Path:
    """Fit the laws of the resolved ``study`` on the models in ``out`` and write their predictions at ``targets``
    (depths, or widths for ``axis="width"``) to ``out/<prediction_name>.csv`` and ``.md`` (module docstring), and the
    values they were fitted on to ``<prediction_name>-fitted.csv`` (every bit: commit it with the file, so a
    judgement can tell models retrained since from a rounding); the CSV's path.

    Raises :class:`simulate.study.judge.across_depth.PredictionError` (one line) before writing anything."""
    out = Path(out)
    table, fitted = (prediction_table if axis == "depth" else width_prediction_table)(study, out, targets)
    made_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    provenance = dict(zip(PROVENANCE_COLUMNS, (_head(ROOT), closure_version("simulate.study.judge.preregistration"),
                                               _data_digest(fitted, axis), made_at)))
    table = table.assign(**provenance)
    name = prediction_name(targets, axis)
    atomic_write(out / f"{name}{FITTED_SUFFIX}.csv",
                 lambda tmp: _fitted_rows(fitted, axis).to_csv(tmp, index=False, float_format="%.17g"))
    csv = atomic_write(out / f"{name}.csv", lambda tmp: table.to_csv(tmp, index=False))
    markdown = (_prediction_markdown if axis == "depth" else _width_prediction_markdown)(study, table, fitted,
                                                                                        provenance, command)
    write_text_atomic(out / f"{name}.md", markdown)
    return csv


def _provenance_lines(fitted: pd.DataFrame, provenance: dict, command: str) -> list[str]:
    """A prediction file's command and what made it, as Markdown list items."""
    return [f"- Command: `{command}`",
            f"- Made at {provenance['made_at']} from commit {provenance['commit']}; code digest (the modules that "
            f"fit the laws) {provenance['code']}; data digest (the {len(fitted)} fitted values of "
            f"{len({key for keys in fitted['points'] for key in keys.split('-')})} models, by model, statistic, line "
            f"and length) {provenance['data']}"]


def _width_prediction_markdown(study, table: pd.DataFrame, fitted: pd.DataFrame, provenance: dict,
                               command: str) -> str:
    targets = ", ".join(f"d = {d}" for d in dict.fromkeys(table["width"]))
    confidence = float(table["confidence"].iloc[0]) if len(table) else math.nan
    informative = int((~table["no_change_inside"].astype(bool)).sum())
    lines = [f"# Pre-registered prediction of study `{study.name}` at {targets}", "",
             "Laws across depth and width fitted on the study's finished widths, written before any model of the "
             "predicted width trained (docs/studies.md#the-atlas-across-width).", "",
             *_provenance_lines(fitted, provenance, command),
             f"- Intervals: {level_label(confidence)} prediction intervals for one new model (the tuning seed's) and "
             "for the mean of the study's seeds in a new (depth, width) cell: the law's refit variance at that "
             "cell's leverage, a new cell's own effect and the seeds' spread, Student's t on cells - coefficients "
             "(simulate.claims.width_laws)",
             "- Laws: `additive` (a + b log L + c log d), `interaction` (+ e log L log d) and `no width term` "
             "(a + b log L: width does nothing), each fitted per line and training length",
             f"- Informative: a row whose interval holds the mean measured at the widest trained width at its depth "
             f"(`no change`) cannot tell a width effect from none; {informative} of {len(table)} rows exclude it", ""]
    columns = ("statistic", "scheme", "law", "rate", "depth", "width", "judged_on", "prediction", "no_change",
               "width_term", "fitted_models", "lack_of_fit_p")
    return "\n".join(lines + _line_sections(
        table, columns,
        width_term=lambda r: (f"{r.width_term:.3g} [{r.width_term_low:.3g}, {r.width_term_high:.3g}]"
                              if np.isfinite(r.width_term_low) else ""),
        no_change=lambda r: f"{r.no_change:.3g}" + (" (inside)" if r.no_change_inside else "")))


def _prediction_markdown(study, table: pd.DataFrame, fitted: pd.DataFrame, provenance: dict, command: str) -> str:
    targets = ", ".join(f"L = {d}" for d in dict.fromkeys(table["depth"]))
    confidence = float(table["confidence"].iloc[0]) if len(table) else math.nan
    lines = [f"# Pre-registered prediction of study `{study.name}` at {targets}", "",
             "Laws across depth fitted on the study's finished cells, written before any model of the predicted "
             "depths trained; the report that judges them reads this file as first committed and never refits "
             "(docs/studies.md#pre-registered-predictions).", "",
             *_provenance_lines(fitted, provenance, command),
             f"- Intervals: {level_label(confidence)} prediction intervals for one new model (the tuning seed's) and "
             "for the mean of the study's seeds at a new depth: the law's refit variance, a new cell's own effect "
             "and the seeds' spread, Student's t on cells - 2 degrees of freedom (simulate.claims.depth_laws)",
             "- Lines: `fixed`, each scheme at the rate most of its depths chose (the tuning seed trains "
             "it at every depth, so the test exists whatever the new depth chooses); `tuned`, each cell at its own "
             "chosen rate (conditional on what the new cell chooses); laws are fitted per training length",
             "- Judged per row: passes when the measured value lies inside the interval; about "
             f"{level_label(1 - confidence)} of the rows fail by chance if the laws are right", ""]
    columns = ("statistic", "scheme", "law", "rate", "depth", "judged_on", "prediction", "slope", "fitted_depths",
               "fitted_models", "lack_of_fit_p")
    return "\n".join(lines + _line_sections(
        table, columns, law=lambda r: f"{r.law} ({r.form})",
        slope=lambda r: f"{r.slope:.3g} [{r.slope_low:.3g}, {r.slope_high:.3g}]"))


def _line_sections(table: pd.DataFrame, columns, **texts) -> list[str]:
    """A prediction file's rows as one Markdown table per line and training length: each row's ``rate`` and
    ``prediction`` in words, and each ``name=text`` of ``texts`` (a row's text), then ``columns`` shown."""
    lines = []
    for (line, steps), part in table.groupby(["line", "steps"], sort=False):
        rows = list(part.itertuples())
        shown = part.assign(rate=[_rate_label(r) for r in rows],
                            prediction=[f"{r.estimate:.3g} [{r.low:.3g}, {r.high:.3g}]" for r in rows],
                            **{name: [text(r) for r in rows] for name, text in texts.items()})
        lines += [f"## Line `{line}`, {steps} steps", "", markdown_table(shown[list(columns)]), ""]
    return lines


def _rate_label(row) -> str:
    if math.isnan(row.lr):
        return "chosen" if row.line is not RateLine.FIXED else ""
    return f"{row.lr:g}" + (f" - {row.lr_second:g}" if not math.isnan(row.lr_second) else "")


@dataclass(frozen=True)
class Commit:
    """The commit that first added a file: its hash, time and the file's text in it."""

    sha: str
    time: datetime
    text: str


def first_commit(path: Path) -> Commit | None:
    """The commit that first added ``path`` to its repository (None outside git or where it is not committed)."""
    path = Path(path).resolve()
    found = _git(path.parent, "log", "--diff-filter=A", "--reverse", "--format=%H %cI", "--", path.name)
    if not found:
        return None
    sha, stamp = found.splitlines()[0].split()
    text = _git(path.parent, "show", f"{sha}:./{path.name}")
    return None if text is None else Commit(sha, datetime.fromisoformat(stamp), text)


def model_start(record: dict) -> datetime:
    """When a model first started: its record's ``started_at``, else ``finished_at - wall_s`` (older records)."""
    if record.get("started_at"):
        return datetime.strptime(record["started_at"], "%Y-%m-%dT%H:%M:%S%z")
    finished = datetime.strptime(record["finished_at"], "%Y-%m-%dT%H:%M:%S%z")
    return datetime.fromtimestamp(finished.timestamp() - float(record.get("wall_s") or 0.0), finished.tzinfo)


@dataclass(frozen=True)
class Judged:
    """A pre-registered file judged: the study it was judged against; its rows with ``measured``, ``n`` and
    ``blind_test`` (a :class:`~theory.verdicts.BlindTest`, None where nothing was judged); the commit it was read from
    (None: not committed, or read back from the judged file); the first start of a model at a predicted depth; and
    what stops a judgement ('' where it was judged)."""

    name: str
    study: str
    rows: pd.DataFrame
    commit: Commit | None
    first_start: datetime | None
    problem: str


def _line_models(models, chosen: set, row) -> list:
    """The finished models of a row's line at its depth (and width, for a width prediction's row) and length: at the
    rates the file wrote (fixed), or at their cell's chosen rate."""
    width = getattr(row, "width", None)
    here = [m for m in models if m.status is PointStatus.OK and m.value("depth") == row.depth
            and m.value("steps") == row.steps and (width is None or m.value("width") == width)]
    if row.line is not RateLine.FIXED:
        return [m for m in here if m.point.key in chosen]
    rates = dict(zip(row.scheme.split("-"), (row.lr, row.lr_second)))
    return [m for m in here if rates.get(m.scheme) == m.point.setting.lr]


def _measured(row, models, chosen: set, every_seed: bool = False) -> tuple[float, int]:
    """The value a row is judged on (the named seed's, or the mean of every seed's; ``every_seed``: of whatever
    seeds are there) and on how many models."""
    samples = subject_samples(Subject(row.statistic, tuple(row.scheme.split("-")), ()), _line_models(models, chosen,
                                                                                                      row))
    seed = JudgedOn.parse(row.judged_on).seed
    if seed is not None:
        values = samples.loc[samples["seed"] == seed, "value"]
    else:
        values = samples["value"] if every_seed or len(samples) == row.models else samples["value"].iloc[:0]
    return (float(values.mean()) if len(values) else math.nan), len(values)


_ROW_KEYS = ["statistic", "scheme", "law", "line", "steps", "depth", "models", "judged_on"]


def _refit(written: pd.DataFrame, study, out, axis: str, committed_values: pd.DataFrame | None) -> dict:
    """Each committed row beside the same law refitted now on the models at its fitted depths (widths, along
    ``axis="width"``) (``refit``, ``refit_difference``: refit minus committed, NaN where the row cannot be refitted)
    and whether those models' values are still the ones the file was fitted on (``refit_data``: within
    :data:`REFIT_RTOL` of ``committed_values``, the committed ``-fitted.csv``; without one, the file's digest of
    them, ``data``, equals theirs now, to the bit). The judgement never uses the refit: it says how far the shipped
    models have moved since the commit (models retrained with new code after it), so a reader can tell a law's miss
    from a change of its data."""
    fitted = sorted({int(d) for text in written[f"fitted_{axis}s"].astype(str) for d in text.split()})
    keep = lambda points: tuple(p for p in points if getattr(p.setting, axis) in fitted)  # noqa: E731
    candidates = study.candidates or study.sweep
    at_fitted = dataclasses.replace(study, sweep=dataclasses.replace(study.sweep, points=keep(study.sweep.points)),
                                    candidates=dataclasses.replace(candidates, points=keep(candidates.points)))
    table = prediction_table if axis == "depth" else width_prediction_table
    refit, values = table(at_fitted, out, sorted(set(written[axis])))
    keys = _ROW_KEYS + (["width"] if axis == "width" else [])
    merged = written[keys].merge(refit[[*keys, "estimate"]].rename(columns={"estimate": "refit"}),
                                 on=keys, how="left")  # (rows,) in the file's order
    if committed_values is not None:
        same = [bool(len(values)) and values_moved(committed_values, _fitted_rows(values, axis)) <= REFIT_RTOL] * len(
            written)
    else:
        digest = _data_digest(values, axis) if len(values) else ""
        same = [digest == str(written_digest) for written_digest in written["data"]]
    return {"refit": merged["refit"].to_numpy(), "refit_difference": (merged["refit"] - written["estimate"]).to_numpy(),
            "refit_data": same}


def _judged_models(row, models, chosen: set) -> list:
    """The finished models a row is judged on (its seed's, or every seed's on its line)."""
    here = _line_models(models, chosen, row)
    seed = JudgedOn.parse(row.judged_on).seed
    return here if seed is None else [m for m in here if m.seed == seed]


def _alternatives(written: pd.DataFrame, row, models, chosen: set, axis: str) -> tuple[float, float]:
    """What a row must tell its law from: the value measured at the nearest fitted depth (width, along
    ``axis="width"``) on the same line, length, scheme and seeds ("no change from the fitted cells"), and the rival
    laws' prediction of the same row nearest its own (NaN where there is none): the interval is centred on the row's
    estimate, so it holds a rival's prediction exactly when it holds that one."""
    fitted = [int(d) for d in str(getattr(row, f"fitted_{axis}s")).split()]
    target = getattr(row, axis)
    nearest = min(fitted, key=lambda d: abs(math.log(d / target)))
    value, _ = _measured(row._replace(**{axis: nearest}), models, chosen, every_seed=True)
    same = ((written["statistic"] == row.statistic) & (written["scheme"] == row.scheme) & (written["law"] != row.law)
            & (written["line"] == row.line) & (written["steps"] == row.steps) & (written["depth"] == row.depth)
            & (written["judged_on"] == row.judged_on) & (written[axis] == target))
    rivals = written.loc[same, "estimate"].to_numpy(float)  # (other laws,)
    rival = float(rivals[np.argmin(np.abs(rivals - row.estimate))]) if len(rivals) else math.nan
    return value, rival


def judge_prediction(path, study, out) -> Judged:
    """The file at ``path`` judged against the resolved ``study``'s models in ``out`` (module docstring)."""
    path = Path(path)
    axis = prediction_axis(path.name)
    commit = first_commit(path)
    written = read_prediction(StringIO(commit.text) if commit is not None else path)
    every = candidate_models(study, out)
    predicted = set(written[axis])
    starts = [model_start(m.record) for m in every
              if m.status is not PointStatus.PENDING and m.value(axis) in predicted]
    first = min(starts) if starts else None
    problem = ""
    if commit is None:
        problem = f"{path.name} is not committed: a prediction is judged only as first committed, before its models"
    elif first is not None and first <= commit.time:
        problem = (f"a model at a predicted {axis} started at {first.isoformat()}, before the file's first commit "
                   f"{commit.sha[:12]} at {commit.time.isoformat()}: it is no pre-registration")
    if problem:
        return Judged(path.stem, study.name, written.assign(measured=math.nan, n=0, blind_test=None), commit, first,
                      problem)
    chosen = {p.key for p in study.sweep.points}
    values = first_commit(path.with_name(f"{path.stem}{FITTED_SUFFIX}.csv"))
    committed_values = None if values is None else pd.read_csv(StringIO(values.text))
    written = written.assign(**_refit(written, study, out, axis, committed_values))
    measured = [_measured(row, every, chosen) for row in written.itertuples()]
    alternatives = [_alternatives(written, row, every, chosen, axis) for row in written.itertuples()]
    informative = [not any(row.low <= v <= row.high for v in pair) for row, pair in zip(written.itertuples(),
                                                                                        alternatives)]
    verdicts = [BlindTest.NOT_TESTABLE if _never_trained(row, study) else _blind_test(row, value, n, useful)
                for row, (value, n), useful in zip(written.itertuples(), measured, informative)]
    notes = [unresolved_drops(Subject(row.statistic, tuple(row.scheme.split("-")), ()),
                              _judged_models(row, every, chosen)) for row in written.itertuples()]
    return Judged(path.stem, study.name, written.assign(
        measured=[v for v, _ in measured], n=[n for _, n in measured], nearest_fitted=[a for a, _ in alternatives],
        rival=[b for _, b in alternatives], informative=informative, blind_test=verdicts, note=notes), commit, first,
        "")


def _never_trained(row, study) -> bool:
    """Whether a fixed-line row waits for models no one will train: a cell at its depth (and width, for a width
    prediction's row) chose another rate than the row's, so only the tuning seed at the full length trains the
    fixed rate there."""
    full = study.stability[1] if study.stability else row.steps
    on_tuning_seed = JudgedOn.parse(row.judged_on).seed in study.tune_seeds and row.steps == full
    if row.line is not RateLine.FIXED or on_tuning_seed:
        return False
    rates = dict(zip(row.scheme.split("-"), (row.lr, row.lr_second)))
    width = getattr(row, "width", None)
    chosen = {(p.setting.scheme, p.setting.lr) for p in study.sweep.points
              if p.setting.depth == row.depth and (width is None or p.setting.width == width)}
    return any({lr for s, lr in chosen if s == scheme} - {rate} for scheme, rate in rates.items())


def _blind_test(row, value: float, n: int, informative: bool) -> BlindTest:
    """A row's blind test (:func:`~simulate.claims.judgement.blind_test_verdict`), ``pending`` without its models."""
    if n == 0 or math.isnan(value):
        return BlindTest.PENDING
    centre, half = (row.high + row.low) / 2, (row.high - row.low) / 2
    return blind_test_verdict(centre - value, half, informative)


def chance_failures(rows: pd.DataFrame, draws: int = 20000, seed: int = 0) -> tuple[float, float, int]:
    """How many of the judged ``rows`` (a judged file's) would fail by chance if every law were right, knowing that
    rows share models: ``(expected, 95th percentile, observed)``. Each row is a normal prediction at its
    ``confidence``; rows on one seed's model share its standard normal draw (whatever their law or line), and a
    row on the mean of ``m`` seeds reads their mean draw, times ``sqrt(m)``: one simulation, seeded.

    >>> rows = pd.DataFrame({"depth": [64] * 4, "steps": [4000] * 4, "statistic": ["var_last"] * 4,
    ...                      "scheme": ["pre"] * 4, "judged_on": ["seed 0", "seed 0", "mean of 3 seeds", "seed 1"],
    ...                      "confidence": [0.95] * 4,
    ...                      "blind_test": [BlindTest.PASSES, BlindTest.FAILS, BlindTest.PASSES, BlindTest.PASSES]})
    >>> expected, high, observed = chance_failures(rows)
    >>> round(expected, 1), high, observed
    (0.2, 2.0, 1)
    """
    judged = rows[rows["blind_test"].isin([BlindTest.PASSES, BlindTest.PASSES_UNINFORMATIVE, BlindTest.FAILS])]
    if judged.empty:
        return math.nan, math.nan, 0
    rng = np.random.default_rng(seed)
    model_columns = [c for c in ("width", "depth", "steps", "statistic", "scheme") if c in judged.columns]
    units = judged[model_columns].astype(str).agg("|".join, axis=1)  # (rows,) one draw per model and statistic
    judged_on = [JudgedOn.parse(text) for text in judged["judged_on"]]  # (rows,)
    means = max((on.models for on in judged_on if on.seed is None), default=0)
    seeds = sorted({on.seed for on in judged_on if on.seed is not None} | set(range(max(3, means))))
    codes = {unit: i for i, unit in enumerate(dict.fromkeys(units))}
    z = rng.standard_normal((draws, len(codes), len(seeds)))  # (draws, units, seeds)
    quantile = stats.norm.ppf(0.5 + judged["confidence"].to_numpy(float) / 2)  # (rows,)
    failures = np.zeros(draws)
    for i, (unit, on) in enumerate(zip(units, judged_on)):
        if on.seed is not None:
            draw = z[:, codes[unit], seeds.index(on.seed)]  # (draws,)
        else:
            draw = z[:, codes[unit], :on.models].sum(axis=1) / math.sqrt(on.models)  # (draws,) the mean's draw
        failures += np.abs(draw) > quantile[i]
    observed = int((judged["blind_test"] == BlindTest.FAILS).sum())
    return float(failures.mean()), float(np.quantile(failures, 0.95)), observed


def judged_markdown(judged: Judged) -> str:
    """``prediction-L<depth>-judged.md`` (``prediction-d<width>-judged.md``): the commit it was read from, the timing
    check, the count of rows that pass and fail per law, and every row."""
    axis = prediction_axis(judged.name)
    lines = [f"# `{judged.name}` judged", ""]
    if judged.commit is not None:
        lines.append(f"- Read as first committed: {judged.commit.sha[:12]} at {judged.commit.time.isoformat()}")
    if judged.first_start is not None:
        lines.append(f"- The first model at a predicted {axis} started at {judged.first_start.isoformat()}")
    if judged.problem:
        return "\n".join([*lines, "", f"**Not judged: {judged.problem}.**", ""])
    rows = judged.rows
    counts = _counts(rows, _count_keys(axis))
    moved = rows["refit_difference"].abs()
    lines += ["", *[f"- {_chance_words(rows[rows[axis] == value], _target_label(axis, value))}"
                    for value in sorted(set(rows[axis]))],
              f"- The models at the fitted {axis}s {'are' if rows['refit_data'].all() else 'are no longer'} the ones "
              "the file was fitted on" + ("" if rows["refit_data"].all() else
                                      f" (models retrained after the commit): refitted now, the laws' predictions move "
                                      f"by up to {moved.max():.3g} (median {moved.median():.3g}; `refit`, "
                                      "`refit_difference`); the judgement reads the committed file, never the refit"),
              f"- A row that passes but whose interval also holds the value at the nearest fitted {axis} "
              f"(`nearest_fitted`: no change from the fitted cells) or {_RIVAL[axis][0]} (`rival`{_RIVAL[axis][1]}) "
              "could not have failed: "
              "`passes, uninformative`, counted apart.",
              "", "## Per law", "", markdown_table(counts), "", "## Every row", "",
              markdown_table(rows.assign(
                  prediction=[f"{r.estimate:.3g} [{r.low:.3g}, {r.high:.3g}]" for r in rows.itertuples()])[
                  ["statistic", "scheme", "law", "line", "steps", *(["width"] if axis == "width" else []), "depth",
                   "judged_on", "prediction", "measured", "n", "nearest_fitted", "rival", "refit_difference",
                   "blind_test", "note"]]), ""]
    return "\n".join(lines)


_RIVAL = {"depth": ("the rival law's prediction", ""),  # one at most: "power" and "exponential in L"
          "width": ("a rival law's prediction", ", the one nearest the row's")}  # two: the other WIDTH_LAWS


def _target_label(axis: str, value) -> str:
    """``L = 64`` or ``d = 128``: a predicted depth or width in the pages' words."""
    return f"{'L' if axis == 'depth' else 'd'} = {value}"


def _count_keys(axis: str) -> tuple[str, ...]:
    """The groups a judged file's rows are counted by: per predicted value, and for a width prediction per trained
    depth too (each its own models)."""
    return (*(("width",) if axis == "width" else ()), "depth", "statistic", "scheme", "law", "line", "steps")


def write_judgements(studies, out) -> list[Judged]:
    """Judge every ``prediction-L*.csv`` in ``out`` against the resolved depth study among ``studies`` and every
    ``prediction-d*.csv`` against the width study (not the judged files), writing ``<name>-judged.csv`` and ``.md``
    beside it; the judgements."""
    out = Path(out)
    judged = []
    for axis, prefix in (("depth", PREFIX), ("width", WIDTH_PREFIX)):
        study = next((s for s in studies if axis in s.axes and (axis == "width" or "width" not in s.axes)), None)
        for path in sorted(out.glob(f"{prefix}*.csv")):
            if path.stem.endswith(("-judged", FITTED_SUFFIX)) or study is None:
                continue
            result = judge_prediction(path, study, out)
            rows = result.rows.assign(study=result.study)  # the file names the study it was judged against
            atomic_write(out / f"{path.stem}-judged.csv", lambda tmp, rows=rows: rows.to_csv(tmp, index=False))
            write_text_atomic(out / f"{path.stem}-judged.md", judged_markdown(result))
            judged.append(result)
    return judged


def _counts(rows: pd.DataFrame, by: tuple[str, ...]) -> pd.DataFrame:
    """Passes, failures and pending rows per group of ``by`` (and the rows not testable, where there are any)."""
    tested = (BlindTest.PASSES, BlindTest.PASSES_UNINFORMATIVE, BlindTest.FAILS, BlindTest.PENDING,
              BlindTest.NOT_TESTABLE)
    def count(verdicts) -> str:
        counts = {t: sum(v is t for v in verdicts) for t in tested}
        always = (BlindTest.PASSES, BlindTest.FAILS)
        return "; ".join(f"{t} {n}" for t, n in counts.items() if n or t in always)

    return rows.groupby(list(by), sort=False)["blind_test"].agg(count).reset_index().rename(
        columns={"blind_test": "rows"})


def _counts_per_line(rows: pd.DataFrame, axis: str) -> pd.DataFrame:
    """:func:`_counts` per predicted value, statistic, scheme and law (and trained depth, along width), one column per
    line (``fixed line``, ``tuned line``): the two lines are separate tests, and where a cell chose the fixed rate they
    judge the same models, so one sum over both would count one failure twice."""
    keys = [key for key in _count_keys(axis) if key not in ("line", "steps")]
    counts = _counts(rows.sort_values(axis, kind="stable"), (*keys, "line"))  # (groups x lines, keys + line + rows)
    wide = counts.pivot_table(index=keys, columns="line", values="rows", aggfunc="first",
                              sort=False).fillna("")  # (groups, lines), first-seen order within a predicted value
    return wide.rename(columns=lambda line: f"{line} line").reset_index().rename_axis(columns=None)


_LINES = (" The fixed line predicts at each scheme's fixed rate (the one most of its fitted cells chose), the tuned "
          "line, conditional, at the rate each predicted cell chose: where that is the same rate, both lines judge "
          "the same models.")


def _chance_words(rows: pd.DataFrame, target: str) -> str:
    """The failures of the rows at one predicted depth or width (``target``: ``L = 64``, ``d = 128``) against
    :func:`chance_failures`, and the informative passes."""
    expected, high, observed = chance_failures(rows)
    passes = {word: int((rows["blind_test"] == word).sum()) for word in (BlindTest.PASSES,
                                                                            BlindTest.PASSES_UNINFORMATIVE)}
    verdict = ("more than chance explains" if observed > high else "within what chance explains")
    return (f"{target}: {observed} rows fail, {passes[BlindTest.PASSES]} pass informatively, "
            f"{passes[BlindTest.PASSES_UNINFORMATIVE]} pass uninformatively; if every law were right, {expected:.1f} "
            f"would fail by chance on average and at most {high:.0f} in 95 % of simulated judgements (rows on one "
            f"model share its draw: simulate.study.judge.preregistration.chance_failures): {verdict}")


def read_judgements(folder) -> list[Judged]:
    """Every judged pre-registration in ``folder`` read back from its ``-judged.csv`` (``prediction-L*``, then
    ``prediction-d*``): its rows, each ``blind_test`` parsed into its word (None where nothing was judged); the
    commit and the first start are not in the file (None), and a file without a blind test could not be judged
    (its reason is in its ``-judged.md``)."""
    judged = []
    for path in [*sorted(Path(folder).glob(f"{PREFIX}*-judged.csv")),
                 *sorted(Path(folder).glob(f"{WIDTH_PREFIX}*-judged.csv"))]:
        rows = read_prediction(path)
        tests = _words(rows["blind_test"], lambda word: BlindTest.parse(word) if isinstance(word, str) else None)
        problem = "" if tests.notna().any() else f"see {path.stem}.md"
        study = str(rows.pop("study").iloc[0]) if "study" in rows and len(rows) else ""  # '': a file without it
        judged.append(Judged(path.stem.removesuffix("-judged"), study, rows.assign(blind_test=tests), None, None,
                             problem))
    return judged


def judged_summary(judgements: list[Judged]) -> list[str]:
    """README lines: each judged pre-registration (:func:`write_judgements`' or :func:`read_judgements`') with its
    rows' passes and failures per law; empty without one."""
    lines = []
    for judged in judgements:
        rows, name = judged.rows, judged.name
        axis = prediction_axis(name)
        confidence = float(rows["confidence"].iloc[0])
        if judged.problem:
            lines += [f"## Pre-registered prediction `{name}`", "", f"Not judged: see `{name}-judged.md`.", ""]
            continue
        lines_note = _LINES if RateLine.FIXED in set(rows["line"]) else ""
        lines += [f"## Pre-registered prediction `{name}` against the models trained after it", "",
                  f"Each row a {level_label(confidence)} prediction interval committed before the models started "
                  f"(`{name}.md`); judged without refitting (`{name}-judged.md`, per line and length). A pass is "
                  f"`uninformative` where the interval also held the value at the nearest fitted {axis} or "
                  f"{_RIVAL[axis][0]}: such a row could not have failed." + lines_note, "",
                  *[f"- {_chance_words(rows[rows[axis] == value], _target_label(axis, value))}."
                    for value in sorted(set(rows[axis]))],
                  "",
                  markdown_table(_counts_per_line(rows, axis)), ""]
    return lines
