"""Structured loops in native code: a ``loop`` (scan) or ``while`` node runs as one native
call that iterates its body's compiled kernel.

The body (a :class:`symgrad.graph.body.Body`, already optimised by the front end) is
compiled once per body and target like any program; a small driver -- one function per
target, the same for every loop -- calls that kernel once per step: before each step it
points the kernel's slots at the step's slice of every scanned array and stacked result
(``base + t * stride``), after it copies the new carries over the old.  So a loop costs
one native call whatever its trip count, and compiling it costs one body, not its
unrolled length.  A body that is not fully native (it holds a loop itself, or a numpy
step) runs step by step from Python with the same kernels instead.
"""
from __future__ import annotations

import contextvars
import ctypes
import os
import threading
from typing import Sequence

import numpy as np

from symgrad.graph.body import Body
from symgrad.graph.program import Program

from . import support


__all__ = ["run_loop", "run_while", "prefetch", "RUNNERS", "DRIVER_NAME"]

DRIVER_NAME = "symgrad_loop_driver"
_LOCK = threading.Lock()
_DRIVERS: dict[str, object] = {}
_BODIES: dict[tuple, object] = {}
# bodies prefetch() is compiling -> (pid, event set when done); a child forked meanwhile
# has no such thread, and compiles them itself
_PENDING: dict[tuple, tuple[int, threading.Event]] = {}

_P = ctypes.c_void_p
_DRIVER = ctypes.CFUNCTYPE(ctypes.c_int32, _P, _P, _P, _P, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_int64, _P, _P, _P, ctypes.c_int64, _P, _P, _P, _P)


def _build_driver() -> str:
    """The driver's IR (see the module docstring):
    ``i32 driver(body, slots, bases, strides, nslots, trips, reverse, dst, src, nbytes,
    ncopy, cond, cond_slots, pred, err)``; ``trips < 0``: until ``cond`` says stop."""
    from llvmlite import ir     # late: the IR builder loads only when a driver is built
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    p8 = i8.as_pointer()
    pp8 = p8.as_pointer()
    kernel_t = ir.FunctionType(i32, [p8, p8])
    mod = ir.Module(name="symgrad_loops")
    memcpy = mod.declare_intrinsic("llvm.memcpy", [p8, p8, i64])
    fn = ir.Function(mod, ir.FunctionType(i32, [p8, pp8, pp8, i64.as_pointer(), i64, i64, i64,
                                                 pp8, pp8, i64.as_pointer(), i64, p8, pp8,
                                                 p8, p8]), DRIVER_NAME)
    (body, slots, bases, strides, nslots, trips, reverse, dst, src, nbytes, ncopy, cond,
     cslots, pred, err) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    head = fn.append_basic_block("head")
    check = fn.append_basic_block("check")
    step_bb = fn.append_basic_block("step")
    fill = fn.append_basic_block("fill")
    call = fn.append_basic_block("call")
    copy = fn.append_basic_block("copy")
    nxt = fn.append_basic_block("next")
    done = fn.append_basic_block("done")
    fail = fn.append_basic_block("fail")
    entry = b.block
    b.branch(head)

    b.position_at_end(head)
    step = b.phi(i64, "step")
    step.add_incoming(ir.Constant(i64, 0), entry)
    bounded = b.icmp_signed(">=", trips, ir.Constant(i64, 0))
    over = b.and_(bounded, b.icmp_signed(">=", step, trips))
    b.cbranch(over, done, check)

    b.position_at_end(check)
    status = ir.Constant(i32, 0)
    has_cond = b.icmp_unsigned("!=", cond, ir.Constant(p8, None))
    with b.if_then(has_cond):
        st = b.call(b.bitcast(cond, kernel_t.as_pointer()), [b.bitcast(cslots, p8), err])
        with b.if_then(b.icmp_signed("!=", st, ir.Constant(i32, 0))):
            b.ret(st)
        with b.if_then(b.icmp_unsigned("==", b.load(pred), ir.Constant(i8, 0))):
            b.ret(ir.Constant(i32, 0))
    b.branch(step_bb)

    b.position_at_end(step_bb)
    last = b.sub(b.sub(trips, ir.Constant(i64, 1)), step)
    t = b.select(b.icmp_unsigned("!=", reverse, ir.Constant(i64, 0)), last, step)
    b.branch(fill)

    b.position_at_end(fill)          # slots[s] = bases[s] + t * strides[s]
    s = b.phi(i64, "s")
    s.add_incoming(ir.Constant(i64, 0), step_bb)
    more = b.icmp_signed("<", s, nslots)
    fill_body = fn.append_basic_block("fill_body")
    b.cbranch(more, fill_body, call)
    b.position_at_end(fill_body)
    base = b.load(b.gep(bases, [s]))
    off = b.mul(t, b.load(b.gep(strides, [s])))
    b.store(b.gep(base, [off]), b.gep(slots, [s]))
    s.add_incoming(b.add(s, ir.Constant(i64, 1)), fill_body)
    b.branch(fill)

    b.position_at_end(call)
    st = b.call(b.bitcast(body, kernel_t.as_pointer()), [b.bitcast(slots, p8), err])
    b.cbranch(b.icmp_signed("!=", st, ir.Constant(i32, 0)), fail, copy)

    b.position_at_end(copy)          # the new carries become the current ones
    j = b.phi(i64, "j")
    j.add_incoming(ir.Constant(i64, 0), call)
    copy_body = fn.append_basic_block("copy_body")
    b.cbranch(b.icmp_signed("<", j, ncopy), copy_body, nxt)
    b.position_at_end(copy_body)
    b.call(memcpy, [b.load(b.gep(dst, [j])), b.load(b.gep(src, [j])),
                    b.load(b.gep(nbytes, [j])), ir.Constant(ir.IntType(1), 0)])
    j.add_incoming(b.add(j, ir.Constant(i64, 1)), copy_body)
    b.branch(copy)

    b.position_at_end(nxt)
    step.add_incoming(b.add(step, ir.Constant(i64, 1)), nxt)
    b.branch(head)

    b.position_at_end(fail)
    b.ret(st)
    b.position_at_end(done)
    b.ret(status)
    return str(mod)


