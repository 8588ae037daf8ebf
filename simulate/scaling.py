"""``python -m simulate bench --scaling``: how the run time grows with depth, width, tokens and samples.

One axis at a time is swept around a small base point (LLaMA preset, all else fixed)
and each point is run once by :func:`simulate.simulate` (defaults: implicit weights,
prefetch on the CPU), after one untimed warm-up run. The table (``DIR/scaling.csv``)
has columns :data:`SCALING_COLUMNS`:

==================  ===============================================================
axis                depth, width, tokens or samples
value               the swept value
setting             preset label of the point
wall_s, cpu_s       wall-clock and process CPU seconds (all threads) of the run
per_layer_sample_ms wall_s / (depth * samples) in milliseconds
==================  ===============================================================

Expected shapes (implicit product, m = tokens rows per sample): linear in depth and
samples; in width about linear (draws m*d_out, Gram 2 m^2 d, L Z 2 m^2 d_out); in tokens
about quadratic (m^2 terms) once the fixed per-op costs stop dominating. Nothing here
asserts a time.

>>> [row[:2] for row in scaling_points(quick=True)][:3]
[('depth', 2), ('depth', 4), ('depth', 8)]
"""

from __future__ import annotations

import time

import pandas as pd
import torch

from theory.setting import Setting

__all__ = ["SCALING_COLUMNS", "scaling_points", "run_scaling"]

SCALING_COLUMNS = ["axis", "value", "setting", "wall_s", "cpu_s", "per_layer_sample_ms"]


def scaling_points(quick: bool = False, device: str = "cpu") -> list[tuple[str, int, Setting, int]]:
    """(axis, value, setting, samples) of the sweep; small on the CPU, larger on CUDA."""
    if quick:
        base, samples = dict(width=32, heads=2, tokens=8, depth=4), 2
        axes = {"depth": (2, 4, 8), "width": (16, 32, 64), "tokens": (4, 8, 16), "samples": (1, 2, 4)}
    elif device == "cuda":
        base, samples = dict(width=1024, heads=8, tokens=256, depth=32), 8
        axes = {"depth": (16, 32, 64, 128), "width": (512, 1024, 2048, 4096), "tokens": (64, 128, 256, 512),
                "samples": (1, 4, 8, 16)}
    else:
        base, samples = dict(width=256, heads=4, tokens=32, depth=16), 4
        axes = {"depth": (8, 16, 32, 64), "width": (128, 256, 512, 1024), "tokens": (16, 32, 64, 128),
                "samples": (1, 2, 4, 8, 16)}
    points = []
    for axis, values in axes.items():
        for value in values:
            fields = dict(base, **({} if axis == "samples" else {axis: value}))
            points.append((axis, value, Setting.preset("llama", **fields), value if axis == "samples" else samples))
    return points


def run_scaling(device: torch.device, quick: bool = False) -> pd.DataFrame:
    """Time every point of :func:`scaling_points`; returns the table with :data:`SCALING_COLUMNS`."""
    from simulate import simulate

    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    points = scaling_points(quick, device.type)
    simulate(points[0][2], samples=points[0][3], device=str(device))  # warm-up
    rows = []
    for axis, value, setting, samples in points:
        sync()
        start, start_cpu = time.perf_counter(), time.process_time()
        simulate(setting, samples=samples, device=str(device))
        sync()
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        label = f"llama-w{setting.width}-T{setting.tokens}-L{setting.depth}-S{samples}"
        rows.append(dict(axis=axis, value=value, setting=label, wall_s=wall, cpu_s=cpu,
                         per_layer_sample_ms=1e3 * wall / (setting.depth * samples)))
    return pd.DataFrame(rows, columns=SCALING_COLUMNS)
