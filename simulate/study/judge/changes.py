"""Which verdicts of a study changed between two runs of it: ``--compare OLD`` beside ``--export``.

The same study (by name) run twice, for example the 400-step atlas and the atlas re-run at ten
times the tokens with tuned rates, answers the same claims at the cells they share. A level
verdict is matched on its claim, statistic, scheme and axis values; a trend verdict on its
claim, scheme and axis (a claim has one statistic); each at the full length of its run (a stability study's
longest ``steps``), since that is the verdict a run reports. ``DEST/changes-from-<name of OLD>`` (a Markdown file) lists
every matched verdict that differs (old -> new) with both estimates and the models each rests
on, and counts those that stayed; the cells only one run has are counted apart. A trend compares
the runs' own axis ranges, which may differ (the 400-step atlas's depths reach 64, the re-run's
32).

>>> from theory.verdicts import Size, Verdict
>>> old = pd.DataFrame({"claim": ["c"], "statistic": ["s"], "scheme": ["pre"], "depth": [4], "verdict": [Verdict.HOLDS],
...                     "mean": [1.0], "n": [3]})
>>> new = old.assign(verdict=Verdict.INCONCLUSIVE, mean=0.2, steps=4000)
>>> [[str(v) for v in row] for row in level_changes(old, new, ["depth"])[["old", "new"]].values]
[['holds', 'inconclusive']]
"""

from __future__ import annotations

import math

from pathlib import Path

import pandas as pd

from simulate.claims.along_axes import IDENTIFIABLE_BLOCKS
from simulate.study.judge.tables import at_full_length, read_verdicts
from theory.cli import markdown_table
from theory.files import write_text_atomic
from theory.verdicts import Size, Verdict

__all__ = ["level_changes", "trend_changes", "write_changes"]


def _changes(old: pd.DataFrame, new: pd.DataFrame, keys: list[str], estimate: str) -> pd.DataFrame:
    """The matched rows (on ``keys``) of two verdict tables: ``keys``, ``old``, ``new`` verdicts, estimates, models,
    the statistics and the old rule's method where they have them, and ``why`` (:func:`_why`)."""
    extra = [c for c in ("statistic", "method", "rates", "p_adjusted", "size") if c not in keys]
    old, new = (at_full_length(table).reindex(columns=[*keys, "verdict", estimate, "n", *extra])
                .drop_duplicates(keys) for table in (old, new))
    merged = old.merge(new, on=keys, how="outer", suffixes=("_old", "_new"), indicator=True)
    merged = merged.rename(columns={"verdict_old": "old", "verdict_new": "new", f"{estimate}_old": "estimate_old",
                                    f"{estimate}_new": "estimate_new", "n_old": "models_old", "n_new": "models_new"})
    return merged.assign(why=[_why(row) for row in merged.itertuples()])


def _why(row) -> str:
    """What in the new analysis changed a verdict, read from the two rows (docs/studies.md#verdicts)."""
    reasons = []
    if getattr(row, "method_old", "") == "endpoints" and getattr(row.old, "judged", False):
        reasons.append("the old verdict read the last minus the first cell by seeds (the line's lack of fit was "
                       "rejected); the new one reads the cell means' slope")
    statistic_old, statistic_new = getattr(row, "statistic_old", None), getattr(row, "statistic_new", None)
    if isinstance(statistic_old, str) and isinstance(statistic_new, str) and statistic_old != statistic_new:
        reasons.append(f"judged on {statistic_new} (was {statistic_old})")
    if row.models_old == row.models_old and row.models_new < row.models_old:
        reasons.append(f"the tuning seed left out of the comparison ({row.models_old:g} -> {row.models_new:g} models)")
    rates = getattr(row, "rates_new", 1)  # NaN in an older run's table, which had no such column
    if rates == rates and rates > 1 and not getattr(row, "rates_old", 1) > 1:
        reasons.append(f"its cells changed rate along the axis ({rates:g} rates): the slope is now fitted within runs "
                       "of one rate, not across the switch")
    p_old, p_new = getattr(row, "p_adjusted_old", math.nan), getattr(row, "p_adjusted_new", math.nan)
    if p_old == p_old and p_new == p_new and p_new > p_old:
        reasons.append(f"the family's adjustment is Bonferroni's, whose simultaneous interval the verdict reads "
                       f"(adjusted p {p_old:.2g} -> {p_new:.2g})")
    statistic = statistic_new if isinstance(statistic_new, str) else getattr(row, "statistic", None)  # a key
    if row.new is Verdict.UNRESOLVABLE and statistic == "pooled_exponential_step_share":
        reasons.append(f"too few blocks to identify a growth class (fewer than {IDENTIFIABLE_BLOCKS}: "
                       "docs/studies.md#growth-across-depth)")
    elif row.new is Verdict.UNRESOLVABLE:
        reasons.append("not resolved, and smaller than the design can detect at 80 % power")
    size = getattr(row, "size_new", "")  # a word as the new table wrote it ('' or NaN where none)
    size = Size.parse(size) if isinstance(size, str) and size else None
    if row.old is Verdict.UNRESOLVABLE and row.new is Verdict.INCONCLUSIVE and size not in (None, Size.CANNOT_TELL):
        reasons.append(f"the interval answers the papers' size ({size}): the design resolved that much")
    return "; ".join(reasons) or "the family of full-length verdicts and its adjustment, or the interval moved"


