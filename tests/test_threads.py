"""symgrad.set_num_threads and friends against PyTorch 2.13 (errors, values, defaults
under OMP_NUM_THREADS / MKL_NUM_THREADS), and what the count does: native code on one
thread starts no helper thread (also in a forked child and for a mailbox made after the
call), the BLAS libraries report the limit through threadpoolctl, and compiled results
equal torch's on one thread and on two.  Whatever this host's CPU count: expectations
come from torch run here, from the affinity mask, or from what the code generator says
it may use.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import symgrad
from symgrad import parallelism

TOL = {np.float64: dict(rtol=1e-9, atol=1e-11), np.float32: dict(rtol=1e-4, atol=1e-5)}
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run(code: str, env: dict | None = None) -> str:
    full = {k: v for k, v in os.environ.items() if k not in THREAD_ENV}
    full.update(env or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300, env=full)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def outcome(fn, *args) -> tuple[str, str]:
    try:
        return "ok", repr(fn(*args))
    except Exception as e:          # noqa: BLE001 -- the type and text are compared
        return type(e).__name__, str(e)


@pytest.fixture
def restore_threads():
    """Put back this process's thread settings: the count, the helper flag, the BLAS
    libraries' limits (scipy's loaded first, so it is restored too)."""
    from threadpoolctl import threadpool_limits
    from codegen import runtime, worker
    runtime.blas_symbols()
    saved, allowed = parallelism._state.intra, worker.helper_allowed()
    with threadpool_limits(limits=None, user_api="blas"):
        yield
    parallelism._state.intra = saved
    worker.set_helper_allowed(allowed)


# ---- errors and values --------------------------------------------------------------------

BAD = {
    "zero": lambda m: 0, "negative": lambda m: -1, "int32 min": lambda m: -2 ** 31,
    "float": lambda m: 1.5, "integral float": lambda m: 2.0, "True": lambda m: True,
    "False": lambda m: False, "str": lambda m: "2", "None": lambda m: None,
    "list": lambda m: [2], "complex": lambda m: 3 + 0j,
    "2**31": lambda m: 2 ** 31, "below int32": lambda m: -2 ** 31 - 1,
    "2**63": lambda m: 2 ** 63, "2**64": lambda m: 2 ** 64, "below int64": lambda m: -2 ** 63 - 1,
    "numpy float": lambda m: np.float64(2.0), "numpy bool": lambda m: np.bool_(True),
    "numpy uint64 2**63": lambda m: np.uint64(2 ** 63), "tensor": lambda m: m.tensor(2),
}


@pytest.mark.parametrize("setter", ["set_num_threads", "set_num_interop_threads"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_counts_raise_torchs_errors(setter, case):
    want = outcome(getattr(torch, setter), BAD[case](torch))
    got = outcome(getattr(symgrad, setter), BAD[case](symgrad))
    assert want[0] != "ok"
    assert got == want


def test_arity_and_keywords_are_refused_as_by_a_builtin():
    for fn in (symgrad.set_num_threads, symgrad.set_num_interop_threads):
        for call in (lambda: fn(), lambda: fn(1, 2), lambda: fn(n=1)):
            with pytest.raises(TypeError):
                call()
    for fn in (symgrad.get_num_threads, symgrad.get_num_interop_threads):
        with pytest.raises(TypeError):
            fn(1)


@pytest.mark.usefixtures("restore_threads")
def test_set_values_read_back_as_torchs():
    before = torch.get_num_threads()
    try:
        for value in (1, 3, np.int64(2), np.int32(1), 2 ** 31 - 1, 2):
            torch.set_num_threads(value)
            symgrad.set_num_threads(value)
            got = symgrad.get_num_threads()
            assert type(got) is int and got == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


SEQUENCE = """
    import numpy as np
    import {module} as torch

    def show(fn, *args):
        try:
            print("ok", repr(fn(*args)))
        except Exception as e:
            print(type(e).__name__, e)

    show(torch.get_num_interop_threads)
    show(torch.set_num_interop_threads, 0)
    show(torch.set_num_interop_threads, 3)
    show(torch.get_num_interop_threads)
    show(torch.set_num_interop_threads, 3)
    show(torch.set_num_interop_threads, 1)
    show(torch.set_num_interop_threads, 1.5)
    show(torch.get_num_interop_threads)
    show(torch.set_num_threads, 1)
    show(torch.get_num_threads)
    show(torch.set_num_threads, np.int64(3))
    show(torch.get_num_threads)
    show(torch.set_num_threads, -3)
    show(torch.get_num_threads)
    show(torch.get_num_interop_threads)
