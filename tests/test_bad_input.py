"""The bad-input audit: every kind of bad input to every CLI ends the same way.

Each case runs one command line (``python -m theory|simulate|paper_figs ARGS``) in a fresh
temporary working directory with its own simulator cache and checks: exit code 2,
exactly one non-empty line on stderr, no "Traceback", and no new file (in the working
directory or the cache). Python starts are the cost here (~2 s each, more with torch), so
the cases run in two worker processes, each calling the CLIs' ``main(argv)`` one case
after another exactly as ``python -m`` does (``SystemExit`` and its code; any other
exception printed as the interpreter would print it); a few cases also run through a
real ``python -m`` to tie the two together. No case is skipped: a command that went
missing fails its cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SMALL = ["--depth", "2", "--width", "16", "--heads", "2", "--tokens", "4"]
_RUN = ["run", *_SMALL, "--samples", "2"]
_SPEC_OK = 'task = "predict"\n[setting]\nblock = "linear"\nwidth = 8\n[axes]\ndepth = [2, 4]\n'

# (id, cli, argv, files to create first). Paths are relative to the case's working directory.
CASES = [
    # python -m theory
    ("theory-no-command", "theory", [], {}),
    ("theory-unknown-command", "theory", ["frobnicate"], {}),
    ("list-unknown-kind", "theory", ["list", "--kind", "nope"], {}),
    ("show-unknown-id", "theory", ["show", "p9-thm-99"], {}),
    ("show-missing-id", "theory", ["show"], {}),
    ("predict-missing-out", "theory", ["predict", "--depth", "3"], {}),
    ("predict-depth-zero", "theory", ["predict", "--depth", "0", "--out", "p.csv"], {}),
    ("predict-depth-not-a-number", "theory", ["predict", "--depth", "ten", "--out", "p.csv"], {}),
    ("predict-width-float", "theory", ["predict", "--width", "25.5", "--out", "p.csv"], {}),
    ("predict-unknown-scheme", "theory", ["predict", "--scheme", "prenorm", "--out", "p.csv"], {}),
    ("predict-unknown-block", "theory", ["predict", "--block", "conv", "--out", "p.csv"], {}),
    ("predict-unknown-norm", "theory", ["predict", "--norm", "batchnorm", "--out", "p.csv"], {}),
    ("predict-unknown-activation", "theory", ["predict", "--activation", "tanh", "--out", "p.csv"], {}),
    ("predict-heads-not-dividing-width", "theory", ["predict", "--width", "30", "--heads", "4", "--out", "p.csv"],
     {}),
    ("predict-odd-head-dim-with-rope", "theory", ["predict", "--width", "12", "--heads", "4", "--out", "p.csv"], {}),
    ("predict-kv-heads-not-dividing", "theory", ["predict", "--heads", "4", "--kv-heads", "3", "--out", "p.csv"], {}),
    ("predict-top-k-above-experts", "theory", ["predict", "--block", "moe", "--experts", "4", "--top-k", "5",
                                               "--out", "p.csv"], {}),
    ("predict-negative-init-std", "theory", ["predict", "--init-std", "-0.1", "--out", "p.csv"], {}),
    ("predict-nan-input-std", "theory", ["predict", "--input-std", "nan", "--out", "p.csv"], {}),
    ("predict-input-cos-one", "theory", ["predict", "--input-cos", "1", "--out", "p.csv"], {}),
    ("predict-mask-density-above-one", "theory", ["predict", "--mask-density", "1.5", "--out", "p.csv"], {}),
    ("predict-mix-fraction-negative", "theory", ["predict", "--mix-fraction", "-0.5", "--out", "p.csv"], {}),
    ("predict-lr-times-decay-above-one", "theory", ["predict", "--lr", "1", "--weight-decay", "2", "--out", "p.csv"],
     {}),
    ("predict-bad-boolean", "theory", ["predict", "--causal", "maybe", "--out", "p.csv"], {}),
    ("predict-unknown-preset", "theory", ["predict", "--preset", "gpt2", "--out", "p.csv"], {}),
    ("predict-abbreviated-flag", "theory", ["predict", "--dept", "3", "--out", "p.csv"], {}),
    ("predict-out-missing-directory", "theory", ["predict", "--out", "no/such/p.csv"], {}),
    ("predict-out-is-a-directory", "theory", ["predict", "--out", "adir"], {"adir/": ""}),
    ("predict-unknown-width-law", "theory", ["predict", "--width-law", "exact", "--out", "p.csv"], {}),
    ("predict-finite-width-below-its-width", "theory", ["predict", "--width", "4", "--heads", "2", "--width-law",
                                                        "finite-width", "--out", "p.csv"], {}),
    # python -m simulate run
    ("simulate-no-command", "simulate", [], {}),
    ("simulate-unknown-command", "simulate", ["frobnicate"], {}),
    ("run-missing-out", "simulate", [*_RUN], {}),
    ("run-samples-zero", "simulate", [*_RUN, "--samples", "0", "--out", "r"], {}),
    ("run-negative-seed", "simulate", [*_RUN, "--seed", "-1", "--out", "r"], {}),
    ("run-unknown-metric", "simulate", [*_RUN, "--metrics", "var,entropy", "--out", "r"], {}),
    ("run-empty-metrics", "simulate", [*_RUN, "--metrics", ",", "--out", "r"], {}),
    ("run-unknown-device", "simulate", [*_RUN, "--device", "tpu", "--out", "r"], {}),
    ("run-unknown-dtype", "simulate", [*_RUN, "--dtype", "float16", "--out", "r"], {}),
    ("run-unknown-weights", "simulate", [*_RUN, "--weights", "sparse", "--out", "r"], {}),
    ("run-tf32-on-cpu", "simulate", [*_RUN, "--device", "cpu", "--precision", "tf32", "--out", "r"], {}),
    ("run-bf16-with-float64", "simulate", [*_RUN, "--precision", "bf16", "--dtype", "float64", "--out", "r"], {}),
    ("run-unknown-prefetch", "simulate", [*_RUN, "--prefetch", "maybe", "--out", "r"], {}),
    ("run-setting-depth-zero", "simulate", [*_RUN, "--depth", "0", "--out", "r"], {}),
    ("run-out-is-a-file", "simulate", [*_RUN, "--out", "afile"], {"afile": "x"}),
    ("run-out-empty", "simulate", [*_RUN, "--out", ""], {}),
    ("run-memory-width-1e8", "simulate", ["run", "--width", "100000000", "--depth", "2", "--samples", "2",
                                          "--out", "X"], {}),
    ("run-memory-4096-tokens-64-samples", "simulate", ["run", "--width", "4096", "--tokens", "4096",
                                                       "--samples", "64", "--out", "X"], {}),
    # python -m simulate verify / bench
    ("verify-unknown-lemma", "simulate", ["verify", "--quick", "--only", "p9-thm-99", "--out", "v"], {}),
    ("verify-out-is-a-file", "simulate", ["verify", "--quick", "--out", "afile"], {"afile": "x"}),
    ("verify-unknown-flag", "simulate", ["verify", "--fast", "--out", "v"], {}),
    ("verify-unknown-width-law", "simulate", ["verify", "--quick", "--width-law", "exact", "--out", "v"], {}),
    ("verify-map-unknown-width-law", "simulate", ["verify", "--map", "--quick", "--width-law", "exact", "--out", "m"],
     {}),
    ("bench-repeat-zero", "simulate", ["bench", "--quick", "--repeat", "0", "--out", "b"], {}),
    ("bench-threads-zero", "simulate", ["bench", "--quick", "--threads", "0", "--out", "b"], {}),
    ("bench-out-is-a-file", "simulate", ["bench", "--quick", "--out", "afile"], {"afile": "x"}),
    ("bench-unknown-device", "simulate", ["bench", "--quick", "--device", "tpu", "--out", "b"], {}),
    # python -m simulate train
    ("train-steps-zero", "simulate", ["train", *_SMALL, "--steps", "0", "--out", "t"], {}),
    ("train-batch-zero", "simulate", ["train", *_SMALL, "--steps", "2", "--batch", "0", "--out", "t"], {}),
    ("train-missing-data", "simulate", ["train", *_SMALL, "--steps", "2", "--data", "none.txt", "--out", "t"], {}),
    ("train-log-every-zero", "simulate", ["train", *_SMALL, "--steps", "2", "--log-every", "0", "--out", "t"], {}),
    ("train-bad-setting", "simulate", ["train", *_SMALL, "--scheme", "prenorm", "--out", "t"], {}),
    # python -m simulate scores
    ("scores-missing-run", "simulate", ["scores", "no_such_run", "--out", "s"], {}),
    ("scores-not-a-run", "simulate", ["scores", "empty", "--out", "s"], {"empty/": ""}),
    ("scores-unknown-score", "simulate", ["scores", "empty", "--scores", "nope", "--out", "s"], {"empty/": ""}),
    # python -m simulate sweep
    ("sweep-missing-spec", "simulate", ["sweep", "none.toml", "--out", "w"], {}),
    ("sweep-malformed-toml", "simulate", ["sweep", "bad.toml", "--out", "w"], {"bad.toml": "task = [\n"}),
    ("sweep-bad-setting-field", "simulate", ["sweep", "bad.toml", "--out", "w"],
     {"bad.toml": _SPEC_OK.replace("depth = [2, 4]", "depth = [2, 0]")}),
    ("sweep-unknown-engine", "simulate", ["sweep", "ok.toml", "--engine", "slurm", "--out", "w"],
     {"ok.toml": _SPEC_OK}),
    # python -m paper_figs
    ("figs-unknown-figure", "paper_figs", ["--quick", "--only", "nope", "--out", "f"], {}),
    ("figs-out-is-a-file", "paper_figs", ["--quick", "--out", "afile"], {"afile": "x"}),
    ("figs-unknown-flag", "paper_figs", ["--fast", "--out", "f"], {}),
]
# Also through a real ``python -m``, so the in-process workers stand for the real thing.
REAL_PYTHON = ("predict-depth-zero", "run-memory-width-1e8", "figs-unknown-figure")

_WORKER = r'''
import contextlib, io, json, os, sys, traceback
from pathlib import Path

cases, base = json.loads(sys.stdin.read()), Path(sys.argv[1])
from simulate.runtime.process import configure_process
configure_process()
MAINS = {"theory": "theory.__main__", "simulate": "simulate.__main__", "paper_figs": "paper_figs.__main__"}

def call(cli, argv):
    import importlib
    return importlib.import_module(MAINS[cli]).main(argv)

def listing(*roots):
    return sorted(str(p) for root in roots for p in root.rglob("*"))

def run(case):
    cwd = base / case["id"]
    (cwd / "work").mkdir(parents=True)
    (cwd / "cache").mkdir()
    for name, text in case["files"].items():
        target = cwd / "work" / name
        if name.endswith("/"):
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    before = listing(cwd)
    os.chdir(cwd / "work")
    os.environ["DEPTH_WORKBENCH_CACHE"] = str(cwd / "cache")
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = call(case["cli"], case["argv"])
            code = 0 if code is None else code
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, (int, type(None))):
                print(stop.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
    os.chdir(base)
    return {"id": case["id"], "code": code, "stderr": err.getvalue(), "new": sorted(set(listing(cwd)) - set(before))}

print(json.dumps([run(case) for case in cases]))
'''


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "DEPTH_WORKBENCH_THREADS": "1"}


def _worker(cases: list, base: Path) -> list[dict]:
    base.mkdir(parents=True)
    payload = [{"id": i, "cli": cli, "argv": argv, "files": files} for i, cli, argv, files in cases]
    done = subprocess.run([sys.executable, "-c", _WORKER, str(base)], input=json.dumps(payload), text=True,
                          capture_output=True, env=_env(), cwd=base, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _real(case, base: Path) -> dict:
    case_id, cli, argv, files = case
    work, cache = base / case_id / "work", base / case_id / "cache"
    work.mkdir(parents=True)
    cache.mkdir()
    done = subprocess.run([sys.executable, "-m", cli, *argv], text=True, capture_output=True, cwd=work,
                          env={**_env(), "DEPTH_WORKBENCH_CACHE": str(cache)}, timeout=600)
    new = sorted(str(p) for p in (base / case_id).rglob("*") if p not in (work, cache))
    return {"id": case_id, "code": done.returncode, "stderr": done.stderr, "new": new}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    """Every case's outcome: two workers (theory+figures, simulate) and the real ``python -m`` cases, in parallel."""
    base = tmp_path_factory.mktemp("bad-input")
    groups = [[c for c in CASES if c[1] != "simulate"], [c for c in CASES if c[1] == "simulate"]]
    real = [c for c in CASES if c[0] in REAL_PYTHON]
    with ThreadPoolExecutor(max_workers=3) as pool:
        workers = [pool.submit(_worker, group, base / f"worker{i}") for i, group in enumerate(groups)]
        reals = pool.submit(lambda: [_real(c, base / "real") for c in real])
        outcomes = [r for w in workers for r in w.result()]
        outcomes += [dict(r, id=r["id"] + "@python-m") for r in reals.result()]
    return {r["id"]: r for r in outcomes}


