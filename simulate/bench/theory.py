"""``python -m simulate bench --theory [--law-noise] [--quick]``: the time the theory's predictions take, and the
finite-width law's own Monte-Carlo noise, each against the mean-field law.

Speed (``DIR/bench_theory.csv``), one row per case and width law: the whole process of
``python -m theory predict --preset llama --scheme lns --depth 1000000`` (``--quick``: depth ``10^4``) and, in one
warm process, :func:`theory.predict` of the default :class:`theory.Setting` and of two map cells (Pre-LN transformer,
d = 32, T = 16 and 64, depth 64). Columns: ``case``, ``law``, ``runs``, ``median_s`` (wall), ``cpu_s`` (median
process CPU seconds: on a shared machine closer to a quiet machine's wall time), ``ratio_to_mean_field`` (the
median wall time over the mean-field law's for the same case), ``cold_s`` and ``cold_cpu_s`` (in process: the
same with the finite-width law's cache of attention averages emptied before each run, so that it draws them: a
setting predicted for the first time; the tables a law reads stay built), ``load`` (the 1-minute load average when
the case ran). The two laws take turns, so a change of load touches both.

Noise (``DIR/bench_law_noise.csv``, ``--law-noise``): for the Pre-LN transformer cells of the accuracy map's star
(depth 64; d = 16, 64, 256 at T = 16; T = 8 and 64 at d = 64; the LLaMA preset's Pre-LN and LNS cells), the spread
(standard deviation over :data:`NOISE_SEEDS` seeds of the attention average, ``law_seed`` of :func:`theory.predict`)
of the finite-width law's ``var``, ``var_attn`` and ``token_cos`` at the last layer, beside the simulator's standard
error at the map's sample count for the cell (:meth:`simulate.accuracy.grid.MapGrid.sample_cap`; the per-sample
spread measured at :data:`NOISE_PILOT` samples). Columns: ``cell``, ``metric``, ``law_spread_pct`` (of the mean),
``sim_sem_pct`` (at ``map_samples``), ``map_samples``, ``ratio`` (spread over sem; the goal is at most 0.2).
Source: docs/design.md#speed-of-the-theory, docs/derivations.md#finite-width-token-covariance.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from theory import Setting, predict
from theory.meanfield.finite_width import clear_attention_cache

__all__ = ["LAWS", "NOISE_SEEDS", "NOISE_PILOT", "speed_cases", "bench_theory_speed", "noise_cells",
           "bench_law_noise", "run_theory_bench"]

LAWS = ("finite-width", "mean-field")
NOISE_SEEDS = (38, 1, 2, 3, 4, 5)  # ATTENTION_SEED and five others
NOISE_PILOT = 256  # simulator samples per cell for its per-sample spread
_METRICS = (("var", ("preln-init", "lns-init")), ("var_attn", ("causal-attention",)),
            ("token_cos", ("causal-attention",)))


def speed_cases(quick: bool) -> list[tuple[str, object]]:
    """``(name, what)``: ``what`` a command line (list, run as a process) or a Setting (predicted in this process).

    >>> [name for name, _ in speed_cases(quick=True)][0]
    'theory predict --preset llama --scheme lns --depth 10000 (whole process)'
    """
    depth = 10_000 if quick else 1_000_000
    command = [sys.executable, "-m", "theory", "predict", "--preset", "llama", "--scheme", "lns", "--depth", str(depth),
               "--no-progress"]
    return [(f"theory predict --preset llama --scheme lns --depth {depth} (whole process)", command),
            ("predict(Setting()) in process (d = 256, T = 64, depth 12)", Setting()),
            ("predict, Pre-LN d = 32, T = 16, depth 64, in process", Setting(width=32, tokens=16, depth=64)),
            ("predict, Pre-LN d = 32, T = 64, depth 64, in process", Setting(width=32, tokens=64, depth=64))]


def _time_once(what, law: str, scratch: Path, cold: bool = False) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``what`` under ``law`` (``cold``: the attention averages drawn again)."""
    if isinstance(what, list):
        start, usage = time.perf_counter(), os.times()
        subprocess.run(what + ["--width-law", law, "--out", str(scratch / "p.csv")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        after = os.times()
        return time.perf_counter() - start, (after.children_user - usage.children_user
                                             + after.children_system - usage.children_system)
    if cold and law != "mean-field":  # (the mean-field law draws nothing; the other law's averages stay)
        clear_attention_cache()
    start, cpu = time.perf_counter(), time.process_time()
    predict(what, width_law=law)
    return time.perf_counter() - start, time.process_time() - cpu


def bench_theory_speed(quick: bool = False, repeat: int | None = None) -> pd.DataFrame:
    """The speed rows (module docstring): ``repeat`` runs per case and law (default 5, quick 2), the laws in turn,
    after one warm-up run per law of each in-process case (tables and caches built once per process); a row per
    case and law (tests/simulate/test_bench.py::test_theory_bench_rows)."""
    repeat = repeat or (2 if quick else 5)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, what in speed_cases(quick):
            if not isinstance(what, list):
                for law in LAWS:
                    _time_once(what, law, Path(scratch))
            times = {(law, cold): [] for law in LAWS for cold in (False, True)}
            loads = []
            for _ in range(repeat):
                for cold in (False, True) if not isinstance(what, list) else (False,):
                    for law in LAWS:
                        loads.append(os.getloadavg()[0])
                        times[law, cold].append(_time_once(what, law, Path(scratch), cold))
            base = statistics.median(wall for wall, _ in times["mean-field", False])
            for law in LAWS:
                wall = statistics.median(w for w, _ in times[law, False])
                cold = times[law, True] or [(math.nan, math.nan)]
                rows.append({"case": name, "law": law, "runs": repeat, "median_s": wall,
                             "cpu_s": statistics.median(c for _, c in times[law, False]),
                             "ratio_to_mean_field": wall / base, "cold_s": statistics.median(w for w, _ in cold),
                             "cold_cpu_s": statistics.median(c for _, c in cold), "load": statistics.median(loads)})
    return pd.DataFrame(rows)


def noise_cells(quick: bool = False) -> list[tuple[str, Setting, int]]:
    """``(name, setting, map samples)`` of the cells whose law noise is measured (module docstring; quick: two)."""
    from simulate.accuracy.grid import MapGrid

    grid = MapGrid()
    shapes = [("pre", "transformer", 16, 16), ("pre", "transformer", 64, 16), ("pre", "transformer", 256, 16),
              ("pre", "transformer", 64, 8), ("pre", "transformer", 64, 64), ("pre", "llama", 64, 16),
              ("lns", "llama", 64, 16)]
    if quick:
        shapes = shapes[:1] + shapes[4:5]
    return [(f"{scheme} {block} d{width} T{tokens}", grid.setting(scheme, block, width, tokens, True),
             grid.sample_cap(tokens)) for scheme, block, width, tokens in shapes]


def _last_layer(table: pd.DataFrame, depth: int) -> dict[str, float]:
    last = table[table.layer == depth]
    return {metric: float(last[(last.metric == metric) & last.law.isin(laws)].value.iloc[0])
            for metric, laws in _METRICS}


def bench_law_noise(quick: bool = False) -> pd.DataFrame:
    """The noise rows (module docstring). The simulator runs float32 on the CPU, seed 4242 (a seed the tests and the
    map do not use)."""
    from simulate import simulate

    rows = []
    seeds = NOISE_SEEDS[:3] if quick else NOISE_SEEDS
    for name, setting, map_samples in noise_cells(quick):
        values = np.array([[v for v in _last_layer(predict(setting, width_law="finite-width", law_seed=seed),
                                                   setting.depth).values()] for seed in seeds])  # (seeds, 3)
        spread = values.std(axis=0, ddof=1) / np.abs(values.mean(axis=0)) * 100
        pilot = 32 if quick else NOISE_PILOT
        measured = simulate(setting, samples=pilot, seed=4242, metrics=tuple(m for m, _ in _METRICS), device="cpu")
        last = measured[measured.layer == setting.depth].set_index("metric")
        for (metric, _), law_spread in zip(_METRICS, spread):
            sem = float(last.loc[metric, "sem"] * np.sqrt(pilot / map_samples) / abs(last.loc[metric, "mean"]) * 100)
            rows.append({"cell": name, "metric": metric, "law_spread_pct": float(law_spread), "sim_sem_pct": sem,
                         "map_samples": map_samples, "ratio": float(law_spread) / sem})
    return pd.DataFrame(rows)


def run_theory_bench(out: Path, quick: bool, noise: bool, repeat: int | None) -> int:
    """``bench --theory [--law-noise]``: the rows written (atomically) and printed; returns 0."""
    from theory.files import write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    tables = [("bench_theory.csv", bench_theory_speed(quick, repeat))]
    if noise:
        tables.append(("bench_law_noise.csv", bench_law_noise(quick)))
    for filename, table in tables:
        write_text_atomic(out / filename, table.to_csv(index=False))
        with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 80):
            print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print(f"wrote {out / filename}")
    return 0
