"""A tuned study with stability: the rate chosen per scheme and cell, every verdict compared at half the steps.

The study trains tiny LLaMA models (d=16, 2 and 4 blocks, 12 steps, docs corpus) at two rates
on one tuning seed, then the three seeds at each cell's chosen rate, each also for 6 steps; the
comparisons leave the tuning seed out.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from simulate.claims.definitions import MARGINS
from simulate.study import load_study, read_study, run_studies, write_reports
from simulate.study.cli import main as study_main
from simulate.study.plan.spec import StudyError, parse_study
from simulate.study.plan.tuning import DIVERGED_LOSS, choose_rate, resolve_tuning, tuning_points, unplanned_points
from theory.verdicts import CellStatus, RateStatus, Stability

SPEC = """
name = "tuned"
seeds = 3

[setting]
preset = "llama"
width = 16
heads = 2
tokens = 16
input_std = 0.02

[axes]
scheme = ["pre", "lns"]
depth = [2, 4]

[options]
steps = 12
log_every = 6
data = "docs"
sequences = 4
pairs = 1

[study]
axes = ["depth"]
stability = 0.5
tune_lr = [1e-3, 1e-2]
tune_seeds = [1]
"""


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tuned")
    (folder / "tuned.toml").write_text(SPEC)
    study = load_study(folder / "tuned.toml")
    report = run_studies([study], folder / "out", workers=1)
    write_reports(study, folder / "out")
    return study, folder / "out", report


def test_the_grid_tunes_on_its_seed_at_the_full_length_then_every_seed_trains_at_the_chosen_rate(tuned):
    study, out, report = tuned
    assert study.tuned and study.stability == (6, 12) and study.tune_seeds == (1,)
    tuning = tuning_points(study, out)
    assert len(tuning) == 2 * 2 * 2 and {p.seed for p in tuning} == {1}, "2 schemes x 2 depths x 2 rates, seed 1"
    assert {p.options["steps"] for p in tuning} == {12}
    resolved = resolve_tuning(study, out)
    table = pd.read_csv(out / "tuned" / "tuning.csv")  # the file holds the words, the judgement read back the members
    chosen = table[table["chosen"]]
    assert len(chosen) == 4 and set(table["cell_status"]) == {"tuned"}, table
    read_back = read_study(out, "tuned").tuning
    assert set(read_back["cell_status"]) == {CellStatus.TUNED}, read_back
    assert set(read_back["status"]) == {RateStatus.OK}, read_back
    pd.testing.assert_frame_equal(read_back, write_reports(study, out).judgement.tuning, check_dtype=False)
    for row in chosen.itertuples():  # the chosen rate has the lowest mean held-out loss of its cell
        cell = table[(table["scheme"] == row.scheme) & (table["depth"] == row.depth)]
        assert row.val_loss == cell["val_loss"].min() and row.edge, row  # a grid of two: every choice is an edge
    points = resolved.sweep.points
    assert len(points) == 4 * 3 * 2, "every cell's three seeds at its chosen rate, each at 6 and 12 steps"
    for point in points:
        row = chosen[(chosen["scheme"] == point.setting.scheme) & (chosen["depth"] == point.setting.depth)]
        assert math.isclose(point.setting.lr, row["lr"].iloc[0]), point
    assert report.total == len({p.key for p in points} | {p.key for p in tuning}) and report.failed == 0, report


def test_every_full_length_level_tests_its_change_from_the_shorter_models(tuned):
    """A level at the full length with two seeds left after the tuning seed has the change of its statistic from
    the shorter models (paired by seed) with an interval, and a stability word that reads it; the shorter length's
    rows have none, nor do trends of two axis values (a slope of two cells has no interval)."""
    study, out, _ = tuned
    results = read_study(out, "tuned")
    levels = results.levels
    assert (levels["n"] <= 2).all(), "the tuning seed is left out of the comparisons"
    full = levels[(levels["steps"] == 12) & levels["mean"].notna() & (levels["n"] == 2)
                  & ~levels["statistic"].isin(["growth_exponent", "growth_rate", "pooled_exponential_step_share"])]
    assert len(full), levels
    for row in full.itertuples():
        assert row.change_low <= row.change <= row.change_high, row
        assert isinstance(row.stability, Stability), row
        margin = MARGINS[row.statistic].level  # declared before the data, not taken from the estimate
        assert row.margin == pytest.approx(margin) and row.change_confidence == pytest.approx(0.9), row  # TOST at 0.05
        if row.stability is Stability.STABLE:
            assert -margin < row.change_low and row.change_high < margin, row
        elif row.stability is Stability.MOVES:
            assert row.change_low > margin or row.change_high < -margin, row
    assert levels.loc[levels["steps"] == 6, "stability"].isna().all()
    assert results.trends["stability"].isna().all() and (results.trends["cells"] == 2).all()
    text = (out / "tuned" / "study.md").read_text()
    assert "## Tuned learning rates" in text and "Stability: every model is also trained for 6 of the 12" in text
    assert "Convergence: training-loss slope" in text
    full = results.points[results.points["steps"] == 12]
    assert set(results.points["lr"]) <= {1e-3, 1e-2} and full["loss_slope"].notna().all(), "3+ steps in the last quarter"


def test_a_cell_whose_every_rate_diverges_is_failed_and_the_study_goes_on():
    assert choose_rate({1e-3: [math.nan], 1e-2: [DIVERGED_LOSS + 1]}) == (None, False)
    assert choose_rate({1e-3: [2.0, math.nan], 1e-2: [2.5, 2.4]}) == (1e-2, True)


@pytest.mark.parametrize("line, words", [
    ("stability = 0.5", "stability = 1.5"), ("stability = 0.5", "stability = 0.01"),
    ("tune_lr = [1e-3, 1e-2]", "tune_lr = [1e-3]"), ("tune_lr = [1e-3, 1e-2]", "tune_lr = [1e-3, -1.0]"),
    ("tune_seeds = [1]", "tune_seeds = [5]"), ("tune_seeds = [1]", "tune_seeds = []")])
def test_bad_tuning_and_stability_keys_exit_2_naming_the_key(tmp_path, capsys, line, words):
    (tmp_path / "bad.toml").write_text(SPEC.replace(line, words))
    with pytest.raises(SystemExit) as stop:
        study_main([str(tmp_path / "bad.toml"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    key = words.split(" = ")[0]
    assert stop.value.code == 2 and len(err) == 1 and f"study.{key}" in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_spec_that_sweeps_what_the_study_table_sweeps_is_refused():
    import tomllib

    data = tomllib.loads(SPEC)
    data["axes"]["lr"] = [1e-3, 3e-3]
    with pytest.raises(StudyError, match="study.tune_lr is not allowed with lr among the axes"):
        parse_study(data)


def test_the_export_ships_the_tuning_models_and_counts_them(tuned, tmp_path):
    """The copy holds every model the study trained, the grid's too; its README counts 8 tuning models and the 4
    cells' 3 seeds x 2 lengths, the tuning seed's full-length model shared: 8 + 4 x 5 = 28."""
    study, out, _ = tuned
    dest = tmp_path / "shipped"
    assert study_main([str(Path(out).parent / "tuned.toml"), "--out", str(out), "--report-only", "--export",
                       str(dest)]) == 0
    assert len(list((dest / "points").glob("*.parquet"))) == 28
    assert "**28 of the 28 models**" in (dest / "README.md").read_text()
    assert (dest / "tuned" / "tuning.csv").is_file()
    readme = (dest / "README.md").read_text()
    headline = readme[readme.index("## Headline answers of `tuned`"):readme.index("## To go on")]
    chosen = pd.read_csv(dest / "tuned" / "tuning.csv").query("chosen")
    for depth in (2, 4):  # each depth's loss row names both schemes' chosen rates and one of the three answers
        rates = [f"{chosen[(chosen['scheme'] == s) & (chosen['depth'] == depth)]['lr'].iloc[0]:g}"
                 for s in ("lns", "pre")]
        row = next(line for line in headline.splitlines() if line.startswith(f"| {depth} | ") and "/" in line)
        assert any(answer in row for answer in ("LNS lower", "LNS higher", "no difference resolved",
                                                "smaller than the design can resolve")), row
        assert all(rate in row.split("|")[-2] for rate in rates) and "(at the edge)" in row, (row, rates)
    assert "### 2. Are deep Pre-LN blocks" in headline and "### 3. How does the last layer's variance grow" in headline
    assert "too few axis values" in headline.split("### 3.")[1], "two depths give no exponent's verdict"
    again = read_study(dest, "tuned")
    assert len(again.points) == len(resolve_tuning(load_study(dest / "tuned" / "spec.toml"), dest).sweep.points)


@pytest.mark.parametrize("beyond, allowed", [("[3e-3]", "below 0.001 or above 0.01"),
                                             ("[1e-2, 3e-2]", "below 0.001 or above 0.01"),
                                             ("[-1.0]", "each a real number in (0, inf)"),
                                             ("0.1", "a list of distinct values")])
def test_rates_beyond_the_grid_must_lie_outside_it(tmp_path, capsys, beyond, allowed):
    (tmp_path / "bad.toml").write_text(SPEC + f"tune_lr_beyond = {beyond}\n")
    with pytest.raises(SystemExit) as stop:
        study_main([str(tmp_path / "bad.toml"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "study.tune_lr_beyond" in err[0], err
    assert allowed in err[0] and not (tmp_path / "out").exists(), err


def test_a_cell_whose_best_rate_is_at_an_edge_goes_on_past_it(tmp_path):
    """Pre-LN at two depths, a grid of two rates and three beyond it: each cell tries the next rate past an
    edge only while its best so far is that edge, every seed then trains at the rate it chose, and the
    report shows the rates a cell did not reach as "not tried"."""
    spec = (SPEC.replace('scheme = ["pre", "lns"]', 'scheme = ["pre"]').replace("stability = 0.5\n", "")
            + "tune_lr_beyond = [1e-4, 3e-2, 1e-1]\n")
    (tmp_path / "edge.toml").write_text(spec)
    out = tmp_path / "out"
    assert study_main([str(tmp_path / "edge.toml"), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    table = pd.read_csv(out / "tuned" / "tuning.csv")
    for depth, cell in table.groupby("depth"):
        losses = dict(zip(cell["lr"], cell["val_loss"]))
        assert set(losses) >= {1e-3, 1e-2} and cell["status"].eq("ok").all(), cell
        for rate in sorted(set(losses) - {1e-3, 1e-2}):  # each rate past the grid: the best before it at the edge
            before = {r: v for r, v in losses.items() if (r < rate if rate > 1e-2 else r > rate)}
            edge = max(before) if rate > 1e-2 else min(before)
            assert min(before, key=before.get) == edge, (rate, before)
        best = min(losses, key=losses.get)
        upward = best >= 1e-2
        further = [r for r in (1e-4, 3e-2, 1e-1) if r not in losses and (r > best if upward else r < best)]
        assert not (further and best == (max(losses) if upward else min(losses))), (best, losses, further)
        assert cell.loc[cell["chosen"], "lr"].tolist() == [best], cell
    results = read_study(out, "tuned")
    chosen = table[table["chosen"]].set_index("depth")["lr"]
    assert len(results.points) == 2 * 3 and all(math.isclose(row.lr, chosen[row.depth])
                                                for row in results.points.itertuples()), results.points
    assert ("not tried" in (out / "tuned" / "study.md").read_text()) == (len(table) < 2 * 5)


def test_a_model_whose_cell_chose_past_the_edge_is_not_shipped(tmp_path):
    """A study tuned over 1e-3 and 1e-2 (both cells choose 1e-2, their edge, at 12 steps) is exported; then
    3e-2 is allowed past the edge, both cells choose it, and the export drops the seed-0 models at 1e-2 (no
    longer the study's) from the earlier copy, keeping every tuning model."""
    spec = SPEC.replace('scheme = ["pre", "lns"]', 'scheme = ["pre"]').replace("stability = 0.5\n", "")
    out, dest = tmp_path / "out", tmp_path / "shipped"
    (tmp_path / "tuned.toml").write_text(spec)
    command = [str(tmp_path / "tuned.toml"), "--out", str(out), "--workers", "1", "--no-progress"]
    assert study_main([*command, "--export", str(dest)]) == 0
    first = {path.stem for path in (dest / "points").glob("*.parquet")}
    (tmp_path / "tuned.toml").write_text(spec + "tune_lr_beyond = [3e-2]\n")
    assert study_main([*command, "--export", str(dest)]) == 0
    table = pd.read_csv(dest / "tuned" / "tuning.csv")
    assert table.loc[table["chosen"], "lr"].tolist() == [3e-2, 3e-2], table
    study = resolve_tuning(load_study(tmp_path / "tuned.toml"), out)
    superseded, waiting = unplanned_points(study, out)
    assert {(p.seed, p.setting.lr) for p in superseded} == {(0, 1e-2), (2, 1e-2)} and len(superseded) == 4
    assert not waiting
    shipped = {path.stem for path in (dest / "points").glob("*.parquet")}
    assert len(first) == 2 * 4 and shipped == first - {p.key for p in superseded} | {
        p.key for p in study.sweep.points} | {p.key for p in tuning_points(study, out)}, (first, shipped)
    assert len(shipped) == 2 * 5 and "**10 of the 10 models**" in (dest / "README.md").read_text()


def test_compare_needs_export_and_the_old_reports(tuned, tmp_path, capsys):
    """A folder of the study without its reports is refused; a study the old run has no folder of is new."""
    _, out, _ = tuned
    spec = str(Path(out).parent / "tuned.toml")
    (tmp_path / "old" / "tuned").mkdir(parents=True)
    for extra, words in (([], "--compare is allowed only with --export"),
                         (["--export", str(tmp_path / "copy")], "it has no tuned/levels.csv")):
        with pytest.raises(SystemExit) as stop:
            study_main([spec, "--out", str(out), "--report-only", "--compare", str(tmp_path / "old"), *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1 and words in err[0], err
    assert not (tmp_path / "copy").exists()
    (tmp_path / "none").mkdir()
    assert study_main([spec, "--out", str(out), "--report-only", "--export", str(tmp_path / "copy"),
                       "--compare", str(tmp_path / "none")]) == 0
    assert "New since" in (tmp_path / "copy" / "changes-from-none.md").read_text()


def test_compare_lists_the_verdicts_that_changed(tuned, tmp_path):
    """The study against itself changes nothing; against a copy whose verdicts were all set to "violated",
    every judged verdict at the full length is listed, old -> new."""
    _, out, _ = tuned
    spec = str(Path(out).parent / "tuned.toml")
    old = tmp_path / "old"
    shutil.copytree(Path(out) / "tuned", old / "tuned")
    assert study_main([spec, "--out", str(out), "--report-only", "--export", str(tmp_path / "same"),
                       "--compare", str(old)]) == 0
    text = (tmp_path / "same" / "changes-from-old.md").read_text()
    assert "0 of " in text.split("## Trends")[0] and "| claim |" not in text, text
    levels = pd.read_csv(old / "tuned" / "levels.csv")
    judged = levels["verdict"].isin(["holds", "inconclusive"]) & (levels["steps"] == 12)
    levels.loc[levels["verdict"].isin(["holds", "inconclusive"]), "verdict"] = "violated"
    levels.to_csv(old / "tuned" / "levels.csv", index=False)
    assert study_main([spec, "--out", str(out), "--report-only", "--export", str(tmp_path / "new"),
                       "--compare", str(old)]) == 0
    text = (tmp_path / "new" / "changes-from-old.md").read_text().split("## Trends")[0]
    assert f"{judged.sum()} of " in text and text.count("| violated |") == judged.sum() > 0, text
