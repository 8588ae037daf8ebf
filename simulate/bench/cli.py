"""``python -m simulate bench [--quick] [--device] [--out DIR] [--no-ablate] [--repeat N] [--scaling] [--train]
[--batches B,B,... [--layouts 1x2,2x1]] [--sweep [--workers N]] [--theory [--law-noise]]``.

``--theory``: the theory's prediction times against the mean-field law's (and with ``--law-noise`` the
finite-width law's own noise against the simulator's standard error), :mod:`simulate.bench.theory`.

Writes ``DIR/bench.csv`` and ``DIR/bench_checks.csv`` (:mod:`simulate.bench`); exit 1 when the
statistics of ours and the reference disagree by more than :data:`Z_FAIL` standard errors.
"""

from __future__ import annotations

import argparse
import inspect
import sys

import pandas as pd
import torch

from simulate.bench.cases import Case, cases, simulate_function
from simulate.bench.timing import COLUMNS, throughput_line, pair_lines, run_cases
from theory.cli import CliParser, add_progress_argument, fail, int_at_least, output_path, progress_enabled
from theory.files import write_text_atomic
from theory.setting import SettingError

__all__ = ["PROG", "Z_FAIL", "build_parser", "main"]

PROG = "python -m simulate bench"
Z_FAIL = 5.0  # |z| above this on a check: exit code 1 (after the files are written)


def build_parser() -> CliParser:
    parser = CliParser(prog=PROG, description="This simulator against a naive nn.Module one (timings, agreement).")
    parser.add_argument("--quick", action="store_true", help="tiny settings, seconds (CI smoke test)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    parser.add_argument("--out", default="bench_out", help="output directory (default ./bench_out)")
    parser.add_argument("--ablate", action=argparse.BooleanOptionalAction, default=True,
                        help="rows switching one technique off at a time (default on; --no-ablate skips them)")
    parser.add_argument("--repeat", type=int_at_least(1), default=None,
                        help="time each of our runs as the best of N (default 3; 1 with --quick)")
    parser.add_argument("--scaling", action="store_true",
                        help="also time depth/width/tokens/samples sweeps at small sizes into DIR/scaling.csv")
    parser.add_argument("--threads", type=int_at_least(1), default=None,
                        help="torch CPU threads (default: as set; on a busy machine 1 avoids oversubscription)")
    parser.add_argument("--theory", action="store_true",
                        help="time theory predict (finite-width against mean-field law) instead -> DIR/bench_theory.csv")
    parser.add_argument("--law-noise", action="store_true",
                        help="with --theory: the finite-width law's spread over its seeds against the simulator's sem "
                             "-> DIR/bench_law_noise.csv (minutes)")
    parser.add_argument("--sweep", action="store_true",
                        help="only the sweep engines: 16 Monte-Carlo points serial vs the local pool, and Ray's "
                             "per-point overhead -> DIR/bench_sweep.csv")
    parser.add_argument("--workers", type=int_at_least(1), default=None, metavar="N",
                        help="with --sweep: processes of the local engine (default: one per core)")
    parser.add_argument("--train", action="store_true",
                        help="only the trainer with statistics against a plain training loop -> DIR/bench_train.csv")
    parser.add_argument("--batches", type=_batch_sizes, default=None, metavar="B,B,...",
                        help="with --train: instead, the atlas's model at each batch size (e.g. 16,32,64,128) for one "
                             "budget of tokens, per thread layout -> DIR/bench_batches.csv (CPU)")
    parser.add_argument("--layouts", type=_layouts, default=None, metavar="L,L",
                        help="with --batches: thread layouts, 1x2 (one worker of two threads) and/or 2x1 (two "
                             "workers of one thread); default both")
    add_progress_argument(parser)
    return parser


def _batch_sizes(text: str) -> tuple[int, ...]:
    """``--batches``: a comma list of integers >= 1 (argparse type)."""
    return tuple(int_at_least(1)(word) for word in text.split(","))


def _layouts(text: str) -> tuple[str, ...]:
    """``--layouts``: a comma list of :data:`simulate.bench.batches.LAYOUTS` (argparse type)."""
    from simulate.bench.batches import LAYOUTS

    words = tuple(word.strip() for word in text.split(","))
    if unknown := [word for word in words if word not in LAYOUTS]:
        raise argparse.ArgumentTypeError(f"{unknown[0]!r} is not allowed: one of {', '.join(LAYOUTS)}")
    return words


def _run_batch_bench(out, args) -> int:
    """``bench --train --batches``: the rows of :func:`simulate.bench.batches.bench_batches`, written and printed."""
    from simulate.bench.batches import LAYOUTS, bench_batches

    table = bench_batches(args.batches, args.layouts or tuple(LAYOUTS), quick=args.quick)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "bench_batches.csv", table.to_csv(index=False))
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {out / 'bench_batches.csv'}")
    return 0


