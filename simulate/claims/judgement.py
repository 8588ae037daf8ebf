"""What a judge says about one claim on one set of models: the typed record both judges return.

>>> from simulate.claims.definitions import CLAIMS
>>> from simulate.claims.intervals import Interval
>>> j = Judgement(CLAIMS["p1-lns-loss"], "val_loss", Interval(-0.02, -0.03, -0.01), Verdict.HOLDS, n=3)
>>> j.claim.id, j.estimate.format(), str(j.verdict)
('p1-lns-loss', '-0.02 [-0.03, -0.01]', 'holds')
"""

from __future__ import annotations

from dataclasses import dataclass

from simulate.claims.definitions import Claim
from simulate.claims.intervals import Interval
from simulate.claims.verdicts import Verdict

__all__ = ["Judgement"]


@dataclass(frozen=True)
class Judgement:
    """A claim's statistic with its interval, the verdict, the value the verdict compares with (``target``),
    a sentence for the reader (``comment``), how many models (``n``) and, for a growth claim, the class."""

    claim: Claim
    statistic: str
    estimate: Interval
    verdict: Verdict
    n: int
    target: float = 0.0
    comment: str = ""
    growth_class: str = ""
