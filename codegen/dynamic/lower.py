"""One LLVM module computing a program for every value of a runtime extent ``n``.

The kernel is ``i32 @<name>(ptr bufs, i64 n, ptr err)``: ``bufs`` holds the inputs'
and the outputs' data pointers (the caller allocates the outputs for this ``n``), and
every size, stride, offset, loop bound, element count (mean's divisor) and GEMM
dimension is computed from ``n`` (:class:`~codegen.dynamic.poly.Poly`).  Temporaries
live in one arena ``malloc``-ed per call at the size ``n`` needs.

Each node that is not a view gets a contiguous buffer and one internal function (its
buffers are ``noalias`` parameters, LLVM inlines it):

* elementwise (formulas, ``fused``, cast, full, iota): one loop nest over the result,
  arguments read through broadcast views;
* reductions (sum, mean, amax, amin, prod over any axes): initialise, accumulate over
  the argument in loop order (float32 sums in a float64 scratch buffer), finalise;
* matmul of 1-D / 2-D operands: BLAS (``dgemm_``/``sgemm_``) when the product is large
  enough (decided at run time, as :mod:`codegen.lower.matmul` does statically), else a
  loop nest whose innermost loop runs along a unit stride;
* gather / gather_scatter: every index checked first (status 1 and the error record
  ``(node, value, axis, size)`` as :mod:`codegen.lower.indexing` writes it);
* index_check (PyTorch's bounds check, no wrapping): a copy of its indices, each
  checked in ``[0, size)`` before it is stored (status ``CHECK``, record ``(step, value,
  0, 0)``; :mod:`codegen.status` raises the node's own error).  Its ``size`` is the
  node's attribute, the same at every ``n`` (a size that moves with ``n`` is refused by
  the front end's generalisation: the program is compiled per size).

Anything else (windows, other index kernels, numpy-rule nodes, batched products) raises
:class:`NotGeneric` naming the operation: the caller compiles per size instead.
Sanitized mode (``SYMGRAD_SANITIZE=1``) checks every element access against its
buffer's size at this ``n`` and makes the call fail instead of touching memory.
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.config import settings
from symgrad.graph import dtypes
from symgrad.graph.node import Node, toposort

from .. import runtime
from .. import status as statuses
from .. import types as T
from ..executable import arena_release_name
from ..classify import REDUCE_OPS, const_scalar, formula_of, kind_of, numpy_reason
from ..lower.context import ConstPool, sanitize_fault_global
from ..lower.loops import Loop
from ..lower.reduce import acc_dtype, combine, identity
from ..lower.formula_ir import FormulaEmitter, compute_dtype
from ..lower.matmul import BLAS_MIN_DIM, BLAS_MIN_WORK
from .errors import NotGeneric
from .poly import Poly, affine
from .views import VIEW_OPS, RView, broadcast_to, contiguous, needs_copy, view_of

__all__ = ["NotGeneric", "DynamicModule", "build"]

ALIGN = 64


class _Buf:
    """Storage of one node: ``in`` / ``out`` slot of ``bufs``, an arena ``temp``, or a
    ``const`` global."""

    __slots__ = ("kind", "slot", "dtype", "size", "name", "node")

    def __init__(self, kind, slot, dtype, size: Poly, name, node=None):
        self.kind, self.slot, self.dtype, self.size, self.name, self.node = \
            kind, slot, dtype, size, name, node


class DynamicModule:
    """The analysis of a program (buffers, views) and its module (:func:`build`)."""

    def __init__(self, program, dims, name: str) -> None:
        self.program, self.dims, self.name = program, dims, name
        self.nodes = toposort(list(program.outputs) + list(program.inputs))
        self.shape: dict[int, tuple[Poly, ...]] = {
            id(n): tuple(affine(a, b) for a, b in dims.dims(n)) for n in self.nodes}
        self.bufs: dict[int, _Buf] = {}
        self.views: dict[int, RView] = {}
        self.order: list[Node] = []          # nodes computed, in order
        self.copies: list[tuple[int, Node]] = []     # (output index, node) copied at the end
        self.scratch: dict[int, _Buf] = {}   # float32 sums: float64 accumulators
        self.const_storage: dict = {}        # const buffer key -> what ConstPool reads
        self._plan()

    # ---- analysis ----------------------------------------------------------------
    def _plan(self) -> None:
        p = self.program
        for k, (node, name) in enumerate(zip(p.inputs, p.input_names)):
            if id(node) not in self.bufs:
                self._own(node, _Buf("in", k, node.dtype, self._size(node), _ident(name), node))
        out_of = {}
        for j, o in enumerate(p.outputs):
            out_of.setdefault(id(o), j)
        for node in self.nodes:
            if id(node) in self.views:
                continue
            self._classify(node, out_of)
        for j, o in enumerate(p.outputs):
            b = self.bufs.get(id(o))
            if b is None or b.kind != "out" or b.slot != len(p.inputs) + j:
                self.copies.append((j, o))

    def _size(self, node: Node) -> Poly:
        out = Poly.const(1)
        for d in self.shape[id(node)]:
            out = out * d
        return out

    def _own(self, node: Node, buf: _Buf) -> None:
        self.bufs[id(node)] = buf
        self.views[id(node)] = contiguous(id(node), self.shape[id(node)])

    def _classify(self, node: Node, out_of: dict) -> None:
        op = node.op
        if op == "const":
            shape = self.shape[id(node)]
            zero = Poly.const(0)
            if id(node) in self.dims.scalars:
                # a value of n (all elements equal): computed once, read with zero strides
                self.order.append(node)
                self.bufs[id(node)] = _Buf("temp", -1, node.dtype, Poly.const(1),
                                           f"t{len(self.bufs)}")
                self.views[id(node)] = RView(id(node), shape, (zero,) * len(shape), zero)
                return
            if all(d.is_const for d in shape):
                self._own(node, _Buf("const", -1, node.dtype, self._size(node),
                                     f"c{len(self.bufs)}", node))
                return
            if const_scalar(node) is None:
                raise NotGeneric("a constant array whose shape depends on the size")
            # one value everywhere: a single element read with zero strides
            self.bufs[id(node)] = _Buf("const", -1, node.dtype, Poly.const(1),
                                       f"c{len(self.bufs)}", node)
            self.views[id(node)] = RView(id(node), shape, (zero,) * len(shape), zero)
            return
        if op == "input":
            raise NotGeneric("an input that is not an argument")
        why = numpy_reason(node)
        if why is not None:
            raise NotGeneric(f"{op} runs through numpy ({why})")
        kind = kind_of(node)
        if kind == "view":
            if op not in VIEW_OPS:
                raise NotGeneric(f"view {op}")
            arg = self.views[id(node.args[0])]
            shape = self.shape[id(node)]
            if op == "reshape" and needs_copy(node, arg, shape):
                arg = self._materialise_copy(node.args[0])
            self.views[id(node)] = view_of(node, arg, shape, self.dims.attrs.get(id(node), {}))
            return
        if kind == "window" and op != "pad_slice":
            raise NotGeneric(f"{op} (a window without a runtime-extent lowering)")
        if kind == "opaque":
            if op == "matmul":
                if len(node.args[0].shape) > 2 or len(node.args[1].shape) > 2:
                    raise NotGeneric("batched matmul")
            elif op not in _INDEX_KERNELS:
                raise NotGeneric(f"{op} (an index kernel without a runtime-extent lowering)")
        elif kind not in ("ew", "reduce", "window"):
            raise NotGeneric(f"{op} ({kind})")
        j = out_of.get(id(node))
        slot = len(self.program.inputs) + j if j is not None else -1
        self._own(node, _Buf("out" if j is not None else "temp", slot, node.dtype,
                             self._size(node), f"out{j}" if j is not None else f"t{len(self.bufs)}"))
        if op in ("sum", "mean") and node.dtype.name == "float32":
            self.scratch[id(node)] = _Buf("temp", -1, dtypes.float64, self._size(node),
                                          f"acc{len(self.bufs)}")
        self.order.append(node)

    def _materialise_copy(self, node: Node) -> RView:
        """A contiguous copy of ``node``'s view (for a reshape that cannot view it)."""
        key = ("copy", id(node))
        if key not in self.bufs:
            self.bufs[key] = _Buf("temp", -1, node.dtype, self._size(node), f"copy{len(self.bufs)}",
                                  node)
            self.order.append(("copy", node))
        return contiguous(key, self.shape[id(node)])