"""


def test_interop_count_is_set_once_as_in_torch():
    """A second set_num_interop_threads is refused with torch's text, a bad value first
    fails its check; intra-op settings leave the inter-op count alone (fresh processes:
    the first set is once per process)."""
    want = run(SEQUENCE.format(module="torch"))
    assert "cannot set number of interop threads" in want
    assert run(SEQUENCE.format(module="symgrad")) == want


# ---- defaults -------------------------------------------------------------------------

DEFAULTS = """
    import {module} as torch
    print(torch.get_num_threads(), torch.get_num_interop_threads())
"""


def _env_cases() -> dict[str, dict[str, str]]:
    many = str(parallelism.usable_cpus() + 3)          # more than this host has: capped
    return {"unset": {}, "OMP 1": {"OMP_NUM_THREADS": "1"},
            "OMP list": {"OMP_NUM_THREADS": "1,2"}, "OMP too many": {"OMP_NUM_THREADS": many},
            "OMP not a number": {"OMP_NUM_THREADS": "abc"}, "OMP 0": {"OMP_NUM_THREADS": "0"},
            "OMP 1.5": {"OMP_NUM_THREADS": "1.5"},
            "MKL first": {"MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": many},
            "MKL invalid": {"MKL_NUM_THREADS": "0", "OMP_NUM_THREADS": "1"}}


@pytest.mark.parametrize("case", sorted(_env_cases()))
def test_defaults_equal_torchs_in_a_fresh_process(case):
    env = _env_cases()[case]
    want = run(DEFAULTS.format(module="torch"), env)
    assert run(DEFAULTS.format(module="symgrad"), env) == want


def test_default_follows_the_affinity_mask():
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no affinity masks here")
    code = """
        import os
        os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})
        import {module} as torch
        print(torch.get_num_threads(), torch.get_num_interop_threads())
    """
    want = run(code.format(module="torch"))
    assert want.split()[0] == "1"
    assert run(code.format(module="symgrad")) == want


# ---- what the count does --------------------------------------------------------------

def _loss(X, W, b, v):
    """The same code on torch's tensors and on symgrad's."""
    return ((X @ W + b).tanh() ** 2).mean() + (v.sin() * v.tanh()).sum()


def _torch_reference(args):
    ts = [torch.tensor(a, requires_grad=k in (1, 2)) for k, a in enumerate(args)]
    value = _loss(*ts)
    value.backward()
    return value.item(), ts[1].grad.numpy(), ts[2].grad.numpy()


@pytest.mark.usefixtures("restore_threads")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_results_equal_torchs_on_one_and_two_threads(dtype):
    """A split product with bias and tanh after it and a big elementwise reduction: value
    and gradients as torch's with 1 thread and with 2; the elementwise program's result is
    the same bits either way (chunks are merged in order whoever ran them)."""
    rng = np.random.default_rng(5)
    args = [rng.standard_normal((256, 300)).astype(dtype),
            (rng.standard_normal((300, 128)) * 0.05).astype(dtype),
            rng.standard_normal(128).astype(dtype),
            rng.standard_normal(1 << 20).astype(dtype)]
    want_value, want_dw, want_db = _torch_reference(args)
    vg = symgrad.value_and_grad(_loss, argnums=(1, 2), backend="llvm")
    elementwise = symgrad.compile(lambda v: (v.sin() * v.tanh()).sum(), backend="llvm")
    sums = {}
    for n in (1, 2):
        symgrad.set_num_threads(n)
        for _ in range(3):
            value, (dw, db) = vg(*args)
            np.testing.assert_allclose(value, want_value, **TOL[dtype])
            np.testing.assert_allclose(dw, want_dw, **TOL[dtype])
            np.testing.assert_allclose(db, want_db, **TOL[dtype])
        sums[n] = np.asarray(elementwise(args[3]))
    want_sum = (torch.tensor(args[3]).sin() * torch.tensor(args[3]).tanh()).sum().item()
    np.testing.assert_allclose(sums[1], want_sum, **TOL[dtype])
    assert sums[1].tobytes() == sums[2].tobytes()


HELPER = """
    import json, os, threading
    import numpy as np
    import symgrad
    from codegen import worker
    from codegen.lower import parallel

    def native_tasks():
        # threads of this process that Python did not start (None: no /proc here)
        if not os.path.isdir("/proc/self/task"):
            return None
        return set(os.listdir("/proc/self/task")) - {str(t.native_id) for t in threading.enumerate()}

    def calls(f, x, n=5):
        before = native_tasks()
        values = [float(f(x)) for _ in range(n)]
        after = native_tasks()
        new = None if before is None else len(after - before)
        return values, new, dict(worker.mailbox())

    x = np.random.default_rng(0).standard_normal(1 << 21)
    symgrad.set_num_threads(1)                      # before the helper's mailbox exists
    assert worker.mailbox() is None
    f = symgrad.compile(lambda v: (v.sin() * v.tanh()).sum(), backend="llvm")
    posts = "symgrad_rt_post" in f.lower(x).compile().as_text("llvm")
    float(f(x))
    one, new_one, box_one = calls(f, x)
    pid = os.fork()
    if pid == 0:                                    # the child keeps the one-thread flag
        values, new, box = calls(f, x, 3)
        ok = values == one[:3] and box["started"] == 0 and box["solo"] == 1 and new in (0, None)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    symgrad.set_num_threads(2)
    two, new_two, box_two = calls(f, x)
    print(json.dumps(dict(posts=posts, threads=parallel.threads(), one=one, two=two,
                          new_one=new_one, new_two=new_two, box_one=box_one, box_two=box_two,
                          child=os.waitstatus_to_exitcode(status))))
