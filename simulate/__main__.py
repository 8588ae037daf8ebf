"""``python -m simulate run|verify|bench|sweep|train|scores|study``.

``run [SETTING FLAGS] --samples S --seed N --device auto|cpu|cuda --dtype float32|float64
--metrics LIST --weights dense|implicit|auto --precision highest|tf32|bf16 --prefetch auto|on|off
--out DIR [--plot]`` writes
``DIR/config.json`` and ``DIR/layers.csv`` (and ``DIR/metrics.png`` with ``--plot``) and
prints a one-line summary. Bad input: one line on stderr, exit 2, nothing written; so is a
run whose estimated peak memory exceeds what the device has (:mod:`simulate.engine.memory_model`).
Numerical blow-up: what was measured is written, one line names the layer, exit 1.
Ctrl-C or SIGTERM: the complete layers measured so far are written (``config.json`` has
``interrupted_after_layer``), one line says so, exit 130 or 143 (:mod:`simulate.runtime.interrupts`).
``--progress/--no-progress``: a bar over blocks (default: when stderr is a terminal).
The other commands are handed to the ``main`` of their module (:data:`_DELEGATED`).
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

from simulate.runtime.process import configure_process
from theory.cli import CliParser, add_progress_argument, fail, int_at_least, output_path, progress_enabled
from theory.files import atomic_write
from theory.setting import SettingError, add_setting_arguments, setting_from_args

PROG = "python -m simulate"
_DELEGATED = {"verify": "simulate.verify", "bench": "simulate.bench.cli", "sweep": "simulate.sweep.cli",
              "train": "simulate.training.cli", "scores": "simulate.scores.cli", "study": "simulate.study.cli"}
_COMMANDS = ", ".join(["run", *_DELEGATED])


_PREFETCH = {"auto": None, "on": True, "off": False}


def build_parser() -> CliParser:
    """The ``run`` parser (``verify``/``bench`` parse their own flags)."""
    parser = CliParser(prog=f"{PROG} run", description="Monte-Carlo per-layer metrics of a random-weight stack.")
    add_setting_arguments(parser)
    mc = parser.add_argument_group("Monte Carlo")
    mc.add_argument("--samples", type=int_at_least(1), default=8, help="independent stacks S (default 8)")
    mc.add_argument("--seed", type=int_at_least(0), default=0, help="seed (default 0)")
    mc.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    mc.add_argument("--dtype", default="float32", choices=("float32", "float64"), help="default float32")
    mc.add_argument("--metrics", default="var", help="comma-separated names or 'all' (default var)")
    mc.add_argument("--weights", default="auto", choices=("dense", "implicit", "auto"), help="default auto")
    mc.add_argument("--precision", default="highest", choices=("highest", "tf32", "bf16"),
                    help="matmul precision: highest (fp32), tf32 (CUDA), bf16 weight products (default highest)")
    mc.add_argument("--prefetch", default="auto", choices=("auto", "on", "off"),
                    help="draw the next blocks' random numbers on a background thread (auto: on for cpu)")
    mc.add_argument("--out", required=True, help="output directory")
    mc.add_argument("--plot", action="store_true", help="also write DIR/metrics.png")
    add_progress_argument(mc)
    return parser


def plot_table(table, path: Path, title: str, blow_up_layer: int | None = None) -> None:
    """One panel per metric: mean and 95% CI over layers; log y where the values span decades.

    Beyond 1e200 (a run near its blow-up) matplotlib's log axis overflows, so such a
    panel shows log10 of the mean instead; a blow-up is marked by a red line at its block.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(dict.fromkeys(table.metric))
    fig, axes = plt.subplots(len(names), 1, figsize=(6, 0.6 + 2.2 * len(names)), squeeze=False, sharex=True)
    for axis, name in zip(axes[:, 0], names):
        rows = table[table.metric == name]
        mean = rows["mean"].to_numpy()
        positive = len(rows) > 1 and bool((mean > 0).all())
        if positive and mean.max() > 1e200:
            axis.plot(rows.layer, np.log10(mean), lw=1.2, label="mean")
            name = f"log10 {name}"
        else:
            axis.plot(rows.layer, mean, lw=1.2, label="mean")
            axis.fill_between(rows.layer, rows.ci_low, rows.ci_high, alpha=0.3, label="95% CI")
            if positive and mean.max() / mean.min() > 100:
                axis.set_yscale("log")
        if blow_up_layer is not None:
            axis.axvline(blow_up_layer, color="red", lw=1, label=f"blow-up at block {blow_up_layer}")
        axis.set_ylabel(name)
        axis.legend(fontsize=7)
    axes[-1, 0].set_xlabel("layer (block index; 0 = input)")
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    atomic_write(path, lambda temp: fig.savefig(temp, format="png", dpi=110))
    plt.close(fig)


