"""Persistent disk cache of compiled objects.

Where: ``<settings.cache_dir>/llvm/<key[:2]>/<key>.obj`` (``SYMGRAD_CACHE_DIR``, or set
``symgrad.config.settings.cache_dir``); ``SYMGRAD_DISK_CACHE=0`` (or
``settings.disk_cache = False``) disables it.  Settings are read at each access.

Key (:func:`cache_key`, one of the keys :func:`derived_key` makes): the program's
structural key (outputs and inputs, via ``symgrad.graph.node.structural_key``), the
formula of every elementwise primitive it applies
(``symgrad.graph.primitives.fingerprint(prim, formula=True)``: nodes name primitives,
and a user may register another formula under a name), input and output
names/shapes/dtypes, the nesting of the native entry's result, and the
:func:`environment`: the target's fingerprint (triple, CPU name, features, vector width,
llvmlite and LLVM versions: code built for one CPU is never loaded for another), the
loop thread count, the Python and numpy versions (C API layouts), the symgrad version
and a digest of the code generator's own source files (names, sizes, mtimes) -- anything
that changes the generated code changes the key. Other layers key their own entries
(e.g. the front end's traced-program entries, :mod:`symgrad.compiler.persist`) with
:func:`derived_key` too, under their own ``kind``.

File format: ``MAGIC``, a little-endian u32 header length, a JSON header (key, section
names and lengths, SHA-256 of the sections), then the sections (object code and the
zlib-compressed IR/asm texts).  A file whose magic, key, length or checksum does not
match is ignored (and rewritten by the next compile).  Writes go to a temporary file in
the same directory followed by ``os.replace``, so concurrent processes never see a
partial file.  Loads refresh an entry's mtime; beyond :data:`MAX_BYTES` the least
recently used entries are deleted (:func:`evict`, checked on some stores).

>>> e = encode("k" * 64, {"object": b"\\x7fELF..."})
>>> decode(e, "k" * 64)["object"]
b'\\x7fELF...'
>>> decode(e[:-1], "k" * 64) is None       # truncated
True
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import random
import stat
import struct
import sys
import tempfile
import time
from pathlib import Path

from symgrad.config import settings
from symgrad.version import __version__
from symgrad.graph.node import structural_key, toposort
from symgrad.graph.primitives import PRIMITIVES, fingerprint

from . import gemm_choice, target

__all__ = ["cache_key", "transient_key", "enabled", "derived_key", "environment", "source_digest", "encode", "decode",
           "load", "store", "evict", "cache_path", "read_entry", "write_entry", "MAGIC", "MAX_BYTES"]

MAGIC = b"SYMGRAD-OBJ\x01"
MAX_BYTES = 1 << 30        # the cache is trimmed (least recently used first) beyond this
EVICT_CHANCE = 1 / 16      # a store checks the size with this probability


@functools.cache
def source_digest(root: str) -> str:
    """Digest of the Python source files under ``root`` (name, size, modification
    time): editing any of them changes every key that includes it.  Stats, not
    contents (~0.1 ms per 50 files, not ~2 ms)."""
    stack, files, skip = [root], [], len(root)
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.name.endswith(".py"):
                    st = e.stat()
                    files.append(f"{e.path[skip:]}:{st.st_size}:{st.st_mtime_ns}")
                elif e.name != "__pycache__" and e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    files.sort()
    return hashlib.blake2b("\n".join(files).encode(), digest_size=16).hexdigest()


def environment(t: "target.Target | None" = None) -> str:
    """Everything besides the program that changes the generated code: the target it is
    built for (:func:`codegen.target.current`), the loop thread count, the Python and
    numpy versions (the entries call CPython's and numpy's C APIs, whose layouts they
    assume), symgrad's version and the source of the code generator and of the graph
    package it builds on (symgrad.graph: programs, dtypes, the order of divisions)."""
    import numpy
    return "\n".join([(t or target.current()).fingerprint(), f"threads={target.threads()}",
                      f"sanitize={settings.sanitize}", f"gemm={gemm_choice.mode()}",
                      f"python={sys.implementation.cache_tag}{sys.abiflags}",
                      f"numpy={numpy.__version__}", f"symgrad={__version__}",
                      f"codegen={source_digest(str(Path(__file__).parent))}",
                      f"graph={source_digest(_GRAPH_SOURCE)}"])


_GRAPH_SOURCE = str(Path(fingerprint.__code__.co_filename).parent)     # symgrad/graph


def derived_key(kind: str, parts: list[str], t: "target.Target | None" = None) -> str:
    """A key for another layer's entries: ``kind`` (a namespace, so such keys never
    equal a :func:`cache_key`), its ``parts`` and the :func:`environment`."""
    text = "\n".join([f"kind={kind}", *parts, environment(t)])
    return hashlib.blake2b(text.encode(), digest_size=24).hexdigest()


def _definitions(ops: set[str]) -> str:
    """The formulas of the elementwise primitives among ``ops``: a node names its
    primitive, and another process may register another formula under that name."""
    prims = [PRIMITIVES.get(op) for op in sorted(ops)]
    return repr([fingerprint(p, formula=True) for p in prims
                 if p is not None and p.kind == "elementwise"])


def cache_key(program) -> str:
    """Hex digest identifying the native code of ``program`` on this host."""
    nodes = toposort(list(program.outputs))
    ops = {n.op for n in nodes}
    parts = [
        structural_key(list(program.outputs) + list(program.inputs)),
        _definitions(ops),
        repr([(str(n), i.shape, i.dtype.name) for n, i in zip(program.input_names, program.inputs)]),
        repr([(str(n), o.shape, o.dtype.name) for n, o in zip(program.output_names, program.outputs)]),
        repr(getattr(program, "native_structure", lambda: None)()),   # shape of the entry's result
    ]
    if getattr(program, "donated", ()):            # outputs written into their inputs
        parts.append(repr(tuple(program.donated)))
    if any(n.op == "matmul" and gemm_choice.concerns(n) for n in nodes):
        parts.append(gemm_choice.describe())       # which GEMM its products run on
    return derived_key("program", parts)


def encode(key: str, sections: dict[str, bytes]) -> bytes:
    """One cache file's bytes."""
    names = sorted(sections)
    body = b"".join(sections[n] for n in names)
    header = json.dumps({"key": key, "sections": [[n, len(sections[n])] for n in names],
                         "sha256": hashlib.sha256(body).hexdigest()}).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + body


