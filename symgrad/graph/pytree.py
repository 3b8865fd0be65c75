"""Flattening nested arguments and results (tuples, lists, dicts, None, leaves) into a
list of leaves plus a hashable structure, and back."""
from __future__ import annotations

from typing import Any

__all__ = ["flatten", "unflatten", "leaf_paths"]

_LEAF = "*"


def flatten(tree) -> tuple[list, Any]:
    """(leaves, structure); structure is hashable and equal for equal nestings."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
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
