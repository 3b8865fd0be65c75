"""The layering rules of docs/architecture.md, checked on the source's import statements
(every ``import`` / ``from ... import``, at module level or inside functions).

* ``symgrad.graph`` (the IR layer) imports nothing else of the project;
* ``symgrad.config`` and ``symgrad.version`` are leaves (they import nothing of it);
* ``codegen`` imports only the IR layer and those two leaves, never ``bench``;
* the front end reaches the code generator only through ``codegen.backend``, and only
  from ``symgrad.compiler.backends`` (the registry of backends);
* no import cycle crosses the boundary between ``symgrad`` and ``codegen``;
* an import made inside a function is a deliberate one: it names an optional or heavy
  dependency, or its line (or the line above) says why it is late;
* the front end is layered (``LAYERS``): a module-level import never goes to a higher
  layer, and the only import cycles are a package's ``__init__`` with its own submodules.

Imports under ``if TYPE_CHECKING:`` are annotations for type checkers: they never run, so
the layer and cycle rules skip them.
"""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("symgrad", "codegen")


def _modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str) -> str | None:
    """The project module an imported name lives in (None: outside the project)."""
    while name and name not in MODULES:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name or None


class Import(NamedTuple):
    importer: str
    target: str          # the imported project module
    late: bool           # inside a function
    line: int
    type_only: bool      # under ``if TYPE_CHECKING:`` (never runs)


def _inside(tree, kinds, test=lambda node: True) -> set[int]:
    """ids of the import statements inside nodes of `kinds` (that pass `test`)."""
    return {id(sub) for node in ast.walk(tree) if isinstance(node, kinds) and test(node)
            for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom))}


def _imports() -> list[Import]:
    """Every import statement of the project's source that names a project module."""
    out = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        late = _inside(tree, (ast.FunctionDef, ast.AsyncFunctionDef))
        type_only = _inside(tree, ast.If, lambda node: "TYPE_CHECKING" in ast.unparse(node.test))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path, node)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                         for a in node.names]
            else:
                continue
            for name in names:
                target = _owner(name) if name.split(".")[0] in PACKAGES else None
                if name.split(".")[0] == "bench":
                    target = name
                if target and target != module:
                    out.append(Import(module, target, id(node) in late, node.lineno,
                                      id(node) in type_only))
    return out


IMPORTS = _imports()
LEAVES = ("symgrad.config", "symgrad.version")


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_ir_layer_imports_nothing_else_of_the_project():
    bad = [(a, b) for a, b, *_ in IMPORTS if _in(a, "symgrad.graph") and not _in(b, "symgrad.graph")]
    assert not bad, bad


def test_settings_and_version_are_leaves():
    bad = [(a, b) for a, b, *_ in IMPORTS if a in LEAVES]
    assert not bad, bad


def test_codegen_sees_only_the_ir_layer():
    bad = [(a, b) for a, b, *_ in IMPORTS if _in(a, "codegen") and not _in(b, "codegen")
           and not _in(b, "symgrad.graph") and b not in LEAVES]
    assert not bad, bad