"""


def test_one_thread_starts_no_helper_and_two_restore_it():
    """set_num_threads(1) before any native code: a parallel kernel runs on its calling
    thread, its mailbox refuses posts (the solo flag), no thread is started -- also in a
    forked child; set_num_threads(2) gives the kernel its helper back (where this
    process may use two CPUs), same results."""
    r = json.loads(run(HELPER))
    assert r["child"] == 0
    assert r["one"] == r["two"] and len(set(r["one"])) == 1
    assert r["box_one"]["started"] == 0 and r["box_one"]["solo"] == 1
    assert r["new_one"] in (0, None)
    assert r["box_two"]["solo"] == 0
    if r["threads"] > 1:
        assert r["posts"]
        assert r["box_two"]["started"] == 1
        assert r["new_two"] in (1, None)
    else:                      # one usable CPU: the code generator made no parallel code
        assert r["box_two"]["started"] == 0


BLAS = """
    import json
    import numpy as np
    import symgrad
    from threadpoolctl import threadpool_info
    from codegen import runtime

    def blas():
        return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    symgrad.set_num_threads(1)
    first = blas()
    f = symgrad.compile(lambda v: v.exp().sum(), backend="llvm")
    float(f(np.ones(8)))                            # the backend is loaded ...
    runtime.blas_symbols()                          # ... then scipy's BLAS
    second = blas()
    symgrad.set_num_threads(2)
    third = blas()
    np.ones((64, 64)) @ np.ones((64, 64))
    print(json.dumps(dict(first=first, second=second, third=third,
                          cpus=symgrad.parallelism.usable_cpus())))
"""


def test_blas_libraries_report_the_limit():
    """threadpoolctl reports the count on numpy's BLAS at once, on scipy's when the
    backend loads it later, and the new count after a second call (at most the usable
    CPUs)."""
    r = json.loads(run(BLAS))
    if not r["second"]:
        pytest.skip("threadpoolctl finds no BLAS library here")
    assert set(r["first"].values()) <= {1}
    assert set(r["second"]) >= set(r["first"])
    assert set(r["second"].values()) == {1}
    assert set(r["third"].values()) == {min(2, r["cpus"])}


@pytest.mark.usefixtures("restore_threads")
def test_native_limit_is_applied_and_restored_in_this_process():
    from codegen import backend, worker
    from codegen.lower import parallel
    symgrad.set_num_threads(1)
    assert not worker.helper_allowed() and backend.max_threads() == 1
    if worker.mailbox() is not None:
        assert worker.mailbox()["solo"] == 1
    symgrad.set_num_threads(3)                      # more than the design has: two
    assert worker.helper_allowed() and backend.max_threads() == parallel.threads()
    assert symgrad.get_num_threads() == 3
    if worker.mailbox() is not None:
        assert worker.mailbox()["solo"] == 0


def test_eager_products_run_on_one_openblas_thread_and_restore_it():
    """Eager products of moderate size run with OpenBLAS's per-thread count at 1 (its
    spinning pool thrashes on a busy machine) and leave the count as it was; the values
    are numpy's (1-D, batched, both dtypes)."""
    from symgrad.ops import blas_local
    rng = np.random.default_rng(3)
    cases = [((300, 200), (200, 100)), ((7, 64, 40), (40, 50)), ((500,), (500, 300)),
             ((3, 1, 90, 80), (2, 80, 70))]
    for dtype in (np.float32, np.float64):
        for sa, sb in cases:
            a, b = rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)
            got = blas_local.matmul(a, b)
            assert got.dtype == dtype
            np.testing.assert_allclose(got, torch.matmul(torch.tensor(a), torch.tensor(b)).numpy(),
                                       rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-4)
    for fn in blas_local._controls():
        before = fn(3)
        blas_local.matmul(np.ones((400, 400)), np.ones((400, 400)))
        assert fn(before) == 3