def _driver(t):
    with _LOCK:
        hit = _DRIVERS.get(t.name)
        if hit is None:
            loaded = support.load_or_compile("loop-driver", _build_driver, t, level=2)
            hit = _DRIVERS[t.name] = (loaded, _DRIVER(loaded.address(DRIVER_NAME)))
        return hit[1]


def prefetch(nodes, t) -> None:
    """Start compiling the bodies (and conditions) of the loop nodes among ``nodes`` for
    ``t`` in a background thread, those not compiled or being compiled: the program
    holding them is compiled meanwhile, and a body's Python work (plan, IR) runs while
    LLVM works on the program (and the reverse) -- else a body is compiled only when its
    loop first runs, after the program.  A body that fails here is compiled again, and
    raises, when its loop runs."""
    bodies = [v for n in nodes if n.op in RUNNERS
              for k in ("cond", "body") if isinstance(v := n.kwargs.get(k), Body)]
    with _LOCK:
        todo = {(b, t.name): threading.Event() for b in bodies
                if (b, t.name) not in _BODIES and _pending((b, t.name)) is None}
        _PENDING.update({key: (os.getpid(), done) for key, done in todo.items()})
    if not todo:
        return
    context = contextvars.copy_context()       # the target and settings in use

    def run() -> None:
        for key, done in todo.items():
            try:
                _body_exe(key[0], t, wait=False)
            except Exception:       # noqa: BLE001 -- raised again where the loop runs
                pass
            finally:
                with _LOCK:
                    _PENDING.pop(key, None)
                done.set()
    threading.Thread(target=context.run, args=(run,), name="symgrad-loop-bodies",
                     daemon=True).start()


def _pending(key) -> threading.Event | None:
    """The event of this process's thread compiling body ``key`` (hold ``_LOCK``)."""
    pid, done = _PENDING.get(key, (None, None))
    return done if pid == os.getpid() else None


def _body_exe(body: Body, t, wait: bool = True):
    """The body compiled as a program (its inputs, then its outputs, are the kernel's
    slots); cached per body and target (waits for :func:`prefetch`'s thread if it is
    compiling it)."""
    key = (body, t.name)
    exe = _BODIES.get(key)
    if exe is None and wait:
        with _LOCK:
            pending = _pending(key)
        if pending is not None:
            pending.wait()
            exe = _BODIES.get(key)
    if exe is None:
        from .backend import compile_program       # late: backend imports this module's users
        prog = Program(list(body.inputs), [n.attr("name") for n in body.inputs],
                       list(body.outputs), [f"out{i}" for i in range(len(body.outputs))])
        exe = compile_program(prog, target=t, entry=False)    # the driver calls seg0
        with _LOCK:
            exe = _BODIES.setdefault(key, exe)
    return exe


def _kernel(exe):
    """The address of the body's one native kernel, or None if it is not fully native."""
    if exe.interface.hybrid or exe.interface.segments != 1 or exe.handle is None:
        return None
    return exe.handle.address(f"{exe.name}.seg0")


def _contiguous(a: np.ndarray, node) -> np.ndarray:
    """``a`` C-contiguous in the node's dtype (0-d stays 0-d, unlike ascontiguousarray)."""
    a = np.asarray(a)
    if a.flags.c_contiguous and a.dtype == node.dtype.np:
        return a
    return np.array(a, dtype=node.dtype.np, order="C")


def _ptrs(values) -> ctypes.Array:
    return (_P * max(len(values), 1))(*values)


def _i64s(values) -> ctypes.Array:
    return (ctypes.c_int64 * max(len(values), 1))(*values)




