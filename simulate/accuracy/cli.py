"""``python -m simulate verify --map``: the accuracy map of every law at init, written to ``DIR``.

``DIR/map.csv`` (one row per cell x law x metric, :data:`simulate.accuracy.measure.MAP_COLUMNS`),
``DIR/map.md`` (the summary: how many curves are within noise, within 1 %, 5 %, worse; the curves
labelled exact that the map contradicts, :func:`exact_contradicted`) and ``DIR/map.png``
(:func:`simulate.accuracy.figure.plot_map`). Bad input: one line naming the flag and what is allowed,
exit 2, nothing written. Ctrl-C/SIGTERM: nothing written, exit 130/143; the finished cells are in the
simulator cache and the same command goes on from there. docs/accuracy.md says what the map means.
"""

from __future__ import annotations

import sys
import time

import pandas as pd
from scipy import stats
from tqdm.auto import tqdm

from simulate.accuracy.figure import plot_map
from simulate.accuracy.grid import DESIGNS, MAP_BLOCKS, MapGrid
from simulate.accuracy.measure import ACCURACY_CLASSES, is_paper, measure_cell
from simulate.compare import Z_LIMIT
from simulate.runtime.interrupts import deferred_signals, exit_code, handle_signals, interrupted_line, signal_of
from theory.cli import CliParser, add_progress_argument, fail, markdown_table, output_path, progress_enabled
from theory.constraints import ConstraintError
from theory.files import write_text_atomic

__all__ = ["QUICK_GRID", "run_map", "summary", "kind_z_limit", "exact_contradicted", "resolution_line", "to_markdown",
           "main"]

PROG = "python -m simulate verify --map"
# A map in seconds (tests, a first look): three schemes, three blocks, two widths, depth 16.
QUICK_GRID = dict(schemes=("pre", "lns", "post"), blocks=("mlp", "transformer", "llama"), widths=(16, 32),
                  tokens=(8,), causal=(True,), depth=16, pilot_samples=64, max_sample_tokens=4096, tangent_sample_tokens=512)


