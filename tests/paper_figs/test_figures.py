"""Every paper figure builds at the quick (tiny) size; the CLI works and rejects bad names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paper_figs import FIGURES
from paper_figs.__main__ import main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_builds_png_and_pdf(name, tmp_path, shared_cache):
    paths = [Path(p) for p in FIGURES[name](tmp_path, True)]
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"], paths
    for path in paths:
        assert path.is_file() and path.stat().st_size > 0, path
        assert path.parent == tmp_path
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary files left behind"


def _run_cli(*args, cache):
    env = {**os.environ, "DEPTH_WORKBENCH_CACHE": str(cache), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "paper_figs", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def test_cli_builds_one_figure(tmp_path, shared_cache):
    env = {**os.environ, "DEPTH_WORKBENCH_CACHE": str(shared_cache), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-m", "paper_figs", "--quick", "--only", "weight_decay", "--out",
                           str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    written = sorted(p.suffix for p in tmp_path.iterdir())
    assert written == [".pdf", ".png"], written


def test_cli_unknown_figure_exits_2_with_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--quick", "--only", "no_such_figure", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "no_such_figure" in lines[0] and "variance_by_scheme" in lines[0], lines
    assert not (tmp_path / "out").exists()
