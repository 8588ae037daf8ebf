"""Result tables: building them from per-sample statistics, saving, loading, caching.

A run is stored as a directory with ``config.json`` (setting, Monte-Carlo config, code
version, anything else) and ``layers.csv`` (columns :data:`COLUMNS`), CSV and JSON only.
Every file is written to a temporary file in the same directory and moved into place
(:func:`theory.cli.atomic_write`), so a reader never sees half a file.

>>> import numpy as np
>>> table = table_from_stats(np.array([[[1.0, 3.0]]]), ("var",))
>>> table[["layer", "metric", "mean", "sem"]].to_dict("records")
[{'layer': 0, 'metric': 'var', 'mean': 2.0, 'sem': 1.0}]
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from theory.cli import atomic_write

__all__ = ["COLUMNS", "table_from_stats", "save_run", "load_run", "write_atomic", "code_version", "cache_dir",
           "cache_key", "cached_simulate"]

COLUMNS = ["layer", "metric", "mean", "sem", "ci_low", "ci_high", "n"]
_Z95 = 1.96
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent
# The sources that decide what a run measures: a change to any of them is a new code
# version. The reports built on runs (verify, bench, figures) are left out, so editing
# them keeps the cache.
_RESULT_SOURCES = ("theory/setting.py", "theory/architecture.py") + tuple(
    f"simulate/{name}.py" for name in ("blocks", "stack", "metrics", "weights", "implicit", "noise",
                                        "processes", "jacobian", "results"))


def table_from_stats(values: np.ndarray, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Long table from per-sample values (n_layers, n_metrics, S); entries that are NaN for all samples are left out.

    mean over samples, sem = std(ddof=1)/sqrt(n) (NaN when n = 1), CI = mean +- 1.96 sem.
    """
    rows = []
    n_layers, n_metrics, _ = values.shape
    for m, name in enumerate(metrics):
        block = values[:, m, :]  # (n_layers, S)
        finite = np.isfinite(block)  # (n_layers, S)
        counts = finite.sum(-1)  # (n_layers,)
        for layer in np.nonzero(counts)[0]:
            sample = block[layer][finite[layer]]  # (n,)
            n = int(sample.size)
            scale = float(np.abs(sample).max()) or 1.0  # so that squares of values near a blow-up do not overflow
            mean = scale * float((sample / scale).mean())
            sem = scale * float((sample / scale).std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
            rows.append((int(layer), name, mean, sem, mean - _Z95 * sem, mean + _Z95 * sem, n))
    return pd.DataFrame(rows, columns=COLUMNS)  # metrics in the given order, layers ascending


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` all at once (:func:`theory.cli.atomic_write`)."""
    atomic_write(path, lambda temp: Path(temp).write_text(text))


def save_run(out_dir, config: dict, table: pd.DataFrame) -> Path:
    """Save ``config.json`` and ``layers.csv`` into ``out_dir`` (created), each atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "layers.csv", table[COLUMNS].to_csv(index=False))
    write_atomic(out / "config.json", json.dumps(config, indent=2, sort_keys=True) + "\n")
    return out


def load_run(run_dir) -> tuple[dict, pd.DataFrame]:
    """Inverse of :func:`save_run`: (config dict, table)."""
    run = Path(run_dir)
    config = json.loads((run / "config.json").read_text())
    table = pd.read_csv(run / "layers.csv")
    return config, table[COLUMNS]


def code_version() -> str:
    """sha256 (first 16 hex digits) of the sources that decide what a run measures."""
    digest = hashlib.sha256()
    for name in _RESULT_SOURCES:
        digest.update(name.encode())
        digest.update((_PACKAGE_ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """``$DEPTH_WORKBENCH_CACHE`` or ``~/.cache/depth-workbench``."""
    return Path(os.environ.get("DEPTH_WORKBENCH_CACHE") or Path.home() / ".cache" / "depth-workbench")


def _mc_config(samples, seed, metrics, device, dtype, weights) -> dict:
    from simulate.metrics import parse_metrics
    from simulate.stack import resolve_device, resolve_dtype

    return {"samples": samples, "seed": seed, "metrics": list(parse_metrics(metrics)),
            "device": resolve_device(device).type, "dtype": str(resolve_dtype(dtype)).replace("torch.", ""),
            "weights": weights}


def cache_key(setting, mc_config: dict) -> str:
    """sha256 of (setting.to_dict(), Monte-Carlo config, code version)."""
    payload = {"setting": setting.to_dict(), "mc": mc_config, "code": code_version()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def cached_simulate(setting, *, samples: int = 8, seed: int = 0, metrics=("var",), device="auto",
                    dtype="float32", weights: str = "auto", progress: bool = False) -> pd.DataFrame:
    """:func:`simulate.simulate` through the on-disk cache (blow-ups are not cached)."""
    from simulate.stack import simulate

    mc = _mc_config(samples, seed, metrics, device, dtype, weights)
    entry = cache_dir() / cache_key(setting, mc)
    if (entry / "layers.csv").exists() and (entry / "config.json").exists():
        return load_run(entry)[1]
    table = simulate(setting, samples=samples, seed=seed, metrics=metrics, device=device, dtype=dtype,
                     weights=weights, progress=progress)
    save_run(entry, {"setting": setting.to_dict(), "mc": mc, "code": code_version()}, table)
    return table
