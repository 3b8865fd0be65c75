"""The per-call guard checks of a compiled function as one generated Python function.

:class:`symgrad.compiler.sources.Guards` re-reads, before every call, the paths by which a
function reaches its closed-over tensors, the functions and modules it inlined, and the
Python constants it baked in. Walked generically (a getter per root, a loop over each
path's steps), that costs about 0.1 us per path -- more than the native call itself on a
small program. :func:`compile_checks` writes the same reads out as straight-line code:
each root read once (a global as ``globals.get(name)``, a cell as ``cell.cell_contents``,
a constant object as itself), each step as the attribute or item access it stands for,
each comparison inline (identity first, then :func:`sources._same_constant` for
constants). The generated function answers only "nothing changed" (True) or "look again"
(False, also on any exception): the walking code stays the one source of truth for *why*
something changed, and is asked whenever the generated check fails.

A root getter says how it reads its root through its ``guard_root`` attribute (set where
:mod:`symgrad.compiler.sources` makes it): ``("global", dict, name)``, ``("cell", cell)``,
``("default", function, index)``, ``("kwdefault", function, name)`` or ``("const", obj)``;
any other getter is called.
"""
from __future__ import annotations

from typing import Callable

__all__ = ["compile_checks", "MAX_CHECKS"]

MAX_CHECKS = 4096      # more than this: the walking code (a huge function stays unbuilt)


def compile_checks(identities, checks, constants, *, missing, same_constant,
                   class_attribute) -> Callable[[], bool] | None:
    """One function of no arguments, True while every guard holds.

    ``identities``: (name, root getter, object) -- the root still holds the object;
    ``checks``: (source, object) -- the source's path still leads to the object;
    ``constants``: (source, getter, value) -- the path leads to an equal constant.
    ``missing`` is the sentinel a global read yields for a deleted name,
    ``same_constant(now, then)`` compares constants, ``class_attribute(obj, key)`` reads a
    "classattr" step (raising KeyError when absent). None when there are too many."""
    if len(identities) + len(checks) + len(constants) > MAX_CHECKS:
        return None
    w = _Writer(missing, class_attribute)
    for _, get, obj in identities:
        w.require(w.root(get), obj)
    for src, obj in checks:
        w.require(w.path(src.root, src._steps), obj)
    for src, _, value in constants:
        here = w.path(src.root, src._steps)
        k = w.constant(value)
        w.lines.append(f"if {here} is not {k} and not _same({here}, {k}): return False")
    w.names["_same"] = same_constant
    body = "\n".join("        " + line for line in w.lines) or "        pass"
    source = ("def _guards_hold():\n    try:\n" + body +
              "\n    except Exception:\n        return False\n    return True\n")
    exec(compile(source, "<symgrad guards>", "exec"), w.names)
    check = w.names["_guards_hold"]
    check.source = source
    return check


class _Writer:
    """Straight-line code reading roots and paths into locals, each read once."""

    def __init__(self, missing, class_attribute):
        self.names: dict = {"_M": missing, "_classattr": class_attribute}
        self.lines: list[str] = []
        self._locals: dict = {}       # (root key, steps) -> local name
        self._required: set = set()   # (local, id of object) already compared
        self._keep: list = []         # (what is keyed by id stays alive while writing)

    def constant(self, obj) -> str:
        name = f"k{len(self.names)}"
        self.names[name] = obj
        return name

    def require(self, here: str, obj) -> None:
        if (here, id(obj)) not in self._required:
            self._required.add((here, id(obj)))
            self.lines.append(f"if {here} is not {self.constant(obj)}: return False")

    def _root_key(self, get):
        """Getters reading the same root (one global of one module, one cell) share it."""
        how = getattr(get, "guard_root", None)
        if how is None:
            self._keep.append(get)
            return ("call", id(get))
        self._keep.append(how)
        return (how[0],) + tuple(map(id, how[1:2])) + tuple(how[2:])

    def root(self, get) -> str:
        key = (self._root_key(get), ())
        if key in self._locals:
            return self._locals[key]
        how = getattr(get, "guard_root", None)
        kind = how[0] if how else None
        if kind == "const":
            here = self.constant(how[1])
            self._locals[key] = here
            return here
        if kind == "global":
            expr = f"{self.constant(how[1])}.get({how[2]!r}, _M)"
        elif kind == "cell":
            expr = f"{self.constant(how[1])}.cell_contents"
        elif kind == "default":
            expr = f"{self.constant(how[1])}.__defaults__[{how[2]}]"
        elif kind == "kwdefault":
            expr = f"{self.constant(how[1])}.__kwdefaults__[{how[2]!r}]"
        else:
            expr = f"{self.constant(get)}()"
        return self._assign(key, expr)

    def path(self, get, steps: tuple) -> str:
        if not steps:
            return self.root(get)
        key = (self._root_key(get), steps)
        if key in self._locals:
            return self._locals[key]
        here = self.path(get, steps[:-1])
        kind, k = steps[-1]
        if kind == "attr":
            expr = f"{here}.__dict__[{k!r}]"
        elif kind == "classattr":       # (the instance's own, else its class's)
            expr = f"({here}.__dict__[{k!r}] if {k!r} in {here}.__dict__ else " \
                   f"_classattr({here}, {k!r}))"
        elif kind == "item":
            expr = f"{here}[{k!r}]"
        elif kind == "len":
            expr = f"len({here})"
        else:
            table = {"param": "_parameters", "buffer": "_buffers", "module": "_modules"}[kind]
            expr = f"{here}.__dict__[{table!r}][{k!r}]"
        return self._assign(key, expr)

    def _assign(self, key, expr: str) -> str:
        name = f"v{len(self._locals)}"
        self._locals[key] = name
        self.lines.append(f"{name} = {expr}")
        return name