def _ident(name: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in str(name)).strip("_")
    return out or "x"


# ---- emission ---------------------------------------------------------------------------
class _Fn:
    """One internal function: its builder, ``n``, and a pointer per buffer it touches."""

    def __init__(self, dm: "DynamicModule", module: ir.Module, consts: ConstPool, label: str,
                 keys: list, fallible: bool) -> None:
        self.dm = dm
        self.keys = [k for k in dict.fromkeys(keys) if dm.bufs[k].kind != "const"]
        params = [T.PTR] * len(self.keys) + [T.I64] + ([T.PTR] if fallible else [])
        fn = ir.Function(module, ir.FunctionType(T.I32, params), f"{dm.name}.{label}"[:90])
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        self.fn = fn
        self.ptrs = {}
        for arg, k in zip(fn.args, self.keys):
            arg.add_attribute("noalias")
            arg.name = dm.bufs[k].name
            self.ptrs[k] = arg
        self.n = fn.args[len(self.keys)]
        self.n.name = "n"
        self.err = fn.args[-1] if fallible else None
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.consts = consts

    def ptr(self, key) -> ir.Value:
        buf = self.dm.bufs[key]
        if buf.kind != "const":
            return self.ptrs[key]
        st = self.dm.const_storage.setdefault(key, _ConstStorage(buf))
        return self.consts.get(st)

    def elem(self, key, index: ir.Value) -> ir.Value:
        buf, b = self.dm.bufs[key], self.b
        if settings.sanitize:
            size = buf.size.emit(b, self.n)
            ok = b.icmp_unsigned("<", index, size)
            fault = sanitize_fault_global(b.module)
            b.store(b.select(ok, b.load(fault), T.I64(1)), fault)
            index = b.select(ok, index, T.I64(0))
        return b.gep(self.ptr(key), [index], inbounds=True, source_etype=T.storage_type(buf.dtype))

    def offset(self, v: RView, idx) -> ir.Value:
        b = self.b
        out = v.offset.emit(b, self.n)
        for s, i in zip(v.strides, idx):
            if s == 0 or i is None:
                continue
            out = b.add(out, i if s == 1 else b.mul(i, s.emit(b, self.n)))
        return out

    def load(self, v: RView, idx, dtype) -> ir.Value:
        return T.load(self.b, self.elem(v.buffer, self.offset(v, idx)), dtype)

    def store(self, v: RView, idx, value, dtype) -> None:
        T.store(self.b, value, self.elem(v.buffer, self.offset(v, idx)), dtype)

    def nest(self, shape, name: str):
        """Open loops over ``shape``; returns (indices, close): size-1 dims are index 0."""
        loops, idx = [], []
        for d, n in enumerate(shape):
            if n == 1:
                idx.append(None)
                continue
            loop = Loop(self.b, 0, n.emit(self.b, self.n), f"{name}{d}")
            loops.append(loop)
            idx.append(loop.index)

        def close():
            for loop in reversed(loops):
                loop.close()
        return idx, close

    def done(self) -> None:
        self.b.ret(T.I32(0))


