"""Where a traced function's closed-over tensors come from, and whether they still do.

A compiled program reads the tensors its function closes over (a model's parameters, a
global weight) as inputs, so in-place updates need no recompile. Rebinding is another
matter: ``m.weight = nn.Parameter(...)``, ``w = zeros(...)`` at module level or
``h.w = ...`` make the function read another tensor, and a program still holding the old
one would answer for a model that no longer exists. As ``torch.compile`` guards on the
objects its frame reads, a :class:`Source` records the path by which the function reaches
each such tensor -- from its globals, closure cells, defaults or bound ``self`` through
attributes, modules' parameters / buffers / submodules and container items -- and
:meth:`Guards.replaced` re-reads the paths before each call: a path that now leads to
another object makes the cache entry stale, and the function is traced again.

Paths through modules are re-read only when some module's registration changed since the
last check (:func:`registration_changed`, called by ``nn.Module`` on every parameter,
buffer or submodule assignment); the roots (a global, a cell) are re-read at every call.
A tensor reached in a way not found here (computed by a call, an attribute of a C object)
has no source and is read as it was traced, as ``jax.jit`` reads closed-over values.
"""
from __future__ import annotations

import inspect
import types
from collections import deque
from itertools import islice

import numpy as np

from ..tensor import Tensor

__all__ = ["Source", "Guards", "find", "registration_changed", "registration_version"]

_registration = [0]        # bumped by nn.Module whenever a parameter / buffer / submodule
                           # is assigned, registered or deleted anywhere

_MAX_VISITS = 20_000       # bound of one search (a function reaching a huge object graph)
_PLAIN_DEPTH = 3           # attributes / items followed through non-module objects


def registration_changed() -> None:
    """Called by ``nn.Module`` when a module's parameters, buffers or submodules change
    (and on any other attribute assignment, ``training`` included)."""
    _registration[0] += 1


def registration_version() -> int:
    """How many times :func:`registration_changed` was called: while it stays, no
    module attribute was assigned (a guard's ``version``)."""
    return _registration[0]


_MISSING = object()


class Source:
    """A path from a root (a global, a closure cell, a constant object) to a tensor."""

    __slots__ = ("name", "root", "_steps", "module_path")

    def __init__(self, name: str, root, steps: tuple, module_path: bool):
        self.name = name            # readable: "w", "m.layers[0].weight", "d['k']"
        self.root = root            # () -> the root object now
        self._steps = steps         # (kind, key): "attr" | "item" | "param" | "buffer" | "module"
        self.module_path = module_path   # goes through a module's registration tables

    def current(self):
        """The object the path leads to now (a sentinel when it leads nowhere)."""
        obj = self.root()
        for kind, key in self._steps:
            try:
                if kind == "attr":
                    obj = obj.__dict__[key]
                elif kind == "item":
                    obj = obj[key]
                else:
                    obj = obj.__dict__[_TABLES[kind]][key]
            except (KeyError, IndexError, TypeError, AttributeError):
                return _MISSING
        return obj


_TABLES = {"param": "_parameters", "buffer": "_buffers", "module": "_modules"}


class Guards:
    """The sources of a program's closed-over tensors (aligned with its closure)."""

    __slots__ = ("_checks", "_governed", "_roots", "_seen")

    def __init__(self, closure: list, sources: dict):
        self._checks = []            # (source, tensor): re-read at every call
        self._governed = []          # ... re-read when a module registration changed
        roots = {}                   # their roots (a global, a cell): re-read at every call
        for t in closure:
            src = sources.get(id(t))
            if src is None:
                continue
            if src.module_path:
                self._governed.append((src, t))
                roots.setdefault(id(src.root), (src.root, src.root()))
            else:
                self._checks.append((src, t))
        self._roots = list(roots.values())
        self._seen = _registration[0]

    def __bool__(self):
        return bool(self._checks or self._governed)

    def replaced(self) -> str | None:
        """Why a closed-over tensor is no longer the one the function reaches, or None."""
        for src, t in self._checks:
            if src.current() is not t:
                return _why(src)
        changed = self._seen != _registration[0]
        if not changed:
            changed = any(root() is not obj for root, obj in self._roots)
        if changed:
            for src, t in self._governed:
                if src.current() is not t:
                    return _why(src)
            self._seen = _registration[0]
            self._roots = [(root, root()) for root, _ in self._roots]
        return None


def _why(src: Source) -> str:
    return f"closed-over tensor {src.name} now refers to another object"


