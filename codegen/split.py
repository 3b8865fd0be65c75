"""Splitting one module's IR text into parts that LLVM optimises and compiles
independently (in two threads: :func:`codegen.jit.compile_module`), loaded together.

The split is a function of the text alone, so a module compiles to the same object code
whether its parts run one after the other or at the same time.  Rules:

* external definitions (the kernel, its segments, the CPython entries) and every
  mutable global stay in part 0;
* *top* internal functions (those an external definition or nothing references: the
  steps of a schedule) go, largest first (with what they reach), to whichever part
  has the least work so far -- work is a definition's lines plus those of the
  ``alwaysinline`` functions it calls, which LLVM inlines; tops that reach the same
  inlinable helper (a GEMM micro-kernel) go together, so that it is optimised once;
* a part also holds every internal function and constant its definitions reach:
  copied, internal, into each part that reaches it (inlining and constant propagation
  see what they see in one module) -- but a ``noinline`` function or a constant of more
  than :data:`BIG_CONSTANT` characters only into the first part that reaches it (a copy
  would be compiled, or stored, twice for nothing);
* what a part references and another part defines (a top, a ``noinline`` function, a
  big constant, an external function, a mutable global) is declared in it, and loses
  ``internal`` where it is defined (its name is the program's or a shared helper's,
  unique in the object);
* declarations, types, metadata and attributes go to every part, and so does an
  appending list that names only declarations (``@llvm.compiler.used`` keeping the trig
  library's vector variants alive for the loop vectoriser);
* a function declared in a part keeps its ``vector-function-abi-variant`` attribute, and
  the variants it names, defined in another part, are declared and kept
  (``@llvm.used``) there too: without them a part's sin / cos loops stayed scalar.

A module smaller than :data:`MIN_LINES`, or whose smaller part would hold less than
:data:`MIN_SHARE` of the work, is not split (one part: the text itself), and so is
any text with a top-level line this module does not know.

>>> text = '''define internal void @"a"() noinline
... {
... entry:
...   ret void
... }
... define void @"k"()
... {
... entry:
...   call void @"a"()
...   ret void
... }
... '''
>>> parts = split(text, min_lines=0, min_share=0.0)
>>> len(parts)
2
>>> print(parts[0].split("define")[0].strip())   # k calls a, defined in part 1
declare void @"a"()
>>> print(next(l for l in parts[1].splitlines() if l.startswith("define")))
define void @"a"() noinline
"""
from __future__ import annotations

import re

from symgrad.config import settings

__all__ = ["split", "MIN_LINES", "MIN_SHARE"]

MIN_LINES = 400      # modules with fewer lines of definitions compile as one part
MIN_SHARE = 0.25     # ... and so do those whose smaller part would have less of the work
BIG_CONSTANT = 512   # characters of a constant's definition: larger ones are not copied

# a scalar function's vector variants, named in an attribute (the loop vectoriser calls
# them): "vector-function-abi-variant"="_ZGV_LLVM_N4vv_f(f_v4),..."
_VARIANTS = re.compile(r'"vector-function-abi-variant"="[^"]*"')
_VARIANT_NAME = re.compile(r"\(([^()]+)\)")
_REF = re.compile(r'@"((?:[^"\\]|\\.)*)"|@([-A-Za-z$._][-A-Za-z$._0-9]*)')
_LINKAGE = ("internal", "private")
_PREFIX_WORDS = {"internal", "private", "dso_local", "hidden", "protected", "default",
                 "unnamed_addr", "local_unnamed_addr", "external", "weak", "weak_odr",
                 "linkonce", "linkonce_odr", "available_externally", "common"}


class _Def:
    __slots__ = ("name", "lines", "refs", "internal", "function", "inline", "noinline",
                 "mutable", "appending", "index", "variants")

    def __init__(self, name, lines, index):
        self.name, self.lines, self.index = name, lines, index
        self.refs: list[str] = []
        self.variants = ""      # a function's vector-function-abi-variant attribute, if any


def _name_at(line: str, start: int) -> tuple[str, int] | None:
    m = _REF.match(line, start)
    if m is None:
        return None
    return (m.group(1) if m.group(1) is not None else m.group(2)), m.end()


