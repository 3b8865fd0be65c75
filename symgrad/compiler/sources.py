"""Where a traced function's closed-over tensors come from, and whether they still do.

A compiled program reads the tensors its function closes over (a model's parameters, a
global weight) as inputs, so in-place updates need no recompile. Rebinding is another
matter: ``m.weight = nn.Parameter(...)``, ``w = zeros(...)`` at module level or
``h.w = ...`` make the function read another tensor, and a program still holding the old
one would answer for a model that no longer exists. As ``torch.compile`` guards on the
objects its frame reads, a :class:`Source` records the path by which the function reaches
each such tensor -- from its globals, closure cells, defaults, bound ``self``,
``functools.partial`` arguments, attributes of Python modules and classes it reads, through
attributes, modules' parameters / buffers / submodules and container items -- and
:meth:`Guards.replaced` re-reads the paths before each call: a path that now leads to
another object makes the cache entry stale, and the function is traced again. The
functions it reaches are searched in turn: user functions it reads, and the user methods
(``forward``, ``__call__``) of the objects it walks; a root holding a user function or a
module is guarded by identity (torch.compile's ID_MATCH: ``def helper`` again runs other
code), and the registration tables of every module met are compared after a change
(``del seq[-1]`` of a layer without tensors).

Paths through modules are re-read only when some module's registration changed since the
last check (:func:`registration_changed`, called after every write to a module's
registration tables -- they are :class:`symgrad.nn.modules.registration.RegistrationTable`
-- or attributes); the roots (a global, a cell) are re-read at every call.
The search is bounded (per root, in total, and in depth through plain objects); a
closed-over tensor it did not find while a bound cut it is searched again without those
bounds, and if even that fails a ``RuntimeWarning`` says that rebinding it will not be
noticed. A tensor reached in a way not followed here (computed by a call, held by a C
object) has no source and is read as it was traced, as ``jax.jit`` reads closed-over
values; the ``symgrad.recompiles`` logger says so at debug level.

Python constants the program bakes in (numbers, strings, None, tuples of them) are
guarded by value, as torch.compile's CONSTANT_MATCH: a global or closure cell of the
user's code holding one (``scale = 3.0`` rebound), and an attribute holding one of a
module or object met on the way, when some code met reads an attribute of that name
(``self.temperature`` in a ``forward``, ``negative_slope`` in ``LeakyReLU.forward``).
Module attributes are assigned through ``Module.__setattr__``: re-read only after a
registration changed; the others at every call. Their values are taken after the trace
(what the compiled program saw). Items of lists and dicts holding one are guarded as
torch.compile's DICT / LIST guards do (``cfg['alpha']``, ``loss_weights[1]``): those whose
key is a constant of some code met (the subscripts it writes), and every item of a short
list (``a, b = weights``); re-read at every call. Items read by a computed key
(``w[i]`` in a loop over a long list), attributes of objects inside containers (a
registry dict of objects: guarding every one would cost microseconds per call) and
attributes read by a computed name (``getattr(self, name)``) are not guarded.
"""
from __future__ import annotations

import dis
import functools
import inspect
import logging
import sys
import types
import warnings
import weakref
from collections import deque
from itertools import chain, count, islice
from operator import is_

import numpy as np

from ..tensor import Tensor
from . import guard_code

__all__ = ["Source", "Guards", "find", "registration_changed", "registration_version"]

_registration = [0]        # a fresh ticket after every write to a module's registration
                           # tables or attributes (symgrad.nn.modules.registration)
_tickets = count(1)        # (next() is atomic: two writers never store the same value, so a
                           # value a guard saw never comes back after a later write)

_MAX_VISITS = 20_000       # objects walked from one root (a huge object graph)
_MAX_TOTAL = 200_000       # ... from all roots of all functions reached
_SHORT_LIST = 8           # lists whose constant items are all guarded
_PLAIN_DEPTH = 4           # attributes / items followed through non-module objects
_DEEP_VISITS = 500_000     # bound of the search for tensors the bounded search missed

