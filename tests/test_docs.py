"""Documents in the repository: every citation points at a file and heading that exist.

The code (``.py`` and ``.ipynb`` under theory/, simulate/, paper_figs/, notebooks/) cites
documents as ``docs/NAME.md`` or ``docs/NAME.md#anchor``; an anchor is a Markdown heading
turned into a GitHub-style slug. Documents kept outside the repository (the developers'
notes: ``CONTRACT.md``, ``THEORY.md``, ``DESIGN.md``, ``TRAINED.md``, anything under
``../shared``) must not be cited at all. Each failure names the file and the line.

The documents in turn name code: dotted names (``theory.symbolic.recursions.preln_variance``),
repository paths and tests (``tests/theory/test_symbolic.py::test_identity``); those must
exist too, and the links between documents must resolve.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("theory", "simulate", "paper_figs", "notebooks")
DOCUMENTS = ("design.md", "formats.md", "derivations.md", "trained.md", "scores.md", "studies.md", "accuracy.md")

# docs/NAME.md with an optional #anchor, not part of a longer path (``x/docs/...``).
DOC_CITATION = re.compile(r"(?<![\w/.-])(docs/[\w./-]*?\.md)(?:#([\w-]+))?")
# Documents outside the repository: the developers' notes, by name or by place.
OUTSIDE = re.compile(r"\b(?:CONTRACT|THEORY|DESIGN|TRAINED)\.md\b|(?:\.\./)+shared\b"
                     r"|(?<![\w/.-])shared/(?=\w)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_HTML_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_CODE_NAME = re.compile(r"`((?:theory|simulate|paper_figs)(?:\.[A-Za-z_]\w*)+)`")
_TEST_NAME = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
_REPO_PATH = re.compile(r"`((?:theory|simulate|paper_figs|notebooks|tests|docs|\.ci)/[\w./-]*?\.(?:py|ipynb|md|toml))`")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens.

    Links keep their text, inline code and emphasis lose their markers.

    >>> github_slug("preln-init"), github_slug("p1-lemma-3.2"), github_slug("How `theory` works!")
    ('preln-init', 'p1-lemma-32', 'how-theory-works')
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # [text](url) -> text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(markdown: Path) -> set[str]:
    """Every anchor of a Markdown file: heading slugs (repeats get -1, -2, ...) and HTML ids."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        found.update(_HTML_ANCHOR.findall(line))
        heading = _HEADING.match(line)
        if heading:
            slug = github_slug(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _numbered_lines(root: Path, paths):
    """``(path:line, path, text)`` for every line of ``paths`` (files relative to ``root``)."""
    for path in paths:
        name = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            yield f"{name}:{number}", path, line


def cited_files(root: Path) -> list[Path]:
    """The .py and .ipynb files whose citations are checked, sorted."""
    return sorted(path for folder in SCANNED if (root / folder).is_dir()
                  for path in (root / folder).rglob("*") if path.suffix in (".py", ".ipynb") and path.is_file()
                  and ".ipynb_checkpoints" not in path.parts)


def citation_problems(root: Path) -> list[str]:
    """``path:line: problem`` for every citation of a missing document, heading or outside document."""
    problems, anchor_cache = [], {}
    for where, _, line in _numbered_lines(root, cited_files(root)):
        for match in OUTSIDE.finditer(line):
            problems.append(f"{where}: cites {match.group(0)!r}, a document outside the repository "
                            f"(cite one of {', '.join('docs/' + doc for doc in DOCUMENTS)})")
        for match in DOC_CITATION.finditer(line):
            document, anchor = match.group(1), match.group(2)
            target = root / document
            if not target.is_file():
                problems.append(f"{where}: cites {document}, which is not in the repository")
            elif anchor and anchor not in _anchors_of(target, anchor_cache):
                problems.append(f"{where}: cites {document}#{anchor}, but {document} has no heading with that anchor")
    return problems


def _anchors_of(markdown: Path, cache: dict) -> set[str]:
    """:func:`anchors` of ``markdown``, read once per check."""
    if markdown not in cache:
        cache[markdown] = anchors(markdown)
    return cache[markdown]


def _markdown_files(root: Path) -> list[Path]:
    return [path for path in sorted((root / "docs").glob("*.md")) + [root / "README.md"] if path.is_file()]


def link_problems(root: Path) -> list[str]:
    """``path:line: problem`` for relative links in docs/*.md and README.md that do not resolve."""
    problems, anchor_cache = [], {}
    for where, path, line in _numbered_lines(root, _markdown_files(root)):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                problems.append(f"{where}: link to {target}: {file_part} does not exist")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors_of(linked, anchor_cache):
                problems.append(f"{where}: link to {target}: no heading with anchor #{anchor}")
    return problems


def _resolves(dotted: str) -> bool:
    """Whether ``a.b.c`` names a module, or an attribute reached from the longest importable module."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
                continue  # this prefix is not a module: try a shorter one
            raise
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def reference_problems(root: Path) -> list[str]:
    """``path:line: problem`` for code names, tests and repository paths the documents name but that do not exist."""
    problems = []
    for where, _, line in _numbered_lines(root, _markdown_files(root)):
        for dotted in _CODE_NAME.findall(line):
            if not _resolves(dotted):
                problems.append(f"{where}: names {dotted}, which does not resolve")
        for test_file, test_name in _TEST_NAME.findall(line):
            source = root / test_file
            if not source.is_file():
                problems.append(f"{where}: names {test_file}, which does not exist")
            elif not re.search(rf"^\s*(?:async\s+)?def {test_name}\(", source.read_text(encoding="utf-8"),
                               re.MULTILINE):
                problems.append(f"{where}: names {test_file}::{test_name}, which is not defined there")
        for repo_path in _REPO_PATH.findall(line):
            if not (root / repo_path).exists():
                problems.append(f"{where}: names {repo_path}, which does not exist")
    return problems


def _report(problems: list[str]) -> str:
    return f"{len(problems)} problem(s):\n" + "\n".join(problems)


# -- the checker itself -------------------------------------------------------------------
@pytest.mark.parametrize("heading,slug", [
    ("preln-init", "preln-init"), ("p1-thm-3.3", "p1-thm-33"), ("Process set-up", "process-set-up"),
    ("The `var` metric, again", "the-var-metric-again"), ("[formats](formats.md) of files", "formats-of-files"),
])
def test_github_slug(heading, slug):
    assert github_slug(heading) == slug


def test_checker_names_file_and_line_of_every_bad_citation(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "laws.md").write_text("# Laws\n\n## exact-thing\n\n```\n## not-a-heading\n```\n")
    (tmp_path / "theory").mkdir()
    (tmp_path / "theory" / "good.py").write_text('"""Derived here, docs/laws.md#exact-thing (see docs/laws.md)."""\n')
    (tmp_path / "theory" / "bad.py").write_text(
        '"""One.\n\nSource: derived here (THEORY.md B).\nSee docs/laws.md#not-a-heading and docs/gone.md.\n'
        'Also ../shared/DESIGN.md.\n"""\n')
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "n.ipynb").write_text('{"cells": [{"source": ["CONTRACT.md says"]}]}\n')
    problems = citation_problems(tmp_path)
    assert not [p for p in problems if p.startswith("theory/good.py")], _report(problems)
    expected = [("theory/bad.py:3:", "THEORY.md"), ("theory/bad.py:4:", "docs/laws.md#not-a-heading"),
                ("theory/bad.py:4:", "docs/gone.md"), ("theory/bad.py:5:", "../shared"),
                ("theory/bad.py:5:", "DESIGN.md"), ("notebooks/n.ipynb:1:", "CONTRACT.md")]
    for where, what in expected:
        assert any(p.startswith(where) and what in p for p in problems), f"{where} {what} not reported:\n" \
                                                                          + _report(problems)
    assert len(problems) == len(expected), _report(problems)


