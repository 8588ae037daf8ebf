"""The headline answers of a depth study: three questions of the curse of depth, each with its stability.

A shipped atlas (``results/atlas/README.md``) answers, from its own reports at the full length
(``levels.csv``, ``trends.csv``, ``tuning.csv``; docs/studies.md#headline-answers):

1. **Loss.** At each scheme's tuned learning rate, does LNS reach a lower held-out loss than
   Pre-LN, at which depths, and where does the difference change sign? Claim ``p1-lns-loss``
   (LNS minus Pre-LN ``val_loss``, paired by seed); the sign change is the trend's crossing
   between the cells (never the zero of an extrapolated line). A scheme whose rate was chosen
   at the edge of what its cell tried is marked: its loss may be lower at a rate beyond.
2. **Deep blocks.** Are deep Pre-LN blocks relatively less useful than shallow ones as depth
   grows? Claim ``p1-thm-3.3-prune``, ``log(deep / shallow pruning drop)``: a ratio, which does
   not shrink as ``1/L`` merely because the blocks multiply; below 0 at a depth, the deep
   blocks cost less to delete; falling along depth, relatively less useful as depth grows.
3. **Growth.** Is the trained variance growth polynomial or exponential, and at which depths?
   Claims ``p1-lemma-3.2-growth`` (Pre-LN) and ``p1-lns-growth`` (LNS), statistic
   ``var_growth``: the growth class tested over seeds ("undetermined" where they cannot tell).

Each row gives the models it rests on and whether its verdict is the same at the shorter
length (the ``stability`` column of a stability study).

>>> _loss_answer("holds"), _loss_answer("inconclusive")
('LNS lower', 'no difference resolved')
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulate.study.report import at_full_length, read_study
from theory.cli import markdown_table

__all__ = ["headline_section"]

LOSS, DEEP, GROWTH = "p1-lns-loss", "p1-thm-3.3-prune", {"pre": "p1-lemma-3.2-growth", "lns": "p1-lns-growth"}


def _loss_answer(verdict: str) -> str:
    return {"holds": "LNS lower", "violated": "LNS higher", "inconclusive": "no difference resolved"}.get(
        verdict, verdict)


def _interval(row) -> str:
    if pd.isna(row.mean):
        return ""
    if pd.isna(row.low):
        return f"{row.mean:.3g} (one model)"
    return f"{row.mean:.3g} [{row.low:.3g}, {row.high:.3g}]"


def _stability(row) -> str:
    return row.stability if isinstance(row.stability, str) and row.stability else "not compared"


def _rates(folder: Path) -> dict[tuple[str, int], str]:
    """``(scheme, depth) -> "0.003"`` (with " (at the edge)") from ``tuning.csv``; empty for an untuned study."""
    path = folder / "tuning.csv"
    if not path.is_file():
        return {}
    tuning = pd.read_csv(path)
    chosen = tuning[tuning["chosen"].astype(bool)]
    return {(r.scheme, int(r.depth)): f"{r.lr:g}" + (" (at the edge)" if r.edge else "") for r in chosen.itertuples()}


def _loss_rows(levels: pd.DataFrame, trends: pd.DataFrame, rates: dict) -> list[str]:
    rows = [{"depth": int(r.depth), "LNS minus Pre-LN, nats/byte [95% CI]": _interval(r),
             "answer": _loss_answer(r.verdict), "stability": _stability(r), "models (pairs)": int(r.n),
             "rate LNS / Pre-LN": f"{rates.get(('lns', int(r.depth)), '?')} / {rates.get(('pre', int(r.depth)), '?')}"}
            for r in levels[levels["claim"] == LOSS].itertuples()]
    trend = trends[(trends["claim"] == LOSS) & (trends["axis"] == "depth")]
    where = (trend["crossing_note"].iloc[0] or "no sign change tested") if len(trend) else "no trend"
    return (["### 1. Does LNS reach a lower held-out loss than Pre-LN, and where does the difference change "
             "sign?", "", markdown_table(pd.DataFrame(rows)), "", f"Along depth: {where}."] if rows else [])


def _deep_rows(levels: pd.DataFrame, trends: pd.DataFrame) -> list[str]:
    rows = [{"depth": int(r.depth), "log(deep / shallow pruning drop) [95% CI]": _interval(r),
             "deep blocks less useful": {"holds": "yes", "violated": "no"}.get(r.verdict, "not resolved"),
             "stability": _stability(r), "models": int(r.n)}
            for r in levels[(levels["claim"] == DEEP) & (levels["statistic"] == "prune_log_ratio")].itertuples()]
    trend = trends[(trends["claim"] == DEEP) & (trends["axis"] == "depth")]
    if not rows:
        return []
    line = "No trend along depth yet."
    if len(trend):
        t = trend.iloc[0]
        answer = {"holds": "yes: the ratio falls with depth", "violated": "no: the ratio rises with depth"}.get(
            t.verdict, f"not resolved ({t.verdict})")
        line = (f"As depth grows: **{answer}** (slope per e-fold of depth {t.slope:.3g} [{t.low:.3g}, {t.high:.3g}], "
                f"verdict from the {t.method}" + (f", adjusted p {t.p_adjusted:.2g}" if pd.notna(t.p_adjusted) else "")
                + f"; {int(t.n)} models; {_stability(t)}).")
    return ["### 2. Are deep Pre-LN blocks relatively less useful than shallow ones as depth grows?", "",
            markdown_table(pd.DataFrame(rows)), "", line]


def _growth_rows(levels: pd.DataFrame) -> list[str]:
    rows = []
    for scheme, claim in GROWTH.items():
        for r in levels[(levels["claim"] == claim) & (levels["statistic"] == "var_growth")].itertuples():
            label = r.growth_class if isinstance(r.growth_class, str) and r.growth_class else "not measured"
            what = {"exponential": "rate per block", "polynomial": "exponent"}.get(label, "")
            rows.append({"scheme": scheme, "depth": int(r.depth), "growth class": label,
                         "rate or exponent [95% CI]": f"{what} {_interval(r)}".strip() if what else "",
                         "stability": _stability(r), "models": int(r.n)})
    return (["### 3. Is the trained variance growth polynomial or exponential?", "",
             markdown_table(pd.DataFrame(rows))] if rows else [])


def headline_section(folder, study) -> list[str]:
    """Markdown lines answering the three questions (module docstring) from ``folder/NAME``'s reports; empty
    for a study that does not run along depth or has no reports yet."""
    if "depth" not in study.axes:
        return []
    try:
        results = read_study(folder, study.name)
    except FileNotFoundError:
        return []
    levels, trends = at_full_length(results.levels), at_full_length(results.trends)
    parts = [_loss_rows(levels, trends, _rates(Path(folder) / study.name)), _deep_rows(levels, trends),
             _growth_rows(levels)]
    body = [line for part in parts if part for line in [*part, ""]]
    if not body:
        return []
    return [f"## Headline answers of `{study.name}` (at the full length; docs/studies.md#headline-answers)", "",
            "Read from this study's reports at its longest training; each row says on how many models it rests "
            "and whether the claim's verdict there is the same at the shorter length (stability). Pending models "
            "are not in them.", "",
            *body]
