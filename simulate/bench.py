"""``python -m simulate bench``: this simulator against a naive one, and what each technique buys.

Each row runs one setting through :func:`simulate.simulate` ("ours") and, where the
row says so, through :func:`simulate.naive.naive_simulate` (an nn.Module stack run one
sample after another), checks that both give the same statistics within Monte-Carlo
error (z-score of the final-layer ``var`` and ``angular``), and records

=====================  =============================================================
setting                row name: preset, width, tokens, depth, samples, variant
device                 cpu or cuda
ours_s, naive_s        wall-clock seconds of one run (device synchronised)
speedup                naive_s / ours_s
layer_samples_per_s    samples * depth / ours_s
tflops                 dense-equivalent model matmul flops / ours_s, in TFLOP/s (the
                       implicit product skips work, so this can beat the peak)
peak_fraction          tflops / a square-matmul peak measured in the same run
peak_mem_mb            GPU: torch.cuda.max_memory_allocated; CPU: growth of the
                       resident set during the run (sampled every 2 ms)
=====================  =============================================================

in ``DIR/bench.csv`` (written atomically) and the statistical checks in
``DIR/bench_checks.csv``; the printed table adds process CPU seconds (``ours_cpu_s``,
``naive_cpu_s``, ``cpu_speedup``: on a shared machine closer to the time on an idle core
than wall-clock) and each row's time over the base row's (``vs_base``, ``vs_base_cpu``).
``--quick`` shrinks everything to seconds (the CI smoke test). Ablation rows (on by
default, ``--no-ablate`` skips them) switch one technique off at a time, same setting:
batched samples (``looped-samples``: one ``simulate`` call per sample), the implicit
Gaussian product (``dense``; ``implicit`` = always factored, vs the cost model's
``auto``), one factorisation for the weights that share rows (``unshared-factors``),
drawing the next blocks' numbers on a background thread (``no-prefetch``), the JVP
probes of ``jac_dev`` (their cost over a var-only run; a full Jacobian would take T*d
JVPs per block); on CUDA also ``matmul_precision`` tf32 and bf16 against fp32.
Two rows time the same stack with independent and with correlated input tokens
(``input-std-1`` and ``input-std-0.02``, P1's embedding std, where the tokens collapse
towards one direction and the Gram of the rows meeting a weight is numerically singular
in float32; :func:`simulate.implicit.refactor_rows`): the printed ``vs_pair`` is the
correlated row's time over the independent one's, and a line gives both throughputs.
``--scaling`` also sweeps depth, width, tokens and samples (:mod:`simulate.scaling`)
into ``DIR/scaling.csv``. Each of our runs is timed as the best of ``--repeat`` (default
3, 1 with ``--quick``); the naive one runs once. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import resource
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd
import torch
from tqdm.auto import tqdm

from simulate.cache import write_atomic
from simulate.tables import confidence_interval
from theory.cli import CliParser, add_progress_argument, fail, output_path, progress_enabled
from theory.setting import Setting, SettingError

__all__ = ["COLUMNS", "EXTRA_COLUMNS", "CHECK_COLUMNS", "PAIR_METRICS", "PAIR_INPUT_STDS", "Case", "cases",
           "run_cases", "pair_lines", "main"]

PROG = "python -m simulate bench"
COLUMNS = ["setting", "device", "ours_s", "naive_s", "speedup", "layer_samples_per_s", "tflops",
           "peak_fraction", "peak_mem_mb"]
# Printed, not written: process CPU seconds (all threads; on a shared machine closer to the
# time on an idle core than wall-clock), and why a row was skipped.
EXTRA_COLUMNS = ["ours_cpu_s", "naive_cpu_s", "cpu_speedup", "vs_base", "vs_base_cpu", "vs_pair", "note"]
CHECK_COLUMNS = ["setting", "metric", "layer", "ours_mean", "ours_sem", "reference_mean", "reference_sem", "z"]
CHECK_METRICS = ("var", "angular")
# The correlated-input pair: the metrics of the issue that found the slowdown (token_cos shows the collapse).
PAIR_METRICS = ("var", "jac_dev", "angular", "e2e_gain", "token_cos")
PAIR_INPUT_STDS = (1.0, 0.02)  # independent tokens; P1's embedding std (tokens collapse with depth)
Z_FAIL = 5.0  # |z| above this on a check: exit code 1 (after the files are written)


@dataclass
class Case:
    """One bench row: a setting, how ours runs it, and whether the naive simulator runs too.

    ``reference`` names an earlier row whose statistics this row's are checked against
    (besides the naive run). ``tf32`` sets TF32 matmuls for the row (CUDA), None = leave.
    ``pair`` names an earlier row of the same size whose time this row's is compared with
    (``vs_pair``; other statistics, so no check).
    """

    name: str
    setting: Setting
    samples: int
    kwargs: dict = field(default_factory=dict)
    naive: bool = False
    reference: str | None = None
    looped: bool = False  # one simulate call per sample (the batched-samples ablation)
    tf32: bool | None = None
    metrics: tuple[str, ...] = CHECK_METRICS
    pair: str | None = None


def _label(setting: Setting, samples: int, variant: str = "") -> str:
    name = f"llama-w{setting.width}-T{setting.tokens}-L{setting.depth}-S{samples}"
    return f"{name}:{variant}" if variant else name


def cases(device: str, quick: bool, ablate: bool) -> list[Case]:
    """The bench rows for ``device`` ('cpu'/'cuda').

    >>> [c.name for c in cases("cpu", quick=True, ablate=False)]
    ['llama-w64-T16-L4-S4', 'llama-w128-T16-L8-S16:input-std-1', 'llama-w128-T16-L8-S16:input-std-0.02']
    >>> names = [c.name for c in cases("cuda", quick=False, ablate=True)]
    >>> len(names) == len(set(names)), names[0]
    (True, 'llama-w4096-T1024-L10000-S1:tf32')
    """
    if quick:
        small, samples = Setting.preset("llama", width=64, heads=4, tokens=16, depth=4), 4
    else:
        small, samples = Setting.preset("llama", width=512, heads=4, tokens=64, depth=96), 8
    base = Case(_label(small, samples), small, samples, naive=True)
    rows = [base]
    if device == "cuda" and not quick:
        rows = _gpu_cases(base)
    elif device == "cuda":
        rows.append(Case(_label(small, samples, "tf32"), small, samples, tf32=True, reference=base.name))
        rows.append(Case(_label(small, samples, "bf16"), small, samples, kwargs={"matmul_precision": "bf16"},
                         reference=base.name))
    if ablate:
        names = {row.name for row in rows}
        rows += [row for row in _ablation_cases(_base_of(rows, base))
                 if row.name not in names]
    return rows + _correlated_cases(quick)


def _correlated_cases(quick: bool) -> list[Case]:
    """The same stack with independent and with correlated tokens (width 128, 16 tokens, depth 3000)."""
    setting = Setting.preset("llama", width=128, tokens=16, depth=8 if quick else 3000)
    samples, rows = 16, []
    for std in PAIR_INPUT_STDS:
        variant = setting.replace(input_std=std)
        rows.append(Case(_label(variant, samples, f"input-std-{std:g}"), variant, samples, metrics=PAIR_METRICS,
                         pair=rows[0].name if rows else None))
    return rows


def _base_of(rows: list[Case], base: Case) -> Case:
    """The row compared with the naive simulator (the ablations' reference)."""
    return next((row for row in rows if row.naive), base)


def _gpu_cases(base: Case) -> list[Case]:
    """Depth 10000 at width 4096 (target <= 15 s, TF32), base vs naive, precision, weights, memory."""
    big = Setting.preset("llama", width=4096, heads=32, tokens=1024, depth=10000)
    mid = big.replace(depth=100)
    small, samples = base.setting, base.samples
    return [
        Case(_label(big, 1, "tf32"), big, 1, tf32=True, metrics=("var",)),
        Case(base.name, small, samples, naive=True, tf32=False),
        Case(_label(small, samples, "tf32"), small, samples, tf32=True, reference=base.name),
        Case(_label(small, samples, "bf16"), small, samples, kwargs={"matmul_precision": "bf16"},
             reference=base.name),
        Case(_label(mid, 1, "dense"), mid, 1, kwargs={"weights": "dense"}, tf32=True, metrics=("var",)),
        Case(_label(mid, 1, "implicit"), mid, 1, kwargs={"weights": "implicit"}, tf32=True, metrics=("var",)),
        Case(_label(mid, 1, "auto"), mid, 1, kwargs={"weights": "auto"}, tf32=True, metrics=("var",)),
        Case(_label(small, samples, "dense"), small, samples, kwargs={"weights": "dense"}, tf32=True),
        Case(_label(small, samples, "implicit"), small, samples, kwargs={"weights": "implicit"}, tf32=True),
    ]


def _ablation_cases(base: Case) -> list[Case]:
    """One technique switched at a time against ``base`` (same setting, same TF32 state)."""
    small, samples = base.setting, base.samples
    rows = [
        Case(_label(small, samples, "looped-samples"), small, samples, looped=True, reference=base.name),
        Case(_label(small, samples, "dense"), small, samples, kwargs={"weights": "dense"}, reference=base.name),
        Case(_label(small, samples, "implicit"), small, samples, kwargs={"weights": "implicit"},
             reference=base.name),
        Case(_label(small, samples, "unshared-factors"), small, samples, kwargs={"share_factors": False},
             reference=base.name),
        Case(_label(small, samples, "no-prefetch"), small, samples, kwargs={"prefetch": False},
             reference=base.name),
        Case(_label(small, samples, "jvp-jac_dev"), small, samples, metrics=("var", "angular", "jac_dev"),
             reference=base.name),
    ]
    offered = inspect.signature(_simulate_function()).parameters
    for keyword in ("compile", "cuda_graphs"):
        if keyword in offered:
            rows.append(Case(_label(small, samples, keyword), small, samples, kwargs={keyword: True},
                             reference=base.name))
    for row in rows:
        row.tf32 = base.tf32
    return rows


# -- measuring -------------------------------------------------------------------------
def _simulate_function() -> Callable:
    from simulate import simulate  # the package's public entry point

    return simulate


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as stream:
            return int(stream.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _PeakMemory:
    """Peak memory of a block: CUDA max_memory_allocated, or the CPU resident-set growth."""

    def __init__(self, device: torch.device):
        self.device, self.mb = device, math.nan
        self._stop = threading.Event()

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        else:
            self._base = self._peak = _rss_bytes()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(0.002):
            self._peak = max(self._peak, _rss_bytes())

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.mb = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            self._stop.set()
            self._thread.join()
            self.mb = max(self._peak, _rss_bytes()) / 2**20 - self._base / 2**20


def _timed(fn: Callable, device: torch.device, cpu_times: list | None = None):
    """(result, seconds, peak MB) of fn(), device synchronised; appends process CPU seconds to ``cpu_times``."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    with _PeakMemory(device) as memory:
        sync()
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        sync()
        seconds = time.perf_counter() - start
        if cpu_times is not None:
            cpu_times.append(time.process_time() - start_cpu)
    return result, seconds, memory.mb


def matmul_peak_tflops(device: torch.device, dtype: torch.dtype = torch.float32) -> float:
    """Best of 3 square matmuls (1024 on CPU, 8192 on GPU) at the current TF32 setting, TFLOP/s."""
    size = 8192 if device.type == "cuda" else 1024
    a = torch.randn(size, size, device=device, dtype=dtype)
    _timed(lambda: a @ a, device)  # warm-up
    best = min(_timed(lambda: a @ a, device)[1] for _ in range(3))
    return 2 * size**3 / best / 1e12


def matmul_peaks(device: torch.device) -> dict[str, float]:
    """Matmul peaks per precision: 'fp32' (and on CUDA 'tf32', 'bf16'), TFLOP/s."""
    if device.type != "cuda":
        return {"fp32": matmul_peak_tflops(device)}
    peaks = {}
    for name, tf32, dtype in (("fp32", False, torch.float32), ("tf32", True, torch.float32),
                              ("bf16", False, torch.bfloat16)):
        _set_tf32(tf32)
        peaks[name] = matmul_peak_tflops(device, dtype)
    return peaks


def _precision(case: Case) -> str:
    """The matmul precision a row runs at: 'bf16', 'tf32' or 'fp32'."""
    if case.kwargs.get("matmul_precision") == "bf16":
        return "bf16"
    tf32 = case.tf32 if case.tf32 is not None else bool(torch.backends.cuda.matmul.allow_tf32)
    return "tf32" if tf32 and torch.cuda.is_available() else "fp32"


def _set_tf32(enabled: bool | None) -> None:
    if enabled is not None and torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def _run_ours(case: Case, device: torch.device) -> pd.DataFrame:
    simulate = _simulate_function()
    precision = {"fp32": "highest", "tf32": "tf32", "bf16": "bf16"}[_precision(case)] if device.type == "cuda" \
        else "highest"
    kwargs = {"metrics": case.metrics, "device": str(device), "matmul_precision": precision, **case.kwargs}
    if not case.looped:
        return simulate(case.setting, samples=case.samples, seed=0, **kwargs)
    # One call per sample (seeds 1000+i): the samples-as-a-batch ablation.
    tables = [simulate(case.setting, samples=1, seed=1000 + i, **kwargs) for i in range(case.samples)]
    return _pool_single_sample_tables(tables)


def _pool_single_sample_tables(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Mean and sem over single-sample tables (layer, metric, mean, ...)."""
    stacked = pd.concat(tables)
    grouped = stacked.groupby(["layer", "metric"])["mean"]
    pooled = grouped.agg(["mean", "std", "count"]).reset_index()  # one row per (layer, metric)
    pooled["sem"] = pooled["std"] / pooled["count"] ** 0.5
    pooled["n"] = pooled["count"]
    pooled["ci_low"], pooled["ci_high"] = confidence_interval(pooled["mean"], pooled["sem"])
    return pooled[["layer", "metric", "mean", "sem", "ci_low", "ci_high", "n"]]


def _model_flops(setting: Setting, samples: int) -> float:
    from simulate.naive import naive_flops

    return samples * naive_flops(setting)


def compare(name: str, ours: pd.DataFrame, reference: pd.DataFrame, metrics=CHECK_METRICS) -> list[dict]:
    """Check rows: z = (ours - reference) / sqrt(sem^2 + sem^2) at the last layer of each metric."""
    rows = []
    for metric in metrics:
        a, b = ours[ours.metric == metric], reference[reference.metric == metric]
        if a.empty or b.empty:
            continue
        layer = int(min(a.layer.max(), b.layer.max()))
        ra, rb = a[a.layer == layer].iloc[0], b[b.layer == layer].iloc[0]
        spread = math.sqrt(ra["sem"] ** 2 + rb["sem"] ** 2)
        z = (ra["mean"] - rb["mean"]) / spread if spread > 0 else math.nan
        rows.append(dict(setting=name, metric=metric, layer=layer, ours_mean=ra["mean"], ours_sem=ra["sem"],
                         reference_mean=rb["mean"], reference_sem=rb["sem"], z=z))
    return rows


def _time_ours(case: Case, device: torch.device, repeat: int) -> tuple[pd.DataFrame, float, float, float]:
    """(table, seconds, peak MB, CPU seconds) of the fastest of ``repeat`` runs (same seed, same table)."""
    best = None
    for _ in range(max(1, repeat)):
        cpu = []
        table, seconds, peak_mb = _timed(lambda: _run_ours(case, device), device, cpu)
        if best is None or seconds < best[1]:
            best = (table, seconds, peak_mb, cpu[0])
    return best


def run_case(case: Case, device: torch.device, peaks: dict[str, float], tables: dict[str, pd.DataFrame],
             naive_times: dict[str, float], repeat: int = 1) -> tuple[dict, list[dict], str]:
    """Run one row (ours timed as the best of ``repeat`` runs); returns (bench row, check rows, note)."""
    from simulate.naive import naive_simulate

    _set_tf32(case.tf32)
    peak_tflops = peaks.get(_precision(case), peaks["fp32"])
    note = ""
    try:
        table, ours_s, peak_mb, ours_cpu_s = _time_ours(case, device, repeat)
        cpu = []
    except (ValueError, TypeError) as error:  # e.g. a dtype this simulator does not offer
        return dict(setting=case.name, device=device.type, note=f"skipped: {error}"), [], f"skipped: {error}"
    tables[case.name] = table
    checks = []
    naive_key = repr(case.setting) + f"/{case.samples}/{_precision(case)}"
    naive_s, naive_cpu_s = naive_times.get(naive_key, (math.nan, math.nan))
    if case.naive:
        dtype = case.kwargs.get("dtype", "float32")
        naive_table, naive_s, _ = _timed(lambda: naive_simulate(
            case.setting, samples=case.samples, seed=1, metrics=CHECK_METRICS, device=device, dtype=dtype),
            device, cpu)
        naive_cpu_s = cpu[-1]
        naive_times[naive_key] = (naive_s, naive_cpu_s)
        checks += [dict(row, setting=f"{case.name} vs naive") for row in compare(case.name, table, naive_table)]
    if case.reference is not None and case.reference in tables:
        checks += [dict(row, setting=f"{case.name} vs {case.reference}")
                   for row in compare(case.name, table, tables[case.reference])]
    tflops = _model_flops(case.setting, case.samples) / ours_s / 1e12
    row = dict(setting=case.name, device=device.type, ours_s=ours_s, naive_s=naive_s,
               speedup=naive_s / ours_s if math.isfinite(naive_s) else math.nan,
               layer_samples_per_s=case.samples * case.setting.depth / ours_s, tflops=tflops,
               peak_fraction=tflops / peak_tflops if peak_tflops > 0 else math.nan, peak_mem_mb=peak_mb,
               ours_cpu_s=ours_cpu_s, naive_cpu_s=naive_cpu_s, note=note)
    return row, checks, note


def _warm_up(device: torch.device) -> None:
    """One tiny run of each simulator, so that no row pays for first-call initialisation."""
    from simulate.naive import naive_simulate

    tiny = Setting.preset("llama", width=32, heads=2, tokens=4, depth=2)
    _simulate_function()(tiny, samples=2, metrics=CHECK_METRICS, device=str(device))
    naive_simulate(tiny, samples=2, metrics=CHECK_METRICS, device=device)


def run_cases(rows: list[Case], device: torch.device, progress: bool = True,
              repeat: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All rows in order: (bench table with COLUMNS + EXTRA_COLUMNS, checks table with CHECK_COLUMNS).

    ``repeat``: each of our runs is timed as the best of that many (the naive one runs once).
    """
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    peaks = matmul_peaks(device)
    _set_tf32(previous_tf32)
    _warm_up(device)
    tables, naive_times, bench_rows, check_rows = {}, {}, [], []
    try:
        for case in tqdm(rows, desc="bench", unit="row", disable=not progress):
            row, checks, note = run_case(case, device, peaks, tables, naive_times, repeat)
            if note:
                print(f"{case.name}: {note}", file=sys.stderr)
            bench_rows.append(row)
            check_rows += checks
    finally:
        _set_tf32(previous_tf32)
    bench = pd.DataFrame(bench_rows).reindex(columns=COLUMNS + EXTRA_COLUMNS)
    bench["cpu_speedup"] = bench["naive_cpu_s"] / bench["ours_cpu_s"]
    seconds = dict(zip(bench["setting"], bench["ours_s"]))  # row name -> our seconds
    bench["vs_pair"] = [own / seconds[case.pair] if case.pair in seconds else math.nan
                        for case, own in zip(rows, bench["ours_s"])]
    base = bench[bench.naive_s.notna()].head(1)
    if len(base):  # each row's time over the base row's: what switching its technique off costs
        bench["vs_base"] = bench["ours_s"] / float(base["ours_s"].iloc[0])
        bench["vs_base_cpu"] = bench["ours_cpu_s"] / float(base["ours_cpu_s"].iloc[0])
    return bench, pd.DataFrame(check_rows).reindex(columns=CHECK_COLUMNS)


def pair_lines(bench: pd.DataFrame, rows: list[Case]) -> list[str]:
    """One line per paired row: both throughputs and the time ratio (the correlated-input check).

    >>> table = pd.DataFrame(dict(setting=["a", "b"], ours_s=[2.0, 2.5], layer_samples_per_s=[8.0, 6.4]))
    >>> pair_lines(table, [Case("a", None, 1), Case("b", None, 1, pair="a")])
    ['b: 6.4 layer-samples/s vs a: 8 layer-samples/s (time ratio 1.25)']
    """
    speed = dict(zip(bench["setting"], bench["layer_samples_per_s"]))  # row name -> layer-samples/s
    seconds = dict(zip(bench["setting"], bench["ours_s"]))
    return [f"{case.name}: {speed[case.name]:.4g} layer-samples/s vs {case.pair}: {speed[case.pair]:.4g} "
            f"layer-samples/s (time ratio {seconds[case.name] / seconds[case.pair]:.3g})"
            for case in rows if case.pair in speed and case.name in speed]


def _throughput_line(device: torch.device) -> str:
    from simulate.implicit import calibrate_costs

    costs = calibrate_costs(device)
    return (f"randn {costs.randn_per_s:.3g}/s, matmul {costs.matmul_flops:.3g} flop/s "
            f"(one normal ~ {costs.matmul_flops / costs.randn_per_s:.0f} flops), "
            f"Gram+Cholesky {costs.cholesky_flops:.3g}, QR {costs.qr_flops:.3g} flop/s")


def build_parser() -> CliParser:
    parser = CliParser(prog=PROG, description="This simulator against a naive nn.Module one (timings, agreement).")
    parser.add_argument("--quick", action="store_true", help="tiny settings, seconds (CI smoke test)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    parser.add_argument("--out", default="bench_out", help="output directory (default ./bench_out)")
    parser.add_argument("--ablate", action=argparse.BooleanOptionalAction, default=True,
                        help="rows switching one technique off at a time (default on; --no-ablate skips them)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="time each of our runs as the best of N (default 3; 1 with --quick)")
    parser.add_argument("--scaling", action="store_true",
                        help="also time depth/width/tokens/samples sweeps at small sizes into DIR/scaling.csv")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: as set; on a busy machine 1 avoids oversubscription)")
    parser.add_argument("--train", action="store_true",
                        help="only the trainer with statistics against a plain training loop -> DIR/bench_train.csv")
    add_progress_argument(parser)
    return parser


def _check_memory(rows: list[Case], device: torch.device, quick: bool) -> None:
    """Exit 2 with one line when the largest row (ours, or the naive stack) would not fit (simulate.memory)."""
    from simulate.memory import LIMIT_ENV, check_fits, estimate_run_bytes, naive_bytes

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
    if args.threads is not None and args.threads < 1:
        fail(PROG, f"threads={args.threads} is not allowed: an integer >= 1")
    if args.repeat is not None and args.repeat < 1:
        fail(PROG, f"repeat={args.repeat} is not allowed: an integer >= 1")
    out = output_path(PROG, args.out, directory=True)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if args.train:  # the trainer's row (simulate.training.speed) instead of the simulator's
        from simulate.training.speed import run_train_bench

        return run_train_bench(out, device, args.quick, args.threads)
    try:
        _simulate_function()
        rows = cases(device.type, args.quick, args.ablate)
    except (ImportError, SettingError, ValueError) as error:
        fail(PROG, str(error))
    _check_memory(rows, device, args.quick)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"device {device.type}, {torch.get_num_threads()} CPU threads; {_throughput_line(device)}")
    bench, checks = run_cases(rows, device, progress=progress_enabled(args.progress),
                              repeat=args.repeat or (1 if args.quick else 3))
    scaling = None
    if args.scaling:
        from simulate.scaling import run_scaling

        scaling = run_scaling(device, quick=args.quick)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "bench.csv", bench[COLUMNS].to_csv(index=False))
    write_atomic(out / "bench_checks.csv", checks.to_csv(index=False))
    if scaling is not None:
        write_atomic(out / "scaling.csv", scaling.to_csv(index=False))
        print(scaling.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(bench.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        if not checks.empty:
            print(checks[["setting", "metric", "layer", "ours_mean", "reference_mean", "z"]]
                  .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for line in pair_lines(bench, rows):
        print(line)
    if args.ablate:
        offered = inspect.signature(_simulate_function()).parameters
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
