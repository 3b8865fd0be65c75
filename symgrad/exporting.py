"""``symgrad.export`` / ``symgrad.deserialize``: a function's traced and transformed
program for one signature, as bytes that hold no Python code.

:func:`export` traces ``f`` (a plain function, or a compiled transform such as
``symgrad.grad(f)``) for example arguments and keeps the transformed program, before
optimisation; values the function closed over are baked in as constants.
:meth:`Exported.serialize` writes it in a versioned format; :func:`deserialize` reads it
back -- checking its magic, version and digest first, so a truncated, tampered or newer
blob is refused with a clear error.  Calling an :class:`Exported` optimises and compiles
the program for the machine it runs on (the native code is cached on disk as any
compiled function's), so a blob moves between machines of different CPUs.

Format (version 1): ``MAGIC``, a little-endian u32 version, a 32-byte blake2b digest of
the rest, a u64 header length, a JSON header (nodes in topological order with their
primitive, argument indices, attributes, shape and dtype; input and output specs and
pytree structures), then the constant arrays as raw little-endian bytes.
"""
from __future__ import annotations

import hashlib
import json
import struct as _struct
import numpy as np

from .compiler.backends import get_backend
from .compiler.dispatcher import Compiled
from .compiler.stages import apply_transform, optimize
from .graph import dtypes, pytree
from .graph.body import Body
from .graph.node import Constant, Node, const, make_node, toposort
from .graph.primitives import PRIMITIVES, resolve
from .graph.program import Program
from .tensor import Tensor
from .version import __version__

__all__ = ["export", "deserialize", "Exported", "FORMAT_VERSION"]

MAGIC = b"SYMGRAD-EXPORT\n"
FORMAT_VERSION = 1


class Exported:
    """A program for one signature: ``in_specs`` / ``out_specs`` (name, shape, dtype per
    leaf), callable like the function it came from (with arrays of those specs)."""

    def __init__(self, program: Program, in_structure, out_structure, name: str):
        self.program = program
        self.in_structure = in_structure
        self.out_structure = out_structure
        self.name = name
        self._exe = None

    @property
    def in_specs(self) -> list[tuple[str, tuple[int, ...], str]]:
        return [(nm, n.shape, n.dtype.name) for n, nm in zip(self.program.inputs,
                                                             self.program.input_names)]

    @property
    def out_specs(self) -> list[tuple[str, tuple[int, ...], str]]:
        return [(nm, n.shape, n.dtype.name) for n, nm in zip(self.program.outputs,
                                                             self.program.output_names)]

    def __repr__(self) -> str:
        ins = ", ".join(f"{nm}: {dt}{list(s)}" for nm, s, dt in self.in_specs)
        return f"<Exported {self.name}({ins})>"

    def serialize(self) -> bytes:
        return _serialize(self)

    def __call__(self, *args):
        leaves, structure = pytree.flatten(tuple(args))
        if structure != self.in_structure:
            raise TypeError(f"{self.name}: called with arguments structured as "
                            f"{_show(structure)}, exported for {_show(self.in_structure)}")
        arrays = []
        for v, (nm, shape, dt) in zip(leaves, self.in_specs):
            a = v.detach().numpy() if isinstance(v, Tensor) else np.asarray(v)
            if a.shape != tuple(shape) or a.dtype != _dtype(dt).np:
                raise TypeError(f"{self.name}: argument {nm} must be {dt}{list(shape)}, got "
                                f"{a.dtype}{list(a.shape)}")
            arrays.append(np.asarray(a, order="C"))
        outs = self._executable()(arrays)
        return pytree.unflatten(self.out_structure, list(outs))

    def _executable(self):
        if self._exe is None:
            p = self.program
            outs = optimize(p.outputs)
            optimized = Program(list(p.inputs), list(p.input_names), outs,
                                list(p.output_names), self.out_structure)
            self._exe = get_backend("llvm").compile_program(optimized)
        return self._exe


def _dtype(name: str) -> dtypes.DType:
    return dtypes.from_numpy_dtype(np.dtype(name))


def _show(structure) -> str:
    return repr(pytree.unflatten(structure, ["*"] * pytree.num_leaves(structure)))