class _ConstStorage:
    """What :class:`ConstPool` reads of a constant buffer."""

    def __init__(self, buf: _Buf) -> None:
        self.name, self.dtype = buf.name, buf.dtype
        value = buf.node.attr("value").value
        self.value = value if buf.size.is_const and buf.size.value == value.size \
            else value.reshape(-1)[:1]


def _views_of(dm, node):
    return [dm.views[id(a)] for a in node.args]


def _value_at(f: _Fn, node: Node, arg: Node, view: RView, idx, shape):
    """``arg``'s element at ``idx`` of ``shape`` (broadcast), uniform constants inline."""
    s = const_scalar(arg) if arg.op == "const" and id(arg) not in f.dm.dims.scalars else None
    if s is not None:
        return T.constant(arg.dtype, s)
    return f.load(broadcast_to(view, shape), idx, arg.dtype)


def _emit_ew(f: _Fn, node: Node) -> None:
    dm, b = f.dm, f.b
    shape = dm.shape[id(node)]
    out = dm.views[id(node)]
    idx, close = f.nest(shape, "i")
    if node.op == "full":
        value = T.constant(node.dtype, node.attr("value"))
    elif node.op == "iota":
        i = idx[node.attr("axis")]
        value = T.convert(b, i if i is not None else T.I64(0), dtypes.int64, node.dtype)
    else:
        args = [_value_at(f, node, a, v, idx, shape) for a, v in zip(node.args, _views_of(dm, node))]
        if node.op == "cast":
            value = T.convert(b, args[0], node.args[0].dtype, node.dtype)
        else:
            expr, symbols = formula_of(node)
            cdt = compute_dtype(expr, [a.dtype for a in node.args])
            values = {s: (v, a.dtype) for s, v, a in zip(symbols, args, node.args)}
            if id(node) in dm.dims.exprs:             # numbers that are k*n or k/n
                expr = dm.dims.exprs[id(node)]
                n_float = T.convert(b, f.n, dtypes.int64, cdt)
                values[dm.dims.size_symbol()] = (n_float, cdt)
            em = FormulaEmitter(b, cdt, values)
            value = T.convert(b, em.emit(expr), cdt, node.dtype)
    f.store(out, idx, value, node.dtype)
    close()


