"""verify: the exact and bridge laws hold against the simulator; the table and CLI are complete."""

from __future__ import annotations

import pandas as pd
import pytest

import theory
from simulate import verify as verify_module
from simulate.compare import COLUMNS, classify
from simulate.verify import main, verify
from theory.verdicts import Verdict

EXACT_IDS = [i for i, lemma in theory.LEMMAS.items() if lemma.kind in ("exact", "bridge")]
# Lemmas whose verify settings give no curve of kind "exact": softmax attention with a score variance above
# UNIFORM_TAU2 (GQA, causal rows) and Jacobian metrics, where theory.predict marks every curve "approx"
# (theory/meanfield/prediction.py). They are compared by their approx rows, which are reported, not asserted.
APPROX_ONLY = {"gqa-init", "causal-attention", "jacobian-init"}


@pytest.fixture(scope="session")
def exact_table(shared_cache):
    return verify(quick=True, only=EXACT_IDS, depths=(4, 16))


def test_columns_present(exact_table):
    assert list(exact_table.columns) == COLUMNS
    assert set(exact_table["id"]) == set(EXACT_IDS)


def test_every_exact_law_of_the_exact_and_bridge_lemmas_holds(exact_table):
    """Curves the theory calls exact must sit within 4 sem at every layer (approx curves: reported only)."""
    exact = exact_table[exact_table["kind"] == "exact"]
    assert set(exact["id"]) == set(EXACT_IDS) - APPROX_ONLY, "the lemmas with exact curves compared"
    broken = exact[[v is not Verdict.HOLDS for v in exact["verdict"]]]
    assert broken.empty, "\n" + broken[["id", "setting", "metric", "layer", "predicted", "measured", "z",
                                         "verdict", "comment"]].to_string()


def test_paper_statement_not_at_init_has_its_verdict(shared_cache):
    table = verify(quick=True, only=["p1-thm-3.3"])
    assert table["verdict"].tolist() == [Verdict.NOT_APPLICABLE]
    assert table["comment"].str.len().min() > 0


@pytest.mark.parametrize("kind, z, excess, expected", [
    ("exact", [0.1, -3.9], [0.0, 0.0], Verdict.HOLDS),
    ("exact", [0.1, 4.5], [0.0, 0.0], Verdict.VIOLATED),
    ("upper", [-50.0, -2.0], [-50.0, -2.0], Verdict.HOLDS_AS_BOUND),
    ("upper", [-50.0, 6.0], [-50.0, 6.0], Verdict.VIOLATED),
    ("lower", [3.0, 9.0], [-3.0, -9.0], Verdict.HOLDS_AS_BOUND),
])
def test_classify(kind, z, excess, expected):
    assert classify(kind, z=z, rel=[0.0] * len(z), excess=excess) is expected


def test_cli_writes_csv_and_markdown(tmp_path, shared_cache, capsys):
    code = main(["--quick", "--only", "exact-weight-decay", "--only", "p2-thm-3,p1-thm-3.3", "--out", str(tmp_path)])
    assert code == 0
    table = pd.read_csv(tmp_path / "verify.csv")
    assert {"id", "verdict"} <= set(table.columns)
    assert set(table["id"]) == {"exact-weight-decay", "p2-thm-3", "p1-thm-3.3"}
    markdown = (tmp_path / "verify.md").read_text()
    assert markdown.startswith("# ") and "| id |" in markdown
    assert "exact-weight-decay" in capsys.readouterr().out


def test_cli_unknown_id_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--only", "no-such-lemma", "--out", str(tmp_path / "o")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-lemma" in err[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flags, message", [
    (["--trained", "--confidence", "1.5"], "--confidence: confidence=1.5 is not allowed: a real number in (0, 1)"),
    (["--confidence", "0.9"], "--confidence is allowed only with --trained"),
])
def test_cli_confidence_is_checked(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as stop:
        main([*flags, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "o").exists()


def test_describe_setting_names_changed_fields():
    assert verify_module.describe_setting(theory.Setting()) == "default"