def _parse_run(prog: str, argv: list[str]):
    """(args, setting, metrics, device) of ``run``, or exit 2 with one line."""
    from simulate.engine import parse_metrics
    from simulate.engine import check_precision, resolve_device, resolve_dtype

    args = build_parser().parse_args(argv)
    args.argv = list(argv)
    try:
        setting = setting_from_args(args)
        metrics = parse_metrics(args.metrics, setting.block)
        device = resolve_device(args.device)
        check_precision(args.precision, device, resolve_dtype(args.dtype))
    except (SettingError, ValueError) as error:
        fail(prog, str(error))
    return args, setting, metrics, device


def _measure(setting, args, metrics, device):
    """(table, what stopped it: None, a NumericalBlowUp or a SimulationInterrupted, seconds)."""
    from simulate.engine import NumericalBlowUp, SimulationInterrupted, simulate

    start = time.perf_counter()
    try:
        table = simulate(setting, samples=args.samples, seed=args.seed, metrics=metrics, device=device,
                         dtype=args.dtype, weights=args.weights, progress=progress_enabled(args.progress),
                         matmul_precision=args.precision, prefetch=_PREFETCH[args.prefetch])
        stop = None
    except (NumericalBlowUp, SimulationInterrupted) as error:
        table, stop = error.table, error
    return table, stop, time.perf_counter() - start


def _describe(setting, args, device) -> str:
    return (f"{setting.scheme}/{setting.block} L={setting.depth} d={setting.width} T={setting.tokens} "
            f"S={args.samples} on {device.type}")


def _run_summary(setting, args, table, device, seconds: float, out: Path) -> str:
    summary = _describe(setting, args, device)
    final = table[(table.metric == "var") & (table.layer == setting.depth)]
    if len(final):
        sem = final["sem"].iloc[0]
        final_text = f"final var {final['mean'].iloc[0]:.5g} +- " + (f"{sem:.2g}, " if sem == sem else "n/a (one sample), ")
    else:
        final_text = ""
    rate = setting.depth * args.samples / max(seconds, 1e-9)
    return f"{summary}: {final_text}{seconds:.2f} s, {rate:.0f} layer-samples/s -> {out}"


def run(argv: list[str]) -> int:
    """The ``run`` command; returns the exit code (0, 1 blow-up, 2 bad input, 130/143 interrupted)."""
    from simulate.runtime.interrupts import deferred_signals, exit_code, handle_signals, interrupted_line, signal_of

    prog = f"{PROG} run"
    with handle_signals():
        try:
            args, setting, metrics, device = _parse_run(prog, argv)
            out = output_path(prog, args.out, directory=True)
            _check_run_memory(prog, setting, args, metrics, device)
            table, stop, seconds = _measure(setting, args, metrics, device)
        except KeyboardInterrupt as error:  # before the first block: nothing measured
            print(interrupted_line(prog, signal_of(error), "before the first block", "nothing written",
                                   "run the command again"), file=sys.stderr)
            return exit_code(error)
    with deferred_signals() as pending:  # what was measured is written whole, whatever arrives now
        lines = _save_run(prog, setting, args, metrics, device, table, stop, seconds, out)
    for line, to_stderr in lines:
        print(line, file=sys.stderr if to_stderr else sys.stdout)
    if stop is not None:
        return exit_code(stop) if isinstance(stop, KeyboardInterrupt) else 1
    if pending:
        print(interrupted_line(prog, pending[0], "while the results were written", f"they are complete in {out}",
                               "nothing to resume"), file=sys.stderr)
        return exit_code(pending[0])
    return 0