def _emit_scalar(f: _Fn, node: Node) -> None:
    """A constant that is a value of ``n`` (``p*n + q``, ``1/(p*n + q)`` or
    ``(p*n + q)/(r*n + s)``)."""
    how, p, q, *rs = f.dm.dims.scalars[id(node)]
    b = f.b
    n = b.sitofp(f.n, T.F64)

    def affine(p, q):
        return b.fadd(b.fmul(n, ir.Constant(T.F64, p)), ir.Constant(T.F64, q))
    value = affine(p, q)
    if how == "inverse":
        value = b.fdiv(ir.Constant(T.F64, 1.0), value)
    elif how == "ratio":
        value = b.fdiv(value, affine(*rs))
    T.store(b, T.convert(b, value, dtypes.float64, node.dtype), f.elem(id(node), T.I64(0)),
            node.dtype)


def _emit_copy(f: _Fn, node: Node, dst: RView) -> None:
    src = f.dm.views[id(node)]
    idx, close = f.nest(src.shape, "c")
    value = _value_at(f, node, node, src, idx, src.shape) if node.op == "const" \
        else f.load(src, idx, node.dtype)
    f.store(dst, idx, value, node.dtype)
    close()


def _emit_pad_slice(f: _Fn, node: Node) -> None:
    """Zeros, then the argument written at the slice's positions."""
    dm = f.dm
    out = dm.views[id(node)]
    idx, close = f.nest(out.shape, "z")
    f.store(out, idx, T.constant(node.dtype, 0), node.dtype)
    close()
    sym = dm.dims.attrs.get(id(node), {}).get("starts")
    offset, strides = out.offset, []
    for d, stride in enumerate(out.strides):
        step = node.attr("steps")[d]
        start = affine(*sym[d]) if sym is not None else Poly.const(
            slice(node.attr("starts")[d], node.attr("stops")[d], step).indices(node.shape[d])[0])
        offset = offset + start * stride
        strides.append(stride * step)
    g = node.args[0]
    gshape = dm.shape[id(g)]
    target = RView(out.buffer, gshape, tuple(strides), offset)
    idx, close = f.nest(gshape, "p")
    f.store(target, idx, f.load(dm.views[id(g)], idx, g.dtype), node.dtype)
    close()


def _emit_reduce(f: _Fn, node: Node) -> None:
    dm, b = f.dm, f.b
    x = node.args[0]
    xv = dm.views[id(x)]
    xshape = dm.shape[id(x)]
    nd = len(xshape)
    axes = {a % nd for a in node.attr("axes")} if nd else set()
    acc_dt = acc_dtype(node)
    acc_key = ("scratch", id(node)) if id(node) in dm.scratch else id(node)
    out = contiguous(acc_key, tuple(Poly.const(1) if d in axes else n for d, n in enumerate(xshape)))
    out_shape = dm.shape[id(node)]
    flat = contiguous(acc_key, out_shape)
    # initialise
    idx, close = f.nest(out_shape, "o")
    f.store(flat, idx, T.constant(acc_dt, identity(node)), acc_dt)
    close()
    # accumulate in loop order
    idx, close = f.nest(xshape, "r")
    v = T.convert(b, f.load(xv, idx, x.dtype), x.dtype, acc_dt)
    oi = [None if d in axes else i for d, i in enumerate(idx)]
    ptr = f.elem(acc_key, f.offset(out, oi))
    acc = T.load(b, ptr, acc_dt)
    T.store(b, combine(b, node.op, acc_dt, acc, v), ptr, acc_dt)
    close()
    # finalise: mean's division by the runtime count, float32 rounding
    if node.op == "mean" or acc_key != id(node):
        count = Poly.const(1)
        for d in axes:
            count = count * xshape[d]
        idx, close = f.nest(out_shape, "f")
        value = f.load(flat, idx, acc_dt)
        if node.op == "mean":
            cnt = b.sitofp(count.emit(b, f.n), T.value_type(acc_dt))
            value = b.fdiv(value, cnt)
        f.store(dm.views[id(node)], idx, T.convert(b, value, acc_dt, node.dtype), node.dtype)
        close()