def _check_memory(rows: list[Case], device: torch.device, quick: bool) -> None:
    """Exit 2 with one line when the largest row (ours, or the naive stack) would not fit (the memory model)."""
    from simulate.engine import estimate_run_bytes, naive_bytes
    from simulate.runtime.machine import LIMIT_ENV, check_fits

    def row_bytes(case: Case) -> int:
        options = {k: v for k, v in case.kwargs.items() if k in ("prefetch", "matmul_precision")}
        ours = estimate_run_bytes(case.setting, 1 if case.looped else case.samples, case.metrics,
                                  case.kwargs.get("dtype", "float32"), case.kwargs.get("weights", "auto"),
                                  device.type, **options)
        return max(ours, naive_bytes(case.setting, case.kwargs.get("dtype", "float32")) if case.naive else 0)

    largest = max(rows, key=row_bytes)
    check_fits(row_bytes(largest), device.type, PROG, "the sizes with --quick", what=f"bench row {largest.name}",
               advice=f"the --quick rows are the smallest: free memory or raise ${LIMIT_ENV}" if quick else None)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m simulate bench``; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        fail(PROG, "device='cuda' is not allowed: CUDA is not available here (use cpu or auto)")
    out = output_path(PROG, args.out, directory=True)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if (args.batches or args.layouts) and not args.train:
        fail(PROG, "--batches and --layouts are allowed only with --train (they time the trainer)")
    if args.layouts and not args.batches:
        fail(PROG, "--layouts is allowed only with --batches (the layouts of the batch-size rows)")
    if args.workers is not None and not args.sweep:
        fail(PROG, "--workers is allowed only with --sweep (the local engine's processes)")
    if args.law_noise and not args.theory:
        fail(PROG, "--law-noise is allowed only with --theory (the law's noise beside its speed)")
    if args.theory:
        from simulate.bench.theory import run_theory_bench

        return run_theory_bench(out, args.quick, args.law_noise, args.repeat)
    if args.sweep:
        from simulate.bench.sweep import run_sweep_bench

        return run_sweep_bench(out, args.workers)
    if args.batches:
        if device.type != "cpu":
            fail(PROG, f"--batches is allowed only on the CPU (thread layouts); --device {args.device} gave {device.type}")
        return _run_batch_bench(out, args)
    if args.train:  # the trainer's row (simulate.bench.training) instead of the simulator's
        from simulate.bench.training import run_train_bench

        return run_train_bench(out, device, args.quick, args.threads)
    try:
        simulate_function()
        rows = cases(device.type, args.quick, args.ablate)
    except (ImportError, SettingError, ValueError) as error:
        fail(PROG, str(error))
    _check_memory(rows, device, args.quick)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"device {device.type}, {torch.get_num_threads()} CPU threads; {throughput_line(device)}")
    bench, checks = run_cases(rows, device, progress=progress_enabled(args.progress),
                              repeat=args.repeat or (1 if args.quick else 3))
    scaling = None
    if args.scaling:
        from simulate.scaling import run_scaling

        scaling = run_scaling(device, quick=args.quick)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "bench.csv", bench[COLUMNS].to_csv(index=False))
    write_text_atomic(out / "bench_checks.csv", checks.to_csv(index=False))
    if scaling is not None:
        write_text_atomic(out / "scaling.csv", scaling.to_csv(index=False))
        print(scaling.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(bench.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        if not checks.empty:
            print(checks[["setting", "metric", "layer", "ours_mean", "reference_mean", "z"]]
                  .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for line in pair_lines(bench, rows):
        print(line)
    if args.ablate:
        offered = inspect.signature(simulate_function()).parameters
        missing = [k for k in ("compile", "cuda_graphs") if k not in offered]
        if missing:
            print(f"not ablated: {', '.join(missing)} (simulate.simulate has no such keyword)")
    print(f"wrote {out / 'bench.csv'} and {out / 'bench_checks.csv'}")
    worst = checks["z"].abs().max() if not checks.empty else 0.0
    if worst > Z_FAIL:
        print(f"{PROG}: statistics disagree: max |z| = {worst:.2f} > {Z_FAIL}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
