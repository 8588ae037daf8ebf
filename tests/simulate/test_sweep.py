"""``python -m simulate sweep``: spec validation, resumable local runs, interrupts, failures, Ray.

The sweep under test is 2 schemes x 2 depths x 2 seeds of tiny LLaMA stacks (a fraction of
a second per point). Summaries are compared exactly, except the wall-time column: every
point is seeded and runs on the CPU with one torch thread whatever the engine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulate.runtime.keys import result_key
from simulate.sweep import SpecError, load_spec, parse_spec, read_point, read_summary, run_sweep
from theory import Setting
from theory.verdicts import PointStatus

REPO = Path(__file__).resolve().parents[2]

SPEC = """
name = "tiny"
task = "run"
seeds = 2

[setting]
preset = "llama"
width = 32
heads = 2
tokens = 8

[axes]
scheme = ["pre", "lns"]
depth = [12, 24]

[options]
samples = 4
metrics = ["var", "angular"]
device = "cpu"
"""


def _spec_file(tmp_path: Path, text: str = SPEC, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _point_files(out: Path) -> list[Path]:
    return sorted(p for p in (out / "points").glob("*.parquet") if not p.name.startswith("."))


def _without_wall_time(summary: pd.DataFrame) -> pd.DataFrame:
    return summary.drop(columns=["wall_s"])


def _env() -> dict:
    return {**os.environ, "DEPTH_WORKBENCH_THREADS": "1", "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted sweep, points one after another in this process: (out dir, summary)."""
    out = tmp_path_factory.mktemp("reference")
    report = run_sweep(load_spec(_spec_file(out)), out / "sweep", workers=1)
    assert (report.total, report.ran, report.failed) == (8, 8, 0), report
    return out / "sweep", read_summary(out / "sweep")


# -- the spec ------------------------------------------------------------------------------
def test_spec_expands_crossed_axes_then_seeds_in_order():
    sweep = parse_spec({"task": "run", "seeds": [3, 5], "setting": {"block": "linear", "width": 8},
                        "axes": {"scheme": ["pre", "lns"], "depth": [2, 4]}})
    got = [(p.setting.scheme, p.setting.depth, p.seed) for p in sweep.points]
    assert got == [(s, d, seed) for s in ("pre", "lns") for d in (2, 4) for seed in (3, 5)], got
    assert [p.index for p in sweep.points] == list(range(8))
    assert len({p.key for p in sweep.points}) == 8


def test_zip_groups_are_zipped_and_crossed_with_axes():
    sweep = parse_spec({"task": "predict", "setting": {"block": "linear"}, "axes": {"depth": [2, 3]},
                        "zip": [{"width": [8, 16], "init_std": [0.5, 0.25]}]})
    got = [(p.setting.depth, p.setting.width, p.setting.init_std) for p in sweep.points]
    assert got == [(2, 8, 0.5), (2, 16, 0.25), (3, 8, 0.5), (3, 16, 0.25)], got
    assert sweep.axis_fields == ("depth", "width", "init_std")


def test_the_key_is_the_full_config_not_its_spelling():
    spelled = parse_spec({"task": "run", "setting": {"preset": "llama", "width": 32, "heads": 2, "depth": 4},
                          "options": {"samples": 8}}).points[0]
    explicit = parse_spec({"task": "run", "setting": {"preset": "llama"},
                           "axes": {"width": [32], "heads": [2], "depth": [4]},
                           "options": {"metrics": "var", "device": "auto"}}).points[0]
    assert spelled.key == explicit.key == result_key(spelled.request(), spelled.versions)
    other_seed = parse_spec({"task": "run", "seeds": [1], "setting": {"preset": "llama", "width": 32, "heads": 2,
                                                                      "depth": 4}}).points[0]
    assert other_seed.key != spelled.key


@pytest.mark.parametrize("data, words", [
    ({"task": "run", "axes": {"depth": [4, 0]}}, ["point 1", "depth=0", "integer >= 1"]),
    ({"task": "run", "axes": {"scheme": ["pre", "lnz"]}}, ["point 1", "scheme='lnz'", "lns"]),
    ({"task": "run", "axes": {"dept": [4]}}, ["axis 'dept'", "depth"]),
    ({"task": "run", "setting": {"widht": 8}}, ["widht", "a field of Setting"]),
    ({"task": "run", "zip": {"depth": [2, 3], "width": [8]}}, ["zip", "different lengths"]),
    ({"task": "run", "options": {"sample": 4}}, ["options", "'sample'", "samples"]),
    ({"task": "run", "options": {"metrics": ["var", "nope"]}}, ["options", "nope"]),
    ({"task": "run", "setting": {"block": "mlp"}, "options": {"metrics": ["var_attn"]}}, ["point 0", "var_attn"]),
    ({"task": "run", "seeds": [1, 1]}, ["seeds", "distinct"]),
    ({"task": "predict", "seeds": 2}, ["seeds", "deterministic"]),
    ({"task": "fit"}, ["task='fit'", "predict", "run"]),
    ({"task": "run", "grid": {}}, ["unknown key 'grid'"]),
    ({"task": "run", "axes": {"depth": [4, 4]}}, ["points 0 and 1", "same config"]),
])
def test_a_bad_spec_names_the_point_and_the_field(data, words):
    with pytest.raises(SpecError) as error:
        parse_spec(data)
    message = str(error.value)
    assert "\n" not in message and all(w in message for w in words), message


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("*.toml")), ids=lambda p: p.stem)
def test_the_example_specs_validate(path):
    sweep = load_spec(path)
    assert len(sweep.points) >= 2 and len({p.key for p in sweep.points}) == len(sweep.points)