def _as_matrix(v: RView, rank_one_as: str) -> RView:
    if len(v.shape) == 2:
        return v
    one, zero = Poly.const(1), Poly.const(0)
    if rank_one_as == "row":
        return RView(v.buffer, (one,) + v.shape, (zero,) + v.strides, v.offset)
    return RView(v.buffer, v.shape + (one,), v.strides + (zero,), v.offset)


def _emit_matmul(f: _Fn, node: Node) -> None:
    dm, b = f.dm, f.b
    av, bv = _views_of(dm, node)
    A, B = _as_matrix(av, "row"), _as_matrix(bv, "col")
    C = contiguous(id(node), (A.shape[0], B.shape[1]))
    dt = node.dtype
    m, k, n = (d.emit(b, f.n) for d in (A.shape[0], A.shape[1], B.shape[1]))
    layouts = _blas_layouts(A, B) if dt.name in runtime.BLAS_GEMM else None
    if layouts is not None:
        work = b.mul(b.mul(m, k), n)
        small = b.or_(b.icmp_signed("<", work, T.I64(BLAS_MIN_WORK)),
                      b.icmp_signed("<", _min(b, m, k, n), T.I64(BLAS_MIN_DIM)))
        small = b.or_(small, b.icmp_signed(">", _max(b, m, k, n), T.I64(2 ** 31 - 1)))
        with b.if_else(small) as (loops, blas):
            with loops:
                _matmul_loops(f, node, A, B, C, m, k, n)
            with blas:
                _blas_call(f, node, A, B, C, m, k, n, layouts)
    else:
        _matmul_loops(f, node, A, B, C, m, k, n)


def _min(b, *vals):
    out = vals[0]
    for v in vals[1:]:
        out = b.select(b.icmp_signed("<", v, out), v, out)
    return out


def _max(b, *vals):
    out = vals[0]
    for v in vals[1:]:
        out = b.select(b.icmp_signed(">", v, out), v, out)
    return out


def _matmul_loops(f: _Fn, node: Node, A: RView, B: RView, C: RView, m, k, n) -> None:
    """C = A @ B by loops: ``i, k, j`` (j innermost: a row update along B's rows) unless
    B is read by columns and A by rows, then ``i, j, k`` (a dot product in a register)."""
    b, dt = f.b, node.dtype
    zero = T.constant(dt, 0)
    add = (lambda x, y: b.fadd(x, y, flags=("reassoc",))) if dt.is_floating_point else b.add
    mul = b.fmul if dt.is_floating_point else b.mul
    if B.strides[0] == 1 and B.strides[1] != 1 and A.strides[1] == 1:
        i = Loop(b, 0, m, "mi")
        j = Loop(b, 0, n, "mj")
        kk = Loop(b, 0, k, "mk", [zero])
        prod = mul(f.load(A, [i.index, kk.index], dt), f.load(B, [kk.index, j.index], dt))
        total, = kk.close([add(kk.carried[0], prod)])
        f.store(C, [i.index, j.index], total, dt)
        j.close()
        i.close()
        return
    i = Loop(b, 0, m, "mi")
    j = Loop(b, 0, n, "mz")
    f.store(C, [i.index, j.index], zero, dt)
    j.close()
    kk = Loop(b, 0, k, "mk")
    a = f.load(A, [i.index, kk.index], dt)
    j = Loop(b, 0, n, "mj")
    ptr = f.elem(C.buffer, f.offset(C, [i.index, j.index]))
    T.store(b, add(T.load(b, ptr, dt), mul(a, f.load(B, [kk.index, j.index], dt))), ptr, dt)
    j.close()
    kk.close()
    i.close()


def _blas_layouts(A: RView, B: RView):
    """BLAS's (trans, ld) of each operand, or None when a stride is not usable."""
    out = []
    for v in (B, A):                     # row-major C = A B is column-major C^T = B^T A^T
        rs, cs = v.strides
        if cs == 1 and _positive(rs):
            out.append(("N", rs))
        elif rs == 1 and _positive(cs):
            out.append(("T", cs))
        else:
            return None
    return out