def level_changes(old: pd.DataFrame, new: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """Level verdicts of two runs matched per claim, statistic, scheme and the values of ``axes``."""
    return _changes(old, new, ["claim", "statistic", "scheme", *axes], "mean")


def trend_changes(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Trend verdicts of two runs matched per claim, scheme and axis (the first group of each; the statistic may
    have changed between the runs' analyses)."""
    return _changes(old, new, ["claim", "scheme", "axis"], "slope")


def _first_line(trends: pd.DataFrame) -> pd.DataFrame:
    """A run's trends on its first line (``tuned`` or ``trained``): the line an earlier run, which had one, is
    compared with."""
    if "line" not in trends or trends.empty:
        return trends
    return trends[trends["line"] == trends["line"].iloc[0]]


def _section(title: str, table: pd.DataFrame, keys: list[str]) -> list[str]:
    both = table[table["_merge"] == "both"]
    judged = both[[bool(getattr(a, "judged", False) or getattr(b, "judged", False))
                   for a, b in zip(both["old"], both["new"])]]
    changed = judged[judged["old"] != judged["new"]]
    only_old, only_new = (table["_merge"] == "left_only").sum(), (table["_merge"] == "right_only").sum()
    shown = changed[[*keys, "old", "new", "estimate_old", "estimate_new", "models_old", "models_new", "why"]].copy()
    for column in ("estimate_old", "estimate_new", "models_old", "models_new"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.3g}")
    return [f"### {title}", "", f"{len(changed)} of {len(judged)} verdicts matched in both runs changed; "
            f"{len(judged) - len(changed)} stayed; {only_old} only in the old run, {only_new} only in the new.", "",
            *([markdown_table(shown), ""] if len(shown) else [])]


def write_changes(old_folder, new_folder, studies) -> Path:
    """Write ``new_folder/changes-from-<name of old_folder>`` (module docstring) for ``studies``, one section each,
    read from both folders' reports (a study the old run has no folder of is new, and said so); its path.
    FileNotFoundError naming the file when the old run's folder of a study lacks a report."""
    lines = [f"# Verdicts that changed from `{old_folder}` to `{new_folder}`", "",
             "Each run at its full length (a stability study's longest training); docs/studies.md#comparing-two-runs.",
             ""]
    for study in studies:
        if not (Path(old_folder) / study.name).is_dir():
            lines += [f"## Study `{study.name}`", "", f"New since `{old_folder}`: no earlier verdicts to compare.", ""]
            continue
        (old_levels, old_trends), (new_levels, new_trends) = (read_verdicts(folder, study.name)
                                                              for folder in (old_folder, new_folder))
        axes = [f for f in study.axes if f in old_levels and f in new_levels]
        levels = level_changes(old_levels, new_levels, axes)
        trends = trend_changes(old_trends, _first_line(new_trends))
        lines += [f"## Study `{study.name}`", "", *_section("Levels", levels, ["claim", "statistic", "scheme", *axes]),
                  *_section("Trends", trends, ["claim", "scheme", "axis"])]
    path = Path(new_folder) / f"changes-from-{Path(old_folder).name}.md"
    write_text_atomic(path, "\n".join(lines))
    return path
