"""Growth-class judgement of P1's statements, trained-claim verdicts and their place in ``verify``."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulate.scores.growth_claims import growth_rows, growth_summary, t_interval
from simulate.scores.trained_claims import signed_verdict, trained_markdown, trained_rows, trained_summary, welch_interval

ALLOWED = {"holds", "holds as a bound", "violated", "inconclusive"}


def _verdicts(rows):
    return {r["metric"]: r["verdict"] for r in rows}


def test_linear_growth_is_polynomial_exponent_one_and_not_p1s_step_law():
    var = 1.0 + 0.3 * np.arange(33.0)  # random-init Pre-LN: constant increments
    summary = growth_summary(var)
    assert summary.label == "polynomial" and abs(summary.exponent[0] - 1.0) < 1e-6, summary
    assert abs(summary.step[0] - 2.0) < 1e-9, f"constant increments: q = {summary.step[0]}, target 2"
    assert _verdicts(growth_rows("p1-lemma-3.2", "x", summary)) == {"var_growth": "holds as a bound",
                                                                    "var_step": "violated"}


def test_p1s_own_recursion_is_recognised():
    var = [1.0]
    for _ in range(64):
        var.append(var[-1] * (1 + 0.5 / math.sqrt(var[-1])))  # P1 Lemma 3.2 read as 1 + c/sigma, c = 0.5
    summary = growth_summary(np.array(var))
    low, high = summary.step[1:]
    assert low <= 1.0 <= high and abs(summary.step[0] - 1.0) < 0.05, summary.step
    assert summary.label == "polynomial" and summary.exponent[0] > 1.3, summary.exponent  # tends to L^2
    assert _verdicts(growth_rows("p1-lemma-3.2", "x", summary))["var_step"] == "holds"


def test_exponential_and_logarithmic_growth():
    layers = np.arange(25.0)
    expo = growth_summary(0.1 + np.exp(0.2 * layers))
    assert expo.label == "exponential" and abs(expo.rate[0] - 0.2) < 0.01, expo.rate
    lns_init = growth_summary(np.r_[1.0, 1.0 + np.cumsum(1.0 / np.arange(1, 65))])  # Theta(log L)
    assert _verdicts(growth_rows("p1-lns", "x", lns_init)) == {"var_growth": "violated"}, lns_init.exponent
    with pytest.raises(ValueError, match="lemma_id"):
        growth_rows("p2-thm-1", "x", lns_init)
    assert _verdicts(growth_rows("p1-lns", "x", expo)) == {"var_growth": "violated"}, expo.rate


def test_an_exponential_class_whose_rate_interval_holds_0_does_not_violate_lns():
    # Three seeds whose pooled residuals favour the exponential fit by a hair (an LNS run at
    # d=64, L=16 gave rate 0.21 [-0.18, 0.59]): the class is no evidence against polynomial growth.
    layers = np.arange(17.0)
    curves = np.stack([1.0 + np.exp(0.25 * layers), 1.0 + 2.0 * layers, 1.0 + np.exp(0.02 * layers) * layers])
    summary = growth_summary(curves)
    assert summary.label == "exponential" and summary.rate[1] < 0 < summary.rate[2], (summary.label, summary.rate)
    (row,) = growth_rows("p1-lns", "x", summary)
    assert row["verdict"] == "inconclusive" and row["measured"] == summary.rate[0] and row["predicted"] == 0.0, row


def test_seed_intervals_match_scipy():
    a, b = [1.0, 1.4, 0.9, 1.2], [0.2, 0.5, 0.1]
    mean, low, high = welch_interval(a, b)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert math.isclose(low, ci.low, rel_tol=1e-9) and math.isclose(high, ci.high, rel_tol=1e-9), (low, high, ci)
    _, low, high = t_interval(a)
    ci = stats.ttest_1samp(a, 0.0).confidence_interval(0.95)
    assert math.isclose(low, ci.low, rel_tol=1e-9) and math.isclose(high, ci.high, rel_tol=1e-9)
    assert signed_verdict((1.0, 0.5, 1.5), 1) == "holds" and signed_verdict((1.0, 0.5, 1.5), -1) == "violated"
    assert signed_verdict((0.1, -0.5, 0.7), 1) == "inconclusive" and signed_verdict((0.1, math.nan, math.nan), 1) \
        == "inconclusive"


@pytest.fixture(scope="module")
def tiny_claim_runs():
    from simulate.scores.training_cache import TINY, claim_runs

    return claim_runs(TINY, names=["pre", "lns", "weight_decay"])


def test_trained_rows_cover_every_claim_at_step_0_and_trained(tiny_claim_runs):
    rows = pd.DataFrame(trained_rows([p for paths in tiny_claim_runs.values() for p in paths]))
    claims = set(zip(rows["id"], rows["metric"]))
    expected = {("p1-lemma-3.2", "var_growth"), ("p1-lemma-3.2", "var_step"), ("p1-thm-3.3", "jac_dev_deep_vs_shallow"),
                ("p1-thm-3.3", "prune_deep_vs_shallow"), ("p1-lns", "var_growth"), ("p1-lns", "prune_deep_vs_pre"),
                ("p1-lns", "val_loss_vs_pre"), ("p2-thm-3", "var_growth_vs_dense"),
                ("p2-thm-3", "usefulness_vs_dense")}
    assert expected <= claims, expected - claims
    assert set(rows["verdict"]) <= ALLOWED, set(rows["verdict"])
    stages = rows["setting"].str.extract(r"^(step \d+) \|")[0]
    assert set(stages) == {"step 0", "step 20"}, set(stages)
    one_seed = rows[rows["kind"] == "claim"]
    assert one_seed["verdict"].eq("inconclusive").all(), "one seed gives no interval"
    summary = trained_summary(rows)
    assert len(summary) == len(rows) // 2 and summary["trained"].ne("").all()
    from theory.cli import markdown_table

    assert "## Trained claims" in trained_markdown(rows, markdown_table)


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
    assert set(table["kind"]) <= {"claim", "growth"} and set(table["id"]) == {"p1-lemma-3.2", "p1-thm-3.3", "p1-lns"}
    assert "verdict trained" in printed and "val_loss_vs_pre" in printed and "loss_slope_per_1000_steps" in printed
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
    assert flat.at_bound == 1 and np.isnan(flat.exponent[1:]).all(), flat
    (row,) = growth_rows("p1-lns", "x", flat)
    assert "at the bound of the fitted range, no interval" in row["comment"] and "[0.02" not in row["comment"], row
    four = growth_summary(np.array([1.0, 1.0, 1.3, 1.2, 1.9]))  # four blocks: the data bound neither end
    assert four.exponent[1] == 0.0 and four.exponent[2] == math.inf, four.exponent
    (row,) = growth_rows("p1-lns", "x", four)
    assert row["verdict"] == "inconclusive" and "[0.00, inf]" in row["comment"], row
