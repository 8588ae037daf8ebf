"""The import graph of theory, simulate and paper_figs: no cycles; theory imports neither torch nor simulate; the
services have an order (``PACKAGE_ORDER``), and so have the study's stages (``STUDY_STAGES``); a lazy facade names
the homes of its names where the walker sees them.

Every module is parsed with ``ast`` (no import is executed), by the walker that also finds the
simulator's sources for its cache key (:func:`simulate.runtime.versions.imported_names`): ``import X``,
``from X import Y`` anywhere in a module (function-level imports included) and
``import_module("X")`` count; ``from pkg import name`` is an edge to ``pkg.name`` when that is a
module of these packages, else to ``pkg``; relative imports are resolved against the importing
module. Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``, so those count as
edges too (except into the importer's own packages, which are already running when it is imported).
"""

from __future__ import annotations

import importlib

import pytest

from simulate.runtime.versions import ROOT, import_closure, imported_names, module_files, resolve_module


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
    _write_tree(tmp_path, files)
    breaches = layer_breaches(module_files(tmp_path))
    assert any(b.startswith("simulate.cache imports simulate.engine.stack") for b in breaches), breaches
    assert any(b.startswith("simulate.engine.stack (engine) imports simulate.cache") for b in breaches), breaches
    assert any(b.startswith("simulate.runtime.lazy (runtime) imports simulate.engine") for b in breaches), breaches
    assert len(breaches) == 3, breaches


# The services' order, lowest first: a package imports only packages of lower levels (function-level imports
# count, as everywhere here). The claims read the training and the scores; the sweeps, the studies, verify
# and the figures read the claims; the benchmarks time what is below them and nothing imports them.
PACKAGE_ORDER = (
    ("theory",),
    ("simulate.runtime",),
    ("simulate.engine",),
    ("simulate.cache", "simulate.naive"),
    ("simulate",),  # the package's own face (simulate/__init__.py): the engine's entry points and the cache's
    ("simulate.scaling",),
    ("simulate.training",),
    ("simulate.scores",),
    ("simulate.claims",),
    ("simulate.compare", "simulate.sweep"),
    ("simulate.study", "simulate.accuracy"),
    ("simulate.verify", "simulate.bench", "simulate.__main__"),
    ("paper_figs",),
)


def package_of(module: str) -> str:
    """``theory``, ``paper_figs``, ``simulate`` (its ``__init__``) or ``simulate.X`` (a subpackage or a module)."""
    parts = module.split(".")
    return parts[0] if parts[0] != "simulate" or len(parts) == 1 else ".".join(parts[:2])


def order_breaches(modules: dict, group_of, order, name: str, exceptions=frozenset()) -> list[str]:
    """Imports from a group (``group_of(module)``; None: in no group) to another not below it in ``order`` (levels of
    groups, lowest first), but the ``(importer, imported)`` pairs of ``exceptions``; and the groups ``order``
    (called ``name``) does not place."""
    level = {group: i for i, groups in enumerate(order) for group in groups}
    breaches = sorted({f"{group_of(m)} is in no level of {name}" for m in modules
                       if group_of(m) is not None and group_of(m) not in level})
    for module in modules:
        source = group_of(module)
        for target in sorted(_imports(module, modules)):
            target_group = group_of(target)
            if source in level and target_group in level and target_group != source \
                    and level[target_group] >= level[source] and (module, target) not in exceptions:
                breaches.append(f"{module} imports {target}: {source} (level {level[source]}) may import only "
                                f"what is below it in {name}, not {target_group} (level {level[target_group]})")
    return breaches


def package_breaches(modules: dict) -> list[str]:
    """:func:`order_breaches` of the packages (:func:`package_of`) in :data:`PACKAGE_ORDER`."""
    return order_breaches(modules, package_of, PACKAGE_ORDER, "PACKAGE_ORDER")


def test_the_services_have_an_order():
    breaches = package_breaches(module_files())
    assert not breaches, "\n".join(breaches)


