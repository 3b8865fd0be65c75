"""The process-wide helper thread that big kernels share work with.

A parallel step (:mod:`codegen.lower.parallel`) hands its control block to the helper
with ``i32 symgrad_rt_post(ptr ctrl, i32 wake)`` instead of starting a thread: starting
one (``pthread_create``, then waking a CPU for it) costs tens of microseconds per
step -- a large share of a sub-millisecond training step with split products -- while a
post to a spinning helper costs well under a microsecond, so steps of a few
microseconds can be split too.  A post with ``wake = 0`` (a small step) only reaches a
helper that is spinning; a sleeping one is left asleep (the futex wake-up is a system
call and the helper would arrive too late to help).

The helper is started by the first waking post (``pthread_create`` in native code, so a
kernel reloaded from the disk cache needs no Python to start it) and lives as long
as the process.  Its loop::

    take the job from the mailbox (spinning for ~0.2 ms, then sleeping on a futex)
    -> run symgrad_rt_thread(job) -> empty the mailbox -> repeat

``symgrad_rt_thread`` is the claim protocol of :mod:`codegen.lower.parallel`: the helper
runs the job only if it moves the block's state 0 -> 1 before the caller, having run
out of chunks, cancels it (0 -> 2).  So the helper never delays a caller by more than
the chunk it is running, whatever the machine's load.  ``post`` returns non-zero (the
caller then runs every chunk itself) when the mailbox is taken -- another kernel, in
another Python thread, is using the helper -- or the helper could not be started.

The spin keeps the helper on its CPU between the steps of one call and between calls
in a loop; after ~0.2 ms without work it sleeps (``futex``, by ``syscall``; where there
is no futex, it polls the mailbox every ``POLL_US`` microseconds with ``usleep``).  The spin
is polite: every ``PAUSES`` pause instructions it calls ``sched_yield``, so on a busy
machine -- where the helper may share a CPU with the very thread that will post to it
-- spinning gives the CPU away instead of burning a time slice.  After
``fork`` the child has no helper: an at-fork hook empties the mailbox and the child's
first post starts a new one.

The process may be limited to one thread (``symgrad.set_num_threads(1)``, through
:func:`set_helper_allowed`): then a flag in the mailbox makes every post return "not
taken" before it looks at anything else, so the caller runs all chunks itself and no
helper is ever started.  The flag is kept in Python too and written into the mailbox
when it is compiled and again in a forked child, so it holds for a mailbox made after
the call and across ``fork``.  With the helper allowed a kernel uses at most two
threads (the caller and the helper): the most this design has.

The module is compiled once per process and never unloaded (the helper's code must
outlive every kernel).

Mailbox (``symgrad_rt_mailbox``, i64 slots): 0 job (ctrl pointer or 0), 1 the
helper sleeps, 2 started (0 no, 1 yes, 2 could not start), 3 solo (1: posts are
refused, the caller runs alone), 8 the futex word.
"""
from __future__ import annotations

import ctypes
import os

import llvmlite.ir as ir

from . import types as T
from .runtime import PTHREAD_CREATE, PTHREAD_DETACH, SCHED_YIELD, SYSCALL, THREAD_POST, USLEEP
from . import target

__all__ = ["worker_ir", "mailbox", "pause", "MAILBOX", "SPIN", "PAUSES", "reset_after_fork",
           "set_helper_allowed", "helper_allowed"]

MAILBOX = "symgrad_rt_mailbox"
WORKER = "symgrad_rt_worker"
PAUSES = 32                 # pause instructions (~25 ns each on Zen 4) per sched_yield
SPIN = 128                  # rounds of PAUSES pauses and a sched_yield (~1.5 us) before sleeping
_JOB, _SLEEPING, _STARTED, _SOLO, _FUTEX = 0, 1, 2, 3, 8
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98,
              "ppc64le": 221, "ppc64": 221, "s390x": 238}
POLL_US = 200               # without futex (not Linux): a sleeping helper polls this often


def futex_number() -> int | None:
    """The futex system call's number on this host, or None (not Linux, unknown CPU)."""
    import platform
    import sys
    return _SYS_FUTEX.get(platform.machine().lower()) if sys.platform.startswith("linux") else None


def _slot(b: ir.IRBuilder, mailbox: ir.Value, k: int) -> ir.Value:
    return b.gep(mailbox, [T.I32(0), T.I32(k)])


def pause(module: ir.Module, b: ir.IRBuilder) -> None:
    """The target's spin-wait hint (x86 ``pause``), if it has one."""
    hint = target.current().spin_hint
    if hint is None:
        return
    fn = module.globals.get(hint) or ir.Function(module, ir.FunctionType(ir.VoidType(), []), hint)
    b.call(fn, [])