def run_loop(node, args: Sequence[np.ndarray], t) -> np.ndarray:
    """The packed result of a ``loop`` node (see :mod:`symgrad.ops.loops`) for its
    operand values, run natively."""
    kw = node.kwargs
    body, T, rev = kw["body"], kw["length"], kw["reverse"]
    m, p, select = kw["n_carry"], kw["n_xs"], kw["select"]
    exe = _body_exe(body, t)
    kernel = _kernel(exe)
    args = [_contiguous(a, n) for a, n in zip(args, body.inputs)]
    outs = body.out_avals
    cur = [np.array(a, copy=True) for a in args[:m]]
    new = [np.empty(s, d.np) for s, d in outs[:m]]
    ys = [np.empty((T,) + tuple(s), d.np) for s, d in outs[m:]]
    if kernel is None:
        _steps(exe, args, cur, ys, T, rev, m, p)
    else:
        bases, strides = [], []
        for j, c in enumerate(cur):
            bases.append(c.ctypes.data)
            strides.append(0)
        for x in args[m:m + p]:
            bases.append(x.ctypes.data)
            strides.append(x.strides[0] if x.shape[0] > 1 else 0)
        for k in args[m + p:]:
            bases.append(k.ctypes.data)
            strides.append(0)
        for c in new:
            bases.append(c.ctypes.data)
            strides.append(0)
        for y in ys:
            bases.append(y.ctypes.data)
            strides.append(y.strides[0] if y.shape[0] > 1 else 0)
        # every ctypes array stays referenced until the call returns
        slots, base_arr, stride_arr = _ptrs([0] * len(bases)), _ptrs(bases), _i64s(strides)
        dst, src = _ptrs([c.ctypes.data for c in cur]), _ptrs([c.ctypes.data for c in new])
        nbytes = _i64s([c.nbytes for c in cur])
        err = (ctypes.c_int64 * 4)()
        st = _driver(t)(kernel, ctypes.addressof(slots), ctypes.addressof(base_arr),
                        ctypes.addressof(stride_arr), len(bases), T, int(bool(rev)),
                        ctypes.addressof(dst), ctypes.addressof(src), ctypes.addressof(nbytes),
                        m, None, None, None, ctypes.addressof(err))
        if st:      # a kernel failed (a bad index, no memory): the per-step path raises
            cur = [np.array(a, copy=True) for a in args[:m]]     # its error (or retries)
            _steps(exe, args, cur, ys, T, rev, m, p)
    values = cur + ys
    dt = node.dtype.np
    return np.concatenate([values[i].reshape(-1).astype(dt, copy=False) for i in select])


def _steps(exe, args, cur, ys, T, rev, m, p):
    """A loop whose body is not fully native: one call of the body per step."""
    ks = list(args[m + p:])
    xs = args[m:m + p]
    for t in (range(T - 1, -1, -1) if rev else range(T)):
        outs = exe(cur + [x[t, ...] for x in xs] + ks)
        cur[:] = outs[:m]
        for y, v in zip(ys, outs[m:]):
            y[t] = v


def _while_steps(cexe, bexe, cur, kc, kb):
    """A while loop whose condition or body is not fully native: one call each per step."""
    while bool(cexe(cur + kc)[0]):
        cur = [np.array(o, copy=True) for o in bexe(cur + kb)]
    return cur


def run_while(node, args: Sequence[np.ndarray], t) -> np.ndarray:
    """The packed result of a ``while`` node for its operand values, run natively."""
    kw = node.kwargs
    cond, body, m, n_cond, select = (kw["cond"], kw["body"], kw["n_carry"], kw["n_cond"],
                                     kw["select"])
    cexe, bexe = _body_exe(cond, t), _body_exe(body, t)
    ck, bk = _kernel(cexe), _kernel(bexe)
    args = [_contiguous(a, n) for a, n in
            zip(args, list(body.inputs[:m]) + list(cond.inputs[m:]) + list(body.inputs[m:]))]
    cur = [np.array(a, copy=True) for a in args[:m]]
    kc, kb = args[m:m + n_cond], args[m + n_cond:]
    if ck is None or bk is None:
        cur = _while_steps(cexe, bexe, cur, kc, kb)
    else:
        new = [np.empty(s, d.np) for s, d in body.out_avals]
        pred = np.zeros((), np.bool_)
        cslots = _ptrs([a.ctypes.data for a in cur + kc] + [pred.ctypes.data])
        bases = [a.ctypes.data for a in cur + kb + new]
        slots, base_arr, stride_arr = _ptrs([0] * len(bases)), _ptrs(bases), _i64s([0] * len(bases))
        dst, src = _ptrs([c.ctypes.data for c in cur]), _ptrs([c.ctypes.data for c in new])
        nbytes = _i64s([c.nbytes for c in cur])
        err = (ctypes.c_int64 * 4)()
        st = _driver(t)(bk, ctypes.addressof(slots), ctypes.addressof(base_arr),
                        ctypes.addressof(stride_arr), len(bases), -1, 0, ctypes.addressof(dst),
                        ctypes.addressof(src), ctypes.addressof(nbytes), m, ck,
                        ctypes.addressof(cslots), pred.ctypes.data, ctypes.addressof(err))
        if st:      # a kernel failed (a bad index, no memory): the per-step path raises
            cur = _while_steps(cexe, bexe, [np.array(a, copy=True) for a in args[:m]], kc, kb)
    dt = node.dtype.np
    return np.concatenate([cur[i].reshape(-1).astype(dt, copy=False) for i in select])


RUNNERS = {"loop": run_loop, "while": run_while}   # the executable's hook, by primitive
