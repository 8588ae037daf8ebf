"""The import graph of theory, simulate and paper_figs: no cycles; theory imports neither torch nor simulate.

Every module is parsed with ``ast`` (no import is executed). ``import X`` and ``from X import Y``
anywhere in a module (function-level imports included) count; ``from pkg import name`` is an
edge to ``pkg.name`` when that is a module of these packages, else to ``pkg``; relative
imports are resolved against the importing module. Importing ``a.b.c`` also runs the
``__init__`` of ``a`` and ``a.b``, so those count as edges too (except into the importer's own
packages, which are already running when it is imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("theory", "simulate", "paper_figs")


def _modules() -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file of the packages (``pkg/__init__.py`` is ``pkg``)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if any(part.startswith(".") or part == "__pycache__" for part in parts):
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def _imported_names(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every dotted name ``module`` imports (external ones included, e.g. ``torch``)."""
    names = set()
    package = module if _is_package(module, modules) else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
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
    return names


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the packages (None: external)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in modules:
            return prefix
    return None


def build_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """``(edges, external)``: internal module -> internal modules it imports, and -> external top-level names."""
    modules = _modules()
    edges, external = {}, {}
    for module, path in modules.items():
        targets, outside = set(), set()
        own = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 2)}
        for name in _imported_names(module, path, modules):
            target = _resolve(name, modules)
            if target is None:
                outside.add(name.split(".")[0])
                continue
            parts = target.split(".")
            for end in range(1, len(parts) + 1):  # the parent packages' __init__ run first
                step = ".".join(parts[:end])
                if step != module and (step == target or step not in own):
                    targets.add(step)
        edges[module], external[module] = targets, outside
    return edges, external


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state = dict.fromkeys(edges, 0)  # 0 new, 1 on the stack, 2 done
    for root in sorted(edges):
        if state[root]:
            continue
        stack, path = [(root, iter(sorted(edges[root])))], [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state[child] == 1:
                return path[path.index(child):] + [child]
            elif state[child] == 0:
                state[child] = 1
                stack.append((child, iter(sorted(edges[child]))))
                path.append(child)
    return None


def _reachable(edges: dict[str, set[str]], start: set[str]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges[node])
    return seen


def test_graph_sees_the_packages():
    edges, _ = build_graph()
    assert {"theory", "theory.meanfield.prediction", "theory.symbolic.lemmas", "simulate", "paper_figs"} <= set(edges)
    assert "theory.meanfield.plan" in edges["theory.meanfield.prediction"]


def test_find_cycle_reports_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    edges, _ = build_graph()
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_theory_imports_neither_torch_nor_simulate():
    edges, external = build_graph()
    reached = _reachable(edges, {module for module in edges if module.split(".")[0] == "theory"})
    internal = sorted(module for module in reached if module.split(".")[0] != "theory")
    assert not internal, f"theory reaches {internal}"
    torch_users = sorted(module for module in reached if "torch" in external[module])
    assert not torch_users, f"theory modules importing torch: {torch_users}"
