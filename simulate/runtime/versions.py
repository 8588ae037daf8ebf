"""Code versions: a digest of the source files that decide a result (cache keys, run records).

Every record the workbench keeps (simulator cache entries and run directories, training
runs, sweep points, cached trainings) names the version of the code that made it, as
:func:`source_digest` of the files that decide its numbers; a change to any of them is a
new version. :func:`import_closure` finds those files from the code itself: the modules a
set of entry modules imports, directly or through one another, read with ``ast`` (nothing
is imported). Imports nothing heavy.

>>> len(source_digest(["theory/setting.py"])), source_digest([]) == source_digest([], salt="")
(16, True)
>>> import_closure(["simulate.engine.noise"])
['simulate/engine/noise.py']
>>> closure_version("simulate.engine.noise") == source_digest(["simulate/engine/noise.py"])
True
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

__all__ = ["ROOT", "PACKAGES", "source_digest", "module_files", "imported_names", "resolve_module",
           "import_closure", "closure_version"]

ROOT = Path(__file__).resolve().parents[2]  # the repository root
PACKAGES = ("theory", "simulate", "paper_figs")  # the packages of the repository


def source_digest(names, salt: str = "", root: Path = ROOT) -> str:
    """sha256 (first 16 hex digits) of ``salt``, then each file's name and bytes, in the order given.

    ``names`` are paths relative to ``root`` (default :data:`ROOT`); a missing file is an error.
    """
    digest = hashlib.sha256(salt.encode())
    for name in names:
        digest.update(str(name).encode())
        digest.update((Path(root) / name).read_bytes())
    return digest.hexdigest()[:16]


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file of every ``.py`` file of :data:`PACKAGES` under ``root`` (``pkg/__init__.py``: ``pkg``)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((Path(root) / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if any(part.startswith(".") or part == "__pycache__" for part in parts):
                continue
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every dotted name ``module`` (its file ``path``) imports, external ones included (e.g. ``torch``).

    ``import X`` and ``from X import Y`` anywhere in the module (function-level imports too)
    count; ``from pkg import name`` names ``pkg.name`` when that is a module in ``modules``,
    else ``pkg``; relative imports are resolved against ``module``; a call
    ``import_module("X")`` with a literal name counts as ``import X``.
    """
    names = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    stat = path.stat()
    for node in _import_nodes(path, stat.st_mtime_ns, stat.st_size):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                names.add(candidate if candidate in modules else base)
        elif node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value)  # import_module("X")
    return names


@lru_cache(maxsize=None)
def _import_nodes(path: Path, mtime_ns: int, size: int) -> tuple[ast.AST, ...]:
    """The import statements and ``import_module(...)`` calls of ``path``, parsed once per version of the file."""
    return tuple(node for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
                 if isinstance(node, (ast.Import, ast.ImportFrom)) or (
                     isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                     == "import_module"))


def resolve_module(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of the dotted ``name`` that is a module in ``modules`` (None: an external name)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def import_closure(entries, root: Path = ROOT) -> list[str]:
    """The files (relative to ``root``, sorted) of the modules ``entries`` and every module of
    :data:`PACKAGES` they import, directly or through one another (:func:`imported_names`).

    A package's ``__init__`` counts where it is imported itself (``import pkg``, ``from pkg
    import name``), not because one of its modules is.
    """
    modules = module_files(root)
    seen, todo = set(), list(entries)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        if module not in modules:
            raise ValueError(f"{module} is not a module of {', '.join(PACKAGES)} under {root}")
        seen.add(module)
        targets = (resolve_module(name, modules) for name in imported_names(module, modules[module], modules))
        todo.extend(target for target in targets if target is not None)
    return sorted(str(modules[module].relative_to(root)) for module in seen)


def closure_version(*entries: str, root: Path = ROOT) -> str:
    """The code version of what the modules ``entries`` compute: :func:`source_digest` of their
    :func:`import_closure` (of the sources under ``root``). Every code version of the workbench is one of
    these (the simulator's cache, the trainer, the scores, each sweep task), so a change to any source a
    result depends on is a new version and a change elsewhere (a verdict's wording) is not."""
    return source_digest(import_closure(entries, root), root=root)
