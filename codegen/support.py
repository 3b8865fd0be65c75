"""The support-object cache: object code that no program decides -- the trig functions'
library (:mod:`codegen.library`), the helper thread's module (:mod:`codegen.worker`),
the loop driver (:mod:`codegen.loops`) -- kept on disk across processes.

Every process needs these few modules, whatever it compiles; building them costs
~20-60 ms of LLVM each (the float64 and float32 trig libraries are the largest), a
large part of a small program's first call.  They are the same in every process on one
machine with one symgrad, so they are cached apart from compiled programs: the
program cache (:mod:`codegen.cache`, ``SYMGRAD_DISK_CACHE``) may be off (the compile
benchmark turns it off, so that every first call compiles its program), this one stays
on unless ``SYMGRAD_SUPPORT_CACHE=0`` (or ``settings.support_cache = False``).

Where: ``<settings.cache_dir>/support/<key>.o``, in :mod:`codegen.cache`'s file format
(magic, header, SHA-256 of the sections): a corrupt, truncated or foreign file is
ignored and rebuilt; writes are atomic (temporary file + ``os.replace``), so concurrent
processes never read a partial entry.  Key: the module's name and
:func:`codegen.cache.environment` -- the target's fingerprint (triple, CPU, features,
vector width, llvmlite and LLVM versions), the Python and numpy versions and the digest
of the code generator's source -- so an object built for one CPU or by another version
of the code is never loaded.  At most :data:`MAX_ENTRIES` entries are kept (the least
recently used go first; keys change with every edit of the code generator).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from symgrad.config import settings

from . import cache, jit
from .target import Target

__all__ = ["enabled", "entry_path", "key", "load_or_compile", "stats", "MAX_ENTRIES"]

MAX_ENTRIES = 32
SUFFIX = ".o"
stats = {"loaded": 0, "compiled": 0}     # support objects loaded from disk / compiled


def enabled() -> bool:
    """Whether the support-object cache is on (``settings.support_cache`` and a
    ``cache_dir``)."""
    return bool(settings.support_cache and settings.cache_dir)


def key(name: str, t: Target) -> str:
    """The key of support module ``name`` built for ``t`` by this code generator."""
    return cache.derived_key("support", [name], t)


def entry_path(k: str) -> Path | None:
    """Where the entry of key ``k`` lives, or None when the cache is off."""
    if not enabled():
        return None
    return Path(settings.cache_dir) / "support" / f"{k}{SUFFIX}"


def load_or_compile(name: str, make_ir: Callable[[], str], t: Target,
                    level: int = jit.OPT_LEVEL) -> "jit.LoadedObject":
    """Support module ``name`` for ``t``: its object from the cache, loaded; else the
    IR ``make_ir()`` returns compiled at ``level`` (and stored)."""
    k = key(name, t)
    path = entry_path(k)
    hit = cache.read_entry(path, k) if path is not None else None
    if hit is not None and "object" in hit:
        try:
            loaded = jit.load_object(hit["object"], t)
            stats["loaded"] += 1
            return loaded
        except (jit.UnresolvedSymbolError, RuntimeError, ValueError):
            pass             # an object this process cannot load: compiled again below
    compiled = jit.compile_module(make_ir(), level=level, target=t)
    stats["compiled"] += 1
    if path is not None and compiled.loaded is not None:
        cache.write_entry(path, k, {"object": compiled.object_code})
        _trim(path.parent)
    return compiled.loaded


def _trim(folder: Path) -> None:
    """Keep the :data:`MAX_ENTRIES` most recently used entries of ``folder`` (a load
    refreshes an entry's mtime)."""
    try:
        entries = sorted(((e.stat().st_mtime_ns, e.path) for e in os.scandir(folder)
                          if e.name.endswith(SUFFIX) and not e.name.startswith(".")),
                         reverse=True)
    except OSError:
        return
    for _, path in entries[MAX_ENTRIES:]:
        try:
            os.unlink(path)
        except OSError:
            pass
