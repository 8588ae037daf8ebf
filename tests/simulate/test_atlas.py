"""The atlases' shipped results: they load, they are what the study command writes from their points, their
figures build, and a re-run of one cheap model reproduces its row.

Two atlases ship (:mod:`simulate.study.atlas`): ``results/atlas`` (the depth study trained ten times longer,
its learning rate tuned, every model also at half the steps; shipped as far as it has run) and
``results/atlas-400-steps`` (the first atlas's four studies). Each is the output of ``python -m simulate study
SPEC... --out DIR --export RESULTS`` without the run directories (weights): the points' long tables, the specs
as they ran, the reports and the extrapolation (docs/studies.md).
"""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulate.claims import CLAIMS, STATISTICS, model_statistics
from simulate.study import read_study, write_reports
from simulate.study.atlas import ATLAS_DIR, EARLY_ATLAS_DIR, atlas_studies
from simulate.study.judge.tables import REPORT_FILES
from simulate.study.plan.tuning import planned_points, resolve_tuning, unplanned_points
from simulate.study.read.models import load_models
from simulate.study.read.point_table import point_evidence
from simulate.study.write.headline import headline_section
from simulate.study.write.provenance import results_readme
from simulate.sweep.store import read_summary
from theory.verdicts import PointStatus

ATLASES = {"atlas": ATLAS_DIR, "atlas-400-steps": EARLY_ATLAS_DIR}


@pytest.fixture(scope="module")
def studies():
    return atlas_studies(EARLY_ATLAS_DIR)


@pytest.mark.parametrize("atlas", ATLASES)
def test_every_study_is_shipped_with_what_it_rests_on(atlas):
    """Every model of every spec is in its study's table, finished or pending, and the README's count is true."""
    folder = ATLASES[atlas]
    studies = {name: resolve_tuning(study, folder) for name, study in atlas_studies(folder).items()}
    finished = {path.stem for path in (folder / "points").glob("*.parquet")}
    planned = {p.key for study in studies.values() for p in planned_points(study, folder)[0]}
    waiting = {p.key for study in studies.values() for p in unplanned_points(study, folder)[1]} - planned
    assert studies and finished <= planned | waiting, finished - planned - waiting  # superseded: not shipped
    shipped = []  # each study's points table
    for name, study in studies.items():
        assert all((folder / name / file).is_file() for file in REPORT_FILES), name
        results = read_study(folder, name)
        shipped.append(results.points)
        assert len(results.points) == len(study.sweep.points), name
        status = results.points.set_index("point")["status"]
        assert set(status[status != PointStatus.PENDING].index) == finished & {p.key for p in study.sweep.points}, name
        assert set(status) <= set(PointStatus)
        expected = {(claim, axis) for claim in study.claims for axis in study.axes}
        assert set(zip(results.trends["claim"], results.trends["axis"])) <= expected, name
        ok = results.points[results.points["status"] == PointStatus.OK]
        assert ok["epochs"].max() < 2.0 if len(ok) else True, f"{name}: a model saw its corpus more than twice"
        if len(ok) == len(results.points) and len(ok):  # a complete study: three seeds, both schemes, every claim
            assert results.points["seed"].nunique() == 3 and set(results.points["scheme"]) == {"pre", "lns"}
            assert set(zip(results.trends["claim"], results.trends["axis"])) == expected, name
            assert ok[list(STATISTICS)].notna().any().all(), f"{name}: a statistic is missing from every model"
    summary = read_summary(folder)  # written by the export from the shipped points' records, not an older run's
    assert set(summary.loc[summary["status"] == PointStatus.OK, "point"]) == finished, f"{folder}/summary.csv is stale"
    code = pd.concat(shipped).drop_duplicates("point").set_index("point")["code"]
    stale = {key: version for key, version in summary.set_index("point")["code"].dropna().items()
             if key in code.index and not str(code[key]).startswith(str(version)[:8])}
    assert not stale, f"{folder}/summary.csv names other code than the points' records: {stale}"
    readme = (folder / "README.md").read_text()
    unknown = sum(planned_points(study, folder)[1] for study in studies.values())
    count = f"**{len(finished & planned)} of the {len(planned) + unknown} models**"
    assert count in readme, f"{folder}/README.md: the count is stale ({count})"
    judgements = {name: read_study(folder, name) for name in studies}
    written = results_readme(list(studies.values()), judgements, str(folder), [], "atlas", "")
    cells = [line for line in written.splitlines() if line.startswith("- `")]
    assert len(cells) == len(studies) and all(line in readme for line in cells), "README: the cells are stale"
    if "depth" in studies and studies["depth"].sweep.points:  # a tuned study: once a cell has chosen its rate
        assert (folder / "extrapolation.md").is_file() and (folder / "extrapolation.csv").is_file()
        laws = judgements["depth"].variance_laws  # the depth study's judgement holds its laws' table
        assert laws is not None and set(laws["study"]) == {"depth"} and set(laws["law"]) == {
            "bridge", "growth", "increment", "across depth"}, laws
        assert all(judgement.variance_laws is None for name, judgement in judgements.items() if name != "depth")
    if "depth" in studies and studies["depth"].tuned:  # the headline names each scheme's rate, or "tuning"
        tuning = pd.read_csv(folder / "depth" / "tuning.csv")
        schemes_chosen = tuning[tuning["chosen"]].groupby("depth")["scheme"].nunique()  # (depths,)
        pruning = readme.split("### 2.")[1].split("###")[0]  # the headline's rows per depth, rates last
        for row in (line.split("|") for line in pruning.splitlines() if line[:3].strip("| ").isdigit()):
            still_tuning = schemes_chosen.get(int(row[1]), 0) < tuning["scheme"].nunique()
            assert ("tuning" in row[-2]) == still_tuning, f"README: the rates of depth {row[1]}: {row[-2]}"


