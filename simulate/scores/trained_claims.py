"""Verdicts on P1's and P2's trained claims from training runs, at step 0 and after training side by side.

Runs are grouped by everything but their seed; statistics are per seed, and intervals are
t intervals over seeds (95 %), Welch intervals for a difference between two groups. Each
claim gives two rows of the verify table (columns :data:`simulate.compare.COLUMNS`): the
statistic at step 0 (the same models at their seed's initialisation) and after the last
step; ``setting`` starts with ``step 0 |`` or ``step N |``. Claims (docs/scores.md):

===================  ==========================================================================
p1-lemma-3.2         Pre-LN variance over depth: growth class and exponents (growth_claims)
p1-thm-3.3           Pre-LN deep blocks near identity: ``log(jac_dev deep / shallow)`` < 0 and
                     ``prune(deep) - prune(shallow)`` < 0 (deep = the upper half of the blocks)
p1-lns               LNS variance polynomial (growth_claims); deep LNS blocks matter more than
                     deep Pre-LN ones (``prune_deep`` LNS - Pre > 0); lower held-out loss (< 0)
p2-thm-3, p2-thm-4,  each sparsity knob (weight decay, sequence length, GQA, MoE) against the
p2-gqa, p2-thm-5     Pre-LN reference: variance growth ``log(var_L / var_1)`` lower (< 0) and
                     usefulness ``mean_l log(L_lin/L)`` higher (> 0)
===================  ==========================================================================

Verdict of a signed claim: ``holds`` when its interval lies on the claimed side of 0,
``violated`` when it lies on the other side, ``inconclusive`` when it contains 0.

>>> round(welch_interval([1.0, 1.2, 1.1], [0.0, 0.1, -0.1])[0], 12)  # 1.1 - 0.0
1.1
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from simulate.compare import verdict_row
from simulate.scores.compute import ScoreOptions
from simulate.scores.growth_claims import growth_rows, growth_summary, t_interval
from simulate.engine import CONFIDENCE, interval_z

__all__ = ["KNOB_CLAIMS", "VERIFY_OPTIONS", "VERIFY_GROUPS", "RunRecord", "load_record", "welch_interval",
           "signed_verdict", "trained_rows", "trained_summary", "trained_markdown"]

# Which Setting field is each P2 knob, which lemma id carries its claim, and its sparse direction.
KNOB_CLAIMS = {"weight_decay": ("p2-thm-3", "weight decay"), "tokens": ("p2-thm-4", "sequence length"),
               "kv_heads": ("p2-gqa", "GQA"), "block": ("p2-thm-5", "MoE")}
_KEY_FIELDS_IGNORED = ("seed",)


# The scores verify computes for each run, at step 0 and at its end: small and fast.
VERIFY_OPTIONS = ScoreOptions(sequences=16, batch_size=16, pairs=1, jac_sequences=4, probes=2, iterations=5)
VERIFY_GROUPS = ("prune", "usefulness", "jacobian")


class RunRecord:
    """What the claims read of one run: its Setting, seed, var profiles, held-out loss and scores."""

    def __init__(self, path, setting, config, var0, var_last, last_step, val_loss, scores0, scores_last):
        self.path, self.setting, self.config = Path(path), setting, config
        self.var0, self.var_last, self.last_step = var0, var_last, last_step  # (L+1,) each
        self.val_loss = val_loss
        self.scores = {0: scores0, last_step: scores_last}

    @property
    def group(self) -> str:
        train = {k: v for k, v in self.config.get("train", {}).items() if k not in _KEY_FIELDS_IGNORED}
        return json.dumps({"setting": self.setting.to_dict(), "train": train}, sort_keys=True)


def _cached_scores(run: Path, at_init: bool):
    """Scores of ``run`` with the small verify options (:data:`VERIFY_OPTIONS`), through the cache."""
    from simulate.scores.training_cache import cached_scores

    return cached_scores(run, at_init=at_init, groups=VERIFY_GROUPS, options=VERIFY_OPTIONS)[0]


def load_record(run_dir) -> RunRecord:
    """Read one run directory (config, train_layers.csv, loss.csv) and score it at step 0 and at its end."""
    from simulate.scores.runs import RunError, read_run_config

    run = Path(run_dir)
    config, setting = read_run_config(run)
    for name in ("train_layers.csv", "loss.csv", "model.safetensors"):
        if not (run / name).is_file():
            raise RunError(f"run directory {str(run)!r} is not allowed: no {name} (an unfinished training run?)")
    layers = pd.read_csv(run / "train_layers.csv")
    var = layers[layers["metric"] == "var"]
    last = int(var["step"].max())

    def profile(step: int) -> np.ndarray:
        rows = var[var["step"] == step].set_index("layer")["mean"]
        return rows.reindex(range(setting.depth + 1)).to_numpy(float)  # (L+1,)

    loss = pd.read_csv(run / "loss.csv")
    val = loss[(loss["split"] != "train") & (loss["step"] == last)]["loss"]
    return RunRecord(run, setting, config, profile(0), profile(last), last,
                     float(val.iloc[0]) if len(val) else math.nan,
                     _cached_scores(run, True), _cached_scores(run, False))


def welch_interval(a, b, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(mean(a) - mean(b), low, high)``: Welch's t interval of a difference of means (NaN bounds for n < 2)."""
    a, b = (np.asarray(v, dtype=float)[np.isfinite(v)] for v in (a, b))
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return diff, math.nan, math.nan
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
    return diff, diff - half, diff + half


