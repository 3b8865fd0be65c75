"""``symgrad.tree_util``: JAX's pytree API over symgrad's one pytree definition
(:mod:`symgrad.graph.pytree`): flatten, unflatten, map, and registering your own classes
(``register_pytree_node``, ``register_dataclass``) so that compiled functions and
transforms take and return them.

>>> import dataclasses, numpy as np, symgrad
>>> @symgrad.tree_util.register_dataclass
... @dataclasses.dataclass
... class Params:
...     w: object
...     b: object
>>> g = symgrad.grad(lambda p, x: ((x @ p.w + p.b) ** 2).sum())(Params(np.ones(2), 0.5), np.ones(2))
>>> type(g).__name__, g.w.tolist(), float(g.b)
('Params', [5.0, 5.0], 5.0)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

from .graph import pytree

__all__ = ["PyTreeDef", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure",
           "tree_map", "register_pytree_node", "register_dataclass"]


class PyTreeDef:
    """The structure of a pytree (what :func:`tree_flatten` returns besides the leaves)."""

    __slots__ = ("_s",)

    def __init__(self, structure):
        self._s = structure

    @property
    def num_leaves(self) -> int:
        return pytree.num_leaves(self._s)

    def unflatten(self, leaves: Iterable[Any]):
        return tree_unflatten(self, leaves)

    def __eq__(self, other) -> bool:
        return isinstance(other, PyTreeDef) and self._s == other._s

    def __hash__(self) -> int:
        return hash(self._s)

    def __repr__(self) -> str:
        return f"PyTreeDef({_show(self._s)})"


def _show(s) -> str:
    k = pytree.kind(s)
    if k == "leaf":
        return "*"
    if k == "none":
        return "None"
    kids = [_show(c) for c in pytree.children(s)]
    if k == "tuple":
        return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
    if k == "list":
        return "[" + ", ".join(kids) + "]"
    if k == "dict":
        return "{" + ", ".join(f"{key!r}: {c}" for key, c in zip(s[1], kids)) + "}"
    name = s[1].__name__ if k == "namedtuple" else s[1][0].__name__
    return f"{name}(" + ", ".join(kids) + ")"


def tree_flatten(tree) -> tuple[list, PyTreeDef]:
    """(leaves, treedef). None is an empty subtree, as in JAX."""
    leaves, s = pytree.flatten(tree)
    return leaves, PyTreeDef(s)


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]):
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"Too {'few' if len(leaves) < treedef.num_leaves else 'many'} leaves "
                         f"for PyTreeDef; expected {treedef.num_leaves}, got {len(leaves)}.")
    return pytree.unflatten(treedef._s, leaves)


def tree_leaves(tree) -> list:
    return pytree.flatten(tree)[0]


def tree_structure(tree) -> PyTreeDef:
    return PyTreeDef(pytree.flatten(tree)[1])


def tree_map(f: Callable, tree, *rest):
    """``f`` applied leaf by leaf to ``tree`` and the trees in ``rest`` (same structure)."""
    leaves, s = pytree.flatten(tree)
    others = []
    for r in rest:
        rl, rs = pytree.flatten(r)
        if rs != s:
            raise ValueError(f"Custom node type mismatch; expected {_show(s)}, got "
                             f"{_show(rs)}.")
        others.append(rl)
    return pytree.unflatten(s, [f(*xs) for xs in zip(leaves, *others)])


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Make ``nodetype`` a pytree node: ``flatten_func(obj) -> (children, aux_data)``
    (``aux_data`` hashable, static), ``unflatten_func(aux_data, children) -> obj``."""
    pytree.register(nodetype, flatten_func, unflatten_func)


def register_dataclass(nodetype: type, data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None, drop_fields=()) -> type:
    """Make a dataclass a pytree node (JAX's ``register_dataclass``): ``data_fields`` are
    children, ``meta_fields`` static (hashable) data. Without them, every field is a child
    except those declared with ``field(metadata=dict(static=True))``. Usable as a
    decorator."""
    if not dataclasses.is_dataclass(nodetype):
        raise TypeError(f"register_dataclass expects a dataclass, got {nodetype!r}")
    fields = [f for f in dataclasses.fields(nodetype) if f.name not in set(drop_fields)]
    if data_fields is None and meta_fields is None:
        meta = [f.name for f in fields if f.metadata.get("static", False)]
        data = [f.name for f in fields if f.name not in meta]
    else:
        data, meta = list(data_fields or ()), list(meta_fields or ())
        named = {f.name for f in fields if f.init}
        if set(data) | set(meta) != named:
            raise ValueError(f"data_fields and meta_fields must include all dataclass fields "
                             f"with init=True: {sorted(named)}, got data {data} and meta "
                             f"{meta}")

    def flatten(obj):
        return [getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in meta)

    def unflatten(aux, children):
        return nodetype(**dict(zip(data, children)), **dict(zip(meta, aux)))
    pytree.register(nodetype, flatten, unflatten, names=data)
    return nodetype