def test_link_and_reference_checkers_catch_what_is_missing(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("See [design](docs/design.md#nowhere) and [x](docs/missing.md).\n")
    (tmp_path / "docs" / "design.md").write_text(
        "# Design\n\n## here\n\n[ok](#here), [web](https://example.org), `theory.setting.Setting`,\n"
        "`theory.setting.NoSuchThing`, `tests/test_docs.py::test_github_slug`, `tests/nope.py::test_x`\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_docs.py").write_text("def test_github_slug():\n    pass\n")
    links = link_problems(tmp_path)
    assert len(links) == 2 and any("#nowhere" in p for p in links) and any("missing.md" in p for p in links), \
        _report(links)
    references = reference_problems(tmp_path)
    assert len(references) == 2, _report(references)
    assert any("NoSuchThing" in p for p in references) and any("tests/nope.py" in p for p in references)


# -- the repository ------------------------------------------------------------------------
def test_every_citation_in_the_code_exists():
    problems = citation_problems(ROOT)
    assert not problems, _report(problems)


def test_the_documents_exist_and_the_readme_links_them():
    missing = [name for name in DOCUMENTS if not (ROOT / "docs" / name).is_file()]
    assert not missing, f"docs/ lacks {', '.join(missing)}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    unlinked = [name for name in DOCUMENTS if f"(docs/{name}" not in readme]
    assert not unlinked, f"README.md has no link to {', '.join('docs/' + n for n in unlinked)}"
    outside = [f"README.md:{n}: {m.group(0)}" for n, line in enumerate(readme.splitlines(), 1)
               for m in OUTSIDE.finditer(line)]
    assert not outside, _report(outside)


def test_links_in_the_documents_resolve():
    problems = link_problems(ROOT)
    assert not problems, _report(problems)


def test_names_in_the_documents_exist():
    problems = reference_problems(ROOT)
    assert not problems, _report(problems)
