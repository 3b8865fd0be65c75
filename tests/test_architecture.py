"""The layering rules of docs/architecture.md, checked on the source's import statements
(every ``import`` / ``from ... import``, at module level or inside functions).

* ``symgrad.graph`` (the IR layer) imports nothing else of the project;
* ``symgrad.config`` and ``symgrad.version`` are leaves (they import nothing of it);
* ``codegen`` imports only the IR layer and those two leaves, never ``bench``;
* the front end reaches the code generator only through ``codegen.backend``, and only
  from ``symgrad.compiler.backends`` (the registry of backends);
* no import cycle crosses the boundary between ``symgrad`` and ``codegen``;
* an import made inside a function is a deliberate one: it names an optional or heavy
  dependency, or its line (or the line above) says why it is late.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

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


def _imports() -> list[tuple[str, str, bool, int]]:
    """(importer, imported project module, inside a function, line) for every import."""
    out = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        late = {id(sub) for fn in ast.walk(tree)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                for sub in ast.walk(fn) if isinstance(sub, (ast.Import, ast.ImportFrom))}
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
                    out.append((module, target, id(node) in late, node.lineno))
    return out


IMPORTS = _imports()
LEAVES = ("symgrad.config", "symgrad.version")


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_ir_layer_imports_nothing_else_of_the_project():
    bad = [(a, b) for a, b, _, _ in IMPORTS if _in(a, "symgrad.graph") and not _in(b, "symgrad.graph")]
    assert not bad, bad


def test_settings_and_version_are_leaves():
    bad = [(a, b) for a, b, _, _ in IMPORTS if a in LEAVES]
    assert not bad, bad


def test_codegen_sees_only_the_ir_layer():
    bad = [(a, b) for a, b, _, _ in IMPORTS if _in(a, "codegen") and not _in(b, "codegen")
           and not _in(b, "symgrad.graph") and b not in LEAVES]
    assert not bad, bad


def test_the_front_end_reaches_codegen_only_through_its_backend_interface():
    bad = [(a, b) for a, b, _, _ in IMPORTS if _in(a, "symgrad") and _in(b, "codegen")
           and (b != "codegen.backend" or a != "symgrad.compiler.backends")]
    assert not bad, bad


def _cycles() -> list[set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for a, b, _, _ in IMPORTS:
        if b in graph:
            graph[a].add(b)
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):                       # Tarjan's strongly connected components
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


def test_no_import_cycle_crosses_the_boundary():
    crossing = [sorted(c) for c in _cycles() if len({m.split(".")[0] for m in c}) > 1]
    assert not crossing, crossing


REASON = re.compile(r"#.*\S")


def test_late_imports_say_why():
    """An import inside a function carries a comment (on its line or the line above)
    saying why it is late: an optional dependency, import-time cost, or a cycle (a
    comment above a block of late imports covers the block)."""
    missing = []
    for a, b, late, line in IMPORTS:
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