@pytest.mark.parametrize("atlas, name", [("atlas-400-steps", "width"), ("atlas", "depth")])
def test_the_reports_are_what_the_study_command_writes_from_the_shipped_points(tmp_path, atlas, name):
    """A study's judgement, made again from a copy of its points, is the shipped one read back (the files, and the
    object every page formats: words as the same enum members)."""
    folder = ATLASES[atlas]
    study = atlas_studies(folder)[name]
    shutil.copytree(folder / "points", tmp_path / "points")
    fresh, shipped = write_reports(study, tmp_path).judgement.frames(), read_study(folder, name).frames()
    files = ("levels.csv", "trends.csv") + (("tuning.csv",) if study.tuned else ())
    for file in files:
        if (folder / name / file).stat().st_size > 1:
            assert_same_report(pd.read_csv(tmp_path / name / file), pd.read_csv(folder / name / file),
                               f"{atlas}/{name}/{file}")
            assert_same_report(fresh[file], shipped[file], f"{atlas}/{name}/{file} as judged")


# A report's numbers are compared to what they mean, not to the last bit: the shipped ones were computed on
# another machine, whose BLAS kernel and numpy SIMD path (AVX-512 against AVX2 or SSE) round differently, and a
# fitted exponent amplifies a 1e-16 rounding to 1e-8 (seen: 1.067454134588979 against 1.0674541234560895). The
# report prints three significant digits (relative resolution >= 5e-4); 1e-6 of a column's largest magnitude is
# 500x finer than that and 100x coarser than the rounding seen. Words (verdicts, notes) must be equal.
REPORT_RTOL = 1e-6


def assert_same_report(fresh: pd.DataFrame, shipped: pd.DataFrame, what: str) -> None:
    """Equal columns and words; numbers within :data:`REPORT_RTOL` of their column's scale (NaN where NaN)."""
    assert list(fresh.columns) == list(shipped.columns) and len(fresh) == len(shipped), what
    for column in shipped.columns:
        if pd.api.types.is_numeric_dtype(shipped[column]) and pd.api.types.is_numeric_dtype(fresh[column]):
            want = shipped[column].to_numpy(float)  # (rows,)
            finite = np.isfinite(want)
            scale = float(np.abs(want[finite]).max()) if finite.any() else 0.0
            np.testing.assert_allclose(fresh[column].to_numpy(float), want, rtol=REPORT_RTOL,
                                       atol=REPORT_RTOL * scale, equal_nan=True, err_msg=f"{what}: {column}")
        else:
            pd.testing.assert_series_equal(fresh[column], shipped[column], check_dtype=False, obj=f"{what}: {column}")


@pytest.mark.parametrize("atlas", ATLASES)
def test_the_headline_written_from_the_shipped_reports_prints_no_missing_value_as_nan(atlas):
    """A judgement holds NaN where a number is left out (no detectable effect for a trend over two cells) and ''
    where a word is (no design need): the headline leaves the clause out instead of printing nan."""
    studies = atlas_studies(ATLASES[atlas])
    lines = [line for study in studies.values()
             for line in headline_section(read_study(ATLASES[atlas], study.name), study)]
    assert lines, f"{atlas}: no headline written"
    printed_nan = [line[:160] for line in lines if re.search(r"\bnan\b", line)]
    assert not printed_nan, f"{atlas}: {len(printed_nan)} headline lines print nan: {printed_nan}"