def _positive(p: Poly) -> bool:
    """True if ``p`` is at least 1 for every n >= 1 (a usable leading dimension)."""
    return p.value >= 1 if p.is_const else (all(c >= 0 for c in p.c) and p.c[-1] > 0)


def _blas_call(f: _Fn, node: Node, A: RView, B: RView, C: RView, m, k, n, layouts) -> None:
    b, module = f.b, f.b.module
    dt = node.dtype
    ety = T.storage_type(dt)
    name = runtime.BLAS_GEMM[dt.name]
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR] * 13), name)
    entry = f.fn.entry_basic_block

    def cell(ty, value):
        with b.goto_block(entry):
            b.position_at_start(entry)
            slot = b.alloca(ty)
        b.store(value, slot)
        return slot

    def i32(v):
        return b.trunc(v, T.I32)

    (ta, lda), (tb, ldb) = layouts
    lda_v = _max(b, lda.emit(b, f.n), T.I64(1))
    ldb_v = _max(b, ldb.emit(b, f.n), T.I64(1))
    chars = [cell(T.I8, T.I8(ord(c))) for c in (ta, tb)]
    args = [chars[0], chars[1], cell(T.I32, i32(n)), cell(T.I32, i32(m)), cell(T.I32, i32(k)),
            cell(ety, ir.Constant(ety, 1.0)),
            f.elem(B.buffer, B.offset.emit(b, f.n)), cell(T.I32, i32(lda_v)),
            f.elem(A.buffer, A.offset.emit(b, f.n)), cell(T.I32, i32(ldb_v)),
            cell(ety, ir.Constant(ety, 0.0)),
            f.elem(C.buffer, T.I64(0)), cell(T.I32, i32(_max(b, n, T.I64(1))))]
    control = None
    if runtime.blas_thread_control() is not None:
        control = module.globals.get(runtime.BLAS_THREADS_LOCAL) or ir.Function(
            module, ir.FunctionType(T.I32, [T.I32]), runtime.BLAS_THREADS_LOCAL)
    if control is None:
        b.call(fn, args)
        return
    # one OpenBLAS thread, as codegen.lower.matmul does (its pool thrashes under load)
    previous = b.call(control, [T.I32(1)])
    b.call(fn, args)
    b.call(control, [previous])


def _emit_index(f: _Fn, node: Node, node_id: int) -> None:
    """gather / gather_scatter along ``axis``, every index checked first."""
    dm, b = f.dm, f.b
    axis = node.attr("axis")
    src, idxv = _views_of(dm, node)
    ishape = dm.shape[id(node.args[1])]
    if node.op == "gather":
        size = dm.shape[id(node.args[0])][axis]
    else:
        size = dm.shape[id(node)][axis]
    size_v = size.emit(b, f.n)
    # validate
    idx, close = f.nest(ishape, "v")
    v = f.load(idxv, idx, node.args[1].dtype)
    v = b.sext(v, T.I64) if v.type.width < 64 else v
    bad = b.or_(b.icmp_signed("<", v, b.neg(size_v)), b.icmp_signed(">=", v, size_v))
    with b.if_then(bad, likely=False):
        for slot, value in enumerate((T.I64(node_id), v, T.I64(axis), size_v)):
            b.store(value, b.gep(f.err, [T.I64(slot)], source_etype=T.I64))
        b.ret(T.I32(1))
    close()
    out = dm.views[id(node)]
    dt = node.dtype
    if node.op == "gather_scatter":
        oidx, close = f.nest(dm.shape[id(node)], "z")
        f.store(out, oidx, T.constant(dt, 0), dt)
        close()
    idx, close = f.nest(ishape, "g")
    v = f.load(idxv, idx, node.args[1].dtype)
    v = b.sext(v, T.I64) if v.type.width < 64 else v
    v = b.select(b.icmp_signed("<", v, T.I64(0)), b.add(v, size_v), v)
    moved = list(idx)
    moved[axis] = v
    if node.op == "gather":
        f.store(out, idx, f.load(src, moved, dt), dt)
    else:
        ptr = f.elem(out.buffer, f.offset(out, moved))
        g = f.load(src, idx, dt)
        T.store(b, combine(b, "sum", dt, T.load(b, ptr, dt), g), ptr, dt)
    close()