def find(fn) -> dict[int, Source]:
    """The sources of the tensors ``fn`` can reach (by id), shortest path first; functions
    it reaches (a global ``loss`` calling ``model``) are searched as well."""
    found: dict[int, Source] = {}
    seen: set[int] = set()          # objects walked
    searched: set[int] = set()      # functions whose roots were walked
    queue = deque([fn])
    budget = _MAX_VISITS
    while queue and budget > 0:
        f = queue.popleft()
        if id(f) in searched:
            continue
        searched.add(id(f))
        for name, root, obj in _roots(f):
            budget = _walk(obj, name, root, found, seen, queue, budget)
    return found


def _roots(fn):
    """(name, getter of the root now, the root now) for what ``fn`` can read."""
    target = inspect.unwrap(fn) if callable(fn) else fn
    if _is_module(target):                     # compile(model): the module itself
        yield "self", (lambda: target), target
        target = getattr(type(target), "forward", None)
        if target is None:
            return
    self_obj = getattr(target, "__self__", None)
    if self_obj is not None and not isinstance(self_obj, types.ModuleType):
        yield "self", (lambda: self_obj), self_obj
        target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None)
    if code is None:
        return
    for var, cell in zip(code.co_freevars, getattr(target, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:           # (an empty cell)
            continue
        yield var, (lambda cell=cell: _cell_value(cell)), value
    g = getattr(target, "__globals__", None) or {}
    for var in _global_names(code):
        if var in g:
            yield var, (lambda var=var: g.get(var, _MISSING)), g[var]
    for i, value in enumerate(getattr(target, "__defaults__", None) or ()):
        yield f"default{i}", (lambda value=value: value), value


_LIBRARIES = ("symgrad", "codegen", "numpy", "scipy", "torch", "jax", "builtins", "functools")


def _user_code(f) -> bool:
    """Whether a function met on the way is the user's (searched in turn), not a library's."""
    module = getattr(getattr(f, "__func__", f), "__module__", None) or ""
    return module.split(".", 1)[0] not in _LIBRARIES


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING


def _global_names(code):
    """Names a code object (and the functions defined in it) may read as globals."""
    names: list[str] = []
    stack = [code]
    while stack:
        c = stack.pop()
        names.extend(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return dict.fromkeys(names)


def _is_module(obj) -> bool:
    d = getattr(obj, "__dict__", None)
    return isinstance(d, dict) and isinstance(d.get("_parameters"), dict) \
        and isinstance(d.get("_modules"), dict)


_ATOMS = (str, bytes, int, float, complex, bool, type(None), type, types.ModuleType,
          types.BuiltinFunctionType, np.ndarray, np.generic)


def _walk(obj, name, root, found, seen, functions, budget) -> int:
    """Record the path of every tensor reachable from ``obj`` breadth first (a bounded
    number of objects, no recursion); functions met are queued on ``functions``.
    Returns the budget left."""
    queue = deque([(obj, name, (), True, 0)])
    while queue and budget > 0:
        obj, name, steps, governed, depth = queue.popleft()
        budget -= 1
        if isinstance(obj, Tensor):
            if id(obj) not in found:
                found[id(obj)] = Source(name, root, steps, governed and bool(steps))
            continue
        if isinstance(obj, _ATOMS) or id(obj) in seen:
            continue
        if isinstance(obj, (types.FunctionType, types.MethodType)):
            if _user_code(obj):
                functions.append(obj)
            continue
        seen.add(id(obj))
        if _is_module(obj):
            # registered through Module.__setattr__, which reports every change: the path
            # stays "governed" (re-read only after a registration changed)
            d = obj.__dict__
            for kind in ("param", "buffer", "module"):
                for key, v in d[_TABLES[kind]].items() if _TABLES[kind] in d else ():
                    if v is not None:
                        queue.append((v, f"{name}.{key}", steps + ((kind, key),), governed, 0))
            children = ((k, v) for k, v in d.items() if not k.startswith("_"))
            for key, v in islice(children, budget):
                queue.append((v, f"{name}.{key}", steps + (("attr", key),), governed, 0))
        elif depth < _PLAIN_DEPTH:
            if isinstance(obj, (list, tuple)):
                items, kind = enumerate(obj), "item"
            elif isinstance(obj, dict):
                items, kind = ((k, v) for k, v in obj.items() if isinstance(k, (str, int))), "item"
            elif isinstance(getattr(obj, "__dict__", None), dict) and not inspect.isroutine(obj):
                items, kind = ((k, v) for k, v in obj.__dict__.items()
                               if not k.startswith("__")), "attr"
            else:
                continue
            for k, v in islice(items, budget):
                label = f"{name}[{k!r}]" if kind == "item" else f"{name}.{k}"
                queue.append((v, label, steps + ((kind, k),), False, depth + 1))
    return budget