def _futex(b: ir.IRBuilder, syscall: ir.Function, word: ir.Value, op: int, value: ir.Value) -> None:
    b.call(syscall, [T.I64(futex_number()), word, T.I64(op), value, ir.Constant(T.PTR, None)])


def worker_ir(trampoline) -> str:
    """The helper's module: mailbox, ``symgrad_rt_worker`` (the thread's loop), ``post``
    and the claim trampoline (``trampoline(module)`` adds it)."""
    m = ir.Module(name="symgrad_worker")
    mailbox = ir.GlobalVariable(m, ir.ArrayType(T.I64, 16), MAILBOX)
    mailbox.initializer = ir.Constant(ir.ArrayType(T.I64, 16), None)
    mailbox.align = 64
    run_job = trampoline(m)
    syscall = ir.Function(m, ir.FunctionType(T.I64, [T.I64], var_arg=True), SYSCALL)
    create = ir.Function(m, ir.FunctionType(T.I32, [T.PTR, T.PTR, T.PTR, T.PTR]), PTHREAD_CREATE)
    detach = ir.Function(m, ir.FunctionType(T.I32, [T.I64]), PTHREAD_DETACH)
    yield_ = ir.Function(m, ir.FunctionType(T.I32, []), SCHED_YIELD)
    has_futex = futex_number() is not None

    # ---- ptr worker(ptr): the helper thread, forever
    worker = ir.Function(m, ir.FunctionType(T.PTR, [T.PTR]), WORKER)
    worker.attributes.add("nounwind")
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    blocks = {s: worker.append_basic_block(s) for s in ("spin", "idle", "pause", "sleep", "wait",
                                                          "woke", "run")}
    futex = b.gep(mailbox, [T.I32(0), T.I32(_FUTEX)])
    b.branch(blocks["spin"])
    b.position_at_end(blocks["spin"])
    n = b.phi(T.I64, name="spins")
    n.add_incoming(T.I64(0), worker.blocks[0])
    job = b.load_atomic(_slot(b, mailbox, _JOB), "acquire", 8, typ=T.I64)
    b.cbranch(b.icmp_unsigned("!=", job, T.I64(0)), blocks["run"], blocks["idle"])
    b.position_at_end(blocks["idle"])
    b.cbranch(b.icmp_signed("<", n, T.I64(SPIN * PAUSES)), blocks["pause"], blocks["sleep"])
    b.position_at_end(blocks["pause"])
    pause(m, b)
    nxt = b.add(n, T.I64(1))
    with b.if_then(b.icmp_unsigned("==", b.and_(nxt, T.I64(PAUSES - 1)), T.I64(0))):
        b.call(yield_, [])
    n.add_incoming(nxt, b.block)
    b.branch(blocks["spin"])
    b.position_at_end(blocks["sleep"])          # seq, sleeping = 1, re-check, wait on seq
    seq = b.load_atomic(futex, "acquire", 4, typ=T.I32)
    b.store_atomic(T.I64(1), _slot(b, mailbox, _SLEEPING), "seq_cst", 8)
    again = b.load_atomic(_slot(b, mailbox, _JOB), "seq_cst", 8, typ=T.I64)
    b.cbranch(b.icmp_unsigned("!=", again, T.I64(0)), blocks["woke"], blocks["wait"])
    b.position_at_end(blocks["wait"])
    if has_futex:
        _futex(b, syscall, futex, _FUTEX_WAIT_PRIVATE, b.zext(seq, T.I64))
    else:
        b.call(ir.Function(m, ir.FunctionType(T.I32, [T.I32]), USLEEP), [T.I32(POLL_US)])
    b.branch(blocks["woke"])
    b.position_at_end(blocks["woke"])
    b.store_atomic(T.I64(0), _slot(b, mailbox, _SLEEPING), "seq_cst", 8)
    n.add_incoming(T.I64(0), blocks["woke"])
    b.branch(blocks["spin"])
    b.position_at_end(blocks["run"])
    b.call(run_job, [b.inttoptr(job, T.PTR)])
    b.store_atomic(T.I64(0), _slot(b, mailbox, _JOB), "release", 8)
    n.add_incoming(T.I64(0), blocks["run"])
    b.branch(blocks["spin"])

    # ---- i32 post(ptr ctrl, i32 wake): 0 if the helper will see the job, else 1
    post = ir.Function(m, ir.FunctionType(T.I32, [T.PTR, T.I32]), THREAD_POST)
    post.attributes.add("nounwind")
    b = ir.IRBuilder(post.append_basic_block("entry"))
    ctrl, wake = post.args
    solo = b.load_atomic(_slot(b, mailbox, _SOLO), "monotonic", 8, typ=T.I64)
    with b.if_then(b.icmp_unsigned("!=", solo, T.I64(0)), likely=False):
        b.ret(T.I32(1))                           # one thread only: the caller runs alone
    wake = b.icmp_unsigned("!=", wake, T.I32(0))
    started = _slot(b, mailbox, _STARTED)
    state = b.load_atomic(started, "acquire", 8, typ=T.I64)
    with b.if_then(b.and_(wake, b.icmp_unsigned("==", state, T.I64(0))), likely=False):
        won = b.extract_value(b.cmpxchg(started, T.I64(0), T.I64(1), "acq_rel", "acquire"), 1)
        with b.if_then(won):
            tid = b.alloca(T.I64, name="tid")
            rc = b.call(create, [tid, ir.Constant(T.PTR, None), worker, ir.Constant(T.PTR, None)])
            with b.if_else(b.icmp_signed("==", rc, T.I32(0))) as (ok, failed):
                with ok:
                    b.call(detach, [b.load(tid, typ=T.I64)])
                with failed:
                    b.store_atomic(T.I64(2), started, "release", 8)
    state = b.load_atomic(started, "acquire", 8, typ=T.I64)
    with b.if_then(b.icmp_unsigned("!=", state, T.I64(1)), likely=False):
        b.ret(T.I32(1))
    asleep = b.load_atomic(_slot(b, mailbox, _SLEEPING), "monotonic", 8, typ=T.I64)
    with b.if_then(b.and_(b.not_(wake), b.icmp_unsigned("!=", asleep, T.I64(0)))):
        b.ret(T.I32(1))                           # a small job is not worth a wake-up
    pair = b.cmpxchg(_slot(b, mailbox, _JOB), T.I64(0), b.ptrtoint(ctrl, T.I64), "seq_cst", "seq_cst")
    with b.if_then(b.not_(b.extract_value(pair, 1)), likely=False):
        b.ret(T.I32(1))
    asleep = b.load_atomic(_slot(b, mailbox, _SLEEPING), "seq_cst", 8, typ=T.I64)
    if has_futex:                           # (else the sleeper polls)
        with b.if_then(b.icmp_unsigned("!=", asleep, T.I64(0))):
            futex = b.gep(mailbox, [T.I32(0), T.I32(_FUTEX)])
            b.atomic_rmw("add", futex, T.I32(1), "seq_cst")
            _futex(b, syscall, futex, _FUTEX_WAKE_PRIVATE, T.I64(1))
    b.ret(T.I32(0))
    return str(m)


