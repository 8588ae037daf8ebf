"""Theory against Monte-Carlo: one verdict per lemma and setting.

For every lemma of :data:`theory.LEMMAS` this module picks settings where the lemma
applies (several depths and parameter values) and hands each to
:func:`simulate.compare.check`, which simulates through the cache, takes the lemma's
curves out of :func:`theory.predict` (rows whose ``law`` is the lemma id) and compares the
two at every layer with the verdict rules stated there. A lemma about trained weights is
``not applicable at init`` (the comment says why and what stands in).
P2 Theorem 3 and the exact weight-decay law describe a training process: they are
checked against :func:`simulate.weight_decay_process` instead of a stack.

>>> sorted(lemma_settings(quick=True))[:2]
['bridge-aligned', 'causal-attention']
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from simulate.claims.judgement import INFERENCE_FIELDS
from simulate.compare import APPROX_REL_TOLERANCE, COLUMNS, Z_LIMIT, check, compare, describe_setting, verdict_row
from simulate.engine import CONFIDENCE
from simulate.runtime.interrupts import deferred_signals, exit_code, handle_signals, interrupted_line, signal_of
from theory.cli import CliParser, add_progress_argument, fail, markdown_table, output_path, progress_enabled
from theory.constraints import ConstraintError
from theory.files import write_text_atomic
from theory.meanfield.finite_width import add_width_law_argument
from theory.setting import Setting
from theory.verdicts import Verdict

__all__ = ["NOT_AT_INIT", "PROCESS_LAWS", "lemma_settings", "verify", "states_the_lemma", "summarize",
           "approximate_errors", "to_markdown",
           "main", "init_growth_rows", "judgement_row", "trained_summary", "trained_section", "check_trained_runs",
           "add_trained_rows", "INIT_TITLE",
           "TRAINED_TITLE", "trained_markdown_report", "check_overwrite", "trained_runs", "convergence_table"]

# Statements that speak about trained weights; what the workbench checks instead.
NOT_AT_INIT = {
    "p1-thm-3.3": ("assumes exponential variance growth, which needs sublayers that grow with the stream "
                   "(trained weights); at init growth is additive (preln-init) and the aligned family "
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
        "p1-lemma-3.2": pre_like("pre"), "preln-init": pre_like("pre"),
        "p1-lns": pre_like("lns"), "lns-init": pre_like("lns"),
        "p1-ln-jacobian": jacobian, "jacobian-init": jacobian,
        "p1-thm-3.3": [],
        "p2-thm-1": masked_linear, "masked-linear": masked_linear,
        "p2-thm-2": masked_blocks,
        "p2-thm-3": process, "exact-weight-decay": process,
        "p2-thm-4": uniform_attention, "causal-attention": causal_attention,
        "p2-thm-5": moe_uniform, "moe-gates": moe_uniform + moe_softmax,
        "p2-gqa": gqa, "gqa-init": gqa,
        "bridge-aligned": aligned,
    }


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


def verify(quick: bool = True, progress: bool = False, only=None, depths=None, width_law: str = "auto") -> pd.DataFrame:
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
    width_law : str
        The law of the token covariance ``theory.predict`` uses (``mean-field``, ``finite-width``, ``auto``).

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
            rows.append(verdict_row(lemma_id, "-", "-", verdict=Verdict.NOT_APPLICABLE, comment=reason))
        for setting in settings if lemma_id not in PROCESS_LAWS else ():
            if depths is None or setting.depth in set(depths):
                pending.setdefault(setting, []).append(lemma_id)
    bar = tqdm(pending.items(), total=len(pending), desc="verify", unit="setting", disable=not progress,
               file=sys.stderr)
    finished = 0
    try:
        for setting, lemma_ids in bar:
            bar.set_postfix_str(describe_setting(setting), refresh=False)
            rows += check(setting, lemma_ids, samples=size.samples, width_law=width_law)
            finished += 1
    except KeyboardInterrupt as stop:  # Ctrl-C: main reports how far it got
        stop.finished, stop.total = finished, len(pending)
        raise
    rows += init_growth_rows(pending, size.samples)
    table = pd.DataFrame(rows, columns=COLUMNS)
    order = {lemma_id: i for i, lemma_id in enumerate(ids)}
    return table.sort_values("id", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


_VERDICT_ORDER = (Verdict.VIOLATED, Verdict.NOT_MEASURED, Verdict.NO_PREDICTION, Verdict.INCONCLUSIVE,
                  Verdict.HOLDS_APPROXIMATELY, Verdict.HOLDS_AS_BOUND, Verdict.HOLDS, Verdict.NOT_APPLICABLE)  # worst first


def states_the_lemma(table: pd.DataFrame) -> pd.Series:
    """Which rows of a verify table state their lemma: a lemma's "exact" curves where it has any (for paper
    statements: their bounds and scalings; "growth": P1's statements judged by growth class), else all its rows.
    The others are its "approx" curves beside an exact law (mean-field stand-ins the theory uses where no exact law
    is derived, e.g. the token cosine of an exact variance law), judged apart.

    >>> t = pd.DataFrame({"id": ["a", "a", "b"], "kind": ["exact", "approx", "approx"]})
    >>> states_the_lemma(t).tolist()
    [True, False, True]
    """
    has_exact = table["kind"].isin(["exact", "growth"]).groupby(table["id"]).transform("any")
    return ~has_exact | ~table["kind"].eq("approx")


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """One row per lemma: the worst verdict over the curves that state the lemma (:func:`states_the_lemma`), and how
    many rows have it.

    A lemma's approximate curves beside an exact law are summarised apart in ``approx_curves``, so an
    approximation that is off never reads as the exact law being violated. ``max_abs_z_last`` and
    ``max_rel_error_last`` are taken at each judged row's last layer, over exact and approximate curves (a
    loose bound's z says nothing).
    """
    import theory

    rows = []
    for lemma_id, group in table.groupby("id", sort=False):
        states = states_the_lemma(group)
        judged, approx = group[states], group[~states]
        verdicts = [Verdict.parse(v) for v in judged["verdict"]]  # members, or their words read from verify.csv
        worst = min(verdicts, key=lambda v: _VERDICT_ORDER.index(v) if v in _VERDICT_ORDER else 0)
        lemma = theory.LEMMAS.get(lemma_id)
        tight = judged["tightness"].dropna()
        laws = judged[judged["kind"].isin(["exact", "approx"])]  # |z| of a loose bound says nothing
        off = approx[~approx["verdict"].map(Verdict.parse).isin([Verdict.HOLDS, Verdict.HOLDS_APPROXIMATELY])]
        rows.append({"id": lemma_id, "source": getattr(lemma, "source", ""), "kind": getattr(lemma, "kind", ""),
                     "verdict": worst, "rows": f"{verdicts.count(worst)}/{len(verdicts)}",
                     "max_abs_z_last": float(laws["z"].abs().max()) if laws["z"].notna().any() else math.nan,
                     "max_rel_error_last": float(laws["rel_error"].max()) if laws["rel_error"].notna().any()
                     else math.nan,
                     "tightness": f"{tight.min():.3g}..{tight.max():.3g}" if len(tight) else "",
                     "approx_curves": (f"{len(approx) - len(off)}/{len(approx)} within {APPROX_REL_TOLERANCE:.0%}: "
                                       + approximate_errors(approx)) if len(approx) else ""})
    return pd.DataFrame(rows)


def approximate_errors(approx: pd.DataFrame) -> str:
    """The approximate curves of verify rows ``approx``, named: per metric, the largest relative error at the last
    layer and the setting where it was measured.

    >>> rows = pd.DataFrame({"metric": ["var", "var", "token_cos"], "rel_error": [0.004, 0.019, 0.03],
    ...                      "setting": ["block=mlp", "block=transformer", "block=transformer"]})
    >>> approximate_errors(rows)
    'token_cos 3.0 % (block=transformer), var 1.9 % (block=transformer)'
    """
    words = []
    for metric, group in approx.groupby("metric", sort=True):
        errors = group["rel_error"].astype(float)
        if errors.notna().any():
            worst = group.loc[errors.idxmax()]
            words.append(f"{metric} {float(worst['rel_error']):.1%} ({worst['setting']})".replace("%", " %"))
    return ", ".join(words)


def to_markdown(table: pd.DataFrame) -> str:
    """The per-lemma summary and the full table as one Markdown document (the random-init report)."""
    return (f"# {INIT_TITLE}\n\nVerdict rules: exact laws hold when |z| <= {Z_LIMIT:g} at every layer "
            f"(z in Monte-Carlo standard errors); bounds hold when never crossed by more than {Z_LIMIT:g} sem "
            f"(tightness = measured/bound at the last layer); approximate laws within "
            f"{APPROX_REL_TOLERANCE:.0%} relative error hold approximately.\n\n## Per lemma\n\n"
            f"{markdown_table(summarize(table))}\n{trained_section(table)}\n## Every setting\n\n"
            f"{markdown_table(table)}\n")


def judgement_row(row_id: str, where: str, stage: int, layer: int, judgement) -> dict:
    """A verify row of a :class:`simulate.claims.judgement.Judgement`: kind ``growth`` for a growth class,
    ``claim`` for a claimed sign; ``predicted`` is the value the verdict compares with."""
    from simulate.claims.definitions import Kind

    estimate = judgement.estimate
    return verdict_row(row_id, where, judgement.statistic, stage=stage, layer=layer,
                       kind="growth" if judgement.claim.kind is Kind.GROWTH else "claim",
                       predicted=judgement.target, measured=estimate.estimate, ci_low=estimate.low,
                       ci_high=estimate.high, z=estimate.z(judgement.target), verdict=judgement.verdict,
                       comment=judgement.comment)


def init_growth_rows(pending: dict, samples: int) -> list[dict]:
    """P1 Lemma 3.2 and P1's LNS bounds judged by the growth class of each simulated ``var`` curve.

    Their constants are unknown (``Theta``, ``1 + c/sigma``), so each setting where they are
    checked has its variance profile fitted (:mod:`simulate.claims.growth`: exponent, rate and
    the per-layer factor's exponent with CIs) from the same cached simulation that
    :func:`simulate.compare.check` compared, and judged by the growth claim that states the
    lemma (:func:`simulate.claims.definitions.growth_claim`); rows of kind ``growth``.
    """
    import theory
    from simulate.claims import CLAIMS, growth_claim, growth_summary, judge_growth
    from simulate.compare import run_monte_carlo

    stated = {claim.lemma for claim in CLAIMS.values() if claim.lemma}
    rows = []
    for setting, lemma_ids in pending.items():
        wanted = [i for i in lemma_ids if i in stated]
        if not wanted:
            continue
        prediction = theory.predict(setting)  # the metric set check() simulated, so the cache answers
        metrics = sorted({m for i in lemma_ids for m in prediction[prediction["law"] == i]["metric"].unique()})
        measured, _ = run_monte_carlo(setting, samples=samples, metrics=metrics or ("var",))
        var = measured[measured["metric"] == "var"].sort_values("layer")["mean"].to_numpy(float)  # (L+1,)
        summary = growth_summary(var)
        for lemma_id in wanted:
            rows += [judgement_row(lemma_id, describe_setting(setting), -1, setting.depth, judgement)
                     for judgement in judge_growth(growth_claim(lemma_id), summary)]
    return rows


_TRAINED_SUMMARY = ["id", "where", "statistic", "at step 0", "verdict at step 0", "trained", "verdict trained"]


def trained_summary(table: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """One line per trained claim, runs and statistic: at step 0 beside the end of training (rows with
    ``stage`` >= 0, from :func:`add_trained_rows`; intervals at ``confidence``)."""
    from simulate.claims.judgement import Interval

    rows = table[table["stage"].astype(float) >= 0]
    out = []
    for (claim_id, where, metric), group in rows.groupby(["id", "setting", "metric"], sort=False):
        group = group.sort_values("stage")
        first, last = group.iloc[0], group.iloc[-1]

        def cell(row) -> tuple[str, str]:
            return Interval(row["measured"], row["ci_low"], row["ci_high"], confidence).format(), str(row["verdict"])

        init_value, init_verdict = cell(first) if first["stage"] == 0 else ("", "")
        value, verdict = cell(last) if last["stage"] > 0 else ("", "")
        out.append({"id": claim_id, "where": f"{where} (step {int(last['stage'])})", "statistic": metric,
                    "at step 0": init_value, "verdict at step 0": init_verdict, "trained": value,
                    "verdict trained": verdict})
    return pd.DataFrame(out, columns=_TRAINED_SUMMARY)


def trained_section(table: pd.DataFrame, confidence: float = CONFIDENCE) -> str:
    """verify.md's "Trained claims" section ('' when the table has no trained rows): one line per claim,
    then :func:`trained_summary`'s table; its intervals are at ``confidence``."""
    from simulate.claims.judgement import level_label

    summary = trained_summary(table, confidence)
    if summary.empty:
        return ""
    lines = [f"- **{r['id']}** {r['statistic']}, {r['where']}: trained {r['trained']} -> {r['verdict trained']}; "
             f"at step 0 {r['at step 0']} -> {r['verdict at step 0']}" for r in summary.to_dict("records")]
    return ("\n## Trained claims (step 0 beside the end of training)\n\nClaims, statistics and verdicts: "
            f"simulate.claims (docs/scores.md). Intervals: {level_label(confidence)} t intervals over seeds "
            "(the --confidence they ran with); a difference between two "
            "groups of runs is paired by seed where both have the same seeds, else Welch's; growth exponents "
            "from the fits of simulate.claims.growth. holds / violated: the interval lies on the claimed / the "
            "other side; inconclusive: it contains the boundary.\n\n" + "\n".join(lines) + "\n\n"
            + markdown_table(summary) + "\n")


def check_trained_runs(prog: str, runs) -> None:
    """Exit 2 with one line, before any work, when a ``--trained`` RUN is not a finished training run."""
    from simulate.training.run_directory import RunDirectory, RunError

    for run in runs or []:
        try:
            RunDirectory(run).require_finished()
        except RunError as error:
            fail(prog, f"--trained {run}: {error}")


def trained_runs(runs: list[str], quick: bool, progress: bool) -> list:
    """The runs ``verify --trained`` judges: those given, or with none the tiny cached claim trainings
    (:func:`simulate.scores.training_cache.claim_runs`, ``TINY`` with ``--quick``, else ``FULL``), trained on
    first use."""
    from simulate.scores.training_cache import FULL, TINY, claim_runs

    if runs:
        return list(runs)
    return [path for paths in claim_runs(TINY if quick else FULL, progress=progress).values() for path in paths]


def add_trained_rows(prog: str, table: pd.DataFrame, runs: list, progress: bool,
                     confidence: float = CONFIDENCE) -> pd.DataFrame:
    """``verify --trained RUN ...``: the rows of :func:`simulate.claims.across_runs.judge_runs` appended (id: the
    claim's, setting: the runs, stage: the step), intervals at ``confidence``. Bad runs: exit 2."""
    from simulate.claims.across_runs import judge_runs
    from simulate.training.run_directory import RunError

    try:
        judged = judge_runs(runs, progress=progress, confidence=confidence)
    except RunError as error:
        fail(prog, str(error))
    rows = pd.DataFrame([judgement_row(r.judgement.claim.id, r.where, r.stage, r.layer, r.judgement)
                         for r in judged], columns=COLUMNS)
    return pd.concat([table, rows], ignore_index=True) if len(table) else rows


def _interrupted(prog: str, stop: KeyboardInterrupt, out) -> int:
    """One line for Ctrl-C/SIGTERM during the checks; returns 130/143."""
    from simulate.cache import cache_dir

    finished, total = getattr(stop, "finished", None), getattr(stop, "total", None)
    where = f"after {finished} of {total} settings" if total is not None else "during the checks"
    print(interrupted_line(prog, signal_of(stop), where, f"nothing written to {out}",
                           f"the finished settings are in the simulator cache ({cache_dir()}): the same command "
                           "goes on from there"), file=sys.stderr)
    return exit_code(stop)


# The two kinds of report verify writes, by the title of their verify.md; neither overwrites the other.
INIT_TITLE = "Theory against Monte-Carlo"
TRAINED_TITLE = "Trained claims against training runs"
_DEFAULT_OUT = {INIT_TITLE: "out/verify", TRAINED_TITLE: "out/verify-trained"}


def trained_markdown_report(table: pd.DataFrame, convergence: pd.DataFrame, confidence: float = CONFIDENCE) -> str:
    """verify.md of ``verify --trained``: the trained claims (step 0 beside the end of training), how far each
    run is from converged, then every row."""
    slope = "docs/studies.md#statistics-of-one-model"
    return (f"# {TRAINED_TITLE}\n{trained_section(table, confidence)}\n## Convergence\n\nTraining-loss slope over the last "
            f"quarter of each run's steps, nats/byte per 1000 steps (0: converged; {slope})\n\n"
            f"{markdown_table(convergence)}\n\n## Every row\n\n{markdown_table(table)}\n")


def convergence_table(runs) -> pd.DataFrame:
    """One row per run: its steps and :func:`simulate.training.report.loss_slope` of its training loss."""
    from simulate.training.report import loss_slope
    from simulate.training.run_directory import RunDirectory

    rows = []
    for run in runs:
        loss = RunDirectory(run).loss()
        train = loss[loss["split"] == "train"]
        rows.append({"run": str(run), "steps": int(train["step"].max()),
                     "loss_slope_per_1000_steps": loss_slope(train["step"].to_numpy(), train["loss"].to_numpy())})
    return pd.DataFrame(rows, columns=["run", "steps", "loss_slope_per_1000_steps"])


def check_overwrite(prog: str, out: Path, title: str, force: bool) -> None:
    """Exit 2 when ``out`` holds a verify report of the other kind (its verify.md's title), unless ``force``."""
    report = out / "verify.md"
    if force or not report.is_file():
        return
    first = report.read_text(errors="replace").partition("\n")[0].removeprefix("# ").strip()
    if first != title:
        fail(prog, f"--out {out} holds another report ({first!r}); give another --out (default for this one: "
                   f"{_DEFAULT_OUT[title]}) or --force to overwrite it")


def main(argv=None) -> int:
    """``python -m simulate verify [--quick] [--only ID ...] [--trained [RUN ...]] [--out DIR] [--force]``.

    ``--map`` hands the rest of the flags to the accuracy map (:func:`simulate.accuracy.cli.main`).

    Without ``--trained``: every lemma at random init; exit code 0 when every curve of kind
    "exact" of an exact or bridge lemma holds, 1 when one does not (approximate curves are
    reported, not enforced). With ``--trained``: only the papers' trained claims on the runs
    (their step 0 and their end; docs/scores.md), their table printed, exit 0; the report goes
    to ``out/verify-trained`` by default. Neither kind overwrites a report of the other kind
    without ``--force``. 2 on bad input, 130/143 on Ctrl-C/SIGTERM (one line; nothing written;
    the settings checked so far stay in the cache). ``--progress/--no-progress``: the bars
    (default: when stderr is a terminal).
    """
    import theory

    argv = sys.argv[1:] if argv is None else list(argv)
    if "--map" in argv:  # the accuracy map: its own flags (simulate/accuracy/cli.py)
        from simulate.accuracy.cli import main as map_main
        return map_main([word for word in argv if word != "--map"])
    prog = "python -m simulate verify"
    parser = CliParser(prog=prog, description="Check every lemma of theory.LEMMAS against the simulator, or, with "
                                              "--trained, the papers' trained claims on training runs.")
    parser.add_argument("--quick", action="store_true", help="small widths, few samples, depths 4/16/64")
    parser.add_argument("--only", action="append", metavar="ID",
                        help="check only this lemma id (repeatable; ids: python -m theory list)")
    parser.add_argument("--out", default=None, help="directory for verify.csv and verify.md (default out/verify, "
                                                    "with --trained out/verify-trained)")
    parser.add_argument("--force", action="store_true", help="overwrite a report of the other kind in --out")
    parser.add_argument("--trained", nargs="*", metavar="RUN", default=None,
                        help="judge only P1's and P2's trained claims, on these training runs (none given: tiny "
                             "cached trainings, see docs/scores.md); the random-init lemmas are not rerun")
    parser.add_argument("--confidence", type=float, default=CONFIDENCE,
                        help="with --trained: the level of every interval and test, in (0, 1) (default 0.95)")
    add_width_law_argument(parser)
    add_progress_argument(parser)
    args = parser.parse_args(argv)
    trained = args.trained is not None
    try:
        INFERENCE_FIELDS["confidence"].check("confidence", args.confidence)
    except ConstraintError as error:
        fail(prog, f"--confidence: {error}")
    if args.width_law != "auto" and trained:
        fail(prog, "--width-law is allowed only without --trained: it picks the law of the random-init predictions")
    if args.confidence != CONFIDENCE and not trained:
        fail(prog, "--confidence is allowed only with --trained: the random-init verdicts are judged in sem (|z| <= 4)")
    if trained and args.only is not None:
        fail(prog, "--only is not allowed with --trained: --only picks random-init lemmas, --trained judges the "
                   "trained claims of its runs")
    only = None if args.only is None else [i for word in args.only for i in word.split(",") if i]
    if only is not None and (unknown := [i for i in only if i not in theory.LEMMAS]):
        fail(prog, f"unknown lemma id {unknown[0]!r}; known ids: {' '.join(theory.LEMMAS)}")
    title = TRAINED_TITLE if trained else INIT_TITLE
    out = output_path(prog, args.out or _DEFAULT_OUT[title], directory=True)
    check_overwrite(prog, out, title, args.force)
    check_trained_runs(prog, args.trained)
    started = time.perf_counter()
    progress = progress_enabled(args.progress)
    with handle_signals():
        try:
            if trained:
                runs = trained_runs(args.trained, args.quick, progress)
                table = add_trained_rows(prog, pd.DataFrame(columns=COLUMNS), runs, progress, args.confidence)
                convergence = convergence_table(runs)
            else:
                table = verify(quick=args.quick, progress=progress, only=only, width_law=args.width_law)
        except KeyboardInterrupt as stop:  # nothing is written before the end: nothing half-written
            return _interrupted(prog, stop, out)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 60):
        print((trained_summary(table, args.confidence) if trained else summarize(table)).to_string(index=False))
        if trained:
            print(convergence.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    with deferred_signals() as pending:  # the two reports are written whole, together
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "verify.csv", table.to_csv(index=False))
        write_text_atomic(out / "verify.md", trained_markdown_report(table, convergence, args.confidence) if trained
                          else to_markdown(table))
    print(f"{len(table)} rows in {time.perf_counter() - started:.1f} s -> {out / 'verify.csv'}, {out / 'verify.md'}")
    if pending:
        print(interrupted_line(prog, pending[0], "while the reports were written", f"both are complete in {out}",
                               "nothing to resume"), file=sys.stderr)
        return exit_code(pending[0])
    return 0 if trained else _exact_law_status(table)


def _exact_law_status(table: pd.DataFrame) -> int:
    """1 (with one line on stderr) when an exact curve of an exact or bridge lemma does not hold, else 0."""
    import theory

    derived = table["id"].map(lambda i: theory.LEMMAS[i].kind in ("exact", "bridge"))
    approx_off = table[derived & (table["kind"] == "approx") & (table["verdict"] == Verdict.VIOLATED)]
    if len(approx_off):
        print(f"note: {len(approx_off)} approximate curves of derived lemmas are off by more than "
              f"{APPROX_REL_TOLERANCE:.0%}: {', '.join(sorted(set(approx_off['id'])))}", file=sys.stderr)
    broken = table[derived & (table["kind"] == "exact") & (table["verdict"] != Verdict.HOLDS)]
    if len(broken):
        print(f"{len(broken)} exact-law rows do not hold: {', '.join(sorted(set(broken['id'])))}", file=sys.stderr)
        return 1
    return 0
