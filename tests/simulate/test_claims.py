"""The claims engine: growth-class judgements, intervals, the two judges on the same records, ``verify --trained``."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulate.claims import (CLAIMS, Interval, difference_interval, growth_claim, growth_summary, judge_growth,
                             t_interval, welch_interval)
from simulate.engine import CONFIDENCE
from theory.verdicts import GrowthClass, Verdict

ALLOWED = {Verdict.HOLDS, Verdict.VIOLATED, Verdict.INCONCLUSIVE, Verdict.UNRESOLVABLE, Verdict.NOT_MEASURED}


def _verdicts(lemma: str, summary) -> dict:
    return {j.statistic: j.verdict for j in judge_growth(growth_claim(lemma), summary)}


def test_linear_growth_is_polynomial_exponent_one_and_not_p1s_step_law():
    var = 1.0 + 0.3 * np.arange(33.0)  # random-init Pre-LN: constant increments
    summary = growth_summary(var)
    assert summary.label is GrowthClass.POLYNOMIAL and abs(summary.exponent.estimate - 1.0) < 1e-6, summary
    assert abs(summary.step.estimate - 2.0) < 1e-9, f"constant increments: q = {summary.step.estimate}, target 2"
    assert _verdicts("p1-lemma-3.2", summary) == {"var_growth": Verdict.HOLDS, "var_step": Verdict.VIOLATED}


def test_p1s_own_recursion_is_recognised():
    var = [1.0]
    for _ in range(64):
        var.append(var[-1] * (1 + 0.5 / math.sqrt(var[-1])))  # P1 Lemma 3.2 read as 1 + c/sigma, c = 0.5
    summary = growth_summary(np.array(var))
    low, high = summary.step.low, summary.step.high
    assert low <= 1.0 <= high and abs(summary.step.estimate - 1.0) < 0.05, summary.step
    assert summary.label is GrowthClass.POLYNOMIAL and summary.exponent.estimate > 1.3, summary.exponent  # tends to L^2
    assert _verdicts("p1-lemma-3.2", summary)["var_step"] is Verdict.HOLDS


def test_exponential_and_logarithmic_growth():
    layers = np.arange(25.0)
    expo = growth_summary(0.1 + np.exp(0.2 * layers))
    assert expo.label is GrowthClass.EXPONENTIAL and abs(expo.rate.estimate - 0.2) < 0.01, expo.rate
    lns_init = growth_summary(np.r_[1.0, 1.0 + np.cumsum(1.0 / np.arange(1, 65))])  # Theta(log L)
    assert _verdicts("p1-lns", lns_init) == {"var_growth": Verdict.VIOLATED}, lns_init.exponent
    with pytest.raises(ValueError, match="lemma='p2-thm-1' is not allowed"):
        growth_claim("p2-thm-1")
    with pytest.raises(ValueError, match="not a growth claim"):
        judge_growth(CLAIMS["p1-lns-loss"], lns_init)
    assert _verdicts("p1-lns", expo) == {"var_growth": Verdict.VIOLATED}, expo.rate


def test_seeds_that_cannot_tell_the_classes_apart_leave_the_class_undetermined():
    # Three seeds whose pooled residuals favour the exponential fit by a hair (an LNS run at d=64, L=16 gave rate
    # 0.21 [-0.18, 0.59]): the interval over seeds of log(RSS poly / RSS exp) holds 0, so no class, no verdict.
    layers = np.arange(17.0)
    curves = np.stack([1.0 + np.exp(0.25 * layers), 1.0 + 2.0 * layers, 1.0 + np.exp(0.02 * layers) * layers])
    summary = growth_summary(curves)
    assert summary.label is GrowthClass.UNDETERMINED and summary.preference.low < 0 < summary.preference.high, summary
    (judgement,) = judge_growth(growth_claim("p1-lns"), summary)
    assert judgement.verdict is Verdict.INCONCLUSIVE and "cannot tell the fits apart" in judgement.comment, judgement


def test_the_class_test_names_a_class_the_seeds_agree_on():
    layers = np.arange(17.0)
    rng = np.random.default_rng(0)
    noise = 1 + 0.01 * rng.standard_normal((3, 17))  # (3, 17) one percent per layer and seed
    expo = growth_summary((1.0 + np.exp(0.3 * layers)) * noise)
    poly = growth_summary((1.0 + 0.5 * layers**1.5) * noise)
    assert expo.label is GrowthClass.EXPONENTIAL and expo.preference.low > 0, expo.preference
    assert poly.label is GrowthClass.POLYNOMIAL and poly.preference.high < 0, poly.preference


def test_the_per_layer_factor_leaves_out_block_1_and_counts_the_blocks_it_drops():
    from theory.meanfield.bridge import loglog_slope

    var = 1.0 + 0.3 * np.arange(33.0)  # constant increments: factor 0.3 / sigma^2, q = 2
    var[0] = 0.03  # the embedding's own scale: block 1's factor is 42, the lift into the stream
    var[20] = var[19]  # one block with factor 0: no logarithm
    summary = growth_summary(var)
    assert summary.step.low <= 2.0 <= summary.step.high and summary.step_dropped == 1, summary
    with np.errstate(divide="ignore", invalid="ignore"):
        with_block_1 = loglog_slope(np.sqrt(var[:-1]), var[1:] / var[:-1] - 1.0)  # the old fit, from block 1
    assert not (-with_block_1.ci_high <= 2.0 <= -with_block_1.ci_low), with_block_1  # the lift dominates it


def test_seed_intervals_match_scipy():
    a, b = [1.0, 1.4, 0.9, 1.2], [0.2, 0.5, 0.1]
    welch = welch_interval(a, b)
    low, high = welch.low, welch.high
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert math.isclose(low, ci.low, rel_tol=1e-9) and math.isclose(high, ci.high, rel_tol=1e-9), (low, high, ci)
    low, high = t_interval(a).low, t_interval(a).high
    ci = stats.ttest_1samp(a, 0.0).confidence_interval(0.95)
    assert math.isclose(low, ci.low, rel_tol=1e-9) and math.isclose(high, ci.high, rel_tol=1e-9)
    paired = difference_interval(dict(enumerate(a[:3])), dict(enumerate(b)))
    ci = stats.ttest_rel(a[:3], b).confidence_interval(0.95)
    assert paired.estimate.method == "paired by seed" and paired.n == 3, paired
    assert math.isclose(paired.estimate.low, ci.low, rel_tol=1e-9) and math.isclose(paired.estimate.high, ci.high,
                                                                                     rel_tol=1e-9), (paired, ci)
    unpaired = difference_interval(dict(enumerate(a)), dict(enumerate(b)))
    assert unpaired.estimate.method == "Welch" and unpaired.n == 7 and unpaired.estimate == welch_interval(a, b), unpaired
    assert Interval(1.0, 0.5, 1.5, 0.95).signed_verdict(1) is Verdict.HOLDS
    assert Interval(1.0, 0.5, 1.5, 0.95).signed_verdict(-1) is Verdict.VIOLATED
    assert Interval(0.1, -0.5, 0.7, 0.95).signed_verdict(1) is Verdict.INCONCLUSIVE
    assert Interval(0.1).signed_verdict(1) is Verdict.INCONCLUSIVE


@pytest.fixture(scope="module")
def tiny_claim_runs():
    from simulate.scores.training_cache import TINY, claim_runs

    return claim_runs(TINY, names=["pre", "lns", "weight_decay"])


def test_trained_rows_cover_every_claim_at_step_0_and_trained(tiny_claim_runs):
    from simulate.compare import COLUMNS
    from simulate.verify import add_trained_rows, trained_section, trained_summary

    runs = [p for paths in tiny_claim_runs.values() for p in paths]
    rows = add_trained_rows("verify", pd.DataFrame(columns=COLUMNS), runs, progress=False)
    claims = set(zip(rows["id"], rows["metric"]))
    expected = {("p1-lemma-3.2-growth", "var_growth"), ("p1-lemma-3.2-growth", "var_step"),
                ("p1-thm-3.3-jac", "jac_dev_log_ratio"), ("p1-thm-3.3-prune", "prune_log_ratio"),
                ("p1-lns-growth", "var_growth"), ("p1-lns-prune", "prune_deep_log"), ("p1-lns-loss", "val_loss"),
                ("p2-thm-3-var-growth", "var_growth"), ("p2-thm-3-usefulness", "usefulness_log")}
    assert expected <= claims, expected - claims
    assert set(rows["id"]) <= set(CLAIMS), set(rows["id"]) - set(CLAIMS)
    assert set(rows["verdict"]) <= ALLOWED, set(rows["verdict"])
    assert set(rows["stage"]) == {0, 20}, set(rows["stage"])  # an integer stage, no step packed into the setting
    assert not rows["setting"].str.contains("step").any(), rows["setting"].unique()
    one_seed = rows[rows["kind"] == "claim"]
    assert one_seed["verdict"].isin([Verdict.INCONCLUSIVE, Verdict.NOT_MEASURED, Verdict.UNRESOLVABLE]).all(), \
        "one seed gives no interval"
    summary = trained_summary(rows, CONFIDENCE)
    measured = summary["verdict trained"].ne("not measured")
    assert len(summary) == len(rows) // 2 and summary.loc[measured, "trained"].ne("").all(), summary
    assert "## Trained claims" in trained_section(rows)


def test_both_judges_give_one_comparison_one_interval(tiny_claim_runs):
    """The judge of ``verify --trained`` and a study's judge read the same per-model statistics and compare two
    schemes the same way: on the same models they give the same estimate, interval and verdict."""
    from dataclasses import dataclass
    from types import SimpleNamespace

    from simulate.claims import Inference, ModelStatistics, judge_levels, judge_runs, judged_run
    from theory.verdicts import PointStatus, RateLine

    @dataclass(frozen=True)
    class StudyModel:  # what the study's judge reads of a model (simulate.study.read.models.Model)
        scheme: str
        seed: int
        stats: ModelStatistics
        profiles: dict
        status: PointStatus = PointStatus.OK

        def cell(self, fields):
            return ()

    runs = [judged_run(p) for name in ("pre", "lns") for p in tiny_claim_runs[name]]
    judged = judge_runs([r.path for r in runs])
    trained = {(r.judgement.claim.id, r.judgement.statistic): r.judgement for r in judged if r.stage > 0}
    models = [StudyModel(r.setting.scheme, r.seed, r.stats[r.last_step], {s: e.last_profile() for s, e in
                                                                           r.evidence.items() if s > 0})
              for r in runs]
    claim_ids = ["p1-lns-loss", "p1-lns-prune", "p1-thm-3.3-jac", "p1-thm-3.3-prune"]  # signed: the growth claims
    study = SimpleNamespace(claims=claim_ids, cell_fields=lambda: (), inference=Inference(), stability=None)
    levels = judge_levels(study, {RateLine.TRAINED: models})  # are judged across depth in a study, not per cell
    assert len(levels) == 4, [(j.claim.id, j.statistic) for j in levels]
    for ours in levels:
        theirs = trained[(ours.claim.id, ours.statistic)]
        np.testing.assert_allclose([ours.estimate.estimate, ours.estimate.low, ours.estimate.high],
                                   [theirs.estimate.estimate, theirs.estimate.low, theirs.estimate.high],
                                   rtol=1e-12, err_msg=f"{ours.claim.id}: study {ours.estimate}, verify {theirs.estimate}")
        assert ours.verdict is theirs.verdict, (ours, theirs)
    assert sum(np.isfinite(j.estimate.estimate) for j in levels) >= 3, levels  # measured, not all NaN (the tiny
    # LNS runs' deep pruning drop is not positive: its log ratio is undefined in both, "not measured")


def test_verify_judges_p1_lemma_by_its_growth_rows():
    from simulate.verify import summarize, verify

    table = verify(quick=True, only=["p1-lemma-3.2"], depths=[16])
    growth = table[table["kind"] == "growth"]
    assert set(growth["metric"]) == {"var_growth", "var_step"} and len(growth) == 2 * 4, growth[["setting", "metric"]]
    mlp = growth[growth["setting"].str.contains("block=mlp") & (growth["metric"] == "var_growth")].iloc[0]
    assert mlp["ci_low"] - 0.1 <= 1.0 <= mlp["ci_high"] + 0.1, mlp  # random-init Pre-LN: linear
    summary = summarize(table).set_index("id").loc["p1-lemma-3.2"]
    assert summary["rows"].endswith(f"/{len(growth)}"), summary  # judged on the growth rows, c = 1 curves apart
    assert summary["approx_curves"], summary


def test_verify_trained_bad_run_exits_2_before_any_work(tmp_path, capsys):
    from simulate.verify import main

    with pytest.raises(SystemExit) as stop:
        main(["--quick", "--trained", str(tmp_path / "nope"), "--out",
              str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "nope" in err[0], err
    assert not (tmp_path / "out").exists()


def test_verify_trained_judges_only_the_runs_prints_them_and_keeps_other_reports(tiny_claim_runs, tmp_path, capsys):
    """``verify --trained RUN RUN`` writes its own report: the trained claims alone, printed on the terminal.

    It reruns no random-init lemma, goes to its own directory, and refuses (exit 2, nothing
    written) to overwrite a random-init report unless ``--force``.
    """
    from simulate.verify import INIT_TITLE, TRAINED_TITLE, main

    runs = [str(p) for name in ("pre", "lns") for p in tiny_claim_runs[name]]
    out = tmp_path / "trained"
    assert main(["--trained", *runs, "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(out / "verify.csv")
    assert set(table["kind"]) <= {"claim", "growth"} and set(table["id"]) == {
        "p1-lemma-3.2-growth", "p1-thm-3.3-jac", "p1-thm-3.3-prune", "p1-lns-growth", "p1-lns-prune", "p1-lns-loss"}
    assert "verdict trained" in printed and "p1-lns-loss" in printed and "loss_slope_per_1000_steps" in printed
    report = (out / "verify.md").read_text()
    assert report.startswith(f"# {TRAINED_TITLE}\n") and "## Convergence" in report
    init_report = tmp_path / "init"
    init_report.mkdir()
    (init_report / "verify.md").write_text(f"# {INIT_TITLE}\n\nkept\n")
    with pytest.raises(SystemExit) as stop:
        main(["--trained", *runs, "--out", str(init_report), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "--force" in err[0], err
    assert (init_report / "verify.md").read_text().endswith("kept\n") and not (init_report / "verify.csv").exists()
    assert main(["--trained", *runs, "--out", str(init_report), "--force", "--no-progress"]) == 0
    assert (init_report / "verify.md").read_text().startswith(f"# {TRAINED_TITLE}\n")


def test_a_fit_at_the_bound_of_its_range_shows_no_interval_and_open_ends_are_open():
    """The fit's range is never printed as a 95 % interval (verify.md once read "0.02 [0.02, 8]")."""
    flat = growth_summary(1.0 + np.log1p(np.arange(17.0)) ** 0.01)  # flatter than l^0.02, the range's end
    assert flat.at_bound == 1 and not flat.exponent.bounded, flat
    (judgement,) = judge_growth(growth_claim("p1-lns"), flat)
    assert "at the bound of the fitted range, no interval" in judgement.comment and "[0.02" not in judgement.comment
    four = growth_summary(np.array([1.0, 1.0, 1.3, 1.2, 1.9]))  # four blocks: the data bound neither end
    assert four.exponent.low == 0.0 and four.exponent.high == math.inf, four.exponent
    (judgement,) = judge_growth(growth_claim("p1-lns"), four)
    assert judgement.verdict is Verdict.INCONCLUSIVE and "[0.00, inf]" in judgement.comment, judgement
