"""No import cycles in the worker runtime, types included.

Every ``import`` and ``from ... import`` statement of every module counts as an edge, wherever it
is: at the top, inside ``if TYPE_CHECKING:`` or inside a function. A cycle hidden behind
``TYPE_CHECKING`` or a deferred import still ties the modules together, so the rule is checked on
the source text (with ``ast``) rather than by importing the package.

The graph holds the ``skyward`` package and the plugins' worker modules
(``packages/plugin-*/python/*.py``), which import ``skyward`` and could import each other.
Importing ``skyward.x`` also runs ``skyward/__init__.py`` first; that implicit step is not an edge
(``__init__`` imports its submodules, so every package would be a cycle), but ``from skyward
import name`` in a submodule is. ``importlib.import_module`` calls (how the worker loads plugins
and task modules) are not import statements and are not counted.

The worker's own parts are layered as well (:data:`WORKER_LAYERS`): each imports only from the
layers below its own, and the rest of the runtime (what tasks and child processes import) imports
none of them, so an upward import fails here even where it would make no cycle.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set

PYTHON_ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = PYTHON_ROOT / "skyward"
# The plugin packages sit beside core in the repository (absent from an installed @skyward/core).
PLUGIN_DIRS = sorted(Path(__file__).resolve().parents[3].glob("plugin-*/python"))

Graph = Dict[str, Set[str]]

#: The worker's parts, lowest layer first (``skyward/worker.py`` wires them). A module imports only
#: from layers below its own; the runtime's other modules import none of these.
WORKER_LAYERS: List[List[str]] = [
    # a submitted task, and the Executor and Host protocols between the worker and its executors
    ["skyward.task"],
    # parts that know no other part: a connection and its handshake, the deadline heap, the TTL,
    # budget and self-destruct, the remote-reference store, the cluster message, the executors
    ["skyward.connection", "skyward.deadlines", "skyward.lifecycle", "skyward.ref_store",
     "skyward.cluster_setup", "skyward.executors", "skyward.process_executor", "skyward.collection_store"],
    # what a copy frame carries of each collection, and the answers it carries to the copy's node's
    # tasks (over the collections' store)
    ["skyward.collection_delta", "skyward.collection_mailbox"],
    # what a detached worker keeps for its client; references moved node to node (over the store);
    # the collections' copy on a second node, and task threads' own connections to them (over the
    # collections' store)
    ["skyward.detach_keeping", "skyward.ref_peers", "skyward.collection_replica", "skyward.collection_direct"],
    # intake, cancel, withdraw, the wait for the cluster message, results kept; the collections'
    # node-to-node link (over their copy)
    ["skyward.task_table", "skyward.collection_link"],
    # nested dispatch through the client; where collection operations go (the head's store, or the
    # link to it)
    ["skyward.subtasks", "skyward.collection_service"],
    # which part handles each client message
    ["skyward.message_router"],
    # the object that wires them
    ["skyward.worker"],
]


def package_modules(package_dir: Path) -> Dict[str, Path]:
    """Dotted module name -> source file, for a package and its subpackages."""
    modules: Dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def top_level_modules(directory: Path) -> Dict[str, Path]:
    """The single-file modules directly in ``directory`` (a plugin's ``python/`` folder)."""
    return {path.stem: path for path in sorted(directory.glob("*.py"))}


def _known(name: str, known: Set[str]) -> Optional[str]:
    """The longest module of the graph that ``name`` is or lies in (``a.b.C`` -> ``a.b``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def imported_modules(module: str, path: Path, modules: Iterable[str]) -> Set[str]:
    """The modules of the graph that ``module`` imports, anywhere in its source."""
    known = set(modules)
    is_package = path.name == "__init__.py"
    targets: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known(alias.name, known)
                if target is not None:
                    targets.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # A relative import starts from the module's package (a package's own __init__ is it).
                package = module.split(".") if is_package else module.split(".")[:-1]
                base_parts = package[: len(package) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module.
                submodule = f"{base}.{alias.name}"
                target = submodule if submodule in known else _known(base, known)
                if target is not None:
                    targets.add(target)
    return targets


def import_graph(modules: Dict[str, Path]) -> Graph:
    return {module: imported_modules(module, path, modules) for module, path in modules.items()}


def find_cycles(graph: Graph) -> List[List[str]]:
    """For each module on a cycle, the shortest cycle (``[a, b, ..., a]``) through it.

    One per module rather than one per tangle of modules, so that the failure shows every import
    that ties them together.
    """
    cycles: Set[tuple[str, ...]] = set()
    for module in graph:
        cycle = _shortest_cycle_through(module, graph)
        if cycle is not None:
            # The same cycle found from another of its modules: start it at its smallest name.
            ring = cycle[:-1]
            first = ring.index(min(ring))
            ring = ring[first:] + ring[:first]
            cycles.add(tuple(ring + [ring[0]]))
    return sorted(list(cycle) for cycle in cycles)


def _shortest_cycle_through(start: str, graph: Graph) -> Optional[List[str]]:
    """Breadth-first from ``start`` back to it, or None when no import path returns."""
    previous: Dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: List[str] = []
        for module in frontier:
            for target in sorted(graph.get(module, ())):
                if target == start:
                    back = [module]  # module, the module that led to it, ..., start
                    while back[-1] != start:
                        back.append(previous[back[-1]])
                    return back[::-1] + [start]
                if target not in previous:
                    previous[target] = module
                    following.append(target)
        frontier = following
    return None


def layer_violations(graph: Graph, layers: List[List[str]]) -> List[str]:
    """Each import that goes up or sideways in ``layers``, or into them from a module outside them."""
    layer_of = {module: index for index, names in enumerate(layers) for module in names}
    violations = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if target not in layer_of:
                continue
            own = layer_of.get(module)
            if own is None:
                violations.append(f"{module} (below the worker's layers) imports {target}")
            elif layer_of[target] >= own:
                violations.append(f"{module} (layer {own}) imports {target} (layer {layer_of[target]})")
    return violations


def _describe(cycles: List[List[str]]) -> str:
    return "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_skyward_package_has_no_import_cycles() -> None:
    modules = package_modules(PACKAGE_DIR)
    assert "skyward.context" in modules, "the runtime package was not found"
    cycles = find_cycles(import_graph(modules))
    assert not cycles, "import cycles in the skyward package:\n" + _describe(cycles)


def test_the_worker_parts_import_only_from_the_layers_below_their_own() -> None:
    modules = package_modules(PACKAGE_DIR)
    layered = [module for layer in WORKER_LAYERS for module in layer]
    assert sorted(set(layered)) == sorted(layered), "a module is in two of the worker's layers"
    assert not [module for module in layered if module not in modules], "a layer names a module that is gone"
    violations = layer_violations(import_graph(modules), WORKER_LAYERS)
    assert not violations, "imports against the worker's layers:\n" + "\n".join(violations)


def test_an_upward_or_sideways_import_breaks_the_layers() -> None:
    layers = [["pkg.low"], ["pkg.mid", "pkg.side"], ["pkg.top"]]
    graph: Graph = {
        "pkg.base": {"pkg.mid"},  # a module outside the layers reaching into them
        "pkg.low": {"pkg.base", "pkg.top"},  # upward
        "pkg.mid": {"pkg.low", "pkg.side"},  # sideways
        "pkg.side": {"pkg.low"},
        "pkg.top": {"pkg.mid", "pkg.low", "pkg.base"},
    }
    assert layer_violations(graph, layers) == [
        "pkg.base (below the worker's layers) imports pkg.mid",
        "pkg.low (layer 0) imports pkg.top (layer 2)",
        "pkg.mid (layer 1) imports pkg.side (layer 1)",
    ]


def test_the_plugin_worker_modules_and_skyward_have_no_import_cycles() -> None:
    modules = package_modules(PACKAGE_DIR)
    for directory in PLUGIN_DIRS:
        modules.update(top_level_modules(directory))
    cycles = find_cycles(import_graph(modules))
    assert not cycles, "import cycles among skyward and the plugin worker modules:\n" + _describe(cycles)


def test_a_cycle_through_type_checking_and_function_imports_is_found(tmp_path: Path) -> None:
    # The checker itself: an edge under TYPE_CHECKING, one inside a function, one absolute and one
    # ``from . import`` of a submodule, all counted.
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "from . import a\n",
        "a.py": "from .sub.b import B\n",
        "sub/__init__.py": "",
        "sub/b.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from ..c import C
            class B: ...
        """,
        "c.py": """
            def late():
                import pkg.a
        """,
        "d.py": "from .a import nothing_cyclic_here\n",
    }
    for name, source in sources.items():
        (package / name).write_text(textwrap.dedent(source))
    graph = import_graph(package_modules(package))
    assert graph["pkg"] == {"pkg.a"}
    assert graph["pkg.sub.b"] == {"pkg.c"}
    assert find_cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]


def test_every_cycle_through_a_module_is_listed_and_a_chain_is_not_one() -> None:
    assert find_cycles({"a": {"a"}}) == [["a", "a"]]
    assert find_cycles({"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"], ["a", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
