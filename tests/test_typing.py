"""The public API is typed (``py.typed`` ships with the package): every public function of
the top-level ``symgrad`` namespace annotates every parameter (``*args`` / ``**kwargs``
aside) and its return, and every annotation resolves to a type as a type checker reads
it (the module's globals plus its ``if TYPE_CHECKING:`` imports), so a misspelt name or an
annotation that means a dtype (``bool`` is ``symgrad.bool`` in ``symgrad/__init__.py``)
fails here. ``symgrad.types`` (the aliases) is never loaded by ``import symgrad``."""
from __future__ import annotations

import ast
import re
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
    return _missing_sig(inspect.signature(fn))


def _missing_sig(sig: inspect.Signature) -> list[str]:
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
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
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
    for f in [fn, *typing.get_overloads(fn)]:
        for key, hint in typing.get_type_hints(f, globalns=ns).items():
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


def _tensor_class_methods() -> list[tuple[str, object]]:
    """Public and special methods written in ``Tensor``'s class body (``functions/methods.py`` attaches
    the operations as methods at import time; those are not covered here)."""
    out = []
    for n in dir(symgrad.Tensor):
        f = inspect.getattr_static(symgrad.Tensor, n)
        f = f.fget if isinstance(f, property) else f
        public = not n.startswith("_") or (n.startswith("__") and n.endswith("__"))
        if public and inspect.isfunction(f) and f.__module__ == "symgrad.tensor":
            out.append((n, f))
    return out


def test_tensor_class_methods_are_annotated():
    methods = _tensor_class_methods()
    assert len(methods) > 20
    bad = {}
    for n, f in methods:
        params = list(inspect.signature(f).parameters.values())[1:]      # (not self)
        sig = inspect.signature(f).replace(parameters=params)
        if m := _missing_sig(sig):
            bad[n] = m
    assert not bad, f"unannotated Tensor methods: {bad}"
    ns = _checker_namespace(str(ROOT / "symgrad" / "tensor.py"), "symgrad.tensor")
    for n, f in methods:
        typing.get_type_hints(f, globalns=ns)



# ---- the methods functions/methods.py attaches, and their static declarations ---------------
def _installed_methods() -> list[tuple[str, object, str]]:
    """(name, function, kind) for what ``methods.install()`` attaches to Tensor."""
    from symgrad.functions import elementwise as E, methods as M, shape
    out = [(n, f, "method") for n, f in M._METHODS.items()]
    out += [(u, getattr(symgrad.Tensor, u), "method") for u in E.UNARY_NAMES
            if u not in M._METHODS]
    out += [("T", shape.T, "property"), ("mT", M._mT, "property")]
    out += [(i, b if callable(b) else M._METHODS.get(b) or getattr(symgrad.Tensor, b), "inplace")
            for i, b in M._INPLACE.items()]
    return out


def _as_method(sig: inspect.Signature, kind: str) -> str:
    """The signature as a method declares it: first parameter ``self``, builtins spelt
    plainly, an in-place method returning the tensor."""
    params = list(sig.parameters.values())
    params = [params[0].replace(name="self", annotation=inspect.Parameter.empty)] + params[1:]
    sig = sig.replace(parameters=params,
                      return_annotation="Tensor" if kind == "inplace" else sig.return_annotation)
    return re.sub(r"\b_(int|float|bool)\b", r"\1", str(sig))


def test_installed_methods_are_annotated():
    bad = {}
    for n, f, _ in _installed_methods():
        params = list(inspect.signature(f).parameters.values())[1:]      # (not self)
        if m := _missing_sig(inspect.signature(f).replace(parameters=params)):
            bad[n] = m
    assert not bad, f"unannotated Tensor methods: {bad}"


def test_installed_methods_are_declared_for_type_checkers():
    from symgrad.functions.method_types import TensorMethods
    declared = {n: (v.fget if isinstance(v, property) else v)
                for n, v in vars(TensorMethods).items()
                if inspect.isfunction(v) or isinstance(v, property)}
    installed = _installed_methods()
    assert set(declared) == {n for n, _, _ in installed}
    for name, fn, kind in installed:
        assert isinstance(vars(TensorMethods)[name], property) == (kind == "property"), name
        want = _as_method(inspect.signature(fn), kind)
        got = _as_method(inspect.signature(declared[name]), "method")
        assert got == want, f"Tensor.{name}: declared {got}, installed {want}"
        want_o = [_as_method(inspect.signature(o), kind) for o in typing.get_overloads(fn)]
        got_o = [_as_method(inspect.signature(o), "method")
                 for o in typing.get_overloads(declared[name])]
        assert got_o == want_o, f"Tensor.{name}: overloads {got_o} != {want_o}"
    # none of them is also written in Tensor's class body (the declaration would hide it)
    tree = ast.parse((ROOT / "symgrad" / "tensor.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    body = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert not body & set(declared)
    ns = _checker_namespace(str(ROOT / "symgrad" / "functions" / "method_types.py"),
                            "symgrad.functions.method_types")
    for name, f in declared.items():
        for g in [f, *typing.get_overloads(f)]:
            hints = typing.get_type_hints(g, globalns=ns)
            assert not any(isinstance(h, symgrad.dtype) for h in hints.values()), name
