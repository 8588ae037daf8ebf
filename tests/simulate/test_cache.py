"""Caches and result files that cannot lie: format version, checksum, recomputation, concurrent fills, a key
that changes with every source the engine runs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from simulate.cache import (ENGINE_ENTRIES, FORMAT_VERSION, CorruptRun, cached_simulate, engine_sources, load_run,
                            save_run)
from simulate.engine.tables import COLUMNS
from simulate.runtime.versions import PACKAGES, closure_version
from theory import Setting

ROOT = Path(__file__).resolve().parents[2]
SETTING = Setting(block="linear", scheme="pre", depth=3, width=8, heads=2, tokens=2)
MC = dict(samples=2, seed=5, metrics="var,angular", dtype="float64")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache of this test's own."""
    monkeypatch.setenv("DEPTH_WORKBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _entries(cache: Path) -> list[Path]:
    return sorted(path for path in cache.iterdir()) if cache.exists() else []


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "simulate.cache" and r.levelno == logging.WARNING]


def test_a_run_directory_records_its_format_and_the_checksum_of_its_table(tmp_path):
    table = pd.DataFrame([[0, "var", 1.0, 0.1, 0.8, 1.2, 4], [1, "var", 2.0, 0.2, 1.6, 2.4, 4]], columns=COLUMNS)
    run = save_run(tmp_path / "run", {"note": "x"}, table)
    config = json.loads((run / "config.json").read_text())
    assert config["format_version"] == FORMAT_VERSION and len(config["layers_sha256"]) == 64
    assert load_run(run)[1].equals(table)


@pytest.mark.parametrize("damage", ["truncate", "flip a digit", "no config", "older format", "bad json"])
def test_load_run_refuses_a_damaged_directory(tmp_path, damage):
    table = pd.DataFrame([[0, "var", 1.0, 0.1, 0.8, 1.2, 4], [1, "var", 2.0, 0.2, 1.6, 2.4, 4]], columns=COLUMNS)
    run = save_run(tmp_path / "run", {}, table)
    layers, config = run / "layers.csv", run / "config.json"
    if damage == "truncate":
        layers.write_bytes(layers.read_bytes()[:-9])
    elif damage == "flip a digit":
        layers.write_text(layers.read_text().replace("2.0", "3.0"))
    elif damage == "no config":
        config.unlink()
    elif damage == "older format":
        record = json.loads(config.read_text())
        del record["format_version"], record["layers_sha256"]
        config.write_text(json.dumps(record))
    else:
        config.write_text("{not json")
    with pytest.raises(CorruptRun):
        load_run(run)