def _parse(text: str):
    """(common lines, definitions in order) of ``text``; None if a line is unknown."""
    common: list[str] = []
    defs: list[_Def] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("define "):
            at = line.find("@")
            got = _name_at(line, at) if at > 0 else None
            if got is None:
                return None
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            if j == len(lines):
                return None
            d = _Def(got[0], lines[i:j + 1], len(defs))
            words = line[len("define "):at].split()
            d.function, d.internal = True, any(w in _LINKAGE for w in words)
            head_end = line.find(")", got[1])
            attrs = line[head_end + 1:].split() if head_end > 0 else []
            d.inline, d.noinline = "alwaysinline" in attrs, "noinline" in attrs
            variants = _VARIANTS.search(line, head_end + 1) if head_end > 0 else None
            d.variants = variants.group(0) if variants else ""
            d.mutable = d.appending = False
            defs.append(d)
            i = j + 1
            continue
        if line.startswith("@"):
            got = _name_at(line, 0)
            if got is None or not line[got[1]:].startswith(" = "):
                return None
            words = line[got[1] + 3:].split(None, 4)
            if {"alias", "ifunc"} & set(words[:4]):
                return None
            if "external" in words[:1]:
                common.append(line)          # a declaration
            else:
                d = _Def(got[0], [line], len(defs))
                d.function = d.inline = d.noinline = False
                d.internal = any(w in _LINKAGE for w in words[:2])
                d.appending = "appending" in words[:2]
                d.mutable = "constant" not in words[:4]
                defs.append(d)
            i += 1
            continue
        if line.startswith(("declare ", "target ", "attributes ", "!", "%", "; ",
                            "source_filename")) or not line.strip():
            common.append(line)
            i += 1
            continue
        return None
    names = {d.name for d in defs}
    for d in defs:
        seen = set()
        start = 1 if d.function else 0     # a definition's own name is not a reference
        for k, line in enumerate(d.lines):
            for m in _REF.finditer(line, line.find("@") + 1 if k == 0 and start else 0):
                ref = m.group(1) if m.group(1) is not None else m.group(2)
                if ref in names and ref != d.name and ref not in seen:
                    seen.add(ref)
                    d.refs.append(ref)
        if not d.function:                 # a global's own name is its first token
            d.refs = [r for r in d.refs if r != d.name]
    return common, defs


def _reach(start, by_name: dict[str, _Def], owner: dict[str, int], into: set[str],
           part: int) -> None:
    """Add to ``into`` every definition reachable from ``start`` that part ``part`` holds:
    copied ones (internal, not owned by a part) and ``noinline`` functions no part owns
    yet, nor big constants (then ``part`` owns them: a copy would only be compiled, or
    stored, twice)."""
    stack = list(start)
    while stack:
        name = stack.pop()
        for ref in by_name[name].refs:
            if ref not in owner and ref not in into:
                if by_name[ref].noinline or len(by_name[ref].lines[0]) > BIG_CONSTANT:
                    owner[ref] = part
                into.add(ref)
                stack.append(ref)