def test_codegen_reads_op_kinds_from_the_registry():
    """Which primitives a lowering takes is named once: codegen asks the registry's
    families (``codegen.classify``: ``VIEW_OPS``, ``REDUCE_OPS``, ...) and never spells a
    family out again as a literal of three or more primitive names."""
    importlib.import_module("symgrad")        # registers the built-in primitives
    from symgrad.graph.primitives import PRIMITIVES
    bad = []
    for module, path in MODULES.items():
        if not _in(module, "codegen"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 3 and all(
                    isinstance(e, ast.Constant) and e.value in PRIMITIVES for e in node.elts):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "\n".join(bad)


def test_the_front_end_reaches_codegen_only_through_its_backend_interface():
    bad = [(a, b) for a, b, *_ in IMPORTS if _in(a, "symgrad") and _in(b, "codegen")
           and (b != "codegen.backend" or a != "symgrad.compiler.backends")]
    assert not bad, bad


def _sccs(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _cycles() -> list[set[str]]:
    """Import cycles over every import statement (late ones too)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for a, b, *_ in IMPORTS:
        if b in graph:
            graph[a].add(b)
    return _sccs(graph)


def test_no_import_cycle_crosses_the_boundary():
    crossing = [sorted(c) for c in _cycles() if len({m.split(".")[0] for m in c}) > 1]
    assert not crossing, crossing


REASON = re.compile(r"#.*\S")


def test_late_imports_say_why():
    """An import inside a function carries a comment (on its line or the line above)
    saying why it is late: an optional dependency, import-time cost, or a cycle (a
    comment above a block of late imports covers the block)."""
    missing = []
    for a, b, late, line, _ in IMPORTS:
        if not late:
            continue
        lines = MODULES[a].read_text().splitlines()
        here = lines[line - 1]
        k = line - 2                  # above a block of late imports: its comment
        while k >= 0 and lines[k].strip().startswith(("from ", "import ")):
            k -= 1
        if not (REASON.search(here) or (k >= 0 and lines[k].strip().startswith("#"))):
            missing.append(f"{MODULES[a].relative_to(ROOT)}:{line}: {here.strip()}")
    assert not missing, "\n".join(missing)


# ---- the front end's layers ------------------------------------------------------------------
# Lowest first. A module's layer is that of the longest name here that it is, or is inside
# (``symgrad.autograd.engine`` is in "engine", the rest of ``symgrad.autograd`` in
# "libraries"). docs/architecture.md says what each layer owns.
LAYERS = (
    ("base", ("symgrad.graph", "symgrad.config", "symgrad.version", "symgrad.errors",
              "symgrad.device", "symgrad.printing", "symgrad.utils", "symgrad.tracing",
              "symgrad.autograd.grad_mode", "symgrad.autograd.anomaly_mode",
              "symgrad.autograd.saved_hooks")),
    ("tensor", ("symgrad.tensor", "symgrad.types")),
    ("tape", ("symgrad.autograd.node_type", "symgrad.autograd.graph", "symgrad.autograd.nodes",
              "symgrad.autograd.hooks")),
    ("dispatch", ("symgrad.dispatch",)),
    ("ops", ("symgrad.ops",)),
    ("engine", ("symgrad.autograd.engine", "symgrad.autograd.validate")),
    ("functions", ("symgrad.functions", "symgrad.linalg", "symgrad.lax")),
    ("compiler", ("symgrad.compiler", "symgrad.func", "symgrad.exporting", "symgrad.tree_util",
                  "symgrad.dask", "symgrad.parallelism")),
    ("libraries", ("symgrad.autograd", "symgrad.nn", "symgrad.optim", "symgrad.utils.data",
                   "symgrad.serialization", "symgrad.torch_compile")),
    ("package", ("symgrad", "symgrad.cli", "symgrad.__main__")),
)
_LAYER_OF = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}


def _layer(module: str) -> int:
    name = module
    while name not in _LAYER_OF:
        name = name.rsplit(".", 1)[0]        # (every front-end module has a layer)
    return _LAYER_OF[name]


RUNTIME = [i for i in IMPORTS if not i.late and not i.type_only]   # what import runs


def test_every_front_end_module_has_a_layer():
    front = [m for m in MODULES if _in(m, "symgrad")]
    assert all(m == "symgrad" or "." in m for m in front)
    assert not [n for n in _LAYER_OF if n not in MODULES], "LAYERS names a missing module"


def test_module_level_imports_go_down_the_layers():
    """An import that runs when its module loads goes to the module's own layer or a lower
    one; each offender is listed with its line."""
    bad = []
    for i in RUNTIME:
        if _in(i.importer, "symgrad") and _in(i.target, "symgrad") \
                and _layer(i.target) > _layer(i.importer):
            text = MODULES[i.importer].read_text().splitlines()[i.line - 1].strip()
            bad.append(f"{MODULES[i.importer].relative_to(ROOT)}:{i.line}: {text}  "
                       f"({LAYERS[_layer(i.importer)][0]} -> {LAYERS[_layer(i.target)][0]})")
    assert not bad, "\n".join(bad)


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _module_level_cycles(package: str) -> list[list[str]]:
    """The import cycles inside ``package`` over the imports that run at module level --
    and the packages an import runs first: ``from .x.y import z`` in ``a.b`` runs
    ``a.x``'s ``__init__`` too -- other than a package's ``__init__`` with modules inside
    that package."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES if _in(m, package)}
    for i in RUNTIME:
        if i.importer in graph and i.target in graph:
            graph[i.importer].add(i.target)
            graph[i.importer].update(p for p in _ancestors(i.target) if p in graph
                                     and p not in _ancestors(i.importer) and p != i.importer)
    bad = []
    for comp in _sccs(graph):
        top = min(comp, key=len)
        if not all(m == top or m.startswith(top + ".") for m in comp):
            bad.append(sorted(comp))
    return bad


def test_the_front_end_has_no_import_cycle():
    """The only cycle allowed is a package's ``__init__`` with its own modules."""
    bad = _module_level_cycles("symgrad")
    assert not bad, bad


# A late import that goes up the layers is a call from a lower layer into a higher one: only
# these, each deliberate (the reason is also on the import's line).
UPWARD_LATE_IMPORTS = {
    ("symgrad.ops.loops", "symgrad.compiler.autodiff"):
        "a loop's VJP builds its body's gradient graph with the compiler's autodiff",
    ("symgrad.functions.methods", "symgrad.nn.functional"):
        "Tensor methods that are nn.functional's (softmax, ...); nn loads on first use",
    ("symgrad.compiler.dispatcher", "symgrad.autograd.compiled_function"):
        "compiled outputs join eager autograd through an autograd.Function",
    ("symgrad.compiler.entries", "symgrad.autograd.compiled_function"):
        "a program for other sizes shares the autograd bridge of the entry it came from",
    ("symgrad.functions.creation", "symgrad.parallelism"):
        "a float arange past 32768 elements is split over the threads as at::parallel_for "
        "splits it (the thread count is read only then)",
}


def test_late_imports_go_up_the_layers_only_where_deliberate():
    """An import inside a function may reach a higher layer -- that is how laziness and a
    rare up-call work -- but never to get around a cycle: the ones there are, are
    :data:`UPWARD_LATE_IMPORTS`."""
    up = {(i.importer, i.target) for i in IMPORTS
          if i.late and not i.type_only and _in(i.importer, "symgrad") and _in(i.target, "symgrad")
          and _layer(i.target) > _layer(i.importer)}
    assert up == set(UPWARD_LATE_IMPORTS), (sorted(up - set(UPWARD_LATE_IMPORTS)),
                                            sorted(set(UPWARD_LATE_IMPORTS) - up))


def test_codegen_has_no_import_cycle_at_module_level():
    """Importing any codegen module runs no cycle; the late cycles are a loop body's
    program compiled through the backend (codegen.loops) and the helper thread's module
    built on first use (codegen.runtime)."""
    bad = _module_level_cycles("codegen")
    assert not bad, bad
