"""Every (block, metric) pair either gives a finite table or one clear error naming both.

A metric of a sublayer a block does not have (``var_attn`` of an ``mlp`` block) used to
come back as an empty, object-typed table, which crashed the explorer's plot; now
:func:`simulate.engine.metrics.parse_metrics` refuses it, in the API and the CLI (exit 2).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simulate import simulate
from simulate.engine.blocks import SUBLAYERS as RUNNER_SUBLAYERS
from simulate.engine.metrics import METRICS, metrics_of_block, parse_metrics
from theory.setting import BLOCKS, Setting

REPO = Path(__file__).resolve().parents[2]
DEPTH = 2


def _setting(block: str) -> Setting:
    return Setting(block=block, depth=DEPTH, width=8, tokens=3, heads=2, experts=2, top_k=1)


@pytest.mark.parametrize("block", BLOCKS)
def test_metrics_of_block_are_what_the_runner_measures(block):
    """'all' measures exactly metrics_of_block(block), each at every layer it is defined, all finite."""
    table = simulate(_setting(block), samples=2, seed=0, metrics="all")
    assert tuple(m for m in METRICS if m in set(table.metric)) == metrics_of_block(block), sorted(set(table.metric))
    assert table["mean"].dtype == np.float64 and np.isfinite(table["mean"]).all(), table
    branch = {name for name, _ in RUNNER_SUBLAYERS[block]}  # the branch variances the runner writes
    assert branch == {m for m in metrics_of_block(block) if m.startswith("var_")}, (block, branch)


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("block", BLOCKS)
def test_each_pair_plots_or_is_refused(block, metric):
    if metric in metrics_of_block(block):
        table = simulate(_setting(block), samples=2, seed=0, metrics=(metric,))
        assert set(table.metric) == {metric} and len(table) >= DEPTH, table
        assert np.isfinite(table[["mean", "ci_low", "ci_high"]].to_numpy(float)).all(), table
        assert int(table.layer.max()) == DEPTH, table
    else:
        with pytest.raises(ValueError) as error:
            simulate(_setting(block), samples=2, seed=0, metrics=(metric,))
        text = str(error.value)
        assert f"metrics={metric!r}" in text and f"block={block!r}" in text, text
        assert all(m in text for m in metrics_of_block(block)) and "\n" not in text, text


def test_parse_metrics_all_depends_on_the_block():
    assert parse_metrics("all") == METRICS
    assert parse_metrics("all", "mlp") == metrics_of_block("mlp")
    assert "var_attn" not in parse_metrics("all", "linear") and "attn_entropy" in parse_metrics("all", "moe")
    with pytest.raises(ValueError, match="block='nope'"):
        metrics_of_block("nope")


def test_cli_refuses_a_metric_the_block_lacks(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "simulate", "run", "--block", "linear", "--metrics", "var,attn_entropy",
               "--depth", "2", "--width", "8", "--tokens", "2", "--samples", "2", "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "attn_entropy" in lines[0] and "block='linear'" in lines[0], lines
    assert not out.exists()
