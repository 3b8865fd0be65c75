"""A module's registration tables (``_parameters``, ``_buffers``, ``_modules``): dicts that
report every write.

Compiled functions re-read the paths to the tensors they close over through modules only
when some module's registration changed (:func:`symgrad.compiler.sources.registration_changed`).
So that no write can be forgotten -- ``Module.__setattr__``, ``load_state_dict(assign=True)``,
``_apply`` (``.double()``, ``.to()``), the containers' ``del`` / ``insert`` / ``pop`` --, the
tables themselves report it: every mutating method of :class:`RegistrationTable` advances the
counter *after* the write (a compiled call in between re-reads the new paths). Reads are
``dict``'s own C methods, untouched.
"""
from __future__ import annotations

from ...compiler.sources import registration_changed

__all__ = ["RegistrationTable", "TABLES"]

TABLES = ("_parameters", "_buffers", "_modules")


class RegistrationTable(dict):
    """A ``dict`` whose writes advance the registration counter."""

    __slots__ = ()

    def __setitem__(self, key, value):
        try:
            dict.__setitem__(self, key, value)
        finally:
            registration_changed()

    def __delitem__(self, key):
        try:
            dict.__delitem__(self, key)
        finally:
            registration_changed()

    def __ior__(self, other):
        try:
            return dict.__ior__(self, other)
        finally:
            registration_changed()

    def pop(self, *args):
        try:
            return dict.pop(self, *args)
        finally:
            registration_changed()

    def popitem(self):
        try:
            return dict.popitem(self)
        finally:
            registration_changed()

    def clear(self):
        try:
            dict.clear(self)
        finally:
            registration_changed()

    def update(self, *args, **kwargs):
        try:
            dict.update(self, *args, **kwargs)
        finally:
            registration_changed()

    def setdefault(self, key, default=None):
        try:
            return dict.setdefault(self, key, default)
        finally:
            registration_changed()