@pytest.mark.parametrize("damage", ["truncate", "corrupt", "older format", "config missing"])
def test_a_bad_cache_entry_is_reported_in_one_line_and_recomputed(cache, caplog, damage):
    fresh = cached_simulate(SETTING, **MC)
    (entry,) = _entries(cache)
    layers, config = entry / "layers.csv", entry / "config.json"
    if damage == "truncate":
        layers.write_bytes(layers.read_bytes()[: len(layers.read_bytes()) // 2])
    elif damage == "corrupt":
        text = layers.read_text()
        layers.write_text(text[:40] + ("9" if text[40] != "9" else "8") + text[41:])
    elif damage == "older format":  # what the code before format versions wrote
        record = json.loads(config.read_text())
        del record["format_version"], record["layers_sha256"]
        config.write_text(json.dumps(record))
        layers.write_text(layers.read_text().replace("angular", "var_mlp"))  # would be misread if trusted
    else:
        config.unlink()
    with caplog.at_level(logging.WARNING, logger="simulate.cache"):
        again = cached_simulate(SETTING, **MC)
    messages = _warnings(caplog)
    assert len(messages) == 1 and "\n" not in messages[0] and "recomputing" in messages[0], messages
    pd.testing.assert_frame_equal(again, fresh)
    assert load_run(entry)[1].shape == fresh.shape, "the entry was not rewritten whole"
    assert [p.name for p in _entries(cache)] == [entry.name], "temporary directories left behind"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="simulate.cache"):
        cached_simulate(SETTING, **MC)
    assert _warnings(caplog) == [], "the recomputed entry is not valid"


def test_a_good_entry_is_read_not_recomputed(cache, monkeypatch):
    first = cached_simulate(SETTING, **MC)
    monkeypatch.setattr("simulate.cache.simulate", lambda *a, **k: pytest.fail("recomputed a valid entry"))
    pd.testing.assert_frame_equal(cached_simulate(SETTING, **MC), first)



def test_a_build_left_by_a_killed_process_is_removed_by_the_next_fill_after_an_hour(cache):
    from simulate.cache import STALE_BUILD_SECONDS

    cache.mkdir(parents=True)
    stale, recent = cache / ".0123abcd.killed", cache / ".4567ef01.building"
    for build in (stale, recent):
        build.mkdir()
        (build / "layers.csv").write_text("half a table")
    hour_ago = time.time() - STALE_BUILD_SECONDS - 60
    os.utime(stale, (hour_ago, hour_ago))
    cached_simulate(SETTING, **MC)
    assert not stale.exists(), "a build directory over an hour old was kept"
    assert recent.exists(), "a build directory another process may still be filling was removed"
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1

_FILL = """
import sys, time
from pathlib import Path
from theory import Setting
from simulate.cache import cached_simulate
go = Path(sys.argv[1])
Path(sys.argv[2]).touch()  # ready
while not go.exists():
    time.sleep(0.01)
table = cached_simulate(Setting(block="linear", scheme="pre", depth=400, width=32, heads=2, tokens=4),
                        samples=4, seed=1, metrics="var,angular", dtype="float64")
print(table["mean"].sum().hex())
"""


@pytest.mark.slow
def test_two_processes_filling_one_entry_leave_one_valid_entry(tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEPTH_WORKBENCH_CACHE": str(cache),
           "DEPTH_WORKBENCH_THREADS": "1"}
    go, ready = tmp_path / "go", [tmp_path / f"ready{i}" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", _FILL, str(go), str(flag)], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for flag in ready]
    deadline = time.monotonic() + 240
    while not all(flag.exists() for flag in ready) and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()  # both start filling the same (missing) entry now
    seen_bad, polls = [], 0
    while any(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
        for entry in _entries(cache):  # a reader meanwhile: an entry that exists is complete
            if entry.name.startswith("."):
                continue
            polls += 1
            try:
                load_run(entry)
            except (CorruptRun, FileNotFoundError) as error:
                seen_bad.append(str(error))
        time.sleep(0.001)
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert not seen_bad, f"a reader saw an incomplete entry ({len(seen_bad)} of {polls} reads): {seen_bad[0]}"
    assert [proc.returncode for proc in procs] == [0, 0], [err[-500:] for _, err in outputs]
    assert outputs[0][0] == outputs[1][0], "the two processes saw different tables"
    entries = _entries(cache)  # no temporary directory is left either
    assert len(entries) == 1, f"expected one entry, found {[p.name for p in entries]}"
    config, table = load_run(entries[0])
    assert table["layer"].max() == 400 and config["format_version"] == FORMAT_VERSION


# -- the code version in the key ---------------------------------------------------------------
def _executed_sources(run) -> set[str]:
    """The repository files (relative to ROOT) with a Python function that ``run()`` calls, in any thread."""
    seen = set()

    def profile(frame, event, arg):
        if event == "call":
            seen.add(frame.f_code.co_filename)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    files = {Path(name).resolve() for name in seen if name.endswith(".py")}
    return {str(path.relative_to(ROOT)) for path in files if path.is_relative_to(ROOT)
            and path.relative_to(ROOT).parts[0] in PACKAGES}


def test_the_engine_sources_hold_every_file_a_run_executes():
    from simulate import simulate

    settings = [Setting.preset("llama", scheme="lns", depth=2, width=16, heads=2, tokens=4),
                Setting(block="moe", scheme="deepnorm", depth=2, width=16, heads=2, tokens=4, experts=4, top_k=2),
                Setting(block="mlp", scheme="mix", activation="gelu", depth=2, width=16, mask_density=0.5)]
    executed = _executed_sources(lambda: [simulate(s, samples=2, metrics="all", weights=w, dtype=d)
                                          for s in settings for w, d in (("dense", "float32"),
                                                                         ("implicit", "float64"))])
    assert {"simulate/engine/stack.py", "simulate/engine/blocks.py", "theory/setting.py"} <= executed
    missing = executed - set(engine_sources())
    assert not missing, f"a run executes {sorted(missing)}, which the cache key leaves out"


def test_editing_any_engine_source_changes_the_key_and_a_report_does_not(source_copy):
    root = source_copy
    sources = engine_sources(root)
    assert sources == engine_sources() and "simulate/engine/stack.py" in sources
    before = closure_version(*ENGINE_ENTRIES, root=root)
    assert before == closure_version(*ENGINE_ENTRIES)
    for name in sources + ["simulate/verify.py", "paper_figs/profiles.py"]:
        path = root / name
        original = path.read_bytes()
        path.write_bytes(original + b"\n# edited\n")
        assert (closure_version(*ENGINE_ENTRIES, root=root) != before) == (name in sources), name
        path.write_bytes(original)
    assert closure_version(*ENGINE_ENTRIES, root=root) == before


def test_a_module_the_engine_starts_to_import_is_in_the_key(source_copy):
    root = source_copy
    (root / "simulate" / "new_part.py").write_text("SCALE = 1.0\n")
    assert "simulate/new_part.py" not in engine_sources(root)
    blocks = root / "simulate" / "engine" / "blocks.py"
    blocks.write_text(blocks.read_text() + "\n\ndef _scale():\n    from simulate.new_part import SCALE\n\n"
                      "    return SCALE\n")
    assert "simulate/new_part.py" in engine_sources(root)
    before = closure_version(*ENGINE_ENTRIES, root=root)
    (root / "simulate" / "new_part.py").write_text("SCALE = 2.0\n")
    assert closure_version(*ENGINE_ENTRIES, root=root) != before