log = logging.getLogger("symgrad.recompiles")


def registration_changed() -> None:
    """Called *after* a module's parameters, buffers, submodules or attributes changed."""
    _registration[0] = next(_tickets)


def registration_version() -> int:
    """The ticket of the last :func:`registration_changed`: while it stays, no module
    attribute was assigned (a guard's ``version``)."""
    return _registration[0]


_MISSING = object()


class Source:
    """A path from a root (a global, a closure cell, a constant object) to a tensor."""

    __slots__ = ("name", "root", "_steps", "module_path")

    def __init__(self, name: str, root, steps: tuple, module_path: bool):
        self.name = name            # readable: "w", "m.layers[0].weight", "d['k']"
        self.root = root            # () -> the root object now
        self._steps = steps         # (kind, key): "attr" | "item" | "param" | "buffer" |
                                    # "module" | "classattr" (the instance's, else its class's)
                                    # | "len" (the container's length; last step only)
        self.module_path = module_path   # goes through a module's registration tables

    def current(self):
        """The object the path leads to now (a sentinel when it leads nowhere)."""
        obj = self.root()
        for kind, key in self._steps:
            try:
                if kind == "attr":
                    obj = obj.__dict__[key]
                elif kind == "classattr":
                    obj = _class_attribute(obj, key)
                elif kind == "item":
                    obj = obj[key]
                elif kind == "len":
                    obj = len(obj)
                else:
                    obj = obj.__dict__[_TABLES[kind]][key]
            except (KeyError, IndexError, TypeError, AttributeError):
                return _MISSING
        return obj


_TABLES = {"param": "_parameters", "buffer": "_buffers", "module": "_modules"}


def _class_attribute(obj, key):
    """``obj.key`` read as a "classattr" step: the instance's own, else its class's
    (KeyError when neither has it)."""
    d = obj.__dict__
    if key in d:
        return d[key]
    value = _attribute_of(type(obj), key)
    if value is _MISSING:
        raise KeyError(key)
    return value


class Found(dict):
    """What :func:`find` found: the sources of tensors (by id); the modules met with what
    their registration tables held (a container that lost or gained a layer without
    tensors -- ``del seq[-1]`` of a ``Tanh`` -- runs another program); the roots holding a
    function or module the program inlined; whether a bound cut the search."""

    __slots__ = ("modules", "layouts", "identities", "module_paths", "cut", "fn", "ticket",
                 "constants", "names", "item_keys", "arrays", "given")

    def __init__(self):
        super().__init__()
        self.modules: list = []      # the modules met
        self.layouts: list = []      # what their tables held (taken when the search ends)
        self.identities: list = []   # (name, getter of the root now, the object then)
        self.module_paths: list = []  # (source, module) of modules reached through plain
                                      # objects (a list of layers, an attribute of a config)
        self.cut = False             # a bound stopped the search somewhere
        self.constants: list = []    # (source, attribute name or None) of Python constants
        self.names: set = set()      # attribute / global names the code met may read
        self.item_keys: set = set()  # the str / int constants of the code met (subscripts)
        self.arrays: dict = {}       # the sources of numpy arrays (by id)
        self.fn = None               # what was searched
        self.given = 0               # how many positional arguments its call passed
        self.ticket = _registration[0]   # the registration counter when it began

    def extend(self, closure: list) -> None:
        """Search ``fn`` again without bounds for the tensors of ``closure`` not found."""
        wanted = {id(t) for t in closure if id(t) not in self}
        if not (wanted and self.cut):
            return
        deep = find(self.fn, wanted, self.given)
        for key in wanted & deep.keys():
            self[key] = deep[key]
        known = {id(m) for m in self.modules}
        new = [m for m in deep.modules if id(m) not in known]
        self.modules += new
        if new:
            self.layouts.append(_Layout(new))
        known = {id(obj) for _, _, obj in self.identities}
        self.identities += [i for i in deep.identities if id(i[2]) not in known]
        known = {id(m) for _, m in self.module_paths}
        self.module_paths += [p for p in deep.module_paths if id(p[1]) not in known]
        self.cut = deep.cut