def decode(data: bytes, key: str) -> dict[str, bytes] | None:
    """The sections of a cache file, or None if it is corrupt, truncated or for another key."""
    try:
        if not data.startswith(MAGIC):
            return None
        (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
        start = len(MAGIC) + 4
        header = json.loads(data[start:start + hlen].decode())
        body = data[start + hlen:]
        if header.get("key") != key or sum(n for _, n in header["sections"]) != len(body):
            return None
        if hashlib.sha256(body).hexdigest() != header["sha256"]:
            return None
        out, pos = {}, 0
        for name, n in header["sections"]:
            out[name] = body[pos:pos + n]
            pos += n
        return out
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
        return None


def enabled() -> bool:
    """Whether the disk cache is on (``settings.disk_cache`` and a ``cache_dir``)."""
    return bool(settings.disk_cache and settings.cache_dir)


def cache_path(key: str) -> Path | None:
    """Where ``key`` lives, or None when the disk cache is disabled."""
    if not enabled():
        return None
    return Path(settings.cache_dir) / "llvm" / key[:2] / f"{key}.obj"


_TRANSIENT = itertools.count()


def transient_key() -> str:
    """A key for code no disk cache will hold (it is off): unique in this process and
    never a :func:`cache_key`, which it saves computing (the structural key of a long
    program is a noticeable part of its compile)."""
    text = f"kind=transient\npid={os.getpid()}\n{next(_TRANSIENT)}\n{time.time_ns()}"
    return hashlib.blake2b(text.encode(), digest_size=24).hexdigest()


def load(key: str) -> dict[str, bytes] | None:
    """The sections stored under ``key``, or None (missing, unreadable, corrupt, or not
    a regular file).  Only a regular file is ever read: a FIFO, device, socket or
    symlink in its place is ignored (opening a FIFO would block forever), and the file
    is opened non-blocking and checked again on the open descriptor, so a file swapped
    for one of them in between cannot hang or crash the process either."""
    path = cache_path(key)
    return None if path is None else read_entry(path, key)


def read_entry(path: Path, key: str) -> dict[str, bytes] | None:
    """The sections of the entry file ``path`` stored under ``key`` (see :func:`load`);
    also for other caches in this file format (:mod:`codegen.support`)."""
    data = _read_regular(path)
    return None if data is None else decode(data, key)


_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


def _read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not through a symlink) of at most
    :data:`MAX_BYTES`; its mtime is refreshed (recently used: evicted last)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        try:
            os.utime(fd if os.utime in os.supports_fd else path)
        except OSError:
            pass                             # a read-only cache still answers
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def evict(limit: int | None = None) -> int:
    """Delete the least recently used entries until the cache holds at most 3/4 of
    ``limit`` bytes (default :data:`MAX_BYTES`); return how many were deleted."""
    if not settings.cache_dir:
        return 0
    limit = MAX_BYTES if limit is None else limit
    root = Path(settings.cache_dir) / "llvm"
    entries = []
    for path in root.rglob("*.obj"):
        try:
            st = path.stat()
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return 0
    deleted = 0
    for _, size, path in sorted(entries):
        if total <= limit * 3 // 4:
            break
        try:
            path.unlink()
            total -= size
            deleted += 1
        except OSError:
            pass
    return deleted


def store(key: str, sections: dict[str, bytes]) -> bool:
    """Write atomically; False (silently) if the cache is disabled or not writable."""
    path = cache_path(key)
    if path is None or not write_entry(path, key, sections):
        return False
    if random.random() < EVICT_CHANCE:
        evict()
    return True


def write_entry(path: Path, key: str, sections: dict[str, bytes]) -> bool:
    """Write the entry file ``path`` atomically (a temporary file in its directory, then
    ``os.replace``); False (silently) if it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(encode(key, sections))
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return True
    except OSError:
        return False