# ---- export -----------------------------------------------------------------------------------
def export(f, *example_args) -> Exported:
    """The program ``f`` computes for arguments like ``example_args`` (arrays, tensors,
    numbers, pytrees of them): ``symgrad.export(symgrad.grad(loss), w, x)`` exports the
    gradient.  Values ``f`` closes over are constants of the exported program.

    >>> import numpy as np, symgrad
    >>> e = symgrad.export(symgrad.grad(lambda x: (x ** 3).sum()), np.ones(2))
    >>> symgrad.deserialize(e.serialize())(np.array([1.0, 2.0])).tolist()
    [3.0, 12.0]
    """
    c = f if isinstance(f, Compiled) else Compiled(f)
    key, leaves, names = c._signature(example_args)
    tr = c._trace(example_args, key, names)
    if tr.effects is not None and tr.effects.n_outputs:
        raise ValueError(f"cannot export {getattr(c.fn, '__name__', 'the function')}: it "
                         "updates state (tensors in place, .grad), which an exported program, "
                         "a pure function of its arguments, cannot")
    built = apply_transform(c.transform, tr, key[0], names)
    baked = {id(n): const(t._data, t.dtype) for t, n in tr.closure}
    for n in built.aux or []:
        baked[id(n)] = const(np.zeros(n.shape, n.dtype.np), n.dtype)
    outputs = _substitute(list(built.outputs), baked) if baked else list(built.outputs)
    program = Program(list(tr.arg_nodes), list(names), outputs, list(built.names),
                      built.structure)
    return Exported(program, key[0], built.structure,
                    getattr(c.fn, "__name__", "function"))


def _substitute(outputs: list[Node], env: dict[int, Node]) -> list[Node]:
    memo: dict[int, Node] = dict(env)
    for n in toposort(outputs):
        if id(n) in memo:
            continue
        args = tuple(memo[id(a)] for a in n.args)
        memo[id(n)] = n if all(a is b for a, b in zip(args, n.args)) else \
            make_node(n.op, args, n.attrs, n.shape, n.dtype)
    return [memo[id(o)] for o in outputs]


# ---- the format ---------------------------------------------------------------------------------
def _serialize(e: Exported) -> bytes:
    table: dict[int, int] = {}
    nodes: list[dict] = []
    blobs: list[bytes] = []
    offset = [0]

    def visit(roots):
        for n in toposort(list(roots)):
            if id(n) in table:
                continue
            for _, v in n.attrs:             # a loop's body goes first
                if isinstance(v, Body):
                    visit(list(v.outputs) + list(v.inputs))
            prim = PRIMITIVES.get(n.op)
            if prim is not None and (prim.user or prim.opaque):
                raise ValueError(f"export: primitive {n.op!r} is defined by Python code "
                                 "(symgrad.elementwise or a custom rule); an export holds no "
                                 "code, so it cannot be exported")
            rec = {"op": n.op, "args": [table[id(a)] for a in n.args],
                   "attrs": [[k, _attr(v, n)] for k, v in n.attrs],
                   "shape": list(n.shape), "dtype": n.dtype.name}
            table[id(n)] = len(nodes)
            nodes.append(rec)

    def _attr(v, n):
        if isinstance(v, (bool, int, float, str)) or v is None:
            return v
        if isinstance(v, tuple):
            return {"tuple": [_attr(x, n) for x in v]}
        if isinstance(v, dtypes.DType):
            return {"dtype": v.name}
        if isinstance(v, Constant):
            arr = np.array(v.value, order="C")      # (ascontiguousarray makes 0-d 1-d)
            data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
            rec = {"const": [offset[0], len(data), arr.dtype.newbyteorder("<").str,
                             list(arr.shape)]}
            blobs.append(data)
            offset[0] += len(data)
            return rec
        if isinstance(v, Body):
            return {"body": [[table[id(x)] for x in v.inputs], [table[id(x)] for x in v.outputs]]}
        if isinstance(v, (np.integer, np.floating, np.bool_)):
            return v.item()
        raise ValueError(f"export: attribute {v!r} of {n.op} cannot be exported")

    p = e.program
    visit(list(p.outputs) + list(p.inputs))
    header = {"symgrad": __version__, "name": e.name,
              "inputs": [table[id(n)] for n in p.inputs], "input_names": list(p.input_names),
              "outputs": [table[id(n)] for n in p.outputs],
              "output_names": list(p.output_names),
              "in_structure": _structure(e.in_structure),
              "out_structure": _structure(e.out_structure), "nodes": nodes}
    head = json.dumps(header, separators=(",", ":")).encode()
    rest = _struct.pack("<Q", len(head)) + head + b"".join(blobs)
    digest = hashlib.blake2b(rest, digest_size=32).digest()
    return MAGIC + _struct.pack("<I", FORMAT_VERSION) + digest + rest