def _emit_index_check(f: _Fn, node: Node, node_id: int) -> None:
    """Copy the indices, each checked in ``[0, size)`` before it is stored (one unsigned
    comparison: a negative index is a huge unsigned one)."""
    dm, b = f.dm, f.b
    (idx,) = node.args
    shape = dm.shape[id(node)]
    idx_view = dm.views[id(idx)]
    ix, close = f.nest(shape, "k")
    raw = f.load(idx_view, ix, idx.dtype)
    v = b.sext(raw, T.I64) if raw.type.width < 64 else raw
    with b.if_then(b.icmp_unsigned(">=", v, T.I64(node.attr("size"))), likely=False):
        for slot, value in enumerate((T.I64(node_id), v, T.I64(0), T.I64(0))):
            b.store(value, b.gep(f.err, [T.I64(slot)], source_etype=T.I64))
        b.ret(T.I32(statuses.CHECK))
    f.store(dm.views[id(node)], ix, raw, node.dtype)
    close()


# the index kernels with a runtime-extent lowering (steps that may fail on an index)
_INDEX_KERNELS = {"gather": _emit_index, "gather_scatter": _emit_index,
                  "index_check": _emit_index_check}


def _keys_of(dm: DynamicModule, node) -> list:
    if isinstance(node, tuple):                     # ("copy", node)
        return [dm.views[id(node[1])].buffer, ("copy", id(node[1]))]
    keys = [dm.views[id(a)].buffer for a in node.args] + [id(node)]
    if id(node) in dm.scratch:
        keys.append(("scratch", id(node)))
    return keys


def build(dm: DynamicModule) -> ir.Module:
    """The module of :class:`DynamicModule` ``dm`` (see the module docstring)."""
    for key, buf in dm.scratch.items():
        dm.bufs[("scratch", key)] = buf
    module = ir.Module(name=dm.name)
    consts = ConstPool(module)
    if settings.sanitize:
        sanitize_fault_global(module)
    kernel = ir.Function(module, ir.FunctionType(T.I32, [T.PTR, T.I64, T.PTR]), dm.name)
    bufs_arg, n, err = kernel.args
    bufs_arg.name, n.name, err.name = "bufs", "n", "err"
    b = ir.IRBuilder(kernel.append_basic_block("entry"))
    ptrs: dict = {}
    for key, buf in dm.bufs.items():
        if buf.kind in ("in", "out"):
            slot = b.gep(bufs_arg, [T.I64(buf.slot)], inbounds=True, source_etype=T.PTR)
            ptrs[key] = b.load(slot, typ=T.PTR, name=buf.name)
    temps = [(k, buf) for k, buf in dm.bufs.items() if buf.kind == "temp"]
    total: ir.Value = T.I64(0)
    offsets = {}
    for key, buf in temps:
        offsets[key] = total
        nbytes = b.mul(buf.size.emit(b, n), T.I64(buf.dtype.itemsize))
        total = b.and_(b.add(b.add(total, nbytes), T.I64(ALIGN - 1)), T.I64(-ALIGN))
    free = _declare(module, runtime.FREE, ir.FunctionType(ir.VoidType(), [T.PTR]))
    raw, release = _take_arena(module, b, dm.name, total)
    mis = b.and_(b.sub(T.I64(0), b.ptrtoint(raw, T.I64)), T.I64(ALIGN - 1))
    arena = b.gep(raw, [b.add(mis, T.I64(ALIGN))], inbounds=True, source_etype=T.I8,
                  name="arena")
    for key, _ in temps:
        ptrs[key] = b.gep(arena, [offsets[key]], inbounds=True, source_etype=T.I8)

    def call(f: _Fn, fallible: bool) -> None:
        args = [ptrs[k] for k in f.keys] + [n] + ([err] if fallible else [])
        status = b.call(f.fn, args)
        if fallible:
            with b.if_then(b.icmp_signed("!=", status, T.I32(0)), likely=False):
                release()
                b.ret(status)

    for pos, node in enumerate(dm.order):
        if isinstance(node, tuple):
            f = _Fn(dm, module, consts, f"s{pos}.copy", _keys_of(dm, node), False)
            _emit_copy(f, node[1], contiguous(("copy", id(node[1])), dm.shape[id(node[1])]))
            f.done()
            call(f, False)
            continue
        fallible = node.op in _INDEX_KERNELS
        f = _Fn(dm, module, consts, f"s{pos}.{node.op}", _keys_of(dm, node), fallible)
        if node.op == "const":
            _emit_scalar(f, node)
        elif node.op in REDUCE_OPS:
            _emit_reduce(f, node)
        elif node.op == "pad_slice":
            _emit_pad_slice(f, node)
        elif node.op == "matmul":
            _emit_matmul(f, node)
        elif fallible:
            _INDEX_KERNELS[node.op](f, node, pos)
        else:
            _emit_ew(f, node)
        f.done()
        call(f, fallible)
    n_in = len(dm.program.inputs)
    for j, o in dm.copies:
        key = ("outcopy", j)
        dm.bufs[key] = _Buf("out", n_in + j, o.dtype, dm._size(o), f"out{j}")
        slot = b.gep(bufs_arg, [T.I64(n_in + j)], inbounds=True, source_etype=T.PTR)
        ptrs[key] = b.load(slot, typ=T.PTR)
        f = _Fn(dm, module, consts, f"out{j}.copy", [dm.views[id(o)].buffer, key], False)
        _emit_copy(f, o, contiguous(key, dm.shape[id(o)]))
        f.done()
        call(f, False)
    release()
    b.ret(T.I32(0))
    _arena_release(module, dm.name, free)
    return module


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, fnty, name)


