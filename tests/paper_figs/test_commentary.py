"""Notebook 04's commentary says what its summary table says: a lemma's verdict there is the verdict of the curves
that state it, and its approximate curves beside an exact law are named apart, as the table's ``approx_curves``.

Issue 52: the table said masked-linear "holds 18/18" while the commentary listed masked-linear under "violated",
for one approximate angular curve.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from paper_figs.notebook import verdict_commentary
from simulate.compare import COLUMNS
from simulate.verify import summarize
from theory.verdicts import Verdict


def _row(lemma: str, kind: str, metric: str, verdict: str, z: float, setting: str) -> dict:
    """One row of a verify table (:data:`simulate.compare.COLUMNS`), the numbers a comparison prints."""
    row = dict.fromkeys(COLUMNS, math.nan)
    row.update(id=lemma, setting=setting, stage="init", metric=metric, kind=kind, layer=64, z=z, rel_error=0.05,
               verdict=Verdict.parse(verdict), comment=f"|z| = {abs(z):.2f}")
    return row


def _table() -> pd.DataFrame:
    """masked-linear as notebook 04 showed it: its exact variance law holds, one of its approximate angular curves
    does not; preln-init with approximate curves alone (they state it)."""
    return pd.DataFrame([_row("masked-linear", "exact", "var", "holds", 1.2, "rho=0.25"),
                         _row("masked-linear", "exact", "var", "holds", -0.4, "rho=0.5"),
                         _row("masked-linear", "approx", "angular", "violated", 4.48, "rho=0.25"),
                         _row("masked-linear", "approx", "angular", "holds approximately", 4.1, "rho=0.5"),
                         _row("preln-init", "approx", "var", "violated", 6.0, "T=8")], columns=COLUMNS)


def _sections(lines: list[str]) -> dict[str, set[str]]:
    """``{verdict: lemmas}`` of the commentary's verdict sections before the approximate curves' own."""
    sections = {}
    for line in lines:
        if line.startswith("=== approximate curves beside an exact law"):
            break
        heading = re.match(r"=== (.+): \d+ rows, lemmas (.+)$", line)
        if heading:
            sections[heading.group(1)] = set(heading.group(2).split(", "))
    return sections


def test_the_commentary_lists_a_lemma_under_the_verdicts_the_summary_gives_it():
    table = _table()
    summary = summarize(table).set_index("id")
    lines = verdict_commentary(table)
    sections = _sections(lines)
    assert str(summary.loc["masked-linear", "verdict"]) == "holds", summary  # 2/2 exact curves hold
    assert "masked-linear" not in sections.get("violated", set()), lines
    assert sections["violated"] == {"preln-init"} and sections["holds"] == {"masked-linear"}, sections
    beside = lines[lines.index(next(line for line in lines if line.startswith("=== approximate curves"))):]
    assert "masked-linear" in beside[0] and any(line.startswith("--- violated: 1 rows") for line in beside), beside
    assert summary.loc["masked-linear", "approx_curves"].startswith("1/2 within"), summary.loc["masked-linear"]