def run_map(grid: MapGrid, progress: bool = False) -> pd.DataFrame:
    """Every cell of ``grid`` measured (:func:`simulate.accuracy.measure.measure_cell`), one table."""
    cells = grid.cells()
    tables = []
    for done, setting in enumerate(tqdm(cells, desc="accuracy map", unit="cell", disable=not progress)):
        try:
            tables.append(measure_cell(setting, grid))
        except KeyboardInterrupt as stop:
            stop.finished, stop.total = done, len(cells)
            raise
    return pd.concat(tables, ignore_index=True)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Curves per accuracy class, the laws derived here apart from the papers' statements.

    >>> from theory.verdicts import AccuracyClass
    >>> t = pd.DataFrame({"law": ["preln-init", "p1-lemma-3.2"],
    ...                   "accuracy": [AccuracyClass.WITHIN_NOISE, AccuracyClass.WORSE]})
    >>> [(str(r.accuracy), r.derived, r.paper) for r in summary(t).itertuples() if r.derived + r.paper]
    [('within noise', 1, 0), ('worse', 0, 1)]
    """
    paper = table["law"].astype(str).map(is_paper)
    counts = {"derived": table.loc[~paper, "accuracy"].value_counts(), "paper": table.loc[paper, "accuracy"].value_counts()}
    return pd.DataFrame({"accuracy": list(ACCURACY_CLASSES),
                         **{name: [int(c.get(word, 0)) for word in ACCURACY_CLASSES] for name, c in counts.items()}})


def kind_z_limit(table: pd.DataFrame, level: float = 0.05) -> float:
    """The family-wise limit on ``|z|`` for the curves of kind ``exact`` of a map: Bonferroni over every layer
    they compare, at ``level`` (a map compares some 30,000 such layers; ``|z| > 4`` then happens about twice by
    chance, docs/accuracy.md#kinds).

    >>> round(kind_z_limit(pd.DataFrame({"kind": ["exact", "approx"], "layers": [64, 64]})), 2)
    3.36
    """
    comparisons = int(table.loc[table["kind"] == "exact", "layers"].sum())
    return float(stats.norm.isf(level / 2 / max(comparisons, 1)))


def exact_contradicted(table: pd.DataFrame) -> pd.DataFrame:
    """Curves whose kind is ``exact`` at every compared layer and whose worst ``|z|`` is beyond
    :func:`kind_z_limit`: a kind the map contradicts."""
    exact = table[table["kind"] == "exact"]
    return exact[exact["worst_z"].abs() > kind_z_limit(table)].sort_values("worst_rel_error", ascending=False)


def resolution_line(table: pd.DataFrame) -> str:
    """The smallest relative error the map resolves: ``Z_LIMIT`` relative sem of ``var`` at the last layer, over its
    cells (median and range).

    >>> rows = pd.DataFrame({"scheme": "pre", "block": "mlp", "width": [16, 16, 64, 64], "tokens": 8, "causal": True,
    ...                      "metric": ["var", "var", "var", "angular"], "rel_sem": [0.002, 0.002, 0.004, 0.1]})
    >>> print(resolution_line(rows))
    smallest error resolved (4 sem of var at the last layer): median 1.20 %, from 0.80 % to 1.60 % over 2 cells
    """
    var = table[table["metric"] == "var"].drop_duplicates(["scheme", "block", "width", "tokens", "causal"])
    limits = Z_LIMIT * var["rel_sem"].dropna()  # one per cell: every law's var curve shares the cell's measurement
    if limits.empty:
        return "smallest error resolved: no var curve measured"
    return (f"smallest error resolved ({Z_LIMIT:g} sem of var at the last layer): median {limits.median():.2%}, "
            f"from {limits.min():.2%} to {limits.max():.2%} over {len(limits)} cells").replace("%", " %")


def to_markdown(table: pd.DataFrame, grid: MapGrid, seconds: float) -> str:
    """``map.md``: the grid, the summary, the contradicted exact curves, the worst curve of each law."""
    contradicted, limit = exact_contradicted(table), kind_z_limit(table)
    exact = table[table["kind"] == "exact"]
    beyond_four = exact[exact["worst_z"].abs() > 4]
    chance = 2 * stats.norm.sf(4) * exact["layers"].sum()
    finite = table[table["blow_up_layer"] < 0]  # a blown-up cell's error says nothing of the law
    worst = finite.sort_values("worst_rel_error", ascending=False).groupby(["law", "metric"], observed=True).head(1)
    cells = table[["scheme", "block", "width", "tokens", "causal"]].drop_duplicates()
    return (f"# Accuracy map of the laws at init\n\n{len(cells)} cells, {len(table)} curves, depth {grid.depth}, "
            f"design {grid.design}: schemes {', '.join(grid.schemes)}; blocks {', '.join(grid.blocks)}; widths "
            f"{', '.join(map(str, grid.widths))}; T {', '.join(map(str, grid.tokens))}; causal "
            f"{', '.join(map(str, grid.causal))}; width law {grid.width_law} (per cell: the width_law column). "
            f"Samples per cell sized for a relative sem of "
            f"{grid.target_sem:.2%} of var at the last layer (pilot {grid.pilot_samples}, cap "
            f"{grid.max_sample_tokens} samples x T; jac_dev and e2e_gain at {grid.tangent_sample_tokens} samples x T). "
            f"This run: {seconds:.0f} s (cells read from the simulator cache cost nothing). Classes: "
            "docs/accuracy.md#classes.\n\n"
            f"## Curves per class\n\n{resolution_line(table)}; a curve within noise whose resolution is coarser than "
            "the error the shipped map measured for it is unresolved.\n\n"
            f"{markdown_table(summary(table))}\n\n"
            f"## Curves of kind exact that the map contradicts ({len(contradicted)})\n\n"
            f"Worst |z| beyond {limit:.2f}, the family-wise 5 % limit over the {int(exact['layers'].sum())} layers of "
            f"the {len(exact)} exact curves (Bonferroni). {len(beyond_four)} exact curves have a layer with |z| > 4; "
            f"about {chance:.1f} are expected by chance.\n\n"
            f"{markdown_table(contradicted) if len(contradicted) else 'None.'}\n\n"
            f"## The worst cell of each curve (cells without a numerical blow-up)\n\n{markdown_table(worst)}\n")


def _grid_from_args(args) -> MapGrid:
    values = dict(QUICK_GRID) if args.quick else {}
    for name in ("schemes", "blocks", "widths", "tokens", "causal", "design", "depth", "target_sem", "pilot_samples",
                 "max_sample_tokens", "tangent_sample_tokens", "seed", "width_law"):
        value = getattr(args, name)
        if value is not None:
            values[name] = tuple(value) if isinstance(value, list) else value
    return MapGrid(**values)


def _bool_word(text: str) -> bool | str:
    return {"true": True, "false": False}.get(text.lower(), text)


def main(argv=None) -> int:
    """``python -m simulate verify --map [--quick] [--out DIR] [grid flags]``: 0 when written, 2 on bad input."""
    parser = CliParser(prog=PROG, description="Measure every law curve of theory.predict against the Monte-Carlo "
                                              "over a grid of settings at init (docs/accuracy.md).")
    parser.add_argument("--out", default="out/accuracy-map", help="directory for map.csv, map.md, map.png")
    parser.add_argument("--quick", action="store_true", help="a small grid in seconds (flags below override it)")
    parser.add_argument("--schemes", nargs="+", help="norm schemes (default: all of theory.setting.SCHEMES)")
    parser.add_argument("--blocks", nargs="+", help=f"blocks, of {', '.join(MAP_BLOCKS)} (default: all)")
    parser.add_argument("--widths", nargs="+", type=int, help="widths d (default 16 64 256)")
    parser.add_argument("--tokens", nargs="+", type=int, help="sequence lengths T (default 8 16 64)")
    parser.add_argument("--causal", nargs="+", type=_bool_word, help="true and/or false (default: true false)")
    parser.add_argument("--design", help=f"{' or '.join(DESIGNS)} (default star: one factor at a time)")
    parser.add_argument("--depth", type=int, help="blocks L (default 64)")
    parser.add_argument("--target-sem", type=float, help="relative sem of var at the last layer (default 0.002)")
    parser.add_argument("--pilot-samples", type=int, help="samples of the pilot run (default 256)")
    parser.add_argument("--max-sample-tokens", type=int, help="cap on a cell's samples x T (default 32768)")
    parser.add_argument("--tangent-sample-tokens", type=int,
                        help="samples x T for jac_dev and e2e_gain (default 2048)")
    parser.add_argument("--seed", type=int, help="Monte-Carlo seed (default 0)")
    parser.add_argument("--width-law", help="the law of the token covariance theory.predict uses: mean-field, "
                                            "finite-width or auto (default auto)")
    add_progress_argument(parser)
    args = parser.parse_args(argv)
    try:
        grid = _grid_from_args(args)
    except ConstraintError as error:
        fail(PROG, f"--{error.field.replace('_', '-')}: {error}")
    out = output_path(PROG, args.out, directory=True)
    import matplotlib

    matplotlib.use("Agg")  # the figure goes to a file
    started = time.perf_counter()
    with handle_signals():
        try:
            table = run_map(grid, progress=progress_enabled(args.progress))
        except KeyboardInterrupt as stop:
            from simulate.cache import cache_dir

            where = f"after {stop.finished} of {stop.total} cells" if hasattr(stop, "total") else "during the map"
            print(interrupted_line(PROG, signal_of(stop), where, f"nothing written to {out}",
                                   f"the finished cells are in the simulator cache ({cache_dir()}): the same command "
                                   "goes on from there"), file=sys.stderr)
            return exit_code(stop)
    seconds = time.perf_counter() - started
    print(summary(table).to_string(index=False))
    print(resolution_line(table))
    with deferred_signals() as pending:  # the three files are written whole, together
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "map.csv", table.to_csv(index=False))
        write_text_atomic(out / "map.md", to_markdown(table, grid, seconds))
        plot_map(table, out / "map.png")
    print(f"{len(table)} curves in {seconds:.1f} s -> {out / 'map.csv'}, {out / 'map.md'}, {out / 'map.png'}")
    if pending:
        print(interrupted_line(PROG, pending[0], "while the map was written", f"it is complete in {out}",
                               "nothing to resume"), file=sys.stderr)
        return exit_code(pending[0])
    return 0
