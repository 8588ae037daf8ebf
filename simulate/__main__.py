"""``python -m simulate run|verify|bench``.

``run [SETTING FLAGS] --samples S --seed N --device auto|cpu|cuda --dtype float32|float64
--metrics LIST --weights dense|implicit|auto --precision highest|tf32|bf16 --prefetch auto|on|off
--out DIR [--plot]`` writes
``DIR/config.json`` and ``DIR/layers.csv`` (and ``DIR/metrics.png`` with ``--plot``) and
prints a one-line summary. Bad input: one line on stderr, exit 2, nothing written.
Numerical blow-up: what was measured is written, one line names the layer, exit 1.
``verify`` and ``bench`` are handed to ``simulate.verify.main`` and ``simulate.bench.main``.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

from theory.cli import CliParser, atomic_write, fail, output_path
from theory.setting import SettingError, add_setting_arguments, setting_from_args

PROG = "python -m simulate"
_DELEGATED = {"verify": "simulate.verify", "bench": "simulate.bench"}


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


_positive_int.__name__ = "positive integer"
_nonnegative_int.__name__ = "non-negative integer"


def build_parser() -> CliParser:
    """The ``run`` parser (``verify``/``bench`` parse their own flags)."""
    parser = CliParser(prog=f"{PROG} run", description="Monte-Carlo per-layer metrics of a random-weight stack.")
    add_setting_arguments(parser)
    mc = parser.add_argument_group("Monte Carlo")
    mc.add_argument("--samples", type=_positive_int, default=8, help="independent stacks S (default 8)")
    mc.add_argument("--seed", type=_nonnegative_int, default=0, help="seed (default 0)")
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


def run(argv: list[str]) -> int:
    """The ``run`` command; returns the exit code."""
    from simulate.metrics import parse_metrics
    from simulate.results import code_version, save_run
    from simulate.stack import NumericalBlowUp, check_precision, resolve_device, resolve_dtype, simulate

    prog = f"{PROG} run"
    args = build_parser().parse_args(argv)
    try:
        setting = setting_from_args(args)
        metrics = parse_metrics(args.metrics)
        device = resolve_device(args.device)
        check_precision(args.precision, device, resolve_dtype(args.dtype))
    except (SettingError, ValueError) as error:
        fail(prog, str(error))
    out = output_path(prog, args.out, directory=True)
    config = {"setting": setting.to_dict(), "code": code_version(), "command": ["run", *argv],
              "mc": {"samples": args.samples, "seed": args.seed, "metrics": list(metrics), "device": device.type,
                     "dtype": args.dtype, "weights": args.weights, "precision": args.precision,
                     "prefetch": args.prefetch}}
    start = time.perf_counter()
    try:
        table = simulate(setting, samples=args.samples, seed=args.seed, metrics=metrics, device=device,
                         dtype=args.dtype, weights=args.weights, progress=True, matmul_precision=args.precision,
                         prefetch={"auto": None, "on": True, "off": False}[args.prefetch])
        blow_up = None
    except NumericalBlowUp as error:
        table, blow_up = error.table, error
    seconds = time.perf_counter() - start
    config.update(seconds=round(seconds, 4), blow_up_layer=None if blow_up is None else blow_up.layer)
    save_run(out, config, table)
    (out / "metrics.png").unlink(missing_ok=True)  # never leave the plot of an earlier run beside this one
    summary = (f"{setting.scheme}/{setting.block} L={setting.depth} d={setting.width} T={setting.tokens} "
               f"S={args.samples} on {device.type}")
    if args.plot and len(table):
        plot_table(table, out / "metrics.png", summary, None if blow_up is None else blow_up.layer)
    if blow_up is not None:
        print(f"{prog}: {blow_up} -> {out}", file=sys.stderr)
        return 1
    final = table[(table.metric == "var") & (table.layer == setting.depth)]
    if len(final):
        sem = final["sem"].iloc[0]
        final_text = f"final var {final['mean'].iloc[0]:.5g} +- " + (f"{sem:.2g}, " if sem == sem else "n/a (one sample), ")
    else:
        final_text = ""
    rate = setting.depth * args.samples / max(seconds, 1e-9)
    print(f"{summary}: {final_text}{seconds:.2f} s, {rate:.0f} layer-samples/s -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``run``, ``verify`` and ``bench``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        fail(PROG, "a command is needed: run, verify or bench (see --help)")
    if argv[0] in ("-h", "--help"):
        print(f"usage: {PROG} {{run,verify,bench}} ...\n\n"
              "Monte-Carlo simulation of random-weight residual stacks.\n\n"
              "commands:\n"
              "  run     per-layer metrics of one setting -> DIR/config.json, DIR/layers.csv\n"
              "  verify  theory against simulation, one verdict per lemma -> DIR/verify.csv, verify.md\n"
              "  bench   this simulator against a naive one -> DIR/bench.csv\n\n"
              f"'{PROG} COMMAND --help' lists each command's flags.")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "run":
        return run(rest)
    if command in _DELEGATED:
        return int(importlib.import_module(_DELEGATED[command]).main(rest) or 0)
    fail(PROG, f"unknown command {command!r}: choose from run, verify, bench")


if __name__ == "__main__":
    sys.exit(main())
