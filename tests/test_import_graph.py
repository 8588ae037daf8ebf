"""The import graph of theory, simulate and paper_figs: no cycles; theory imports neither torch nor simulate.

Every module is parsed with ``ast`` (no import is executed), by the walker that also finds the
simulator's sources for its cache key (:func:`simulate.runtime.versions.imported_names`): ``import X``,
``from X import Y`` anywhere in a module (function-level imports included) and
``import_module("X")`` count; ``from pkg import name`` is an edge to ``pkg.name`` when that is a
module of these packages, else to ``pkg``; relative imports are resolved against the importing
module. Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``, so those count as
edges too (except into the importer's own packages, which are already running when it is imported).
"""

from __future__ import annotations

from simulate.runtime.versions import imported_names, module_files, resolve_module


def build_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """``(edges, external)``: internal module -> internal modules it imports, and -> external top-level names."""
    modules = module_files()
    edges, external = {}, {}
    for module, path in modules.items():
        targets, outside = set(), set()
        own = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 2)}
        for name in imported_names(module, path, modules):
            target = resolve_module(name, modules)
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



def _imports(module: str, modules: dict) -> set[str]:
    """The internal modules ``module`` names in its imports (resolved, parents not added)."""
    return {target for name in imported_names(module, modules[module], modules)
            if (target := resolve_module(name, modules)) is not None}


def _layer(module: str) -> str:
    """``engine``, ``runtime`` (the plumbing), ``service`` (the rest of simulate), or the top package."""
    parts = module.split(".")
    if parts[0] != "simulate":
        return parts[0]
    return parts[1] if len(parts) > 1 and parts[1] in ("engine", "runtime") else "service"


_ALLOWED = {"engine": ("engine", "runtime", "theory"), "runtime": ("runtime", "theory")}


def layer_breaches(modules: dict) -> list[str]:
    """Imports that break the layers: outside the engine, of an engine module (not the face
    ``simulate.engine``); in the engine, of a service; in the runtime, of anything of simulate above it."""
    breaches = []
    for module in modules:
        layer = _layer(module)
        for target in sorted(_imports(module, modules)):
            if layer != "engine" and target.startswith("simulate.engine."):
                breaches.append(f"{module} imports {target}: import the face simulate.engine instead")
            elif layer in _ALLOWED and _layer(target) not in _ALLOWED[layer]:
                breaches.append(f"{module} ({layer}) imports {target} ({_layer(target)})")
    return breaches


def test_services_import_the_engines_face_and_the_engine_no_service():
    breaches = layer_breaches(module_files())
    assert not breaches, "\n".join(breaches)


def test_the_layer_rule_finds_each_kind_of_breach(tmp_path):
    """Negative control: a service importing an engine module, the engine importing a service, and the
    runtime importing the engine are each reported; importing the face is not."""
    files = {"simulate/__init__.py": "", "simulate/engine/__init__.py": "", "simulate/runtime/__init__.py": "",
             "simulate/engine/stack.py": "import simulate.cache\n",
             "simulate/runtime/lazy.py": "import simulate.engine\n",
             "simulate/cache.py": "from simulate.engine.stack import run\nfrom simulate.engine import simulate\n",
             "theory/__init__.py": "", "paper_figs/__init__.py": ""}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    breaches = layer_breaches(module_files(tmp_path))
    assert any(b.startswith("simulate.cache imports simulate.engine.stack") for b in breaches), breaches
    assert any(b.startswith("simulate.engine.stack (engine) imports simulate.cache") for b in breaches), breaches
    assert any(b.startswith("simulate.runtime.lazy (runtime) imports simulate.engine") for b in breaches), breaches
    assert len(breaches) == 3, breaches