def _declaration(d: _Def) -> str:
    """A declaration of definition ``d`` (function or global)."""
    line = d.lines[0]
    if d.function:
        at = line.find("@")
        words = [w for w in line[len("define "):at].split() if w not in _PREFIX_WORDS]
        end = _name_at(line, at)[1]
        depth, k = 0, end
        while k < len(line):
            if line[k] == "(":
                depth += 1
            elif line[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        # (a vector variant attribute stays: the loop vectoriser reads it at call sites)
        return "declare " + " ".join(words) + " " + line[at:k + 1] + \
            (" " + d.variants if d.variants else "")
    got = _name_at(line, 0)
    rest = line[got[1] + 3:].split()
    kind = next(i for i, w in enumerate(rest) if w in ("global", "constant"))
    type_text = _type_prefix(" ".join(rest[kind + 1:]))
    return f"{line[:got[1]]} = external {rest[kind]} {type_text}"


def _type_prefix(s: str) -> str:
    """The leading type of ``s`` (``[2 x i64] [...]`` -> ``[2 x i64]``)."""
    if s[:1] in "[{<":
        depth = 0
        for k, c in enumerate(s):
            depth += c in "[{<"
            depth -= c in "]}>"
            if depth == 0:
                return s[:k + 1]
    return s.split()[0].rstrip(",")


def _weight(d: _Def, by_name: dict[str, _Def]) -> int:
    return len(d.lines) + sum(len(by_name[r].lines) * _count(d, r)
                              for r in d.refs if by_name[r].inline)


def _count(d: _Def, name: str) -> int:
    token = f'@"{name}"'
    return sum(line.count(token) for line in d.lines)


def split(text: str, parts: int = 2, min_lines: int | None = None,
          min_share: float = MIN_SHARE) -> list[str]:
    """The IR text ``text`` as ``parts`` module texts at most (see the module docstring);
    ``[text]`` when it is not worth splitting or not understood. ``min_lines`` None: the
    process's choice -- :data:`MIN_LINES`, or no split with ``SYMGRAD_SPLIT_COMPILE=0``.
    (A compiled Adam training step runs at the same speed split or whole: 200 and 340 us
    are two states of a busy machine, seen with either code in one process.)"""
    if min_lines is None:
        if not settings.split_compile:
            return [text]
        min_lines = MIN_LINES
    parsed = _parse(text)
    if parsed is None or parts < 2:
        return [text]
    common, defs = parsed
    if sum(len(d.lines) for d in defs if d.function) < min_lines:
        return [text]
    by_name = {d.name: d for d in defs}
    root_refs = {r for d in defs if not d.internal for r in d.refs}
    referenced = {r for d in defs for r in d.refs}
    owner = {d.name: 0 for d in defs if not d.internal or d.mutable or d.appending}
    tops = [d for d in defs if d.function and d.internal and not d.inline and
            (d.name in root_refs or d.name not in referenced)]
    owner.update((d.name, -1) for d in tops)
    weight = {d.name: _weight(d, by_name) for d in defs if d.function}
    mine: list[set[str]] = [set(n for n, k in owner.items() if k == 0)]
    mine += [set() for _ in range(parts - 1)]
    _reach(list(mine[0]), by_name, owner, mine[0], 0)
    load = [sum(weight.get(n, 0) for n in mine[0])] + [0] * (parts - 1)
    # tops that would copy the same inlinable helper (a GEMM micro-kernel) go together:
    # LLVM would otherwise optimise the helper once in each part
    reach: dict[str, set[str]] = {}
    for d in tops:
        reach[d.name] = set()
        _reach([d.name], by_name, dict(owner), reach[d.name], 0)
    group = {d.name: d.name for d in tops}

    def find(n: str) -> str:
        while group[n] != n:
            group[n] = group[group[n]]
            n = group[n]
        return n

    sharer: dict[str, str] = {}
    for d in tops:
        for n in sorted(reach[d.name]):
            h = by_name[n]
            if h.function and not h.inline and not h.noinline:
                if n in sharer:
                    group[find(d.name)] = find(sharer[n])
                else:
                    sharer[n] = d.name
    clusters: dict[str, list[_Def]] = {}
    for d in tops:
        clusters.setdefault(find(d.name), []).append(d)

    def work(members: list[_Def]) -> int:      # with all they reach
        names = {d.name for d in members}.union(*(reach[d.name] for d in members))
        return sum(weight.get(n, 0) for n in names)

    for members in sorted(clusters.values(), key=lambda m: (-work(m), m[0].index)):
        k = min(range(parts), key=lambda p: (load[p], p))
        for d in members:
            owner[d.name] = k
            new = {d.name}
            _reach([d.name], by_name, owner, new, k)
            new -= mine[k]
            mine[k] |= new
            load[k] += sum(weight.get(n, 0) for n in new)
    for d in defs:                       # unreached copied definitions: part 0
        if not any(d.name in m for m in mine):
            mine[0].add(d.name)
    used = [k for k in range(parts) if load[k] > 0 or k == 0]
    if len(used) < 2 or min(load[k] for k in used) < min_share * sum(load):
        return [text]
    for d in defs:          # e.g. llvm.compiler.used keeping the trig variants: every part
        if d.appending and not d.refs:
            for k in used:
                mine[k].add(d.name)
    declared = []
    exported: set[str] = set()
    for k in used:
        outside = {r for n in mine[k] for r in by_name[n].refs} - mine[k]
        # the vector variants of a function defined in another part: declared here too,
        # and kept (@llvm.used) until the loop vectoriser has looked for them
        variants = {v for n in outside for v in _VARIANT_NAME.findall(by_name[n].variants)
                    if v in by_name and v not in mine[k]}
        if variants and "llvm.used" in mine[k]:
            return [text]       # (one more list to merge: not worth it, compile whole)
        outside = sorted(outside | variants, key=lambda n: by_name[n].index)
        decls = [_declaration(by_name[n]) for n in outside]
        if variants:
            names = sorted(variants, key=lambda n: by_name[n].index)
            decls.append(f'@"llvm.used" = appending global [{len(names)} x ptr] ['
                         + ", ".join(f'ptr @"{n}"' for n in names)
                         + '], section "llvm.metadata"')
        declared.append(decls)
        exported.update(n for n in outside if by_name[n].internal)
    texts = []
    for k, decls in zip(used, declared):
        body = []
        for d in defs:
            if d.name in mine[k]:
                if d.name in exported and owner.get(d.name) == k:
                    body.append(_external(d.lines[0], d))
                    body.extend(d.lines[1:])
                else:
                    body.extend(d.lines)
        texts.append("\n".join(common + decls + body) + "\n")
    return texts


def _external(line: str, d: _Def) -> str:
    """The first line of definition ``d`` without its internal linkage."""
    if d.function:
        at = line.find("@")
        head = " ".join(w for w in line[:at].split() if w not in _LINKAGE)
        return head + " " + line[at:]
    got = _name_at(line, 0)
    words = line[got[1] + 3:].split(" ")
    kind = next(i for i, w in enumerate(words) if w in ("global", "constant"))
    head = [w for w in words[:kind] if w not in _LINKAGE]
    return f"{line[:got[1]]} = " + " ".join(head + words[kind:])