def signed_verdict(estimate, sign: int) -> str:
    """``holds`` / ``violated`` / ``inconclusive`` for a claim that the statistic has sign ``sign``."""
    mean, low, high = estimate
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive"
    if (sign > 0 and low > 0) or (sign < 0 and high < 0):
        return "holds"
    if (sign > 0 and high < 0) or (sign < 0 and low > 0):
        return "violated"
    return "inconclusive"


def _score(record: RunRecord, step: int, name: str) -> np.ndarray:
    table = record.scores[step]
    rows = table[table["score"] == name].sort_values("layer")
    return rows.set_index("layer")["value"].reindex(range(1, record.setting.depth + 1)).to_numpy(float)  # (L,)


def _halves(values: np.ndarray) -> tuple[float, float]:
    """(mean over the shallow half, mean over the deep half) of a per-block array."""
    cut = len(values) // 2
    return float(np.nanmean(values[:cut])), float(np.nanmean(values[cut:]))


def _claim_row(lemma_id, label, metric, estimate, sign, comment, layer) -> dict:
    mean, low, high = estimate
    return verdict_row(lemma_id, label, metric, kind="claim", layer=int(layer), predicted=0.0, measured=mean,
                       ci_low=low, ci_high=high, z=interval_z(mean, low, high),
                       verdict=signed_verdict(estimate, sign), comment=comment)


def _fmt(estimate) -> str:
    mean, low, high = estimate
    return f"{mean:.3g} [{low:.3g}, {high:.3g}]" if np.isfinite(low) else f"{mean:.3g}"


def _describe(records: list[RunRecord]) -> str:
    s = records[0].setting
    words = [f"{s.scheme}/{s.block}", f"d={s.width}", f"L={s.depth}", f"T={s.tokens}"]
    if s.block == "moe":
        words.append(f"top-{s.top_k}/{s.experts}")
    if s.resolved_kv_heads != s.heads:
        words.append(f"G={s.group_size}")
    words.append(f"wd={s.weight_decay:g}")
    return " ".join(words) + f", {len(records)} seeds"


def _stage(step: int) -> str:
    return f"step {step}"


def _growth_claim_rows(lemma_id: str, records: list[RunRecord]) -> list[dict]:
    """Growth-class rows of ``lemma_id`` at step 0 and after training."""
    rows = []
    last = records[0].last_step
    for step, curves in ((0, [r.var0 for r in records]), (last, [r.var_last for r in records])):
        rows += growth_rows(lemma_id, f"{_stage(step)} | {_describe(records)}", growth_summary(np.stack(curves)))
    return rows


def _identity_rows(records: list[RunRecord]) -> list[dict]:
    """P1 Theorem 3.3 on Pre-LN: deep blocks nearer the identity and less needed than shallow ones."""
    rows = []
    depth = records[0].setting.depth
    for step in (0, records[0].last_step):
        label = f"{_stage(step)} | {_describe(records)}"
        jac = [_halves(_score(r, step, "jac_dev")) for r in records]
        prune = [_halves(_score(r, step, "prune")) for r in records]
        log_ratio = t_interval([math.log(deep / shallow) for shallow, deep in jac])
        deep_jac = t_interval([deep for _, deep in jac])
        rows.append(_claim_row("p1-thm-3.3", label, "jac_dev_deep_vs_shallow", log_ratio, -1,
                               f"log(jac_dev deep half / shallow half) = {_fmt(log_ratio)}; deep-half jac_dev "
                               f"{_fmt(deep_jac)} (0 = identity); claim: < 0", depth))
        diff = t_interval([deep - shallow for shallow, deep in prune])
        rows.append(_claim_row("p1-thm-3.3", label, "prune_deep_vs_shallow", diff, -1,
                               f"pruning drop, deep half minus shallow half = {_fmt(diff)} nats; claim: < 0", depth))
    return rows


