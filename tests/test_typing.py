"""The public API is typed (``py.typed`` ships with the package): every public function of
the top-level ``symgrad`` namespace annotates every parameter (``*args`` / ``**kwargs``
aside) and its return, and every annotation resolves to a type as a type checker reads
it (the module's globals plus its ``if TYPE_CHECKING:`` imports), so a misspelt name or an
annotation that means a dtype (``bool`` is ``symgrad.bool`` in ``symgrad/__init__.py``)
fails here. ``symgrad.types`` (the aliases) is never loaded by ``import symgrad``."""
from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import typing
from functools import cache
from pathlib import Path

import pytest

import symgrad

ROOT = Path(__file__).resolve().parents[1]


def _public_functions() -> list[tuple[str, object]]:
    return [(n, getattr(symgrad, n)) for n in dir(symgrad)
            if not n.startswith("_") and inspect.isfunction(getattr(symgrad, n))]


def _missing(fn) -> list[str]:
    sig = inspect.signature(fn)
    out = [p.name for p in sig.parameters.values()
           if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.annotation is p.empty]
    if sig.return_annotation is sig.empty:
        out.append("return")
    return out


@cache
def _checker_namespace(path: str, module_name: str) -> dict:
    """The module's globals as a type checker sees them: with its TYPE_CHECKING imports."""
    ns = dict(vars(sys.modules[module_name]))
    tree = ast.parse(Path(path).read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            body = ast.Module(body=node.body, type_ignores=[])
            exec(compile(body, path, "exec"), ns)   # noqa: S102  (import statements only)
    return ns


def test_public_functions_are_found():
    names = {n for n, _ in _public_functions()}
    assert {"tensor", "exp", "add", "sum", "matmul", "compile", "grad", "scan"} <= names
    assert len(names) > 100


def test_every_public_function_is_fully_annotated():
    bad = {n: m for n, fn in _public_functions() if (m := _missing(fn))}
    assert not bad, f"unannotated parameters / returns: {bad}"


@pytest.mark.parametrize("name", [n for n, _ in _public_functions()])
def test_annotations_resolve_as_a_type_checker_reads_them(name):
    fn = getattr(symgrad, name)
    path = inspect.getsourcefile(fn)
    ns = _checker_namespace(path, fn.__module__)
    hints = typing.get_type_hints(fn, globalns=ns)
    for key, hint in hints.items():
        assert not isinstance(hint, symgrad.dtype), (name, key, hint)


def test_generated_functions_are_annotated():
    hints = typing.get_type_hints(symgrad.exp, globalns=_checker_namespace(
        str(ROOT / "symgrad" / "__init__.py"), "symgrad"))
    assert hints["input"] is symgrad.Tensor and hints["return"] is symgrad.Tensor
    hints = typing.get_type_hints(symgrad.mul, globalns=_checker_namespace(
        str(ROOT / "symgrad" / "__init__.py"), "symgrad"))
    assert symgrad.Tensor in typing.get_args(hints["other"])


def test_is_typed_package():
    assert (ROOT / "symgrad" / "py.typed").exists()
    assert (ROOT / "codegen" / "py.typed").exists()


def test_type_aliases_are_not_loaded_by_import():
    code = "import sys, symgrad; print('symgrad.types' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