def _check(result: dict) -> None:
    err = result["stderr"]
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err[-1500:]
    assert result["code"] == 2, f"exit code {result['code']}; stderr: {err[-600:]}"
    assert len(lines) == 1, f"{len(lines)} lines on stderr: {err[-600:]}"
    assert not result["new"], f"files written: {result['new']}"


@pytest.mark.parametrize("case_id", [c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(results, case_id):
    _check(results[case_id])


@pytest.mark.parametrize("case_id", REAL_PYTHON)
def test_the_same_through_python_m(results, case_id):
    _check(results[case_id + "@python-m"])


def test_the_audit_covers_at_least_45_kinds_across_every_cli():
    assert len(CASES) >= 45 and len({c[0] for c in CASES}) == len(CASES)
    commands = {(cli, argv[0] if argv and not argv[0].startswith("-") else "") for _, cli, argv, _ in CASES}
    for needed in [("theory", "list"), ("theory", "show"), ("theory", "predict"), ("simulate", "run"),
                   ("simulate", "verify"), ("simulate", "bench"), ("simulate", "train"), ("simulate", "scores"),
                   ("simulate", "sweep"), ("paper_figs", "")]:
        assert needed in commands, needed


def test_memory_refusals_name_the_estimate_the_limit_and_the_flag(results):
    for case_id, flag in (("run-memory-width-1e8", "--"), ("run-memory-4096-tokens-64-samples", "--samples")):
        line = results[case_id]["stderr"].strip()
        assert "needs about" in line and "has" in line and "lower" in line and flag in line, line