def _lns_versus_pre_rows(lns: list[RunRecord], pre: list[RunRecord]) -> list[dict]:
    """P1's LNS claims against Pre-LN: deep blocks matter more, lower held-out loss."""
    rows = []
    depth = lns[0].setting.depth
    for step_lns, step_pre in ((0, 0), (lns[0].last_step, pre[0].last_step)):
        label = f"{_stage(step_lns)} | {_describe(lns)} vs pre"
        deep_lns = [_halves(_score(r, step_lns, "prune"))[1] for r in lns]
        deep_pre = [_halves(_score(r, step_pre, "prune"))[1] for r in pre]
        diff = welch_interval(deep_lns, deep_pre)
        rows.append(_claim_row("p1-lns", label, "prune_deep_vs_pre", diff, 1,
                               f"deep-half pruning drop, LNS minus Pre-LN = {_fmt(diff)} nats (LNS "
                               f"{np.mean(deep_lns):.3g}, Pre-LN {np.mean(deep_pre):.3g}); claim: > 0", depth))
        loss_lns = [_loss(r, step_lns) for r in lns]
        loss_pre = [_loss(r, step_pre) for r in pre]
        diff = welch_interval(loss_lns, loss_pre)
        rows.append(_claim_row("p1-lns", label, "val_loss_vs_pre", diff, -1,
                               f"held-out loss, LNS minus Pre-LN = {_fmt(diff)} nats/byte (LNS "
                               f"{np.mean(loss_lns):.4g}, Pre-LN {np.mean(loss_pre):.4g}); claim: < 0", 0))
    return rows


def _loss(record: RunRecord, step: int) -> float:
    """Held-out loss of the scores (step 0) or of the trainer's last validation (after training)."""
    if step == 0:
        table = record.scores[0]
        return float(table[table["score"] == "loss"]["value"].iloc[0])
    return record.val_loss


def _growth_statistic(var: np.ndarray) -> float:
    """``log(var_L / var_1)``: the variance growth over the blocks (the embedding's own scale left out)."""
    return float(math.log(var[-1] / var[1]))


def _knob_rows(field: str, sparse: list[RunRecord], dense: list[RunRecord]) -> list[dict]:
    """P2: a sparsity knob lowers variance growth and raises usefulness, against the dense reference."""
    lemma_id, name = KNOB_CLAIMS[field]
    rows = []
    depth = sparse[0].setting.depth
    for step_s, step_d in ((0, 0), (sparse[0].last_step, dense[0].last_step)):
        label = f"{_stage(step_s)} | {name}: {_describe(sparse)} vs {_describe(dense)}"
        var_s = [_growth_statistic(r.var0 if step_s == 0 else r.var_last) for r in sparse]
        var_d = [_growth_statistic(r.var0 if step_d == 0 else r.var_last) for r in dense]
        diff = welch_interval(var_s, var_d)
        rows.append(_claim_row(lemma_id, label, "var_growth_vs_dense", diff, -1,
                               f"log(var_L/var_1), {name} minus reference = {_fmt(diff)}; claim: < 0", depth))
        use_s = [float(np.nanmean(np.log(_score(r, step_s, "usefulness")))) for r in sparse]
        use_d = [float(np.nanmean(np.log(_score(r, step_d, "usefulness")))) for r in dense]
        frac_s = np.mean([_score_fraction(r, step_s) for r in sparse])
        frac_d = np.mean([_score_fraction(r, step_d) for r in dense])
        diff = welch_interval(use_s, use_d)
        rows.append(_claim_row(lemma_id, label, "usefulness_vs_dense", diff, 1,
                               f"mean_l log(L_lin/L), {name} minus reference = {_fmt(diff)}; significant blocks "
                               f"{frac_s:.2f} vs {frac_d:.2f}; claim: > 0", depth))
    return rows


def _score_fraction(record: RunRecord, step: int) -> float:
    table = record.scores[step]
    return float(table[table["score"] == "usefulness_fraction"]["value"].iloc[0])


def _differing_fields(a, b) -> list[str]:
    da, db = a.setting.to_dict(), b.setting.to_dict()
    fields = [k for k in da if da[k] != db[k]]
    if a.config.get("train", {}) != b.config.get("train", {}):
        ta = {k: v for k, v in a.config.get("train", {}).items() if k not in _KEY_FIELDS_IGNORED}
        tb = {k: v for k, v in b.config.get("train", {}).items() if k not in _KEY_FIELDS_IGNORED}
        fields += [f"train.{k}" for k in ta if ta.get(k) != tb.get(k)]
    return fields


