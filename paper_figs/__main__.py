"""``python -m paper_figs [--quick] [--only NAME ...] [--out DIR]``: build the paper figures."""

from __future__ import annotations

import argparse
import sys
import time

from simulate.runtime.process import configure_process

configure_process()  # before paper_figs imports torch (simulate.runtime.process)

from theory.cli import CliParser, add_progress_argument, fail, output_path, progress_enabled  # noqa: E402
from tqdm import tqdm  # noqa: E402

from paper_figs import FIGURES  # noqa: E402
from paper_figs.style import DEFAULT_OUT_DIR  # noqa: E402

__all__ = ["main"]

PROG = "python -m paper_figs"


def main(argv=None) -> int:
    """Build the selected figures; exit 2 with one line on stderr for an unknown name."""
    catalogue = "\n".join(f"  {name:<20} {(build.__doc__ or '').strip().splitlines()[0]}"
                          for name, build in FIGURES.items())
    parser = CliParser(prog=PROG, description="Build the paper figures (PNG and PDF).",
                       epilog=f"figures:\n{catalogue}", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: seconds per figure on a CPU")
    parser.add_argument("--only", action="append", metavar="NAME", help="build only this figure (repeatable)")
    parser.add_argument("--out", default=str(DEFAULT_OUT_DIR), help=f"output directory (default {DEFAULT_OUT_DIR})")
    add_progress_argument(parser)
    args = parser.parse_args(argv)
    names = list(FIGURES) if args.only is None else [n for word in args.only for n in word.split(",") if n]
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        fail(PROG, f"unknown figure {unknown[0]!r}; known: {' '.join(FIGURES)}")
    out = output_path(PROG, args.out, directory=True)
    bar = tqdm(names, desc="figures", unit="figure", disable=not progress_enabled(args.progress), file=sys.stderr)
    for name in bar:
        bar.set_postfix_str(name)
        started = time.perf_counter()
        paths = FIGURES[name](out, args.quick)
        bar.write(f"{name}: {', '.join(str(p) for p in paths)} ({time.perf_counter() - started:.1f} s)", file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
