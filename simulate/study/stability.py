"""Is a verdict stable? The same verdict after ``round(f N)`` steps and after ``N``, or where it flips.

A study with ``[study] stability = f`` (:mod:`simulate.study.spec`) trains every model twice:
for ``N`` steps and for ``round(f N)`` steps, each with a whole schedule of its own (warmup
and cosine decay over its own length). A checkpoint in the middle of the long run would be a
model half way down its learning-rate schedule, not a model trained for half the steps: its
rate has not decayed, so its loss and its statistics mix "trained less" with "not yet
annealed" (how much that matters is measured in docs/studies.md#stability). Each row of
``levels.csv`` and ``trends.csv`` at ``N`` steps gets the column ``stability``:

- ``stable``: the row of the shorter models (same claim, statistic, scheme, cell or group)
  has the same verdict;
- ``flips between step n and N (a -> b)``: it has another one;
- empty: the row is itself of the shorter models, or has no partner, or one of the two is
  no judgement (``too few axis values``, ``not measured``, ``no direction claimed``, no
  models yet).

>>> import pandas as pd
>>> rows = pd.DataFrame({"claim": ["c", "c", "d", "d"], "steps": [50, 100, 50, 100],
...                      "verdict": ["holds", "holds", "holds", "violated"]})
>>> stability_column(rows, ["claim"], (50, 100)).tolist()
['', 'stable', '', 'flips between step 50 and 100 (holds -> violated)']
"""

from __future__ import annotations

import pandas as pd

from simulate.claims.verdicts import Verdict

__all__ = ["stability_column"]

_JUDGED = (Verdict.HOLDS, Verdict.VIOLATED, Verdict.INCONCLUSIVE)  # the verdicts that can be stable or flip


def stability_column(rows: pd.DataFrame, keys, stability: tuple[int, int] | None) -> pd.Series:
    """The ``stability`` of each row (module docstring); ``keys``: the columns that pair a row with its partner."""
    if stability is None or rows.empty:
        return pd.Series([""] * len(rows), index=rows.index, dtype=object)
    shorter, full = stability
    paired = rows[list(keys)].astype(object).where(rows[list(keys)].notna(), "")  # a field a row lacks pairs as ''
    judged = rows["verdict"].isin(_JUDGED) & (rows["n"] > 0 if "n" in rows else True)  # (rows,)
    earlier = {tuple(paired.loc[i]): rows.at[i, "verdict"] for i in rows.index[(rows["steps"] == shorter) & judged]}

    def word(row) -> str:
        before = earlier.get(tuple(paired.loc[row.name]))
        if row["steps"] != full or not before or not judged[row.name]:
            return ""
        return "stable" if before == row["verdict"] else \
            f"flips between step {shorter} and {full} ({before} -> {row['verdict']})"

    return rows.apply(word, axis=1).astype(object)
