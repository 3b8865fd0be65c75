"""Containers that count their changes: an optimizer's ``param_groups`` (a list of
group dicts, each with its ``params`` list) and its ``state`` (a defaultdict of
per-parameter dicts) are these, so a compiled training step asks "did any of it change
since the layout was last read?" in O(1) instead of rebuilding the layout over every
parameter and state entry at each call (see ``Optimizer._layout_now``).

Every mutating method bumps one process-wide counter (:func:`changes`); reading costs
nothing extra (the containers are ``list`` / ``dict`` / ``defaultdict`` subclasses that
override only mutation). They pickle and deep-copy as the plain containers, so saved
state dicts and optimizers hold no symgrad types."""
from __future__ import annotations

from collections import defaultdict

from ..tracing import _lifter, python_effect

__all__ = ["ObservedList", "ObservedDict", "GroupDict", "ObservedState", "changes", "bump", "observe_groups",
           "observed"]

_changes = [0]


def changes() -> int:
    """How many changes any observed container has seen (only ever grows)."""
    return _changes[0]


def bump() -> None:
    """Count a change made outside the containers (one replaced as a whole)."""
    _changes[0] += 1


def _bumping(base, name):
    method = getattr(base, name)

    def mutate(self, *args, **kwargs):
        _changes[0] += 1
        return method(self, *args, **kwargs)
    mutate.__name__ = name
    return mutate


_DICT_MUTATORS = ("__setitem__", "__delitem__", "clear", "pop", "popitem", "setdefault",
                  "update", "__ior__")
_LIST_MUTATORS = ("__setitem__", "__delitem__", "append", "extend", "insert", "pop",
                  "remove", "clear", "sort", "reverse", "__iadd__", "__imul__")


class ObservedList(list):
    """A list counting its changes (see the module docstring)."""

    __slots__ = ()

    def __reduce_ex__(self, protocol):
        return list, (list(self),)


class ObservedDict(dict):
    """A dict counting its changes (see the module docstring)."""

    __slots__ = ()

    def __reduce_ex__(self, protocol):
        return dict, (dict(self),)


class GroupDict(ObservedDict):
    """A parameter group: an :class:`ObservedDict` whose options changed inside a
    ``symgrad.compile`` trace (``g['lr'] = ...`` in a compiled step) make the step run
    uncompiled (:func:`symgrad.compiler.breaks.python_effect`): a compiled program would
    not write them again at each call."""

    __slots__ = ()

    def __setitem__(self, key, value):
        if _lifter[0] is not None and key != "params" and not (
                key in self and _same(dict.__getitem__(self, key), value)):
            python_effect(f"optimizer param_groups[...][{key!r}] assigned")
        ObservedDict.__setitem__(self, key, value)


def _same(a, b) -> bool:
    try:
        return a is b or (type(a) is type(b) and bool(a == b))
    except Exception:
        return False


class ObservedState(defaultdict):
    """An optimizer's ``state``: a ``defaultdict`` of :class:`ObservedDict` counting its
    changes; ``plain`` is set once a value that is not an ObservedDict is stored (its
    changes cannot be seen: the layout is then read in full)."""

    __slots__ = ("plain",)

    def __init__(self, items=()):
        super().__init__(ObservedDict)
        self.plain = False
        for k, v in dict(items).items():
            self[k] = v

    def __setitem__(self, key, value):
        _changes[0] += 1
        if type(value) is not ObservedDict:
            self.plain = True
        super().__setitem__(key, value)

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def __ior__(self, other):
        self.update(other)
        return self

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def __reduce_ex__(self, protocol):
        return defaultdict, (dict,), None, None, iter(self.items())


for _name in _LIST_MUTATORS:
    setattr(ObservedList, _name, _bumping(list, _name))
for _name in _DICT_MUTATORS:
    setattr(ObservedDict, _name, _bumping(dict, _name))
for _name in ("__delitem__", "clear", "pop", "popitem"):
    setattr(ObservedState, _name, _bumping(defaultdict, _name))


def observe_groups(groups) -> ObservedList:
    """Parameter groups as observed containers (each group dict and its ``params``)."""
    out = ObservedList()
    for g in groups:
        g = GroupDict(g)
        if "params" in g:
            dict.__setitem__(g, "params", ObservedList(g["params"]))
        list.append(out, g)
    _changes[0] += 1
    return out


def observed(param_groups, state) -> bool:
    """Whether every change to ``param_groups`` and ``state`` is counted."""
    if type(param_groups) is not ObservedList or type(state) is not ObservedState or state.plain:
        return False
    return all(type(g) is GroupDict and type(g.get("params")) is ObservedList
               for g in param_groups)
