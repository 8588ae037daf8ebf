"""No verdict, class, blind-test, status, rate-line or law word is compared as a string outside its enum's module.

A judgement's word is an enum member (:mod:`theory.verdicts`); code that compares it with a literal
(``verdict == "holds"``, ``label in ("exponential", ...)``, ``.isin(["holds"])``, a dict keyed by a
word) would silently stop matching when a word changes, or match a word read from a stale file.
This test reads the packages', the tools' and the notebooks' sources with ``ast`` and names every
such comparison (a notebook that counted ``verdict == "holds"`` once printed 0 of 40).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from simulate.claims.depth_laws import DepthLawForm
from simulate.claims.width_laws import WidthLawForm
from theory.verdicts import (AccuracyClass, BlindTest, CellStatus, GrowthClass, PointStatus, RateLine, RateStatus,
                             Stability, Verdict)

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("theory", "simulate", "paper_figs", "tools")
ENUM_MODULE = ROOT / "theory" / "verdicts.py"
WORDS = {member.value for kind in (Verdict, GrowthClass, BlindTest, Stability, AccuracyClass) for member in kind}
# A point's or a tuning rate's status (ok, failed, diverged, pending), a tuning cell's (tuned, failed, pending), a
# rate line (fixed, trained, tuned) and a law's form (power, additive, ...) are also other things' words (a trend
# table's count column, BlindTest.PENDING, a column "trained"): such a word is an offence where it is compared with
# what names its kind (an expression naming ``status``, ``cell_status``, ``line``, ``law``), or is a word above.
CONTEXT_WORDS = {"status": {member.value for kind in (PointStatus, RateStatus) for member in kind},
                 "cell_status": {member.value for member in CellStatus}, "line": {member.value for member in RateLine},
                 "law": {member.value for kind in (DepthLawForm, WidthLawForm) for member in kind}}


def _word_constants(node, kinds: frozenset = frozenset()) -> list[str]:
    """The word literals in ``node``: a string constant, or the elements of a literal list, tuple or set; a word of
    :data:`CONTEXT_WORDS` only where its kind is in ``kinds`` (what it is compared with names that kind)."""
    items = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else [node]
    words = (WORDS - set().union(*CONTEXT_WORDS.values())).union(*(CONTEXT_WORDS[kind] for kind in kinds))
    return [item.value for item in items if isinstance(item, ast.Constant) and item.value in words]


def _kinds_named(nodes) -> frozenset:
    """The kinds of :data:`CONTEXT_WORDS` that ``nodes`` name: as an attribute (``m.status``), a subscript's key
    (``points["status"]``) or a name (``line``)."""
    return frozenset(kind for kind in CONTEXT_WORDS for node in nodes for n in ast.walk(node)
                     if isinstance(n, ast.Attribute) and n.attr == kind or isinstance(n, ast.Name) and n.id == kind
                     or isinstance(n, ast.Constant) and n.value == kind)


def _notebook_code(path: Path) -> list[tuple[str, str]]:
    """``(name, source)`` of each code cell of a notebook, its IPython magics (``%``, ``!``) left out."""
    cells = json.loads(path.read_text())["cells"]
    return [(f"{path.relative_to(ROOT)} cell {i}",
             "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                       for line in "".join(cell["source"]).splitlines()))
            for i, cell in enumerate(cells) if cell["cell_type"] == "code"]


def _offences(path: Path) -> list[str]:
    return _source_offences(str(path.relative_to(ROOT)), path.read_text())


def _source_offences(name: str, source: str) -> list[str]:
    tree = ast.parse(source, filename=name)
    found = []
    for node in ast.walk(tree):
        words = []
        if isinstance(node, ast.Compare):
            sides = (node.left, *node.comparators)
            words = [w for side in sides for w in _word_constants(side, _kinds_named(sides))]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "isin":
            words = [w for arg in node.args for w in _word_constants(arg, _kinds_named([node.func.value]))]
        elif isinstance(node, ast.Dict):
            words = [w for key in node.keys if key is not None for w in _word_constants(key)]
        if words:
            found.append(f"{name}:{node.lineno}: {', '.join(map(repr, words))}")
    return found


def test_no_judgement_word_is_compared_as_a_string_outside_its_enum_module():
    sources = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py")) if p != ENUM_MODULE]
    assert len(sources) > 100, "the packages were not found"
    offences = [line for path in sources for line in _offences(path)]
    assert not offences, "words compared as strings (compare the enum members of theory.verdicts):\n" + \
        "\n".join(offences)


def test_no_notebook_compares_a_judgement_word_as_a_string():
    cells = [cell for path in sorted((ROOT / "notebooks").glob("*.ipynb")) for cell in _notebook_code(path)]
    assert len(cells) > 50, "the notebooks were not found"
    offences = [line for name, source in cells for line in _source_offences(name, source)]
    assert not offences, "words compared as strings in notebooks (compare theory.verdicts' members):\n" + \
        "\n".join(offences)


def test_the_check_sees_a_comparison_of_a_word():
    """A control: the check finds a literal comparison, a membership test and an isin of words."""
    sample = ROOT / "tests" / "_words_sample.py"
    sample.write_text('v == "holds"\nx in ("violated", "inconclusive")\nt.isin(["stable"])\n{"passes": 1}\n'
                      'f["exponential"]\nm.status == "ok"\npoints["status"] != "pending"\ncell == "pending"\n'
                      '{"failed": 1}\nrow.line != "fixed"\nlevel == "fixed"\n')
    try:
        found = _offences(sample)
    finally:
        sample.unlink()
    assert len(found) == 7 and all("_words_sample.py" in line for line in found), found
    assert {line.split(":")[1] for line in found} == {"1", "2", "3", "4", "6", "7", "10"}, found
