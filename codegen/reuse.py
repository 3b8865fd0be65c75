"""Structurally identical step functions are compiled once.

A repeated layer, an unrolled loop body or the backward pass of N identical layers
lowers to N step functions that differ only in their names and in which buffers the
segment passes them.  :class:`Reuse` keeps one of each: after a step function (and the
helpers emitted under its name: ``.range``, ``.chunks``, GEMM tiles ...) has been
built, its *canonical text* -- the IR with local names numbered in order of
appearance, its own name replaced by a placeholder, constant arrays named by their
contents and metadata spelled out -- is compared with the steps built before.  An
identical text means identical code for the same positional arguments, so the new
functions are dropped and the segment calls the first one (``noinline``: one copy in
the binary).  LLVM then optimises and compiles one function per distinct layer,
whatever the depth of the network.

Comparing text, not a description of the step, makes the rule safe by construction:
two steps share code only when the code is the same.  Printing a step's IR is not free
(a tenth of a small program's lowering), so the text is made only for steps that may
have a twin: first a cheap *shape* -- per global of the family its name suffix, kind,
type and block and instruction counts, equal whenever the texts are -- and only when
a second step has the shape of an earlier one are their texts compared (the earlier
step's IR is unchanged until then: nothing edits a built step but this class).
"""
from __future__ import annotations

import hashlib
import itertools
import re

import llvmlite.ir as ir

__all__ = ["Reuse"]

_NAME = r'("(?:[^"\\]|\\.)*"|[-a-zA-Z$._0-9]+)'
# one left-to-right pass: a local (%x), a label at the start of a line (x:), a global
# (@x), a metadata reference (!7)
_TOKEN = re.compile(rf"%{_NAME}|^{_NAME}:|@{_NAME}|!(\d+)\b", re.M)


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name


class Reuse:
    """Canonical texts of the step functions built so far in one module."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.seen: dict[str, ir.Function] = {}
        # shape -> the steps of that shape whose text is not made yet: (fn, family, prefix)
        self.pending: dict[tuple, list[tuple[ir.Function, list, str]]] = {}
        self._metadata: dict[str, str] = {}
        self._md_nodes: dict[str, ir.values.MDValue] = {}
        self.reused = 0

    def mark(self) -> int:
        """How many globals are defined so far; pass to :meth:`dedup` after building a
        step (globals are kept in order of definition, and only :meth:`dedup` removes
        any: the last ones, defined since its mark)."""
        return len(self.module.globals)

    def dedup(self, fn: ir.Function, before: int) -> ir.Function:
        """``fn``, or an earlier function with the same code (then ``fn`` and every
        global emitted under its name since the mark ``before`` leave the module).
        Looks only at the globals defined since the mark: a step costs the same in a
        long program as in a short one."""
        prefix = fn.name
        fresh = itertools.islice(reversed(self.module.globals.items()),
                                 len(self.module.globals) - before)
        family = [g for name, g in reversed(list(fresh))
                  if name == prefix or name.startswith(prefix + ".")]
        shape = self._shape(family, prefix)
        earlier = self.pending.get(shape)
        if earlier is None:                     # no step of this shape yet: no twin
            self.pending[shape] = [(fn, family, prefix)]
            return fn
        for other, other_family, other_prefix in earlier:
            self.seen.setdefault(self._key(other_family, other_prefix), other)
        earlier.clear()                         # (the shape stays: later ones compare)
        key = self._key(family, prefix)
        first = self.seen.get(key)
        if first is None:
            self.seen[key] = fn
            return fn
        for g in family:
            del self.module.globals[g.name]
        self.reused += 1
        if "noinline" not in first.attributes:
            # One copy in the binary: inlined into N call sites, it would be N copies
            # for LLVM to optimise again.
            first.attributes.add("noinline")
        return first

    # ---- canonical text -----------------------------------------------------------------
    @staticmethod
    def _shape(family: list, prefix: str) -> tuple:
        """What equal canonical texts have in common, cheap to get (see the module
        docstring)."""
        out = []
        for g in family:
            if isinstance(g, ir.Function):
                item = (g.name[len(prefix):], "fn", str(g.function_type), len(g.blocks),
                        sum(len(block.instructions) for block in g.blocks))
            else:
                item = (g.name[len(prefix):], type(g).__name__, str(g.value_type))
            out.append(item)
        return tuple(out)

    def _key(self, family: list, prefix: str) -> str:
        return hashlib.blake2b("\n".join(self._canonical(g, prefix) for g in family).encode(),
                               digest_size=20).hexdigest()

    def _canonical(self, g: ir.GlobalValue, prefix: str) -> str:
        text = str(g)
        names: dict[str, str] = {}
        module_globals = self.module.globals

        def token(m: re.Match) -> str:
            # Locals and labels share one numbering (one namespace in LLVM), in order of
            # appearance; globals of this family are SELF, constants are named by content,
            # metadata references are spelled out.
            local, label, glob, meta = m.groups()
            if local is not None:
                return "%" + names.setdefault(_unquote(local), f"v{len(names)}")
            if label is not None:
                return names.setdefault(_unquote(label), f"v{len(names)}") + ":"
            if meta is not None:
                return "!{" + self._meta(meta) + "}"
            name = _unquote(glob)
            if name == prefix or name.startswith(prefix + "."):
                return "@SELF" + name[len(prefix):]
            other = module_globals.get(name)
            if isinstance(other, ir.GlobalVariable) and other.global_constant \
                    and other.initializer is not None:
                content = f"{other.value_type}|{other.initializer}|{other.align}"
                return "@const." + hashlib.blake2b(content.encode(), digest_size=16).hexdigest()
            return m.group(0)

        return _TOKEN.sub(token, text)

    def _meta(self, name: str) -> str:
        """The contents of metadata node ``!name``, references spelled out."""
        done = self._metadata.get(name)
        if done is not None:
            return done
        if len(self._md_nodes) != len(self.module.metadata):
            self._md_nodes = {md.name: md for md in self.module.metadata}
        node = self._md_nodes.get(name)
        if node is None:
            return name
        self._metadata[name] = "SELF"          # a loop ID refers to itself
        parts = []
        for op in node.operands:
            if op is node:
                parts.append("SELF")
            elif isinstance(op, ir.values.MDValue):
                parts.append("{" + self._meta(op.name) + "}")
            else:
                parts.append(str(op))
        text = ",".join(parts)
        self._metadata[name] = text
        return text
