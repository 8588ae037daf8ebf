"""The lowest versions pyproject.toml allows, as a pip constraints file: one ``NAME==VERSION`` a line.

Every requirement of ``[project] dependencies`` and of each ``optional-dependencies`` group
(parsed with ``packaging``) must read ``NAME>=VERSION``, extras and a ``; marker`` allowed; a
name in several groups gets its highest bound (the version pip installs them all with, at the
lowest); a reference to the project itself (``depth-workbench[hf]``) is skipped. Extras are
dropped (pip refuses them in constraints), markers are kept.

``--keep NAME`` pins NAME at the version installed where this script runs instead of its
lowest (CI keeps the on-disk torch, see .ci/run), and raises the pin of every other
requirement that the installed NAME needs at a higher version (torch 2.13 needs sympy >= 1.13.3).

Usage: ``python .ci/lowest_constraints.py [--keep NAME ...] [--pyproject PATH] > constraints.txt``;
a requirement of another form, or a kept name that is not installed, is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement  # pytest's dependency: in every test venv
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pyproject.toml asks for tomli there
    import tomli as tomllib


def normalise(name: str) -> str:
    """PEP 503 name: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lowest(pyproject: dict) -> dict[str, tuple[Version, str]]:
    """Normalised name -> (lowest version, marker or "") of every requirement in ``pyproject``."""
    project = pyproject["project"]
    groups = [project.get("dependencies", [])] + list(project.get("optional-dependencies", {}).values())
    found: dict[str, tuple[Version, str]] = {}
    for text in (r for group in groups for r in group):
        try:
            requirement = Requirement(text)
        except InvalidRequirement as error:
            raise ValueError(f"pyproject.toml: requirement {text!r}: {error}") from None
        name = normalise(requirement.name)
        if name == normalise(project["name"]):
            continue
        specs = list(requirement.specifier)
        if len(specs) != 1 or specs[0].operator != ">=":
            raise ValueError(f"pyproject.toml: requirement {text!r} is not of the form NAME>=VERSION[; marker]")
        version = Version(specs[0].version)
        if name not in found or version > found[name][0]:
            found[name] = (version, str(requirement.marker or ""))
    return found


def keep_installed(found: dict, name: str) -> None:
    """Pin ``name`` at its installed version and raise the pins its installed distribution needs higher."""
    if name not in found:
        raise ValueError(f"--keep {name}: pyproject.toml does not require {name}")
    try:
        installed = Version(importlib.metadata.version(name))
        needs = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(f"--keep {name}: {name} is not installed here") from None
    found[name] = (installed, found[name][1])
    for requirement in map(Requirement, needs):
        other = normalise(requirement.name)
        if other not in found or other == name or (requirement.marker and not requirement.marker.evaluate()):
            continue  # not ours, or for another platform, Python or extra
        floors = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if floors and max(floors) > found[other][0]:
            found[other] = (max(floors), found[other][1])
            print(f"lowest_constraints: {other} {max(floors)}, which the installed {name} {installed} needs",
                  file=sys.stderr)


def constraints(found: dict) -> str:
    """The constraints file: a header and one ``NAME==VERSION[; marker]`` line per name, sorted."""
    lines = ["# The lowest versions pyproject.toml allows; written by .ci/lowest_constraints.py, do not edit."]
    lines += [f"{name}=={version}" + (f"; {marker}" if marker else "") for name, (version, marker) in
              sorted(found.items())]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="The lowest versions pyproject.toml allows, as pip constraints.")
    parser.add_argument("--keep", action="append", default=[], metavar="NAME",
                        help="pin NAME at its installed version (and what it needs) instead of its lowest")
    parser.add_argument("--pyproject", type=Path, default=Path(__file__).resolve().parents[1] / "pyproject.toml")
    args = parser.parse_args(argv)
    try:
        found = lowest(tomllib.loads(args.pyproject.read_text()))
        for name in args.keep:
            keep_installed(found, normalise(name))
    except (OSError, ValueError, KeyError) as error:
        print(f"lowest_constraints: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(constraints(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