def _arena_slot(module: ir.Module, name: str) -> ir.GlobalVariable:
    """The module's slot for the arena kept between calls (null: none kept)."""
    slot_name = f"{name}.arena.cache"
    slot = module.globals.get(slot_name)
    if slot is None:
        slot = ir.GlobalVariable(module, T.PTR, slot_name)
        slot.initializer, slot.linkage, slot.align = ir.Constant(T.PTR, None), "internal", 8
    return slot


def _take_arena(module: ir.Module, b: ir.IRBuilder, name: str, total: ir.Value):
    """(the raw block of this call's arena, a function emitting its release). As the
    static kernels' arena (:meth:`codegen.module._Builder.arena`): the block the last
    call left in the module's slot is taken with an atomic exchange -- kept if it is
    large enough for this ``n`` (its capacity is in its first 8 bytes), else freed --
    or ``malloc``'d; released, it goes back to the slot if that is empty, else it is
    freed, so concurrent calls each have their own. (Status 2 if malloc fails.)"""
    malloc = _declare(module, runtime.MALLOC, ir.FunctionType(T.PTR, [T.I64]))
    free = _declare(module, runtime.FREE, ir.FunctionType(ir.VoidType(), [T.PTR]))
    null = ir.Constant(T.PTR, None)
    cache = _arena_slot(module, name)
    held = b.alloca(T.PTR, name="arena.held")
    cached = b.atomic_rmw("xchg", cache, null, "acquire", name="arena.cached")
    b.store(cached, held)
    with b.if_then(b.icmp_unsigned("!=", cached, null)):
        capacity = b.load(cached, typ=T.I64, name="arena.capacity")
        with b.if_then(b.icmp_unsigned("<", capacity, total), likely=False):
            b.call(free, [cached])
            b.store(null, held)
    with b.if_then(b.icmp_unsigned("==", b.load(held, typ=T.PTR), null), likely=False):
        fresh = b.call(malloc, [b.add(total, T.I64(2 * ALIGN))], name="arena.fresh")
        with b.if_then(b.icmp_unsigned("==", fresh, null), likely=False):
            b.ret(T.I32(2))
        b.store(total, fresh)
        b.store(fresh, held)
    raw = b.load(held, typ=T.PTR, name="arena.raw")

    def release():
        kept = b.extract_value(b.cmpxchg(cache, null, raw, "release", "monotonic"), 1)
        with b.if_then(b.not_(kept), likely=False):
            b.call(free, [raw])
    return raw, release


def _arena_release(module: ir.Module, name: str, free: ir.Function) -> None:
    """``void @<name>.arena.release()``: frees the block kept in the slot (called when
    the code is unloaded)."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), arena_release_name(name))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    kept = b.atomic_rmw("xchg", _arena_slot(module, name), ir.Constant(T.PTR, None), "acquire")
    with b.if_then(b.icmp_unsigned("!=", kept, ir.Constant(T.PTR, None))):
        b.call(free, [kept])
    b.ret_void()