def test_cli_bad_spec_exits_2_with_one_line_and_writes_nothing(tmp_path):
    spec = _spec_file(tmp_path, SPEC.replace("depth = [12, 24]", "depth = [12, -1]"))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "simulate", "sweep", str(spec), "--out", str(out)], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "point 2" in lines[0] and "depth=-1" in lines[0] and "spec.toml" in lines[0], lines
    assert not out.exists()


# -- running -------------------------------------------------------------------------------
def test_summary_numbers_are_the_simulators(reference):
    from simulate import simulate

    out, summary = reference
    row = summary[(summary.scheme == "lns") & (summary.depth == 24) & (summary.seed == 1)].iloc[0]
    setting = Setting.preset("llama", width=32, heads=2, tokens=8, scheme="lns", depth=24)
    table = simulate(setting, samples=4, seed=1, metrics=("var", "angular"), device="cpu")
    record, stored = read_point(out, row.point)
    final = stored[(stored.metric == "var") & (stored.layer == 24)]["mean"].iloc[0]
    # The summary's number is its point's, read back from summary.csv: exactly from pandas 3 on, within one
    # unit in the last place with pandas 2's default CSV parser (not round-trip exact).
    assert row.status is PointStatus.OK and abs(row.final_var - final) <= np.spacing(final), (row.final_var, final)
    assert record["config"]["seed"] == 1 and record["config"]["setting"]["scheme"] == "lns"
    # The sweep ran with cores // workers torch threads, this run with one: the same numbers up to the order of
    # float32 reductions (pandas' default relative tolerance, 1e-5), not bit for bit.
    pd.testing.assert_frame_equal(stored, table, check_exact=False, rtol=1e-5)
    assert np.isfinite(summary.growth_exponent).all() and (summary.growth_ci_low <= summary.growth_exponent).all()


@pytest.mark.slow
def test_local_pool_gives_the_same_summary_and_a_rerun_is_a_no_op(reference, tmp_path):
    out = tmp_path / "sweep"
    sweep = load_spec(_spec_file(tmp_path))
    first = run_sweep(sweep, out, workers=2)
    assert (first.ran, first.skipped) == (8, 0), first
    summary = read_summary(out)
    pd.testing.assert_frame_equal(_without_wall_time(summary), _without_wall_time(reference[1]))
    stamps = {p: p.stat().st_mtime_ns for p in _point_files(out)}
    again = run_sweep(sweep, out, workers=2)
    assert (again.ran, again.skipped) == (0, 8), again
    assert {p: p.stat().st_mtime_ns for p in _point_files(out)} == stamps, "a finished point was rewritten"
    pd.testing.assert_frame_equal(read_summary(out), summary)


@pytest.mark.slow
def test_an_interrupted_sweep_resumes_with_only_the_missing_points(reference, tmp_path):
    spec, out = _spec_file(tmp_path), tmp_path / "sweep"
    command = [sys.executable, "-m", "simulate", "sweep", str(spec), "--out", str(out), "--workers", "2",
               "--no-progress"]
    process = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + 180
    while not (out / "points").is_dir() or not _point_files(out):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no point finished within 180 s"
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    kept = _point_files(out)
    assert process.returncode == 130, stderr
    assert 1 <= len(kept) < 8, f"{len(kept)} points were kept: the interrupt came too late to test resuming"
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and f"interrupted by SIGINT after {len(kept)} of 8 points" in lines[0], stderr
    assert lines[0].endswith("re-run the same command to finish"), lines
    partial = read_summary(out)
    assert (partial.status == PointStatus.PENDING).sum() == 8 - len(kept), partial.status.tolist()
    assert not [p for p in (out / "points").iterdir() if p.name.startswith(".")], "temporary files left behind"
    resumed = run_sweep(load_spec(spec), out, workers=1)
    assert (resumed.skipped, resumed.ran) == (len(kept), 8 - len(kept)), resumed
    pd.testing.assert_frame_equal(_without_wall_time(read_summary(out)), _without_wall_time(reference[1]))


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    # no norm, alpha = d s^2 = 400: the float32 stream overflows within about 15 blocks
    sweep = parse_spec({"task": "run", "setting": {"block": "linear", "scheme": "none", "width": 16,
                                                   "tokens": 2, "init_std": 5.0},
                        "axes": {"depth": [2, 40]}, "options": {"samples": 2, "device": "cpu"}})
    report = run_sweep(sweep, tmp_path / "sweep", workers=1)
    summary = read_summary(tmp_path / "sweep")
    assert report.ran == 2 and summary.status.tolist() == [PointStatus.OK, PointStatus.FAILED], summary
    failed = summary.iloc[1]
    assert "blow-up" in failed.error and 1 <= failed.blow_up_layer < 40 and np.isnan(failed.final_var), failed
    record, table = read_point(tmp_path / "sweep", failed.point)
    assert record["status"] == "failed" and table.layer.max() == failed.blow_up_layer - 1
    assert run_sweep(sweep, tmp_path / "sweep", workers=1).ran == 0  # a recorded failure is done
    assert run_sweep(sweep, tmp_path / "sweep", workers=1, retry_failed=True).ran == 1