def _write_tree(root, files: dict) -> None:
    """``{path: source}`` written under ``root`` (a made-up repository for a negative control)."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_package_order_finds_a_cycle_between_two_services(tmp_path):
    """Negative control: a sweep and a study importing each other (inside functions) breach the order once,
    from the lower to the higher; an unplaced package is named."""
    files = {"simulate/__init__.py": "", "simulate/sweep/__init__.py": "", "simulate/study/__init__.py": "",
             "simulate/sweep/tasks.py": "def tasks():\n    from simulate.study.train import point\n",
             "simulate/study/train/point.py": "from simulate.sweep import tasks\n",
             "simulate/extra/__init__.py": "", "theory/__init__.py": "", "paper_figs/__init__.py": ""}
    _write_tree(tmp_path, files)
    breaches = package_breaches(module_files(tmp_path))
    assert any(b.startswith("simulate.sweep.tasks imports simulate.study.train.point") for b in breaches), breaches
    assert not any(b.startswith("simulate.study.train.point imports") for b in breaches), breaches
    assert "simulate.extra is in no level of PACKAGE_ORDER" in breaches and len(breaches) == 2, breaches



# simulate/study/ cut by stage: a stage imports only from the stages before it (simulate.study.cli and
# simulate.study.atlas, outside the stages, read from all of them).
STUDY_STAGES = tuple((f"simulate.study.{stage}",) for stage in ("plan", "train", "read", "judge", "write"))
STAGE_EXCEPTIONS = {  # (importer, imported): why
    ("simulate.study.plan.spec", "simulate.study.train.point"):
        "a study is a sweep of the task 'study', whose recipe (STUDY_DEFAULTS) and registration are the point's",
}


def stage_of(module: str) -> str | None:
    """The stage folder of a module of ``simulate.study`` (``simulate.study.plan`` ...), None outside a folder."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[:2] == ["simulate", "study"] and len(parts) > 3 else None


def stage_breaches(modules: dict) -> list[str]:
    """:func:`order_breaches` of the study's stage folders in :data:`STUDY_STAGES`, but :data:`STAGE_EXCEPTIONS`."""
    return order_breaches(modules, stage_of, STUDY_STAGES, "STUDY_STAGES", STAGE_EXCEPTIONS.keys())


def test_the_study_stages_import_only_the_stages_before_them():
    breaches = stage_breaches(module_files())
    assert not breaches, "\n".join(breaches)


def test_the_stage_rule_finds_a_judge_that_imports_a_writer(tmp_path):
    """Negative control: a judge importing a writer breaches the stage order once; the writer importing the
    judge does not; a module in an unknown stage folder is named."""
    files = {"simulate/__init__.py": "", "simulate/study/__init__.py": "", "simulate/study/judge/__init__.py": "",
             "simulate/study/write/__init__.py": "", "simulate/study/extra/__init__.py": "",
             "simulate/study/judge/tables.py": "def summary():\n    from simulate.study.write import report\n",
             "simulate/study/write/report.py": "from simulate.study.judge import tables\n",
             "simulate/study/extra/thing.py": "", "theory/__init__.py": "", "paper_figs/__init__.py": ""}
    _write_tree(tmp_path, files)
    breaches = stage_breaches(module_files(tmp_path))
    assert any(b.startswith("simulate.study.judge.tables imports simulate.study.write.report") for b in breaches), \
        breaches
    assert "simulate.study.extra is in no level of STUDY_STAGES" in breaches and len(breaches) == 2, breaches


LAZY_FACADES = ("simulate", "simulate.engine", "simulate.scores", "simulate.sweep", "simulate.study", "simulate.claims",
                "simulate.accuracy")


@pytest.mark.parametrize("facade", LAZY_FACADES)
def test_a_lazy_facade_shows_the_walker_every_home(facade):
    """``from simulate.scores import score_run`` reaches ``simulate.scores.runs`` only at run time (its facade
    loads names on first use): the facade's ``TYPE_CHECKING`` imports put every home in the import closure, so
    a code version of the importer covers the code it runs (a sweep's scores once missed scores/runs.py)."""
    homes = set(importlib.import_module(facade)._HOMES.values())
    modules = module_files()
    closure = set(import_closure([facade]))
    missing = sorted(home for home in homes if str(modules[home].relative_to(ROOT)) not in closure)
    assert not missing, f"{facade} loads {missing} on first use but its import closure leaves them out"
