"""Smoke tests of ``python -m theory``: list, show, unknown ids, help, predict dispatch."""

from __future__ import annotations

import os
import subprocess
import sys
import pytest

import theory.__main__ as theory_main
from theory.__main__ import main
from theory.symbolic.lemmas import LEMMAS


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "theory", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_list_one_line_per_lemma():
    result = _run("list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(LEMMAS)
    for line, entry in zip(lines, LEMMAS.values()):
        lemma_id, rest = line.split("  ", 1)
        assert lemma_id == entry.id
        assert rest.strip().startswith(entry.source)


def test_show_p2_thm_1():
    result = _run("show", "p2-thm-1")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "P2 Theorem 1" in out and "\\sigma_{L}^{2} \\leq" in out  # LaTeX
    assert "σ" in out and "√α" in out  # Unicode pretty form
    assert "passed (sympy)" in out and "Growth" in out and "Theta(exp(L))" in out


def test_unknown_id_exits_2_with_one_stderr_line():
    result = _run("show", "no-such-lemma")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "no-such-lemma" in lines[0] and "p2-thm-1" in lines[0] and "bridge-aligned" in lines[0]


@pytest.mark.parametrize("args", [["--help"], ["list", "--help"], ["show", "--help"]])
def test_help(args, capsys):
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 0
    assert "usage:" in capsys.readouterr().out


@pytest.mark.parametrize("args", [[], ["bogus"], ["list", "--kind", "nope"], ["show"]])
def test_bad_usage_is_one_line_exit_2(args, capsys):
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1


def test_list_kind_filter(capsys):
    assert main(["list", "--kind", "exact"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [e.id for e in LEMMAS.values() if e.kind == "exact"]


@pytest.mark.parametrize("lemma_id", list(LEMMAS))
def test_show_every_lemma_in_ascii(lemma_id, capsys):
    assert main(["show", lemma_id, "--ascii", "--no-check"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(lemma_id) and "LaTeX:" in out
    out.encode("ascii")  # --ascii output is plain ASCII


def test_show_falls_back_to_ascii_when_stdout_cannot_encode():
    result = _run("show", "lns-init", "--no-check", env={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stderr
    assert "harmonic" in result.stdout


def test_predict_is_dispatched_to_predict_main(monkeypatch):
    seen = {}

    def fake_main(argv):
        seen["argv"] = argv
        return 7

    monkeypatch.setattr(theory_main, "predict_main", fake_main)
    assert main(["predict", "--depth", "3", "--help"]) == 7
    assert seen["argv"] == ["--depth", "3", "--help"]
