"""The front end's disk cache: a compiled function's native code, found from the traced
program alone.

Tracing is cheap; the stages after it are not (stabilising rewrites, symbolic
differentiation of the formulas, simplification, fusion,
scheduling). The LLVM backend keys its objects on the *optimised* program
(:func:`codegen.cache.cache_key`), known only after all of them. So a second, small
entry points to that object from a key known right after tracing (:func:`trace_key`):

* the traced graph's structural key (outputs and inputs: names, slots, constants,
  shapes, dtypes), the nesting of the arguments and of the result, each argument leaf's
  kind, shape, dtype and requires-grad;
* the transform (:meth:`~symgrad.compiler.transforms.Transform.spec`: grad or jacobian,
  argnums, value / has_aux, ...);
* the definition of every primitive the graph uses
  (:func:`symgrad.graph.primitives.fingerprint`: a user's formula, as another process may
  register another formula under the same name), the default dtype;
* a digest of symgrad's own source (the transforms, rewrites and fusion that a hit
  skips), the sympy version (a user's sympy formula is differentiated by sympy) and the
  backend's environment (host CPU and
  features, LLVM, Python and numpy, code generator: :func:`codegen.cache.derived_key`)
  for the target the code is built for.

The entry (:func:`store`) holds what a call needs: the backend key of the native code,
its :class:`~codegen.executable.Interface`, the nesting of the outputs and the aux
inputs. A hit (:func:`load`) gives an executable without running any stage after
tracing (and without importing the IR builders); the stages run later only if
something asks for them (``Lowered.as_text()``, ``exe.as_text("program")``).

Programs whose meaning such a key cannot capture are never stored: primitives defined
by Python callables (a user's ``numpy=`` / ``vjp=`` rules, structural primitives
registered from outside symgrad), ``fused`` nodes applied by hand, transforms without a
spec (or subclasses defined elsewhere), argument or result nestings whose dict keys are
not plain literals. A missing, corrupt or stale entry, or
one whose object is gone, is a miss: the full pipeline runs and rewrites both entries.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import re
from dataclasses import dataclass

from ..graph import dtypes, pytree
from ..graph.node import toposort, structural_key
from ..graph.primitives import PRIMITIVES, fingerprint
from .backends import get_backend
from .transforms import Transform

__all__ = ["trace_key", "load", "store", "Hit", "KIND"]

KIND = "traced-program-v1"
_LEAF_OPS = ("input", "const")
_SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # the package


def trace_key(tr, signature, transform, target=None) -> str | None:
    """The disk key of a traced program under ``transform`` (see the module docstring),
    or None when it cannot be keyed soundly."""
    backend = get_backend("llvm")
    if type(transform).__module__ != Transform.__module__:
        return None                     # a subclass may build differently under one spec
    spec = transform.spec()
    structure, specs, _static = signature
    if spec is None or not pytree.is_literal(structure) or not pytree.is_literal(tr.out_structure):
        return None
    graph = list(tr.out_nodes) + tr.input_nodes
    defs = []
    for op in sorted({n.op for n in toposort(graph)}):
        prim = PRIMITIVES.get(op)
        if prim is None or op == "fused":     # (a fused node's formula prints ambiguously)
            if op in _LEAF_OPS:
                continue
            return None
        fp = fingerprint(prim)
        if fp is None:
            return None
        defs.append(fp)
    parts = [structural_key(graph), repr(tr.out_structure), repr(structure),
             repr([(s.kind, s.shape, s.dtype.name, s.requires_grad) for s in specs]),
             repr(spec), repr(defs), f"default_dtype={dtypes.get_default_dtype().name}",
             f"symgrad_source={backend.source_digest(_SOURCE)}",
             f"sympy={sympy_version()}"]          # derivatives of a user's sympy formula
    return backend.entry_key(KIND, parts, target)


@functools.cache
def sympy_version() -> str:
    """sympy's version without importing sympy (a disk hit never needs sympy): read from
    its ``release.py``, else from the installed distribution's metadata."""
    spec = importlib.util.find_spec("sympy")
    if spec is not None and spec.origin:
        try:
            text = open(os.path.join(os.path.dirname(spec.origin), "release.py")).read()
            match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
            if match:
                return match.group(1)
        except OSError:
            pass
    from importlib import metadata     # (lazy: ~10 ms, and release.py normally answers)
    return metadata.version("sympy")


@dataclass
class Hit:
    """A disk hit: the executable, the outputs' nesting, the aux inputs' (name, shape,
    dtype)."""

    exe: object
    out_structure: object
    aux: list


def load(key: str, plan, target=None) -> Hit | None:
    """The executable stored for ``key`` (``plan``: a function making its schedule, called
    only if needed), or None."""
    backend = get_backend("llvm")
    sections = backend.load_entry(key)
    if sections is None:
        return None
    try:
        meta = json.loads(sections["meta"].decode())
        interface = meta["interface"]
        out_structure = ast.literal_eval(meta["out_structure"])
        aux = [(str(n), tuple(int(d) for d in shape), dtypes.as_dtype(dt))
               for n, shape, dt in meta["aux"]]
        program_key = str(meta["program"])
    except (KeyError, ValueError, TypeError, AttributeError, SyntaxError, UnicodeDecodeError):
        return None                                   # not an entry this version wrote
    exe = backend.reload(program_key, interface, plan, target)
    return None if exe is None else Hit(exe, out_structure, aux)


def store(key: str, exe, out_structure, aux_nodes) -> bool:
    """Remember, under ``key``, how to reload ``exe`` (an LLVM executable)."""
    text = repr(out_structure)
    try:
        if not pytree.is_literal(out_structure) or ast.literal_eval(text) != out_structure:
            return False
    except (ValueError, SyntaxError):
        return False
    meta = {"program": exe.cache_key, "interface": exe.interface.to_json(),
            "out_structure": text,
            "aux": [[n.attr("name"), list(n.shape), n.dtype.name] for n in aux_nodes]}
    return get_backend("llvm").store_entry(key, {"meta": json.dumps(meta).encode()})
