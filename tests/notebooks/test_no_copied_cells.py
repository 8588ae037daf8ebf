"""No helper is copied from notebook to notebook: a code cell (or a function) of more than 5 lines is in one only.

Helpers the notebooks share live in the packages (``paper_figs.notebook``,
``paper_figs.profiles``, ``paper_figs.explorer``, ...). Two notebooks carrying the same
code cell longer than :data:`MAX_SHARED_LINES` lines, or the same function definition that
long inside different cells, fail this test; lines are compared with trailing spaces and
blank lines dropped.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import nbformat

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
MAX_SHARED_LINES = 5


def _lines(source: str) -> tuple[str, ...]:
    return tuple(line.rstrip() for line in source.splitlines() if line.strip())


def _blocks(source: str) -> list[tuple[str, ...]]:
    """The cell itself and every function or class it defines, as normalised lines."""
    blocks = [_lines(source)]
    clean = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(clean)
    except SyntaxError:
        return blocks
    lines = clean.splitlines()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            blocks.append(_lines("\n".join(lines[node.lineno - 1:node.end_lineno])))
    return blocks


def copied_blocks(notebooks: dict[str, list[str]]) -> list[str]:
    """Blocks longer than MAX_SHARED_LINES found in two notebooks: one line per (pair, block).

    >>> cell = "\\n".join(f"x{i} = {i}" for i in range(6))
    >>> copied_blocks({"a": [cell], "b": [cell, "y = 1"]})
    ['a and b share 6 lines: x0 = 0 ...']
    >>> copied_blocks({"a": [cell], "b": [cell.replace("x5", "z5")]})
    []
    """
    seen = {name: {block for source in sources for block in _blocks(source) if len(block) > MAX_SHARED_LINES}
            for name, sources in notebooks.items()}
    found = []
    for (first, a), (second, b) in itertools.combinations(sorted(seen.items()), 2):
        found += [f"{first} and {second} share {len(block)} lines: {block[0][:60]} ..." for block in sorted(a & b)]
    return found


def test_the_check_finds_a_copied_function():
    helper = "def draw(ax, table):\n" + "\n".join(f"    step_{i}(ax, table)" for i in range(6))
    found = copied_blocks({"one": [f"import os\n{helper}\nprint(1)"], "two": [f"{helper}\n\nx = 2"]})
    assert len(found) == 1 and "def draw(ax, table):" in found[0], found


def test_no_code_cell_longer_than_5_lines_is_in_two_notebooks():
    notebooks = {path.stem: [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
                 for path in sorted(NOTEBOOK_DIR.glob("*.ipynb"))}
    assert len(notebooks) >= 5, sorted(notebooks)
    copies = copied_blocks(notebooks)
    assert not copies, "move these into a package helper (paper_figs.notebook):\n" + "\n".join(copies)