_address: list[int] = []      # the mailbox of this process's helper module, once compiled
_solo = [False]               # set_helper_allowed(False) was called last: posts are refused


def _slots(address: int):
    return (ctypes.c_int64 * 16).from_address(address)


def set_helper_allowed(allowed: bool) -> None:
    """Whether kernels may hand work to the helper thread from now on (False: every
    kernel runs on its calling thread alone and no helper is started; a helper already
    running finishes the chunk it has and goes to sleep).  Holds for a mailbox compiled
    later and in forked children."""
    _solo[0] = not allowed
    if _address:
        _slots(_address[0])[_SOLO] = int(_solo[0])


def helper_allowed() -> bool:
    """What :func:`set_helper_allowed` set last (default True)."""
    return not _solo[0]


def mailbox() -> dict[str, int] | None:
    """The helper's mailbox as it is now (``job``, ``sleeping``, ``started``, ``solo``), or
    None if no kernel of this process has needed the helper yet (for tests and inspection)."""
    if not _address:
        return None
    slots = _slots(_address[0])
    return {"job": slots[_JOB], "sleeping": slots[_SLEEPING], "started": slots[_STARTED],
            "solo": slots[_SOLO]}


def reset_after_fork(mailbox_address: int) -> None:
    """Empty the mailbox in a forked child (its helper thread did not survive the fork):
    the child's first post starts a new helper, unless posts are refused (the flag is
    kept)."""
    ctypes.memset(mailbox_address, 0, 16 * 8)
    _slots(mailbox_address)[_SOLO] = int(_solo[0])


def register_fork_hook(mailbox_address: int) -> None:
    """Adopt the freshly compiled mailbox: apply :func:`set_helper_allowed`'s flag to it
    and empty it in forked children."""
    _address.append(mailbox_address)
    _slots(mailbox_address)[_SOLO] = int(_solo[0])
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: reset_after_fork(mailbox_address))