def _sparse_side(field: str, a, b) -> bool:
    """Whether ``a`` is the sparser side of knob ``field`` (P2's direction), ``b`` the reference."""
    sa, sb = a.setting, b.setting
    if field == "weight_decay":
        return sa.weight_decay > sb.weight_decay
    if field == "tokens":
        return sa.tokens > sb.tokens
    if field == "kv_heads":
        return sa.group_size > sb.group_size
    return sa.block == "moe" and sb.block != "moe"


def trained_rows(run_dirs, progress: bool = False) -> list[dict]:
    """Verify rows for every trained claim the given runs can test (module docstring)."""
    from tqdm.auto import tqdm

    records = [load_record(path) for path in tqdm(list(run_dirs), desc="trained runs", unit="run",
                                                  disable=not progress, leave=False)]
    groups: dict[str, list[RunRecord]] = {}
    for record in records:
        groups.setdefault(record.group, []).append(record)
    groups_list = list(groups.values())
    rows: list[dict] = []
    for members in groups_list:
        scheme = members[0].setting.scheme
        if scheme == "pre":
            rows += _growth_claim_rows("p1-lemma-3.2", members) + _identity_rows(members)
        elif scheme == "lns":
            rows += _growth_claim_rows("p1-lns", members)
    for a in groups_list:
        for b in groups_list:
            if a is b:
                continue
            fields = _differing_fields(a[0], b[0])
            if fields == ["scheme"] and a[0].setting.scheme == "lns" and b[0].setting.scheme == "pre":
                rows += _lns_versus_pre_rows(a, b)
            knob = [f for f in fields if f not in ("experts", "top_k")] if "block" in fields else fields
            if (len(knob) == 1 and knob[0] in KNOB_CLAIMS and b[0].setting.scheme == "pre"
                    and _sparse_side(knob[0], a[0], b[0])):
                rows += _knob_rows(knob[0], a, b)
    return rows


def _stage_of(label: str) -> str:
    return label.split(" | ", 1)[0] if " | " in label else ""


def trained_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One line per trained claim: its statistic at step 0 and after training, side by side.

    Rows of ``table`` whose setting starts with ``step N |`` (from :func:`trained_rows`) are
    paired by (id, the rest of the setting, metric).
    """
    rows = table[table["setting"].astype(str).str.match(r"^step \d+ \| ")].copy()
    if rows.empty:
        return pd.DataFrame(columns=["id", "where", "statistic", "at step 0", "verdict at step 0", "trained",
                                     "verdict trained"])
    rows["stage"] = rows["setting"].map(_stage_of)
    rows["where"] = rows["setting"].map(lambda s: s.split(" | ", 1)[1])
    out = []
    for (lemma_id, where, metric), group in rows.groupby(["id", "where", "metric"], sort=False):
        first = group[group["stage"] == "step 0"]
        later = group[group["stage"] != "step 0"]

        def cell(frame) -> tuple[str, str]:
            if frame.empty:
                return "", ""
            r = frame.iloc[-1]
            return _fmt((r["measured"], r["ci_low"], r["ci_high"])), str(r["verdict"])

        init_value, init_verdict = cell(first)
        value, verdict = cell(later)
        stage = later["stage"].iloc[-1] if len(later) else ""
        out.append({"id": lemma_id, "where": f"{where} ({stage})", "statistic": metric, "at step 0": init_value,
                    "verdict at step 0": init_verdict, "trained": value, "verdict trained": verdict})
    return pd.DataFrame(out)


def trained_markdown(table: pd.DataFrame, markdown_table) -> str:
    """The "Trained claims" section of verify.md ('' without trained rows); one line per claim, then a table."""
    summary = trained_summary(table)
    if summary.empty:
        return ""
    lines = [f"- **{r['id']}** {r['statistic']}, {r['where']}: trained {r['trained']} -> {r['verdict trained']}; "
             f"at step 0 {r['at step 0']} -> {r['verdict at step 0']}" for r in summary.to_dict("records")]
    return ("\n## Trained claims (step 0 beside the end of training)\n\nIntervals: 95 % t intervals over seeds "
            "(Welch for differences between two groups); growth exponents from the fits of "
            "simulate.scores.growth_claims. holds / violated: the interval lies on the claimed / the other side; "
            "inconclusive: it contains the boundary.\n\n" + "\n".join(lines) + "\n\n" + markdown_table(summary) + "\n")
