"""``python -m simulate scores DIR [--scores LIST] [--out DIR2]``: layer-effectiveness of a trained run.

Writes ``DIR2/scores.csv`` (``layer,score,value,sem,n``), ``DIR2/pairs.csv``
(``layer,other,score,value``) and ``DIR2/config.json`` (the request, its key and versions,
step, seconds per score; :func:`simulate.scores.runs.save_scores`) and prints one summary
line. ``DIR2`` defaults to ``DIR/scores`` (``DIR/scores_init`` with ``--at-init``, the same
model at step 0). Bad input (no such run, a run without a checkpoint, a checkpoint of another
shape, an unknown score name, a bad option): one line on stderr, exit 2, nothing written.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from simulate.scores.compute import ROW_SCORES, SCORE_GROUPS, ScoreOptions, parse_scores
from theory.cli import CliParser, add_progress_argument, fail, int_at_least, output_path

__all__ = ["PROG", "build_parser", "main"]

PROG = "python -m simulate scores"


def _pairs(text: str):
    if text == "all":
        return "all"
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


_pairs.__name__ = "'all' or an integer >= 1"


def build_parser() -> CliParser:
    names = ", ".join(f"{g} ({', '.join(ROW_SCORES[g])})" for g in SCORE_GROUPS)
    parser = CliParser(prog=PROG, description="Layer-effectiveness scores of a trained (or step-0) model.",
                       epilog=f"scores: {names}")
    parser.add_argument("run", metavar="DIR", help="a training run directory (python -m simulate train --out DIR), "
                        "or a local Hugging Face LLaMA/Mixtral/Qwen directory (optional extra [hf])")
    parser.add_argument("--scores", default="all", help="comma-separated score names or groups, or 'all' (default)")
    parser.add_argument("--out", default=None, help="output directory (default DIR/scores, DIR/scores_init)")
    parser.add_argument("--at-init", action="store_true", help="score the run's model at step 0 (its seed's init)")
    parser.add_argument("--sequences", type=int_at_least(2), default=64, help="held-out sequences (default 64)")
    parser.add_argument("--batch-size", type=int_at_least(1), default=32, help="sequences per forward (default 32)")
    parser.add_argument("--pairs", type=_pairs, default="all",
                        help="permutation pairs: 'all' (default) or K, only pairs with l2 - l1 <= K")
    parser.add_argument("--jac-sequences", type=int_at_least(2), default=8,
                        help="sequences for the Jacobian statistics (default 8)")
    parser.add_argument("--probes", type=int_at_least(2), default=4, help="Rademacher probes per block (default 4)")
    parser.add_argument("--power-iterations", type=int_at_least(1), default=20,
                        help="power iterations of the spectral norm (default 20)")
    parser.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the Jacobian probes (default 0)")
    parser.add_argument("--data", default=None,
                        help="held-out text: 'docs', 'stdlib' or a UTF-8 file (default: the run's)")
    parser.add_argument("--tokens", type=int_at_least(2), default=None,
                        help="sequence length for a Hugging Face directory (default min(128, max positions)); "
                             "a training run uses its Setting's")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    add_progress_argument(parser)  # bars over layers and pairs
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m simulate scores``; returns the exit code."""
    from simulate.scores.hf import HFError, is_hf_directory, score_hf
    from simulate.scores.runs import save_scores, score_run
    from simulate.training.run_directory import RunDirectory, RunError
    from simulate.engine import resolve_device

    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    hugging_face = is_hf_directory(args.run)
    try:
        groups = parse_scores(args.scores)
        device = resolve_device(args.device)
        if hugging_face and args.at_init:
            raise ValueError("--at-init is not allowed for a Hugging Face directory: give a directory with its "
                             "config.json only for a random-init model")
        if not hugging_face:
            RunDirectory(args.run).config  # noqa: B018 (RunError for a directory that is no run)
            if args.tokens is not None:
                raise ValueError("--tokens is not allowed for a training run: it is scored at its Setting's tokens")
    except (RunError, ValueError) as error:
        fail(PROG, str(error))
    default = Path(args.run) / ("scores_init" if args.at_init else "scores")
    out = output_path(PROG, args.out or str(default), directory=True)
    options = ScoreOptions(sequences=args.sequences, batch_size=args.batch_size, pairs=args.pairs,
                           jac_sequences=min(args.jac_sequences, args.sequences), probes=args.probes,
                           iterations=args.power_iterations, seed=args.seed)
    started = time.perf_counter()
    try:
        if hugging_face:
            scores, pairs, summary = score_hf(args.run, groups, options, tokens=args.tokens, data=args.data,
                                              device=device, progress=args.progress)
        else:
            scores, pairs, summary = score_run(args.run, groups, options, at_init=args.at_init, data=args.data,
                                               device=device, progress=args.progress)
    except (RunError, HFError) as error:
        fail(PROG, str(error))
    summary["seconds_total"] = round(time.perf_counter() - started, 3)
    save_scores(out, scores, pairs, summary)
    loss = scores[scores.score == "loss"].iloc[0]
    slowest = max((k for k in summary["seconds"] if k != "base"), key=summary["seconds"].get, default="base")
    print(f"scores of {args.run} at step {summary['step']}: held-out loss {loss['value']:.4f} +- {loss['sem']:.2g} "
          f"({int(loss['n'])} sequences); {len(scores)} rows, {len(pairs)} pairs in {summary['seconds_total']:.1f} s "
          f"(slowest: {slowest} {summary['seconds'][slowest]:.1f} s) -> {out}")
    return 0