@pytest.mark.parametrize("atlas", ATLASES)
def test_every_headline_row_and_trend_says_which_cell_it_answers_for(atlas):
    """A study that also sweeps the rate (the 400-step atlas's ``lr_depth``) answers each question once per rate:
    no two rows of a headline table, and no two trend lines, may read alike but for their numbers."""
    studies = atlas_studies(ATLASES[atlas])
    for study in studies.values():
        text = "\n".join(headline_section(read_study(ATLASES[atlas], study.name), study))
        for question in text.split("### ")[1:]:
            table = [line.split("|")[1:-1] for line in question.splitlines() if line.startswith("| ")]
            if table:
                header, rows = table[0], table[2:]  # the header, its rule, then one row per cell
                labels_at = ("scheme", "line", "depth", "law", "size")
                names = [i for i, name in enumerate(header) if name.strip() in labels_at
                         or name.strip() in study.group_fields("depth")]
                labels = [tuple(row[i].strip() for i in names) for row in rows]
                assert len(set(labels)) == len(labels), f"{atlas}/{study.name}: rows alike in {header}: {labels}"
            trends = [line.split(":")[0] for line in question.splitlines() if line.startswith("- As depth grows")]
            assert len(set(trends)) == len(trends), f"{atlas}/{study.name}: trend lines alike: {trends}"


@pytest.mark.parametrize("atlas", ATLASES)
def test_the_figures_build_from_the_shipped_results(tmp_path, atlas):
    from paper_figs.studies import study_depth, study_lns_gain, study_pruning
    from paper_figs.study_phase import study_phase

    for build in (study_depth, study_pruning, study_lns_gain, study_phase):
        paths = build(tmp_path / atlas, results=ATLASES[atlas])
        assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 10_000 for p in paths)


def _prediction_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Where one more seed's value falls: mean +- t s sqrt(1 + 1/n) over the shipped seeds."""
    values = values[np.isfinite(values)]
    half = stats.t.ppf(0.5 + confidence / 2, values.size - 1) * values.std(ddof=1) * math.sqrt(1 + 1 / values.size)
    return values.mean() - half, values.mean() + half


@pytest.mark.slow  # a training of 400 steps and its scores: about a minute on one core
def test_a_rerun_of_the_cheapest_model_reproduces_its_row(studies, tmp_path):
    """Depth 4, Pre-LN, seed 0 of the depth study, trained and scored again from its spec.

    Its held-out loss lies within 4 standard errors (over held-out sequences) of the shipped one,
    and every statistic within the interval where one more seed of its cell falls.
    """
    from simulate.sweep.engines import execute_point
    from simulate.sweep.store import decode_point

    study = studies["depth"]
    point = next(p for p in study.sweep.points if p.setting.depth == 4 and p.setting.scheme == "pre" and p.seed == 0)
    record, table = decode_point(execute_point({**point.to_dict(), "workdir": str(tmp_path / "run")})[1])
    assert record["status"] == "ok", record["error"]
    again = model_statistics(point_evidence(table, 4)).as_dict()
    shipped = read_study(EARLY_ATLAS_DIR, "depth").points
    cell = shipped[(shipped["depth"] == 4) & (shipped["scheme"] == "pre") & (shipped["status"] == PointStatus.OK)]
    row = cell[cell["seed"] == 0].iloc[0]
    loss = table[(table["table"] == "scores") & (table["name"] == "loss")].iloc[0]
    assert abs(again["val_loss"] - row["val_loss"]) <= 4 * loss["sem"], (again["val_loss"], row["val_loss"])
    for name in STATISTICS:
        if not np.isfinite(row[name]):
            continue
        low, high = _prediction_interval(cell[name].to_numpy(float))
        assert low <= again[name] <= high or math.isclose(again[name], row[name], rel_tol=1e-6, abs_tol=1e-9), (
            f"{name}: re-run {again[name]:.6g}, shipped {row[name]:.6g}, seeds' interval [{low:.6g}, {high:.6g}]")


def test_the_models_statistics_are_those_of_their_point_tables(studies):
    """points.parquet holds, for every model, the statistics of its shipped long table (read back here)."""
    study = studies["width"]
    shipped = read_study(EARLY_ATLAS_DIR, "width").points.set_index("point")
    for model in load_models(study, EARLY_ATLAS_DIR, statistics=False)[:4]:
        fresh = model_statistics(model.evidence).as_dict()
        for name in ("val_loss", "prune_deep", "usefulness_fraction", "var_last"):
            assert fresh[name] == pytest.approx(shipped.loc[model.point.key, name], rel=1e-12, nan_ok=True), name
    assert {CLAIMS[c].statistic for c in study.claims} <= set(STATISTICS)
