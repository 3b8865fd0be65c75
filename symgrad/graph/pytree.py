"""The one pytree definition: nested arguments and results (tuples, lists, dicts, None,
leaves) flattened into a list of leaves plus a hashable *structure*, and back; and the
questions the rest of the project asks about a structure (how many leaves, its children,
whether it prints as a literal). Nothing else takes a structure apart by hand.

A structure is ``LEAF`` (``"*"``), ``("none",)``, ``("tuple", children)``,
``("list", children)``, ``("dict", keys, children)``, ``("namedtuple", cls,
children)`` or ``("custom", (cls, aux), children)`` for a class registered with
:func:`register` (``symgrad.tree_util.register_pytree_node`` / ``register_dataclass``).

>>> leaves, s = flatten({"w": [1, 2], "b": (3, None)})
>>> leaves, num_leaves(s), unflatten(s, [10, 20, 30])
([3, 1, 2], 3, {'b': (10, None), 'w': [20, 30]})
"""
from __future__ import annotations

from typing import Any

__all__ = ["LEAF", "flatten", "unflatten", "leaf_paths", "tuple_of", "kind", "children",
           "kinds", "num_leaves", "is_literal", "replace_leaves", "register"]

LEAF = "*"
_LEAF = LEAF

# registered classes: cls -> (flatten(obj) -> (children, aux), unflatten(aux, children),
# names of the children for readable leaf paths, or None)
_REGISTRY: dict[type, tuple] = {}


def register(cls: type, flatten_fn, unflatten_fn, names=None) -> None:
    """Make instances of ``cls`` pytree nodes: ``flatten_fn(obj) -> (children, aux)``
    (``aux`` hashable, static), ``unflatten_fn(aux, children) -> obj``."""
    if cls in _REGISTRY:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {cls}.")
    _REGISTRY[cls] = (flatten_fn, unflatten_fn, tuple(names) if names is not None else None)


def flatten(tree) -> tuple[list, Any]:
    """(leaves, structure); structure is hashable and equal for equal nestings."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    reg = _REGISTRY.get(type(tree))
    if reg is not None:
        kids, aux = reg[0](tree)
        try:
            hash(aux)
        except TypeError:
            raise TypeError(f"the auxiliary data of a {type(tree).__name__} pytree node must "
                            f"be hashable, got {type(aux).__name__}") from None
        return ("custom", (type(tree), aux), tuple(_flatten(t, leaves) for t in kids))
    if isinstance(tree, tuple):
        if hasattr(tree, "_fields"):              # a namedtuple: its class is part of it
            return ("namedtuple", type(tree), tuple(_flatten(t, leaves) for t in tree))
        return ("tuple", tuple(_flatten(t, leaves) for t in tree))
    if isinstance(tree, list):
        return ("list", tuple(_flatten(t, leaves) for t in tree))
    if isinstance(tree, dict):
        keys = tuple(sorted(tree, key=repr))
        return ("dict", keys, tuple(_flatten(tree[k], leaves) for k in keys))
    if tree is None:
        return ("none",)
    leaves.append(tree)
    return _LEAF


def unflatten(structure, leaves) -> Any:
    it = iter(leaves)
    out = _unflatten(structure, it)
    return out


def _unflatten(s, it):
    if s == _LEAF:
        return next(it)
    kind = s[0]
    if kind == "tuple":
        return tuple(_unflatten(c, it) for c in s[1])
    if kind == "list":
        return [_unflatten(c, it) for c in s[1]]
    if kind == "dict":
        return {k: _unflatten(c, it) for k, c in zip(s[1], s[2])}
    if kind == "namedtuple":
        return s[1](*(_unflatten(c, it) for c in s[2]))
    if kind == "custom":
        cls, aux = s[1]
        return _REGISTRY[cls][1](aux, [_unflatten(c, it) for c in s[2]])
    return None


def leaf_paths(structure, prefix: str) -> list[str]:
    """Readable names of the leaves: ``params['w']``, ``x[0]``."""
    out: list[str] = []
    _paths(structure, prefix, out)
    return out


def _paths(s, prefix, out):
    if s == _LEAF:
        out.append(prefix)
    elif s[0] in ("tuple", "list"):
        for i, c in enumerate(s[1]):
            _paths(c, f"{prefix}[{i}]", out)
    elif s[0] == "dict":
        for k, c in zip(s[1], s[2]):
            _paths(c, f"{prefix}[{k!r}]", out)
    elif s[0] == "namedtuple":
        for field, c in zip(s[1]._fields, s[2]):
            _paths(c, f"{prefix}.{field}", out)
    elif s[0] == "custom":
        names = _REGISTRY[s[1][0]][2]
        for i, c in enumerate(s[2]):
            _paths(c, f"{prefix}.{names[i]}" if names else f"{prefix}[{i}]", out)


def tuple_of(children) -> tuple:
    """The structure of a tuple of the given child structures."""
    return ("tuple", tuple(children))


def kind(structure) -> str:
    """One of "leaf", "none", "tuple", "list", "dict", "namedtuple", "custom"."""
    return "leaf" if structure == LEAF else structure[0]


def children(structure) -> tuple:
    """The child structures of a tuple, list, dict, namedtuple or registered node (in
    order); () for a leaf or None."""
    k = kind(structure)
    if k in ("tuple", "list"):
        return structure[1]
    if k in ("dict", "namedtuple", "custom"):
        return structure[2]
    return ()


def kinds(structure) -> set[str]:
    """Every :func:`kind` that occurs in ``structure``."""
    out = {kind(structure)}
    for c in children(structure):
        out |= kinds(c)
    return out


def replace_leaves(structure, replacements):
    """``structure`` with its leaves, in order, replaced by the given structures."""
    it = iter(replacements)

    def rec(s):
        k = kind(s)
        if k == "leaf":
            return next(it)
        if k in ("tuple", "list"):
            return (k, tuple(rec(c) for c in s[1]))
        if k in ("dict", "namedtuple", "custom"):
            return (k, s[1], tuple(rec(c) for c in s[2]))
        return s
    return rec(structure)


def num_leaves(structure) -> int:
    """How many leaves ``structure`` holds."""
    if structure == LEAF:
        return 1
    return sum(num_leaves(c) for c in children(structure))


def _literal_key(k) -> bool:
    if type(k) in (str, int, bool, float) or k is None:
        return True
    return type(k) is tuple and all(_literal_key(x) for x in k)


def is_literal(structure) -> bool:
    """Whether ``structure`` prints (``repr``) as a Python literal that reads back equal:
    every dict key is a literal (str, int, bool, float, None, tuples of them)."""
    if kind(structure) in ("namedtuple", "custom"):
        return False                          # a class: not a literal
    if kind(structure) == "dict" and not all(_literal_key(k) for k in structure[1]):
        return False
    return all(is_literal(c) for c in children(structure))