def _structure(s):
    if s == pytree.LEAF:
        return "*"
    kind = s[0]
    if kind == "none":
        return ["none"]
    if kind in ("tuple", "list"):
        return [kind, [_structure(c) for c in s[1]]]
    if kind == "dict":
        for k in s[1]:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise ValueError(f"export: dict key {k!r} cannot be exported (str or int keys)")
        return ["dict", list(s[1]), [_structure(c) for c in s[2]]]
    if kind == "namedtuple":       # its class is code: exported as a plain tuple
        return ["tuple", [_structure(c) for c in s[2]]]
    raise ValueError(f"export: pytree node {kind!r} cannot be exported")


def _unstructure(j):
    if j == "*":
        return pytree.LEAF
    kind = j[0]
    if kind == "none":
        return ("none",)
    if kind in ("tuple", "list"):
        return (kind, tuple(_unstructure(c) for c in j[1]))
    if kind == "dict":
        return ("dict", tuple(j[1]), tuple(_unstructure(c) for c in j[2]))
    raise ValueError(f"unknown pytree node {kind!r}")


def deserialize(blob: bytes) -> Exported:
    """An :class:`Exported` from :meth:`Exported.serialize`'s bytes (see the module
    docstring); ValueError for bytes that are not an intact export this version reads."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"deserialize expects bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if not blob.startswith(MAGIC):
        raise ValueError("not a symgrad export (bad magic bytes)")
    pos = len(MAGIC)
    if len(blob) < pos + 4 + 32 + 8:
        raise ValueError("symgrad export is truncated")
    (version,) = _struct.unpack_from("<I", blob, pos)
    if version > FORMAT_VERSION:
        raise ValueError(f"symgrad export format version {version} is newer than this "
                         f"symgrad ({__version__}) reads (up to {FORMAT_VERSION}); upgrade "
                         "symgrad")
    digest, rest = blob[pos + 4:pos + 36], blob[pos + 36:]
    if hashlib.blake2b(rest, digest_size=32).digest() != digest:
        raise ValueError("symgrad export is corrupt: its digest does not match (truncated "
                         "or modified)")
    (n,) = _struct.unpack_from("<Q", rest, 0)
    header = json.loads(rest[8:8 + n])
    data = rest[8 + n:]
    try:
        return _rebuild(header, data)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ValueError(f"symgrad export is malformed: {exc}") from None


def _rebuild(h: dict, data: bytes) -> Exported:
    built: list[Node] = []

    def attr(v):
        if isinstance(v, dict):
            if "tuple" in v:
                return tuple(attr(x) for x in v["tuple"])
            if "dtype" in v:
                return _dtype(v["dtype"])
            if "const" in v:
                off, size, dt, shape = v["const"]
                arr = np.frombuffer(data[off:off + size], dtype=np.dtype(dt)).reshape(shape)
                return Constant(arr.astype(np.dtype(dt).newbyteorder("=")))
            if "body" in v:
                ins, outs = v["body"]
                return Body([built[i] for i in ins], [built[i] for i in outs])
            raise ValueError(f"unknown attribute {v!r}")
        if isinstance(v, list):
            raise ValueError(f"unknown attribute {v!r}")
        return v

    for rec in h["nodes"]:
        op = rec["op"]
        if op not in ("input", "const") and resolve(op) is None:
            raise ValueError(f"unknown primitive {op!r} (exported by symgrad {h['symgrad']})")
        attrs = tuple((k, attr(v)) for k, v in rec["attrs"])
        built.append(make_node(op, tuple(built[i] for i in rec["args"]), attrs,
                               tuple(rec["shape"]), _dtype(rec["dtype"])))
    program = Program([built[i] for i in h["inputs"]], list(h["input_names"]),
                      [built[i] for i in h["outputs"]], list(h["output_names"]),
                      _unstructure(h["out_structure"]))
    return Exported(program, _unstructure(h["in_structure"]), program.out_structure, h["name"])