class _Layout:
    """What the registration tables of some modules hold, compared in a few C calls (the
    keys, and the values by identity, of all of them at once)."""

    __slots__ = ("_dicts", "_tables", "_lens", "_keys", "_values")

    def __init__(self, modules: list):
        self._dicts, tables = [], []
        for m in modules:
            for name in _TABLES.values():
                self._dicts.append(m.__dict__)
                tables.append(m.__dict__.get(name))
        self._tables = tables
        present = [t for t in tables if isinstance(t, dict)]
        self._lens = list(map(len, present))
        self._keys = list(chain.from_iterable(present))
        self._values = list(chain.from_iterable(map(dict.values, present)))

    def same(self) -> bool:
        tables = self._tables
        if not all(map(is_, map(dict.get, self._dicts, _NAMES * (len(tables) // 3)), tables)):
            return False
        present = [t for t in tables if isinstance(t, dict)]
        return (list(map(len, present)) == self._lens
                and all(map(is_, chain.from_iterable(map(dict.values, present)), self._values))
                and list(chain.from_iterable(present)) == self._keys)


_NAMES = list(_TABLES.values())


class Guards:
    """The sources of a program's closed-over tensors (aligned with its closure)."""

    __slots__ = ("_checks", "_governed", "_roots", "_seen", "_modules", "_identities",
                 "_constants", "_governed_constants", "_governs", "_hold")

    def __init__(self, closure: list, sources: Found):
        sources.extend(closure)
        # (name, getter, object): at every call, each root once
        self._identities = list({(id(get), id(obj)): (name, get, obj)
                                 for name, get, obj in sources.identities}.values())
        self._checks = list(sources.module_paths)   # (source, tensor or module): every call
        self._governed = []          # ... re-read when a module registration changed
        self._modules = sources.layouts   # ... and these tables
        roots = {}                   # their roots (a global, a cell): re-read at every call
        for t in closure:
            src = sources.get(id(t))
            if src is None:
                _unguarded(t, sources.cut)
                continue
            if src.module_path:
                self._governed.append((src, t))
                roots.setdefault(id(src.root), (src.root, src.root()))
            else:
                self._checks.append((src, t))
        self._constants = []         # (source, getter, value): Python constants, per call
        self._governed_constants = []   # ... module attributes: after a registration change
        paths = set()
        for src, key in sources.constants:
            if type(key) is tuple and key[0] == "len":    # (a container's length: when
                if key[1] is not None and key[1] not in sources.names:   # reached by an
                    continue                              # attribute, one code met reads)
            elif type(key) is tuple:     # (an item: its key written in some code met, or
                if key[1] not in sources.item_keys and not key[2]:     # a short list's)
                    continue
            elif key is not None and key not in sources.names:
                continue                 # (no code met reads an attribute of that name)
            elif any(kind == "item" for kind, _ in src._steps):
                continue                 # (an attribute of an object inside a container:
            if src.name in paths:        # not guarded -- guards run at every call)
                continue
            paths.add(src.name)          # (each path once -- guards run at every call)
            value = src.current()        # (now, after the trace: what the program baked)
            if value is _MISSING or not _is_constant(value):
                continue
            if src.module_path and src._steps[-1][0] != "len":   # (``self.ws.append``
                self._governed_constants.append((src, value))    # registers nothing)
                roots.setdefault(id(src.root), (src.root, src.root()))
            else:                        # (a root's own getter: no path to follow)
                self._constants.append((src, src.current if src._steps else src.root, value))
        self._roots = list(roots.values())
        self._seen = sources.ticket
        self._governs = bool(self._governed or self._modules or self._governed_constants)
        # the per-call part as one generated function (None: walked)
        self._hold = guard_code.compile_checks(
            self._identities, self._checks, self._constants, missing=_MISSING,
            same_constant=_same_constant, class_attribute=_class_attribute)

    def per_call(self):
        """A function of no arguments, True while every guard holds -- when no guard needs
        more than re-reading its path (none governed by module registrations) -- else
        None (ask :meth:`replaced`)."""
        return None if self._governs else self._hold

    def __bool__(self):
        return bool(self._checks or self._governed or self._modules or self._identities
                    or self._constants or self._governed_constants)

    def replaced(self) -> str | None:
        """Why a closed-over tensor is no longer the one the function reaches, or None."""
        if self._hold is None or not self._hold():
            why = self._walked()
            if why is not None:
                return why
        return self._governed_replaced() if self._governs else None

    def _walked(self) -> str | None:
        """What the per-call guards find changed, by walking each path."""
        for name, get, obj in self._identities:
            if get() is not obj:
                return f"{name} now refers to another object"
        for src, t in self._checks:
            if src.current() is not t:
                return _why(src)
        for src, get, value in self._constants:
            now = get()
            if now is not value and not _same_constant(now, value):
                return _changed(src, value, now)
        return None

    def _governed_replaced(self) -> str | None:
        """What changed among the paths through modules (re-read after a registration
        changed, or a root of them was rebound)."""
        now = _registration[0]       # (taken before re-reading: a write that lands while
        changed = self._seen != now  # the paths are re-read is seen at the next call)
        if not changed and self._roots:
            changed = any(root() is not obj for root, obj in self._roots)
        if changed:
            roots = [(root, root()) for root, _ in self._roots]     # (also before re-reading)
            for src, t in self._governed:
                if src.current() is not t:
                    return _why(src)
            for src, value in self._governed_constants:
                got = src.current()
                if got is not value and not _same_constant(got, value):
                    return _changed(src, value, got)
            for layout in self._modules:
                if not layout.same():
                    return "the parameters, buffers or submodules of a module changed"
            self._seen = now
            self._roots = roots
        return None


def _unguarded(t: Tensor, cut: bool) -> None:
    what = f"a closed-over tensor of shape {tuple(t.shape)} and dtype {t.dtype}"
    if cut:
        warnings.warn(f"symgrad.compile: {what} was not found within {_DEEP_VISITS} objects "
                      "reachable from the function; rebinding it will not be noticed (the "
                      "compiled function keeps reading this tensor)", RuntimeWarning,
                      stacklevel=4)
    else:
        log.debug("%s is reached in a way the guards do not follow (computed by a call, an "
                  "attribute of a C object): it is read as traced", what)


def _why(src: Source) -> str:
    return f"closed-over tensor {src.name} now refers to another object"


def _changed(src: Source, was, now) -> str:
    now = "(deleted)" if now is _MISSING else repr(now)
    return f"{src.name} changed: {was!r} → {now}"[:200]


_CONSTANTS = (int, float, bool, complex, str, type(None))


def _is_constant(v) -> bool:
    """Whether ``v`` is a Python constant a trace bakes into its program (a number, a
    string, None, a short tuple of them)."""
    t = type(v)
    if t in _CONSTANTS:
        return True
    return t is tuple and len(v) <= 16 and all(map(_is_constant, v))


def _same_constant(a, b) -> bool:
    """Whether two constants give the same program: same types, floats bit for bit
    (-0.0 is not 0.0, NaN is NaN)."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is float:
        return a.hex() == b.hex()
    if t is complex:
        return a.real.hex() == b.real.hex() and a.imag.hex() == b.imag.hex()
    if t is tuple:
        return len(a) == len(b) and all(map(_same_constant, a, b))
    return a == b


def find(fn, wanted: set | None = None, given: int = 0) -> Found:
    """The sources of the tensors ``fn`` can reach (by id), shortest path first; functions
    it reaches (a global ``loss`` calling ``model``, a module's ``forward``, a method of an
    object it reads) are searched as well.

    Each root has its own bound (a huge list read first does not hide the weight read
    after it); where a bound or the depth through plain objects cut the search,
    ``found.cut`` says so. With ``wanted`` (ids of tensors), the search goes on without
    those bounds -- up to ``_DEEP_VISITS`` objects -- until it found them all. ``given``:
    how many positional arguments the traced call passes ``fn`` (the defaults of those
    parameters are not read, so not guarded)."""
    found = Found()
    found.fn, found.ticket, found.given = fn, _registration[0], given
    _search(fn, found, wanted)
    if found.modules:
        found.layouts.append(_Layout(found.modules))
    return found


def _search(fn, found: Found, wanted: set | None) -> None:
    """Walk the roots of ``fn`` and of the functions met, breadth first, into ``found``."""
    seen: set[int] = set()          # objects walked (and classes whose methods were queued)
    searched: set[int] = set()      # functions whose roots were walked
    queue = deque([fn])
    total = _DEEP_VISITS if wanted is not None else _MAX_TOTAL
    depth = None if wanted is not None else _PLAIN_DEPTH
    while queue:
        f = queue.popleft()
        if id(f) in searched:
            continue
        searched.add(id(f))
        user = _user_code(f)
        found.names.update(_read_names(f))
        found.item_keys.update(_item_keys(f))
        for name, root, obj, variable in _roots(f, found.given if f is fn else 0):
            if total <= 0:
                found.cut = True
                return
            if variable and _identity_guarded(obj):
                found.identities.append((name, root, obj))
            if variable and user and _is_constant(obj):     # (a global, a cell)
                found.constants.append((Source(name, root, (), False), None))
            budget = min(total, _MAX_VISITS) if wanted is None else total
            left = _walk(obj, name, root, found, seen, queue, budget, depth)
            total -= budget - left
            if wanted is not None and wanted.issubset(found.keys()):
                return


def _identity_guarded(obj) -> bool:
    """Whether a root (a global, a cell, a module attribute) holding ``obj`` is guarded by
    identity, as torch.compile's ID_MATCH: a user function the program inlined (rebinding
    ``helper`` runs other code) or a module it called."""
    if isinstance(obj, (types.FunctionType, types.MethodType)):
        return _user_code(obj)
    return _is_module(obj)


def _roots(fn, given: int = 0):
    """(name, getter of the root now, the root now, whether it can be rebound) for what
    ``fn`` can read."""
    target = inspect.unwrap(fn) if callable(fn) else fn
    if isinstance(target, functools.partial):  # its bound arguments, then its function
        for i, value in enumerate(target.args):
            yield f"arg{i}", _const_root(value), value, False
        for key, value in target.keywords.items():
            yield key, _const_root(value), value, False
        yield from _roots(target.func)
        return
    if _is_module(target):                     # compile(model): the module itself
        module = target
        yield "self", _const_root(module), module, False
        target = getattr(type(module), "forward", None)
        given += 1                             # (self: passed)
        if target is None:
            return
    elif not isinstance(target, (types.FunctionType, types.MethodType)):
        # a callable object: walking it queues its class's methods (``__call__``)
        yield "self", _const_root(target), target, False
        return
    self_obj = getattr(target, "__self__", None)
    if self_obj is not None and not isinstance(self_obj, types.ModuleType):
        yield "self", _const_root(self_obj), self_obj, False
        target = getattr(target, "__func__", target)
        given += 1
    code = getattr(target, "__code__", None)
    if code is None:
        return
    for var, cell in zip(code.co_freevars, getattr(target, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:           # (an empty cell)
            continue
        get = (lambda cell=cell: _cell_value(cell))
        get.guard_root = ("cell", cell)
        yield var, get, value, True
        if isinstance(value, (types.ModuleType, type)):
            yield from _module_attributes(var, get, value, _global_names(code))
    g = getattr(target, "__globals__", None) or {}
    names = _global_names(code)
    for var in names:
        if var in g:
            value = g[var]
            get = (lambda var=var: g.get(var, _MISSING))
            get.guard_root = ("global", g, var)
            yield var, get, value, True
            if isinstance(value, (types.ModuleType, type)):
                yield from _module_attributes(var, get, value, names)
    # defaults: re-read from the function at every call (``f.__defaults__ = ...``
    # rebinds them, as torch.compile's guards on ``__defaults__`` notice), those of the
    # parameters the call passes aside; indexed from the end, as Python matches them
    defaults = getattr(target, "__defaults__", None) or ()
    first = code.co_argcount - len(defaults)        # the first parameter with a default
    for i, value in enumerate(defaults):
        if first + i < given:
            continue
        get = (lambda target=target, i=i - len(defaults): _default(target, i))
        get.guard_root = ("default", target, i - len(defaults))
        yield f"{target.__name__}.__defaults__[{i - len(defaults)}]", get, value, True
    for key, value in (getattr(target, "__kwdefaults__", None) or {}).items():
        get = (lambda target=target, key=key: (target.__kwdefaults__ or {}).get(key, _MISSING))
        get.guard_root = ("kwdefault", target, key)
        yield f"{target.__name__}.__kwdefaults__[{key!r}]", get, value, True


def _default(fn, i: int):
    """``fn.__defaults__[i]`` now (the sentinel when there is none)."""
    defaults = fn.__defaults__ or ()
    return defaults[i] if -len(defaults) <= i < len(defaults) else _MISSING


def _const_root(value):
    """The getter of a root that cannot be rebound (a bound ``self``, a default)."""
    get = (lambda: value)
    get.guard_root = ("const", value)
    return get


def _module_attributes(name, get, space, names, depth=0):
    """Roots for the attributes of a user's Python module or class the code may read
    (``import params`` ... ``params.W``, ``Consts.W``): the names the code uses, re-read
    from the module or class at every call."""
    if depth >= _PLAIN_DEPTH or not _user_module(space):
        return
    for attr in names:
        value = _attribute_of(space, attr)
        if value is not _MISSING and not attr.startswith("__"):
            sub = (lambda get=get, attr=attr: _attribute_of(get(), attr))
            yield f"{name}.{attr}", sub, value, True
            if isinstance(value, (types.ModuleType, type)):
                yield from _module_attributes(f"{name}.{attr}", sub, value, names, depth + 1)


def _attribute_of(space, attr):
    """``space.attr`` for a Python module or a class (its own dicts: no descriptor runs)."""
    if isinstance(space, types.ModuleType):
        return space.__dict__.get(attr, _MISSING)
    if isinstance(space, type):
        for klass in space.__mro__:
            if attr in klass.__dict__:
                return klass.__dict__[attr]
    return _MISSING


_LIBRARIES = frozenset(("symgrad", "codegen", "numpy", "scipy", "torch", "jax", "builtins",
                        "functools", "sympy", "llvmlite")) | frozenset(sys.stdlib_module_names)


def _user_module(space) -> bool:
    name = space.__module__ if isinstance(space, type) else space.__name__
    return (name or "").split(".", 1)[0] not in _LIBRARIES


def _user_code(f) -> bool:
    """Whether a function met on the way is the user's (searched in turn), not a library's."""
    module = getattr(getattr(f, "__func__", f), "__module__", None) or ""
    return module.split(".", 1)[0] not in _LIBRARIES


def _methods(cls):
    """The user's functions among ``cls``'s methods (a module's ``forward``, a callable
    object's ``__call__``, the helpers they call through ``self``)."""
    for v in _class_functions(cls, lambda m: (m or "").split(".", 1)[0] in _LIBRARIES):
        if isinstance(v, types.FunctionType) and _user_code(v):
            yield v


def _class_functions(cls, skip):
    """The functions defined in ``cls``'s MRO (static / class methods' and properties'
    too), except in classes whose module name ``skip`` accepts."""
    for klass in cls.__mro__:
        if skip(klass.__module__):
            continue
        for v in list(vars(klass).values()):
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            elif isinstance(v, property):
                v = v.fget
            yield v


def _class_attributes(cls):
    """(name, value) of the user's classes' data attributes (not methods) in ``cls``'s
    MRO, the first definition of each name."""
    done = set()
    for klass in cls.__mro__:
        if (klass.__module__ or "").split(".", 1)[0] in _LIBRARIES:
            continue
        for key, v in list(vars(klass).items()):
            if key.startswith("__") or key in done or inspect.isroutine(v) \
                    or isinstance(v, (staticmethod, classmethod, property)):
                continue
            done.add(key)
            yield key, v


def _read_names(f) -> tuple:
    """The attribute and global names the code of ``f`` (a function, method or partial)
    reads."""
    f = inspect.unwrap(f) if callable(f) else f
    while isinstance(f, functools.partial):
        f = f.func
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    return _loaded_names(code) if code is not None else ()


_LOADS = frozenset(("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME"))


@functools.lru_cache(maxsize=4096)
def _loaded_names(code) -> tuple:
    """The names a code object (and the functions defined in it) loads -- not those it
    only assigns (``self.note = 0`` in ``__init__``)."""
    names: dict = {}
    stack = [code]
    while stack:
        c = stack.pop()
        names.update((i.argval, None) for i in dis.get_instructions(c) if i.opname in _LOADS)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return tuple(names)


def _item_keys(f) -> tuple:
    """The string and integer constants of the code of ``f`` (the subscripts it may
    read: ``cfg['alpha']``, ``weights[1]``)."""
    f = inspect.unwrap(f) if callable(f) else f
    while isinstance(f, functools.partial):
        f = f.func
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    return _constants_of(code) if code is not None else ()


@functools.lru_cache(maxsize=4096)
def _constants_of(code) -> tuple:
    keys: dict = {}
    stack = [code]
    while stack:
        c = stack.pop()
        keys.update((k, None) for k in c.co_consts if type(k) in (str, int))
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return tuple(keys)


_BASE_CLASSES = ("builtins", "symgrad.nn.modules.module")   # (their names: not the user's)
_names_of_class = weakref.WeakKeyDictionary()


def _class_read_names(cls) -> tuple:
    """The names the methods of ``cls`` (library classes too: ``LeakyReLU.forward``
    reads ``negative_slope``) may read, remembered per class."""
    got = _names_of_class.get(cls)
    if got is None:
        names = {}
        for v in _class_functions(cls, _BASE_CLASSES.__contains__):
            code = getattr(v, "__code__", None)
            if code is not None:
                names.update(dict.fromkeys(_loaded_names(code)))
        got = _names_of_class[cls] = tuple(names)
    return got


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


def _length_matters(c) -> bool:
    """Whether the length of a list / dict met is guarded (torch.compile's LIST_LENGTH /
    DICT_KEYS: a loop over it unrolled in the program): short ones (as their constant
    items are), and those holding a tensor or a module (``ws.append(t)`` adds a term) --
    not a long list of other objects, which a step may grow at every call (a history)."""
    if len(c) <= _SHORT_LIST:
        return True
    values = c.values() if type(c) is dict else c
    return any(isinstance(v, Tensor) or _is_module(v) for v in islice(values, 64))


def _users(root, steps) -> bool:
    """Whether a container met is the user's, not an attribute of a library's object (its
    own bookkeeping -- a table it fills as it runs, read by key -- which no program
    iterates: its length is not guarded)."""
    if not steps or steps[-1][0] != "attr":
        return True
    owner = Source("", root, steps[:-1], False).current()
    return owner is _MISSING or _user_code(type(owner))


def _bounded(items, budget, found) -> list:
    """At most ``budget`` of ``items`` (``found.cut`` when there were more)."""
    chunk = list(islice(items, budget + 1))
    if len(chunk) > budget:
        found.cut = True
        del chunk[budget:]
    return chunk


def _walk(obj, name, root, found, seen, functions, budget, max_depth) -> int:
    """Record the path of every tensor reachable from ``obj`` breadth first (at most
    ``budget`` objects, ``max_depth`` steps through plain objects, no recursion);
    functions met, and the user's methods of the objects met, are queued on ``functions``.
    Sets ``found.cut`` when a bound stopped it. Returns the budget left."""
    queue = deque([(obj, name, (), True, 0)])
    while queue:
        if budget <= 0:
            found.cut = True
            break
        obj, name, steps, governed, depth = queue.popleft()
        budget -= 1
        if isinstance(obj, Tensor):
            if id(obj) not in found:
                found[id(obj)] = Source(name, root, steps, governed and bool(steps))
            continue
        if type(obj) is np.ndarray:      # (a numpy array a trace may read: an input then)
            if id(obj) not in found.arrays:
                found.arrays[id(obj)] = Source(name, root, steps, governed and bool(steps))
            continue
        if steps and steps[-1][0] in ("attr", "classattr") and _is_constant(obj):
            if not (governed and steps[-1] == ("attr", "training")):   # (Module.__call__
                found.constants.append((Source(name, root, steps, governed), steps[-1][1]))
            continue                                               # guards its mode)
        if isinstance(obj, _ATOMS) or id(obj) in seen:
            continue
        if isinstance(obj, (types.FunctionType, types.MethodType)):
            if _user_code(obj):
                functions.append(obj)
            continue
        seen.add(id(obj))
        cls = type(obj)
        if id(cls) not in seen:
            seen.add(id(cls))
            functions.extend(_methods(cls))
            found.names.update(_class_read_names(cls))
        for key, v in _class_attributes(cls):            # (``self.W`` of a class's ``W``)
            queue.append((v, f"{name}.{key}", steps + (("classattr", key),), False, depth + 1))
        if _is_module(obj):
            # registered through RegistrationTable, which reports every change: the path
            # stays "governed" (re-read only after a registration changed)
            d = obj.__dict__
            found.modules.append(obj)
            if steps and not governed:     # (a tensor-less layer swapped in a list counts)
                found.module_paths.append((Source(name, root, steps, False), obj))
            for kind in ("param", "buffer", "module"):
                for key, v in d[_TABLES[kind]].items() if _TABLES[kind] in d else ():
                    if v is not None:
                        queue.append((v, f"{name}.{key}", steps + ((kind, key),), governed, 0))
            children = ((k, v) for k, v in d.items() if not k.startswith("_"))
            for key, v in _bounded(children, budget, found):
                queue.append((v, f"{name}.{key}", steps + (("attr", key),), governed, 0))
            continue
        if isinstance(obj, (list, tuple)):
            items, kind = enumerate(obj), "item"
        elif isinstance(obj, dict):
            items, kind = ((k, v) for k, v in obj.items() if isinstance(k, (str, int))), "item"
        elif isinstance(getattr(obj, "__dict__", None), dict) and not inspect.isroutine(obj):
            items, kind = ((k, v) for k, v in obj.__dict__.items()
                           if not k.startswith("__")), "attr"
        else:
            continue
        if max_depth is not None and depth >= max_depth:
            found.cut = True             # (what lies deeper is searched only if needed)
            continue
        mutable = type(obj) in (list, dict)
        if mutable and _length_matters(obj) and _users(root, steps):   # (``for w in ws`` /
            attr = steps[-1][1] if steps and steps[-1][0] == "attr" else None  # ``len(ns)``)
            found.constants.append((Source(f"len({name})", root, steps + (("len", None),),
                                           False), ("len", attr)))
        for k, v in _bounded(items, budget, found):
            label = f"{name}[{k!r}]" if kind == "item" else f"{name}.{k}"
            if mutable and _is_constant(v):      # (an item that may change: guarded
                found.constants.append((Source(label, root, steps + ((kind, k),), False),
                                        ("item", k, type(obj) is list
                                         and len(obj) <= _SHORT_LIST)))
                continue                         # if some code writes its key)
            queue.append((v, label, steps + ((kind, k),), False, depth + 1))
    return budget
