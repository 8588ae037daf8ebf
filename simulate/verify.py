"""Theory against Monte-Carlo: one verdict per lemma and setting.

For every lemma of :data:`theory.LEMMAS` this module picks settings where the lemma
applies (several depths and parameter values), runs the simulator through its cache,
takes the lemma's curve out of :func:`theory.predict` (rows whose ``law`` is the
lemma id) and compares the two at every layer. The verdict follows the ``kind`` of the
predicted curve, with rules fixed here, before any number is seen:

``holds``
    ``kind == "exact"`` (or ``"approx"``) and ``|z| <= 4`` at every layer, where
    ``z = (measured - predicted) / sem`` and ``sem`` is the Monte-Carlo standard error.
``holds as a bound``
    ``kind`` is ``"upper"`` (``"lower"``) and the measurement is nowhere above
    (below) the bound by more than 4 sem; ``tightness = measured / bound`` at the last
    layer (1 = tight, far from 1 = loose).
``holds approximately``
    ``kind == "approx"``, ``|z| > 4`` somewhere but the relative error stays within
    :data:`APPROX_REL_TOLERANCE` at every layer.
``violated``
    Anything else.
``not applicable at init``
    The statement needs trained weights; the comment says why and what stands in.
``no prediction``
    ``theory.predict`` has no curve of this lemma for a planned setting (a gap to fill).
``not measured``
    The simulator gave no layer to compare (a numerical blow-up before block 1).

The reported ``predicted``, ``measured``, ``ci_low``, ``ci_high``, ``rel_error`` and
``z`` are those of the last layer compared; the comment names the worst layer.
P2 Theorem 3 and the exact weight-decay law describe a training process: they are
checked against :func:`simulate.weight_decay_process` instead of a stack.

>>> describe_setting(Setting(block="linear", width=32))
'block=linear width=32'
>>> classify("exact", z=[0.5, -3.9], rel=[0.01, 0.02], excess=[0.0, 0.0])
'holds'
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from simulate.results import write_atomic
from theory.cli import CliParser, fail, output_path
from theory.setting import Setting

__all__ = [
    "COLUMNS",
    "Z_LIMIT",
    "APPROX_REL_TOLERANCE",
    "NOT_AT_INIT",
    "PROCESS_LAWS",
    "describe_setting",
    "classify",
    "lemma_settings",
    "run_monte_carlo",
    "compare",
    "verify",
    "summarize",
    "to_markdown",
    "main",
]

COLUMNS = ["id", "setting", "metric", "kind", "layer", "predicted", "measured", "ci_low", "ci_high", "rel_error", "z",
           "verdict", "tightness", "comment"]
Z_LIMIT = 4.0
APPROX_REL_TOLERANCE = 0.10

# Statements that speak about trained weights; what the workbench checks instead.
NOT_AT_INIT = {
    "p1-thm-3.3": ("assumes exponential variance growth, which needs sublayers that grow with the stream "
                   "(trained weights); at init growth is additive (exact-preln-init) and the aligned family "
                   "with constant a is at most quadratic (bridge-aligned)"),
}
# Laws about the weight-decay training process, checked against simulate.weight_decay_process.
PROCESS_LAWS = ("exact-weight-decay", "p2-thm-3")


@dataclass(frozen=True)
class _Sizes:
    width: int
    tokens: int
    depths: tuple[int, ...]
    samples: int
    process_steps: int
    process_samples: int


def _sizes(quick: bool) -> _Sizes:
    if quick:
        return _Sizes(width=32, tokens=8, depths=(4, 16, 64), samples=64, process_steps=200, process_samples=64)
    return _Sizes(width=128, tokens=32, depths=(4, 16, 64, 256), samples=128, process_steps=2000,
                  process_samples=256)


def describe_setting(setting: Setting) -> str:
    """The fields of ``setting`` that differ from the default (or its preset), as ``k=v`` words."""
    reference = Setting.preset(setting.preset) if setting.preset else Setting()
    words = [f"preset={setting.preset}"] if setting.preset else []
    for f in fields(Setting):
        value = getattr(setting, f.name)
        if f.name != "preset" and value != getattr(reference, f.name):
            words.append(f"{f.name}={value:g}" if isinstance(value, float) else f"{f.name}={value}")
    return " ".join(words) or "default"


def lemma_settings(quick: bool = True) -> dict[str, list[Setting]]:
    """For each lemma id, the settings where it is checked (empty: see :data:`NOT_AT_INIT`)."""
    size = _sizes(quick)
    base = Setting(width=size.width, tokens=size.tokens, heads=4, depth=size.depths[0])
    mid = size.depths[min(1, len(size.depths) - 1)]

    def over_depths(**kw) -> list[Setting]:
        return [base.replace(depth=depth, **kw) for depth in size.depths]

    def init_for_alpha(alpha: float) -> float:
        return math.sqrt(alpha / size.width)

    def pre_like(scheme: str) -> list[Setting]:
        return (over_depths(scheme=scheme, block="mlp", activation="relu")
                + over_depths(scheme=scheme, block="transformer")
                + [base.replace(scheme=scheme, block="attention", depth=mid),
                   Setting.preset("llama", width=size.width, tokens=size.tokens, heads=4, depth=mid, scheme=scheme,
                                  input_std=0.02)])

    masked_linear = [base.replace(scheme="none", block="linear", depth=depth, mask_density=rho,
                                  init_std=init_for_alpha(0.5))
                     for rho in (0.25, 0.5, 1.0) for depth in size.depths]
    masked_blocks = [base.replace(scheme="none", block="transformer", activation="relu", depth=depth,
                                  mask_density=rho, init_std=init_for_alpha(0.5))
                     for rho in (0.5, 1.0) for depth in size.depths[:2]]
    jacobian = (over_depths(scheme="pre", block="mlp", activation="relu")
                + over_depths(scheme="lns", block="mlp", activation="relu")
                + [base.replace(scheme=s, block="transformer", depth=mid) for s in ("pre", "lns")])
    token_sweep = [4, size.tokens, 4 * size.tokens]
    uniform_attention = [base.replace(scheme="pre", block="attention", causal=causal, tokens=t, depth=mid)
                         for causal in (False, True) for t in token_sweep]
    causal_attention = [base.replace(scheme="pre", block="attention", tokens=t, depth=depth)
                        for t in token_sweep for depth in size.depths[:2]]
    gqa = [base.replace(scheme="pre", block="attention", kv_heads=kv, depth=depth)  # G = 2, 4 (G = 1: MHA)
           for kv in (2, 1) for depth in size.depths[:2]]
    moe_uniform = [base.replace(scheme="pre", block="moe", uniform_gates=True, top_k=k, depth=depth)
                   for k in (1, 2, 4) for depth in size.depths[:2]]
    moe_softmax = [base.replace(scheme="pre", block="moe", top_k=k, depth=mid) for k in (1, 2, 4)]
    aligned = ([base.replace(scheme="pre", block="linear", alignment=a, depth=depth)
                for a in (0.5, 2.0) for depth in size.depths]
               + [base.replace(scheme="pre", block="mlp", activation="relu", alignment=1.0, depth=mid)])
    process = [Setting(lr=lr, weight_decay=lam, grad_noise_std=g)
               for lr, lam, g in ((1e-2, 0.1, 1.0), (0.1, 1.0, 1.0), (0.5, 1.0, 2.0), (1.0, 1.0, 1.0))]
    return {
        "p1-lemma-3.2": pre_like("pre"), "exact-preln-init": pre_like("pre"),
        "p1-lns": pre_like("lns"), "exact-lns-init": pre_like("lns"),
        "p1-ln-jacobian": jacobian, "exact-jacobian-init": jacobian,
        "p1-thm-3.3": [],
        "p2-thm-1": masked_linear, "exact-masked-linear": masked_linear,
        "p2-thm-2": masked_blocks,
        "p2-thm-3": process, "exact-weight-decay": process,
        "p2-thm-4": uniform_attention, "exact-causal-attention": causal_attention,
        "p2-thm-5": moe_uniform, "exact-moe": moe_uniform + moe_softmax,
        "p2-gqa": gqa, "exact-gqa-init": gqa,
        "bridge-aligned": aligned,
    }


def run_monte_carlo(setting: Setting, *, samples: int, metrics=("var",), seed: int = 0):
    """Simulate through the cache; a numerical blow-up returns what was measured before it.

    Returns
    -------
    (DataFrame, int or None)
        The simulator's table and the layer of the blow-up (None when there was none).
    """
    import simulate

    try:
        table = simulate.cached_simulate(setting, samples=samples, seed=seed, metrics=tuple(sorted(set(metrics))))
        return table, None
    except simulate.NumericalBlowUp as blowup:
        return blowup.table, int(blowup.layer)


def classify(kind: str, *, z, rel, excess) -> str:
    """Verdict of one curve from per-layer ``z``, relative errors and signed excess in sem.

    ``excess`` is ``(measured - bound)/sem`` for an upper bound and ``(bound - measured)/sem``
    for a lower one (positive = on the wrong side).
    """
    z, rel = np.abs(np.asarray(z, dtype=float)), np.abs(np.asarray(rel, dtype=float))
    excess = np.asarray(excess, dtype=float)
    if kind in ("upper", "lower"):
        return "holds as a bound" if np.all(excess <= Z_LIMIT) else "violated"
    if np.all(z <= Z_LIMIT):
        return "holds"
    if kind == "approx" and np.all(rel <= APPROX_REL_TOLERANCE):
        return "holds approximately"
    return "violated"


def _z_scores(measured, predicted, sem):
    diff = measured - predicted
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sem > 0, diff / sem, np.where(np.isclose(measured, predicted, rtol=1e-9, atol=0), 0.0,
                                                   np.sign(diff) * np.inf))
        rel = np.abs(diff) / np.abs(predicted)
    return z, rel


def compare(lemma_id: str, setting_label: str, measured: pd.DataFrame, predicted: pd.DataFrame,
            blowup_layer: int | None = None) -> list[dict]:
    """Rows of the verify table for one lemma and one setting.

    Parameters
    ----------
    measured : DataFrame
        Simulator table (``layer, metric, mean, sem, ci_low, ci_high, n``).
    predicted : DataFrame
        Rows of ``theory.predict`` for this lemma (``layer, metric, law, kind, value``).
    """
    rows = []
    for (metric, kind), curve in predicted.groupby(["metric", "kind"], sort=True):
        if not (curve["layer"] >= 1).any():
            continue  # a value for the input only: nothing to check
        both = curve.merge(measured[measured["metric"] == metric], on=["layer", "metric"], how="inner")
        both = both[(both["layer"] >= 1) & np.isfinite(both["value"]) & np.isfinite(both["mean"])]
        both = both.sort_values("layer")
        if both.empty:
            rows.append(_row(lemma_id, setting_label, metric, kind=kind, verdict="not measured",
                             comment=f"no layer >= 1 both predicted and measured for {metric} ({kind})"
                                     + (f"; numerical blow-up at layer {blowup_layer}" if blowup_layer else "")))
            continue
        value, mean, sem = (both[c].to_numpy(float) for c in ("value", "mean", "sem"))
        z, rel = _z_scores(mean, value, sem)
        excess = z if kind == "upper" else -z
        verdict = classify(kind, z=z, rel=rel, excess=excess)
        worst = int(np.argmax(excess if kind in ("upper", "lower") else np.abs(z)))
        last = both.iloc[-1]
        tightness = float(last["mean"] / last["value"]) if kind in ("upper", "lower") and last["value"] else math.nan
        comment = _comment(kind, verdict, both, z, excess, worst, tightness, blowup_layer)
        rows.append(_row(lemma_id, setting_label, metric, kind=kind, layer=int(last["layer"]),
                         predicted=float(last["value"]), measured=float(last["mean"]), ci_low=float(last["ci_low"]),
                         ci_high=float(last["ci_high"]), rel_error=float(rel[-1]), z=float(z[-1]), verdict=verdict,
                         tightness=tightness, comment=comment))
    return rows


def _comment(kind, verdict, both, z, excess, worst, tightness, blowup_layer) -> str:
    n_layers = len(both)
    worst_layer = int(both["layer"].iloc[worst])
    if kind in ("upper", "lower"):
        ratios = both["mean"].to_numpy(float) / both["value"].to_numpy(float)
        side = "above" if kind == "upper" else "below"
        text = (f"{kind} bound over {n_layers} layers; measured/bound {np.nanmin(ratios):.3g}.."
                f"{np.nanmax(ratios):.3g}, {tightness:.3g} at the last layer")
        if verdict == "violated":
            text += f"; {excess[worst]:.1f} sem {side} it at layer {worst_layer}"
    else:
        text = f"{kind} law over {n_layers} layers; max |z| = {abs(z[worst]):.2f} at layer {worst_layer}"
        if verdict != "holds":
            rel = np.abs(both["mean"].to_numpy(float) - both["value"].to_numpy(float)) / np.abs(both["value"])
            text += f", max rel. error {np.nanmax(rel):.3g}"
    if blowup_layer is not None:
        text += f"; numerical blow-up at layer {blowup_layer}, compared below it"
    return text


def _row(lemma_id, setting_label, metric, **values) -> dict:
    row = dict.fromkeys(COLUMNS, math.nan)
    row.update(id=lemma_id, setting=setting_label, metric=metric, kind="-", layer=-1, verdict="", comment="")
    row.update(values)
    return row


def _process_rows(lemma_id: str, setting: Setting, size: _Sizes) -> list[dict]:
    """P2 Theorem 3 / the exact weight-decay law against the simulated process."""
    import simulate
    import theory

    measured = simulate.weight_decay_process(setting, samples=size.process_samples, seed=0,
                                             steps=size.process_steps)
    measured = measured[measured["metric"] == "var"].sort_values("layer")
    steps = int(measured["layer"].max())
    args = dict(steps=steps, lr=setting.lr, weight_decay=setting.weight_decay,
                grad_noise_std=setting.grad_noise_std, init_var=setting.resolved_init_std ** 2)
    law, kind = ((theory.weight_decay_variance, "exact") if lemma_id == "exact-weight-decay"
                 else (theory.weight_decay_bound, "upper"))
    values = np.asarray(law(**args), dtype=float)
    predicted = pd.DataFrame({"layer": np.arange(len(values)), "metric": "var", "law": lemma_id, "kind": kind,
                              "value": values})
    label = f"lr={setting.lr:g} weight_decay={setting.weight_decay:g} grad_noise_std={setting.grad_noise_std:g} " \
            f"steps={steps} chains={size.process_samples}x{setting.width}"
    return compare(lemma_id, label, measured, predicted)


def verify(quick: bool = True, progress: bool = False, only=None, depths=None) -> pd.DataFrame:
    """Compare every lemma of :data:`theory.LEMMAS` with the simulator.

    Parameters
    ----------
    quick : bool
        Small widths, few samples, depths 4/16/64: minutes on a CPU.
    progress : bool
        A progress bar over the settings on stderr (tqdm).
    only : iterable of str, optional
        Lemma ids to check (default: all).
    depths : iterable of int, optional
        Keep only settings of these depths (smaller runs, e.g. in tests).

    Returns
    -------
    DataFrame
        Columns :data:`COLUMNS`, one row per (lemma, setting, metric, kind of curve).
    """
    import theory

    size = _sizes(quick)
    ids = list(theory.LEMMAS) if only is None else list(only)
    unknown = [i for i in ids if i not in theory.LEMMAS]
    if unknown:
        raise ValueError(f"unknown lemma id {unknown[0]!r}; known: {', '.join(theory.LEMMAS)}")
    plan = lemma_settings(quick)
    rows: list[dict] = []
    pending: dict[Setting, list[str]] = {}
    for lemma_id in ids:
        settings = plan.get(lemma_id, [])
        if lemma_id in PROCESS_LAWS:
            for setting in settings:
                rows += _process_rows(lemma_id, setting, size)
        elif not settings:
            reason = NOT_AT_INIT.get(lemma_id, "no setting of the workbench is planned for it")
            rows.append(_row(lemma_id, "-", "-", verdict="not applicable at init", comment=reason))
        for setting in settings if lemma_id not in PROCESS_LAWS else ():
            if depths is None or setting.depth in set(depths):
                pending.setdefault(setting, []).append(lemma_id)
    bar = tqdm(pending.items(), total=len(pending), desc="verify", unit="setting", disable=not progress,
               file=sys.stderr)
    for setting, lemma_ids in bar:
        bar.set_postfix_str(describe_setting(setting), refresh=False)
        rows += _check_setting(setting, lemma_ids, size)
    table = pd.DataFrame(rows, columns=COLUMNS)
    order = {lemma_id: i for i, lemma_id in enumerate(ids)}
    return table.sort_values("id", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def _check_setting(setting: Setting, lemma_ids: list[str], size: _Sizes) -> list[dict]:
    import theory

    label = describe_setting(setting)
    prediction = theory.predict(setting)
    curves = {i: prediction[prediction["law"] == i] for i in lemma_ids}
    metrics = sorted({m for curve in curves.values() for m in curve["metric"].unique()})
    measured, blowup = run_monte_carlo(setting, samples=size.samples, metrics=metrics or ("var",))
    rows = []
    for lemma_id, curve in curves.items():
        if curve.empty:
            rows.append(_row(lemma_id, label, "-", verdict="no prediction",
                             comment="theory.predict gives no curve for this law in this setting"))
        else:
            rows += compare(lemma_id, label, measured, curve, blowup)
    return rows


_VERDICT_ORDER = ("violated", "not measured", "no prediction", "holds approximately", "holds as a bound", "holds",
                  "not applicable at init")  # worst first


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """One row per lemma: the worst verdict over the curves that state the lemma, and how many rows have it.

    A lemma's own statement is its "exact" curves where it has any (for paper statements:
    their bounds and scalings); its "approx" curves (mean-field stand-ins the theory uses
    where no exact law is derived, e.g. the token cosine of an exact variance law) are
    summarised apart in ``approx_curves``, so an approximation that is off never reads as
    the exact law being violated. ``max_abs_z_last`` and ``max_rel_error_last`` are taken
    at each judged row's last layer, over exact and approximate curves (a loose bound's z
    says nothing).
    """
    import theory

    rows = []
    for lemma_id, group in table.groupby("id", sort=False):
        has_exact = group["kind"].eq("exact").any()
        judged = group[~group["kind"].eq("approx")] if has_exact else group
        approx = group[group["kind"].eq("approx")] if has_exact else group.iloc[0:0]
        verdicts = judged["verdict"].tolist()
        worst = min(verdicts, key=lambda v: _VERDICT_ORDER.index(v) if v in _VERDICT_ORDER else 0)
        lemma = theory.LEMMAS.get(lemma_id)
        tight = judged["tightness"].dropna()
        laws = judged[judged["kind"].isin(["exact", "approx"])]  # |z| of a loose bound says nothing
        off = approx[~approx["verdict"].isin(["holds", "holds approximately"])]
        rows.append({"id": lemma_id, "source": getattr(lemma, "source", ""), "kind": getattr(lemma, "kind", ""),
                     "verdict": worst, "rows": f"{verdicts.count(worst)}/{len(verdicts)}",
                     "max_abs_z_last": float(laws["z"].abs().max()) if laws["z"].notna().any() else math.nan,
                     "max_rel_error_last": float(laws["rel_error"].max()) if laws["rel_error"].notna().any()
                     else math.nan,
                     "tightness": f"{tight.min():.3g}..{tight.max():.3g}" if len(tight) else "",
                     "approx_curves": (f"{len(approx) - len(off)}/{len(approx)} within {APPROX_REL_TOLERANCE:.0%}"
                                       + (f"; last-layer error up to {approx['rel_error'].max():.0%}"
                                          if len(off) else "")) if len(approx) else ""})
    return pd.DataFrame(rows)


def _markdown_table(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return "" if math.isnan(value) else f"{value:.4g}"
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def to_markdown(table: pd.DataFrame, *, title: str = "Theory against Monte-Carlo") -> str:
    """The per-lemma summary and the full table as one Markdown document."""
    return (f"# {title}\n\nVerdict rules: exact laws hold when |z| <= {Z_LIMIT:g} at every layer "
            f"(z in Monte-Carlo standard errors); bounds hold when never crossed by more than {Z_LIMIT:g} sem "
            f"(tightness = measured/bound at the last layer); approximate laws within "
            f"{APPROX_REL_TOLERANCE:.0%} relative error hold approximately.\n\n## Per lemma\n\n"
            f"{_markdown_table(summarize(table))}\n\n## Every setting\n\n{_markdown_table(table)}\n")


def main(argv=None) -> int:
    """``python -m simulate verify [--quick] [--only ID ...] [--out DIR]``.

    Exit code 0 when every curve of kind "exact" of an exact or bridge lemma holds, 1 when one
    does not (approximate curves are reported, not enforced), 2 on bad input.
    """
    import theory

    prog = "python -m simulate verify"
    parser = CliParser(prog=prog, description="Check every lemma of theory.LEMMAS against the simulator.")
    parser.add_argument("--quick", action="store_true", help="small widths, few samples, depths 4/16/64")
    parser.add_argument("--only", action="append", metavar="ID",
                        help="check only this lemma id (repeatable; ids: python -m theory list)")
    parser.add_argument("--out", default="out/verify", help="directory for verify.csv and verify.md (default out/verify)")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar on stderr (it is on by default)")
    args = parser.parse_args(argv)
    only = None if args.only is None else [i for word in args.only for i in word.split(",") if i]
    if only is not None and (unknown := [i for i in only if i not in theory.LEMMAS]):
        fail(prog, f"unknown lemma id {unknown[0]!r}; known ids: {' '.join(theory.LEMMAS)}")
    out = output_path(prog, args.out, directory=True)
    started = time.perf_counter()
    table = verify(quick=args.quick, progress=args.progress, only=only)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 60):
        print(summarize(table).to_string(index=False))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "verify.csv", table.to_csv(index=False))
    write_atomic(out / "verify.md", to_markdown(table))
    print(f"{len(table)} rows in {time.perf_counter() - started:.1f} s -> {out / 'verify.csv'}, {out / 'verify.md'}")
    derived = table["id"].map(lambda i: theory.LEMMAS[i].kind in ("exact", "bridge"))
    approx_off = table[derived & (table["kind"] == "approx") & (table["verdict"] == "violated")]
    if len(approx_off):
        print(f"note: {len(approx_off)} approximate curves of derived lemmas are off by more than "
              f"{APPROX_REL_TOLERANCE:.0%}: {', '.join(sorted(set(approx_off['id'])))}", file=sys.stderr)
    broken = table[derived & (table["kind"] == "exact") & (table["verdict"] != "holds")]
    if len(broken):
        print(f"{len(broken)} exact-law rows do not hold: {', '.join(sorted(set(broken['id'])))}", file=sys.stderr)
        return 1
    return 0