def _check_run_memory(prog: str, setting, args, metrics, device) -> None:
    """Exit 2 with one line when the run would not fit in the memory of ``device`` (the memory model)."""
    from simulate.engine import check_run_fits

    check_run_fits(setting, args.samples, prog, metrics=metrics, dtype=args.dtype, weights=args.weights,
                   device=device.type, prefetch=_PREFETCH[args.prefetch], matmul_precision=args.precision)


def _save_run(prog: str, setting, args, metrics, device, table, stop, seconds: float, out: Path) -> list:
    """Write config.json, layers.csv (and the plot); the lines to print as (text, to stderr)."""
    from simulate.cache import engine_versions, save_run
    from simulate.runtime.interrupts import interrupted_line, signal_of
    from simulate.engine import NumericalBlowUp

    blow_up = stop if isinstance(stop, NumericalBlowUp) else None
    if stop is not None and blow_up is None and table.empty:
        return [(interrupted_line(prog, signal_of(stop), "before layer 0 was measured", "nothing written",
                                  "run the command again"), True)]
    versions = engine_versions()
    config = {"setting": setting.to_dict(), "code": versions["code"], "versions": versions,
              "command": ["run", *args.argv],
              "mc": {"samples": args.samples, "seed": args.seed, "metrics": list(metrics), "device": device.type,
                     "dtype": args.dtype, "weights": args.weights, "precision": args.precision,
                     "prefetch": args.prefetch},
              "seconds": round(seconds, 4), "blow_up_layer": None if blow_up is None else blow_up.layer,
              "interrupted_after_layer": None if stop is None or blow_up is not None else stop.layer}
    save_run(out, config, table)
    (out / "metrics.png").unlink(missing_ok=True)  # never leave the plot of an earlier run beside this one
    if args.plot and len(table):
        plot_table(table, out / "metrics.png", _describe(setting, args, device),
                   None if blow_up is None else blow_up.layer)
    if blow_up is not None:
        return [(f"{prog}: {blow_up} -> {out}", True)]
    if stop is not None:
        return [(interrupted_line(prog, signal_of(stop), f"after block {stop.layer} of {setting.depth}",
                                  f"layers 0..{stop.layer} kept in {out} (config.json: interrupted_after_layer)",
                                  "a run restarts from block 1: run the same command again"), True)]
    return [(_run_summary(setting, args, table, device, seconds, out), False)]


def main(argv: list[str] | None = None) -> int:
    """Dispatch a command (``run`` here, the others to their modules); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        fail(PROG, f"a command is needed: {_COMMANDS} (see --help)")
    if argv[0] in ("-h", "--help"):
        print(f"usage: {PROG} {{{_COMMANDS.replace(', ', ',')}}} ...\n\n"
              "Monte-Carlo simulation of random-weight residual stacks.\n\n"
              "commands:\n"
              "  run     per-layer metrics of one setting -> DIR/config.json, DIR/layers.csv\n"
              "  verify  theory against simulation, one verdict per lemma -> DIR/verify.csv, verify.md\n"
              "  bench   this simulator against a naive one -> DIR/bench.csv\n"
              "  sweep   a grid of settings x seeds x task, resumable -> DIR/points/*.parquet, DIR/summary.csv\n"
              "  train   a tiny byte-level LM of a setting, trained and measured per layer -> DIR/train_layers.csv\n"
              "  scores  layer-effectiveness scores of a trained run -> DIR/scores/scores.csv, pairs.csv\n"
              "  study   trained models along depth, width, steps, lr: trend verdicts -> DIR/NAME/study.md\n\n"
              f"'{PROG} COMMAND --help' lists each command's flags.")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "sweep" and "--bench" in rest:  # the engines' bench lives with the others
        rest = ["--sweep", *(word for word in rest if word != "--bench")]
        command = "bench"
    if command == "run":
        return run(rest)
    if command in _DELEGATED:
        return int(importlib.import_module(_DELEGATED[command]).main(rest) or 0)
    fail(PROG, f"unknown command {command!r}: choose from {_COMMANDS}")


if __name__ == "__main__":
    try:
        configure_process()
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C before a command took over the signals (e.g. while torch loads)
        print(f"{PROG}: interrupted by SIGINT before any work; nothing written", file=sys.stderr)
        sys.exit(130)
