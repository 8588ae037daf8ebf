"""``python -m simulate bench --sweep [--workers N] [--out DIR]`` (also ``sweep --bench``): how fast the engines are.

Two numbers (a benchmark, not a timed test):

- **local speed-up**: 16 Monte-Carlo points of the size of a full paper figure's
  (LLaMA blocks, d = 128, L = 128, T = 32, S = 32, LLaMA-130M's alpha; a few CPU seconds
  each) one after another in this process, once with one torch thread and once with a
  thread per core, then on the local engine (``workers`` processes, this one included,
  ``cores // workers`` threads each, pool start-up included: each spawned worker imports
  theory and torch, about 5 CPU seconds); the speed-up is against the faster of the two
  serial runs. The serial run's CPU time over its wall time says how many cores it
  already keeps busy (torch's threads and the simulator's prefetch thread); ``cores``
  over that is the most any pool of processes could gain, ``speedup_ceiling``
  (:func:`sweep_speed`).
- **Ray per-point overhead**: a local Ray of ``workers`` CPUs, warmed up (its workers
  started and their imports done), runs ``RAY_POINTS`` trivial points (``predict`` of a
  two-block linear stack, milliseconds each); wall time / points. Skipped without Ray.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from simulate.sweep import engines
from simulate.sweep.spec import parse_spec
from theory.files import atomic_write

__all__ = ["MC_SPEC", "RAY_POINTS", "sweep_speed", "ray_overhead", "run_sweep_bench"]

MC_SPEC = {"task": "run", "name": "bench", "seeds": 4,
           "setting": {"preset": "llama", "width": 128, "heads": 4, "tokens": 32, "depth": 128,
                       "init_std": 0.049},
           "axes": {"scheme": ["pre", "lns", "deepnorm", "scaled-init"]},
           "options": {"samples": 32, "device": "cpu"}}
RAY_POINTS = 40


def _timed_run(run) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and of its reaped children) of running ``run`` out."""
    import resource

    def cpu() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    started, cpu_started = time.perf_counter(), cpu()
    for _ in run:
        pass
    return time.perf_counter() - started, cpu() - cpu_started


def sweep_speed(workers: int | None = None) -> dict:
    """Wall (and CPU) times of the 16 points serially and on the local engine, and their ratio.

    ``serial_cores_busy`` is the faster serial run's CPU seconds per wall second (its torch
    threads and the simulator's prefetch thread together); ``speedup_ceiling`` = ``cores /
    serial_cores_busy`` bounds the ``speedup`` any pool can reach on this machine.
    """
    import torch

    cores = engines.available_cores()
    workers = workers or cores
    points = parse_spec(MC_SPEC).points  # (16,)
    threads, serial, serial_cpu = torch.get_num_threads(), {}, {}
    load = os.getloadavg()[0]
    try:
        for count in sorted({1, cores}):
            torch.set_num_threads(count)
            with tempfile.TemporaryDirectory() as serial_dir:
                serial[count], serial_cpu[count] = _timed_run(engines.run_inline(points, Path(serial_dir)))
    finally:
        torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as local_dir:
        local, local_cpu = _timed_run(engines.run_local(points, Path(local_dir), workers))
    best = min(serial, key=serial.get)
    return {"points": len(points), "cores": cores, "workers": workers, "load_average": load,
            "serial_1_thread_s": serial[1], f"serial_{cores}_threads_s": serial[cores], "serial_s": serial[best],
            "local_s": local, "speedup": serial[best] / local, "serial_cpu_s": serial_cpu[best], "local_cpu_s": local_cpu,
            "serial_cores_busy": serial_cpu[best] / serial[best], "speedup_ceiling": cores * serial[best] / serial_cpu[best]}


def ray_overhead(workers: int | None = None, points: int = RAY_POINTS) -> dict:
    """Per-point wall time of ``points`` trivial points on a warmed-up local Ray (NaN without Ray)."""
    try:
        import ray
    except ImportError:
        return {"ray_points": 0, "ray_s": float("nan"), "ray_per_point_s": float("nan")}
    workers = workers or engines.available_cores()
    spec = {"task": "predict", "setting": {"block": "linear", "width": 8, "tokens": 2, "depth": 2},
            "axes": {"input_std": [1.0 + i / 1000 for i in range(points + workers)]}}
    all_points = parse_spec(spec).points
    warm, timed = all_points[:workers], all_points[workers:]
    try:
        ray.init(num_cpus=workers, include_dashboard=False, logging_level="error", log_to_driver=False)
    except Exception as error:  # noqa: BLE001 - a local Ray that cannot start (an overloaded machine) is reported
        return {"ray_points": 0, "ray_s": float("nan"), "ray_per_point_s": float("nan"),
                "ray_error": " ".join(str(error).split())}
    try:
        with tempfile.TemporaryDirectory() as out:
            _timed_run(engines.run_ray(warm, Path(out), None, workers))  # start the workers, do their imports
            seconds, _ = _timed_run(engines.run_ray(timed, Path(out), None, workers))
    finally:
        ray.shutdown()
    return {"ray_points": len(timed), "ray_s": seconds, "ray_per_point_s": seconds / len(timed)}


def run_sweep_bench(out: Path, workers: int | None) -> int:
    """Print the engine numbers and write them to ``out/bench_sweep.csv``."""
    row = sweep_speed(workers)
    many = row[f"serial_{row['cores']}_threads_s"]
    print(f"local engine: {row['points']} Monte-Carlo points in {row['local_s']:.2f} s on {row['workers']} workers "
          f"vs {row['serial_s']:.2f} s one after another (1 thread {row['serial_1_thread_s']:.2f} s, "
          f"{row['cores']} threads {many:.2f} s): {row['speedup']:.2f}x at load average {row['load_average']:.1f}; "
          f"the serial run already keeps {row['serial_cores_busy']:.2f} of {row['cores']} cores busy "
          f"(CPU {row['serial_cpu_s']:.1f} s), so no pool can beat {row['speedup_ceiling']:.2f}x here; "
          f"the pool's CPU {row['local_cpu_s']:.1f} s includes the start-up of {row['workers'] - 1} spawned workers",
          flush=True)
    row.update(ray_overhead(workers))
    if "ray_error" in row:
        print(f"ray engine: not measured, a local Ray did not start: {row['ray_error']}")
    else:
        print(f"ray engine: {row['ray_per_point_s']:.3f} s per point over {row['ray_points']} trivial points "
              f"({row['ray_s']:.2f} s, local Ray of {row['workers']} CPUs, warmed up)")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "bench_sweep.csv", lambda temp: pd.DataFrame([row]).to_csv(temp, index=False))
    print(f"wrote {out / 'bench_sweep.csv'}")
    return 0
