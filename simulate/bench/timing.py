"""Running one bench row: ours timed (best of ``repeat``), the naive reference once, memory, flops, checks.

Nothing here asserts a time (:mod:`simulate.bench`).
"""

from __future__ import annotations

import math
import os
import resource
import sys
import threading
import time
from typing import Callable

import pandas as pd
import torch
from tqdm.auto import tqdm

from simulate.bench.cases import CHECK_METRICS, Case, simulate_function
from simulate.engine import confidence_interval
from theory.setting import Setting

__all__ = ["COLUMNS", "EXTRA_COLUMNS", "CHECK_COLUMNS", "matmul_peak_tflops", "matmul_peaks", "compare", "run_case",
           "run_cases", "pair_lines", "throughput_line"]

COLUMNS = ["setting", "device", "ours_s", "naive_s", "speedup", "layer_samples_per_s", "tflops",
           "peak_fraction", "peak_mem_mb"]
# Printed, not written: process CPU seconds (all threads; on a shared machine closer to the
# time on an idle core than wall-clock), and why a row was skipped.
EXTRA_COLUMNS = ["ours_cpu_s", "naive_cpu_s", "cpu_speedup", "vs_base", "vs_base_cpu", "vs_pair", "note"]
CHECK_COLUMNS = ["setting", "metric", "layer", "ours_mean", "ours_sem", "reference_mean", "reference_sem", "z"]


# -- measuring -------------------------------------------------------------------------
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
    simulate = simulate_function()
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
    simulate_function()(tiny, samples=2, metrics=CHECK_METRICS, device=str(device))
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


def throughput_line(device: torch.device) -> str:
    from simulate.engine import calibrate_costs

    costs = calibrate_costs(device)
    return (f"randn {costs.randn_per_s:.3g}/s, matmul {costs.matmul_flops:.3g} flop/s "
            f"(one normal ~ {costs.matmul_flops / costs.randn_per_s:.0f} flops), "
            f"Gram+Cholesky {costs.cholesky_flops:.3g}, QR {costs.qr_flops:.3g} flop/s")
