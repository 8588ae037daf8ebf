"""``python -m theory list | show ID | predict ...``: the lemma registry on the command line.

- ``list [--kind KIND]``: one line per lemma, ``ID  SOURCE  statement``.
- ``show ID [--ascii] [--no-check]``: the statement in Unicode (``sympy.pretty``) and
  LaTeX, assumptions, closed form, derived growth class, symbolic-check result, notes.
- ``predict [SETTING FLAGS] [--layers SPEC] --out FILE.csv|FILE.parquet``: handed to :func:`predict_main`
  (the table of :func:`theory.meanfield.prediction.predict` at the chosen layers, as CSV or Parquet).

Bad input (an unknown id, a bad flag): exit code 2 and one line on stderr.

>>> main(["list", "--kind", "bridge"])
bridge-aligned  derived here  Eq(sigma_{l+1}**2, b**2 + (a + sigma_l)**2)
0
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Sequence

from typing import TYPE_CHECKING

from tqdm import tqdm

from theory.cli import (CliParser, add_progress_argument, estimated_size, fail, format_bytes, output_path,
                        progress_enabled, table_format, write_table)
from theory.files import atomic_write
from theory.layer_selection import LAYERS_ALLOWED, LayerSelection, layer_selection_type
from theory.meanfield.finite_width import add_width_law_argument, check_width_law
from theory.setting import SettingError, add_setting_arguments, setting_from_args

if TYPE_CHECKING:  # the lemma registry and sympy are loaded by list and show only: predict needs neither
    from theory.symbolic.lemmas import Lemma

__all__ = ["main", "build_parser", "format_list", "format_show", "predict_main", "first_non_finite"]

PROG = "python -m theory"
KINDS = ("paper", "exact", "bridge")
ALL_LAYERS_UP_TO = 10_000  # predict writes every layer up to this depth by default ...
DEFAULT_LOG_LAYERS = 1000  # ... and this many log-spaced layers above it


def build_parser() -> CliParser:
    """The parser of ``python -m theory`` (``predict`` is dispatched before parsing)."""
    from theory.symbolic.lemmas import LEMMAS

    parser = CliParser(prog=PROG, description="Lemmas of the depth workbench: paper statements, "
                       "exact random-init laws and the aligned bridge (docs/derivations.md).")
    commands = parser.add_subparsers(dest="command", metavar="{list,show,predict}", required=True,
                                     parser_class=CliParser)
    listing = commands.add_parser("list", help="one line per lemma: ID  SOURCE  statement",
                                  description="One line per lemma: ID  SOURCE  statement.")
    listing.add_argument("--kind", choices=KINDS, default=None, help="only lemmas of this kind")
    show = commands.add_parser("show", help="one lemma in full", description="Statement (Unicode and "
                               "LaTeX), assumptions, closed form, growth class, symbolic check, notes.")
    show.add_argument("id", metavar="ID", help=f"lemma id, one of: {', '.join(LEMMAS)}")
    show.add_argument("--ascii", action="store_true", help="ASCII art instead of Unicode")
    show.add_argument("--no-check", action="store_true", help="skip running the symbolic check")
    commands.add_parser("predict", add_help=False, help="per-layer numeric predictions for a setting "
                        "(see: python -m theory predict --help)")
    return parser


def format_list(kind: str | None = None) -> str:
    """``ID  SOURCE  statement`` lines, columns aligned, for all lemmas or one kind; a derived law's line ends with
    ``[exact for: ...]``, the curves of ``theory predict`` it labels exact (its others are approximate)."""
    import sympy as sp

    from theory.symbolic.lemmas import LEMMAS

    chosen = [entry for entry in LEMMAS.values() if kind in (None, entry.kind)]
    id_width = max(len(entry.id) for entry in chosen)
    source_width = max(len(entry.source) for entry in chosen)
    return "\n".join(f"{entry.id:<{id_width}}  {entry.source:<{source_width}}  {sp.sstr(entry.statement)}"
                     + (f"  [exact for: {entry.exact_for}]" if entry.exact_for else "") for entry in chosen)


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ")


def _pretty(expr, unicode: bool) -> str:
    import sympy as sp

    return sp.pretty(expr, use_unicode=unicode, wrap_line=False)


def _check_result(entry: Lemma, run: bool) -> str:
    if entry.symbolic_check is None:
        return "none"
    if not run:
        return "skipped (--no-check)"
    what = " ".join((entry.symbolic_check.__doc__ or "").split())
    try:
        verdict = "passed (sympy)" if entry.symbolic_check() else "FAILED"
    except Exception as error:  # a check that sympy cannot finish is reported, not raised
        verdict = f"could not run: {type(error).__name__}: {error}"
    return f"{verdict}{': ' + what if what else ''}"


def format_show(entry: Lemma, *, unicode: bool = True, run_check: bool = True) -> str:
    """The full description of one lemma, as ``show`` prints it."""
    import sympy as sp

    from theory.accuracy import MAP_PATH, law_accuracy

    kind = f"exact for: {entry.exact_for}" if entry.exact_for else entry.kind
    parts = [f"{entry.id}  [{kind}]  {entry.source}", entry.title, "",
             "Statement:", _indent(_pretty(entry.statement, unicode)),
             "LaTeX:", _indent(sp.latex(entry.statement)),
             "Assumptions:", _indent(textwrap.fill(entry.assumptions, 88))]
    if entry.closed_form is not None:
        parts += ["Closed form:", _indent(_pretty(entry.closed_form, unicode)),
                  "Closed form (LaTeX):", _indent(sp.latex(entry.closed_form))]
    else:
        parts += ["Closed form: none"]
    parts += [f"Growth (depth -> oo, derived): {entry.growth or 'n/a (no depth dependence)'}",
              "Symbolic check:", _indent(textwrap.fill(_check_result(entry, run_check), 88))]
    if entry.notes:
        parts += ["Notes:", _indent(textwrap.fill(entry.notes, 88))]
    if entry.related:
        parts += [f"Related: {', '.join(entry.related)}"]
    measured = law_accuracy(entry.id)
    if len(measured):
        table = measured.assign(**{c: measured[c].map(lambda v: f"{v:.2%}")
                                   for c in ("median_rel_error", "worst_rel_error")})
        parts += [f"Measured at init ({MAP_PATH.parent.name}, docs/accuracy.md): per metric, block and scheme, the "
                  "curves' kinds, the resolved cells without a blow-up, how many within noise, the median and worst "
                  "relative errors, where the worst is", _indent(table.to_string(index=False))]
    return "\n".join(parts)


def _stdout_takes_unicode() -> bool:
    try:
        "σ₀≤∑".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _emit(text: str) -> None:
    """Print ``text``; a closed pipe (``| head``) ends quietly instead of with a traceback."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def predict_main(argv: Sequence[str] | None = None) -> int:
    """``python -m theory predict [SETTING FLAGS] [--layers SPEC] --out FILE.csv|FILE.parquet``.

    Predicts every layer, keeps the rows of the layers ``--layers`` selects (default: all up to
    :data:`ALL_LAYERS_UP_TO` blocks, else ``log:`` :data:`DEFAULT_LOG_LAYERS`, said on stderr), says the
    rows and the estimated size on stderr, then writes CSV, or Parquet for a ``.parquet`` path, atomically.
    Bad input exits with code 2 and one line on stderr; no file is written.
    """
    from theory.meanfield.prediction import predict_with_first_non_finite

    prog = "python -m theory predict"
    parser = CliParser(prog=prog, description="Per-layer predictions (columns layer,metric,law,kind,value) "
                       "as CSV, or Parquet when --out ends in .parquet.")
    add_setting_arguments(parser)
    parser.add_argument("--layers", type=layer_selection_type, default=None, metavar="SPEC",
                        help=f"the layers to write: {LAYERS_ALLOWED} (default: all up to {ALL_LAYERS_UP_TO:,} "
                        f"blocks, log:{DEFAULT_LOG_LAYERS} above)")
    parser.add_argument("--out", required=True, metavar="FILE.csv|FILE.parquet",
                        help="output file: Parquet if it ends in .parquet, else CSV")
    add_width_law_argument(parser)
    add_progress_argument(parser)
    args = parser.parse_args(argv)
    try:
        setting = setting_from_args(args)
    except (SettingError, ValueError) as error:
        fail(prog, str(error))
    check_width_law(prog, args.width_law, setting)
    selection = args.layers or (LayerSelection("all") if setting.depth <= ALL_LAYERS_UP_TO
                                else LayerSelection("log", DEFAULT_LOG_LAYERS))
    try:
        layers = selection.layers(setting.depth)  # (M,)
    except ValueError as error:
        fail(prog, f"argument --layers: {error}")  # argparse's words for the other --layers errors
    out = output_path(prog, args.out, directory=False)
    fmt = table_format(out)
    if args.layers is None and len(layers) < setting.depth + 1:
        print(f"{prog}: note: depth {setting.depth:,} > {ALL_LAYERS_UP_TO:,}: writing {len(layers):,} of "
              f"{setting.depth + 1:,} layers (--layers {selection}); --layers all writes every layer",
              file=sys.stderr)
    with tqdm(total=2, desc="predict", unit="stage", disable=not progress_enabled(args.progress),
              file=sys.stderr) as bar:  # the recursion is vectorised: two stages, each seconds at depth 10^6
        bar.set_postfix_str(f"recursion over {setting.depth} blocks")
        table, first_bad = predict_with_first_non_finite(setting, args.width_law, layers)  # rows at the layers only
        blow_up = first_non_finite(first_bad)  # the first layer computed, kept or not
        bar.update()
        bar.set_postfix_str(f"writing {len(table)} rows")
        tqdm.write(f"{prog}: writing {len(table):,} rows (~{format_bytes(estimated_size(table, fmt))}) to {out}",
                   file=sys.stderr)
        atomic_write(out, lambda temp: write_table(table, temp, fmt))
        bar.update()
    metrics = ",".join(sorted(table.metric.unique()))
    print(f"wrote {len(table)} rows ({len(layers)} of {setting.depth + 1} layers; {metrics}) to {out}")
    if blow_up:
        print(f"{prog}: warning: {blow_up}", file=sys.stderr)
    return 0