def test_predict_points_carry_the_theory_numbers(tmp_path):
    from theory import predict

    sweep = parse_spec({"task": "predict", "setting": {"block": "linear", "width": 16, "tokens": 2},
                        "axes": {"depth": [4, 64]}})
    run_sweep(sweep, tmp_path / "sweep", workers=1)
    summary = read_summary(tmp_path / "sweep")
    table = predict(Setting(block="linear", width=16, tokens=2, depth=64))
    exact = table[(table.metric == "var") & (table.kind == "exact")]
    law = exact.law.iloc[0]
    expected = exact[(exact.law == law) & (exact.layer == 64)].value.iloc[0]
    assert summary.status.tolist() == [PointStatus.OK, PointStatus.OK] and summary.final_var.iloc[1] == expected
    assert summary.seed.isna().all()


# -- Ray -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_ray_engine_gives_the_same_summary(reference, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="error", log_to_driver=False,
             runtime_env={"env_vars": {"DEPTH_WORKBENCH_THREADS": "1", "PYTHONPATH": str(REPO)}})
    try:
        report = run_sweep(load_spec(_spec_file(tmp_path)), tmp_path / "sweep", engine="ray")
    finally:
        ray.shutdown()
    assert (report.ran, report.failed, report.lost) == (8, 0, []), report
    pd.testing.assert_frame_equal(_without_wall_time(read_summary(tmp_path / "sweep")),
                                  _without_wall_time(reference[1]))



def test_an_unreachable_cluster_is_one_error_that_names_the_token_setting(monkeypatch, tmp_path):
    ray = pytest.importorskip("ray")
    from simulate.sweep.engines import EngineError, run_ray

    def refused(**kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")

    monkeypatch.setattr(ray, "init", refused)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    points = load_spec(_spec_file(tmp_path)).points
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(EngineError, match="at 10.0.0.1:6379: Failed to connect.*set RAY_AUTH_MODE=token"):
        next(run_ray(points, tmp_path / "out", "10.0.0.1:6379", 2))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # already set: the error is Ray's alone
    with pytest.raises(EngineError) as raised:
        next(run_ray(points, tmp_path / "out", "10.0.0.1:6379", 2))
    assert "RAY_AUTH_MODE" not in str(raised.value), raised.value

# -- trainings -----------------------------------------------------------------------------
def test_train_points_record_the_trainers_losses(tmp_path):
    from simulate.training import Trainer, TrainConfig, load_corpus

    setting = {"preset": "llama", "width": 16, "heads": 2, "tokens": 16, "depth": 2}
    options = {"steps": 4, "batch": 2, "log_every": 2, "device": "cpu"}
    sweep = parse_spec({"task": "train", "seeds": [3], "setting": setting, "axes": {"scheme": ["pre", "lns"]},
                        "options": options})
    run_sweep(sweep, tmp_path / "sweep", workers=1)
    summary = read_summary(tmp_path / "sweep")
    assert summary.status.tolist() == [PointStatus.OK, PointStatus.OK], summary.error.tolist()
    lns = Setting.preset("llama", width=16, heads=2, tokens=16, depth=2, scheme="lns")
    trainer = Trainer(lns, TrainConfig(steps=4, batch=2, log_every=2, seed=3), load_corpus("docs", 16),
                      torch_cpu(), tmp_path / "direct")
    trainer.run()
    loss = pd.read_csv(tmp_path / "direct" / "loss.csv")
    expected = loss[(loss.split == "val") & (loss.step == 4)]["loss"].iloc[0]
    assert summary.final_val_loss.iloc[1] == expected, (summary.final_val_loss.iloc[1], expected)
    _, table = read_point(tmp_path / "sweep", summary.point.iloc[1])
    assert set(table["table"]) == {"loss", "layers"}


def torch_cpu():
    import torch

    return torch.device("cpu")


def test_train_spec_refuses_a_non_causal_setting():
    with pytest.raises(SpecError, match="point 0 .*causal=False"):
        parse_spec({"task": "train", "setting": {"causal": False, "width": 16, "heads": 2}})
