"""``python -m simulate sweep SPEC.toml --out DIR [--engine local|ray] [--address ADDR] [--workers N]``.

Validates the whole spec first (a bad field: one line naming the point and the field,
exit 2, nothing written), then runs the points that have no file in ``DIR`` yet and
rebuilds ``DIR/summary.csv``. An interrupt (SIGINT, SIGTERM; :mod:`simulate.runtime.interrupts`)
keeps the finished points, prints one line (``interrupted by SIGINT after K of N points;
...; re-run the same command to finish``) and exits with 130 (143 for SIGTERM). ``python -m simulate sweep --bench`` is the engines' bench,
``python -m simulate bench --sweep`` (:mod:`simulate.bench.sweep`).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from theory.cli import CliParser, fail, int_at_least, output_path

if TYPE_CHECKING:
    from simulate.sweep.runner import SweepReport

__all__ = ["build_parser", "add_engine_arguments", "check_engine", "run_points", "lost_points", "main"]

PROG = "python -m simulate sweep"


def add_engine_arguments(parser) -> None:
    """``--out``, ``--engine``, ``--address``, ``--workers``, ``--progress``, ``--retry-failed`` (sweep and study)."""
    parser.add_argument("--out", metavar="DIR", help="the output directory: DIR/points/*.parquet, DIR/summary.csv")
    parser.add_argument("--engine", default="local", choices=("local", "ray"),
                        help="local: a process pool on this machine (default); ray: a Ray cluster")
    parser.add_argument("--address", default=None, metavar="HOST:PORT",
                        help="Ray cluster address HOST:6379 (engine ray; default: start a local Ray)")
    parser.add_argument("--workers", type=int_at_least(1), default=None, metavar="N",
                        help="local processes, or a local Ray's CPUs (default: the cores)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="a progress bar over points on stderr, when it is a terminal (default on)")
    parser.add_argument("--retry-failed", action="store_true", help="run failed points again")


def build_parser() -> CliParser:
    """The ``sweep`` parser."""
    parser = CliParser(prog=PROG, description="Run a grid of settings x seeds x task, one result file per point "
                       "(resumable), and DIR/summary.csv. Spec format: README, section Sweeps.")
    parser.add_argument("spec", nargs="?", metavar="SPEC.toml", help="the sweep spec (TOML)")
    add_engine_arguments(parser)
    return parser


def check_engine(args, sweep, prog: str = PROG) -> None:
    """``--address`` needs ``--engine ray``, which needs Ray; on the local engine CUDA points need CUDA (exit 2)."""
    if args.address is not None and args.engine != "ray":
        fail(prog, "--address is for --engine ray")
    if args.engine == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            fail(prog, "--engine ray needs Ray: pip install -e \".[ray]\"")
        return
    from simulate.sweep.tasks import TASKS

    if any(TASKS[p.task].needs_gpu(p.options) for p in sweep.points):
        import torch

        if not torch.cuda.is_available():
            fail(prog, "options: device='cuda' is not allowed: CUDA is not available here (use cpu or auto, "
                       "or --engine ray on a cluster with GPUs)")


def run_points(prog: str, out, run) -> "SweepReport | int":
    """Call ``run()`` (a :func:`simulate.sweep.run_sweep`), turning interrupts and engine failures into one line.

    Returns the sweep's report, or the exit code of an interrupted (130/143) or failed (1) run;
    another sweep writing to ``out`` is an error (exit 2).
    """
    from simulate.runtime.interrupts import exit_code, handle_signals, interrupted_line, signal_of
    from simulate.sweep.engines import EngineError, WorkerDied
    from simulate.sweep.runner import SweepBusy

    try:
        with handle_signals():
            return run()
    except (KeyboardInterrupt, WorkerDied) as error:
        report = getattr(error, "report", None)
        where = f"after {report.on_disk} of {report.total} points" if report else "before any point finished"
        kept, resume = f"the finished points are kept in {out}", "re-run the same command to finish"
        if isinstance(error, WorkerDied):
            print(f"{prog}: {error}: stopped {where}; {kept}; {resume}", file=sys.stderr)
            return 1
        print(interrupted_line(prog, signal_of(error), where, kept, resume), file=sys.stderr)
        return exit_code(error)
    except SweepBusy as error:
        fail(prog, str(error))
    except EngineError as error:
        fail(prog, f"{error}; the points done so far are kept in {out}", code=1)


def lost_points(prog: str, report) -> int:
    """0, or 1 with one line when points were lost with their worker or node."""
    if not report.lost:
        return 0
    print(f"{prog}: {len(report.lost)} points lost with their worker or node; re-run the same command to "
          "retry them", file=sys.stderr)
    return 1


def _sweep(args) -> int:
    from pathlib import Path

    from simulate.sweep.runner import run_sweep
    from simulate.sweep.spec import SpecError, load_spec
    from simulate.sweep.store import read_summary
    from theory.verdicts import PointStatus

    if args.spec is None or args.out is None:
        fail(PROG, "a spec and --out DIR are needed (see --help)")
    try:
        sweep = load_spec(args.spec)
    except SpecError as error:
        fail(PROG, str(error))
    check_engine(args, sweep)
    out = output_path(PROG, args.out, directory=True)
    report = run_points(PROG, out, lambda: run_sweep(
        sweep, out, engine=args.engine, workers=args.workers, address=args.address, progress=args.progress,
        retry_failed=args.retry_failed, spec_text=Path(args.spec).read_text()))
    if isinstance(report, int):
        return report
    failed = int((read_summary(out).status == PointStatus.FAILED).sum())
    print(f"sweep {sweep.name}: {report.total} points ({report.skipped} done before, {report.ran} run now, "
          f"{failed} failed) in {report.seconds:.1f} s on {args.engine} -> {report.summary}")
    return lost_points(PROG, report)


def main(argv: list[str] | None = None) -> int:
    """The ``sweep`` command; returns the exit code."""
    return _sweep(build_parser().parse_args(argv))