def first_non_finite(table) -> str:
    """Where the predicted curves leave float64 (inf/nan), one line per table; "" when all are finite.

    >>> import numpy as np, pandas as pd
    >>> first_non_finite(pd.DataFrame({"layer": [0, 1, 2], "metric": "var", "law": "x", "value": [1, 2, np.inf]}))
    'not finite from layer 2 (var/x at 2); those values are inf/nan'
    """
    import numpy as np

    bad = table[~np.isfinite(table["value"].to_numpy(dtype=float))]
    if bad.empty:
        return ""
    starts = bad.groupby(["metric", "law"], observed=True)["layer"].min().sort_values()  # (curves,)
    curves = ", ".join(f"{metric}/{law} at {layer}" for (metric, law), layer in starts.items())
    return f"not finite from layer {int(starts.iloc[0])} ({curves}); those values are inf/nan"


def _run_predict(argv: Sequence[str]) -> int:
    return int(predict_main(list(argv)) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "predict":
        return _run_predict(argv[1:])
    from theory.symbolic.lemmas import LEMMAS

    args = build_parser().parse_args(argv)
    if args.command == "list":
        _emit(format_list(args.kind))
        return 0
    if args.id not in LEMMAS:
        fail(f"{PROG} show", f"unknown lemma id {args.id!r}; allowed ids: {', '.join(LEMMAS)}")
    unicode = not args.ascii and _stdout_takes_unicode()
    _emit(format_show(LEMMAS[args.id], unicode=unicode, run_check=not args.no_check))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
