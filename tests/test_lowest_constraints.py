""".ci/lowest_constraints.py: pyproject.toml's lower bounds as a pip constraints file, which CI installs."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "lowest_constraints.py"
LINE = re.compile(r"^([a-z0-9]+(?:-[a-z0-9]+)*)==([0-9][0-9a-z.+]*)(?:; (.+))?$")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def _pins(text: str) -> dict[str, tuple[Version, str | None]]:
    """Name -> (version, marker) of a constraints file, checking every line's form."""
    lines = text.splitlines()
    assert lines[0].startswith("# ") and "lowest_constraints.py" in lines[0], lines[0]
    pins = {}
    for line in lines[1:]:
        match = LINE.match(line)
        assert match, f"not NAME==VERSION[; marker]: {line!r}"
        pins[match.group(1)] = (Version(match.group(2)), match.group(3))
    assert list(pins) == sorted(pins), "names sorted"
    return pins


def _declared() -> dict[str, Version]:
    """Name -> highest declared lower bound over the dependencies and every extra (the project itself left out)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    bounds: dict[str, Version] = {}
    for text in project["dependencies"] + [r for group in project["optional-dependencies"].values() for r in group]:
        requirement = Requirement(text)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if name != project["name"]:
            (spec,) = requirement.specifier
            bounds[name] = max(bounds.get(name, Version(spec.version)), Version(spec.version))
    return bounds


def test_every_requirement_is_pinned_at_its_lower_bound():
    done = _run()
    assert done.returncode == 0 and done.stderr == "", done.stderr
    pins = _pins(done.stdout)
    assert {name: version for name, (version, _) in pins.items()} == _declared()
    assert pins["tomli"][1] == 'python_version < "3.11"'  # a marker is kept


def test_a_kept_distribution_is_pinned_as_installed_and_raises_what_it_needs():
    done = _run("--keep", "torch")
    assert done.returncode == 0, done.stderr
    pins = _pins(done.stdout)
    assert pins["torch"][0] == Version(importlib.metadata.version("torch"))
    needs = [Requirement(r) for r in importlib.metadata.requires("torch") if r.startswith("sympy")]
    assert all(pins["sympy"][0] in need.specifier for need in needs), (pins["sympy"], needs)
    assert pins["numpy"][0] == _declared()["numpy"]  # what torch does not need stays at its bound


def test_a_requirement_without_a_lower_bound_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[project]\nname = "x"\ndependencies = ["numpy<3"]\n')
    done = _run("--pyproject", str(bad))
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "'numpy<3'" in done.stderr and "NAME>=VERSION" in done.stderr
