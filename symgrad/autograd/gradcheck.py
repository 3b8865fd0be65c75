"""``gradcheck`` / ``gradgradcheck``: analytical gradients (the backward engine) against
central finite differences, with PyTorch's signatures, checks, order of checks and
failure messages (:class:`GradcheckError`).

Slow mode builds both Jacobians column by column (finite differences perturb the
inputs' storage in place, in their own dtype, as PyTorch does) and compares them with
``allclose(analytical, numerical, rtol, atol)``; fast mode compares ``vᵀ J u`` for random
unit vectors u, v drawn from PyTorch's generator (Mersenne Twister, seed 67280421310721)
and, on a mismatch, recomputes the slow-mode Jacobians for the message. Then, as
PyTorch: with ``check_batched_grad``, the backward vmapped over two random
grad_outputs (``symgrad.func.vmap`` of ``autograd.grad``) must equal the two backward
passes; the backward must be multiplied by grad_output, and custom Functions must handle
undefined output gradients. ``check_forward_ad`` needs forward-mode AD in eager mode,
which symgrad does not have: it raises NotImplementedError.

>>> import symgrad as torch
>>> x = torch.tensor([0.5, -1.5], dtype=torch.float64, requires_grad=True)
>>> torch.autograd.gradcheck(lambda t: t.sin() * t, (x,))
True
"""
from __future__ import annotations

import warnings
from itertools import product

import numpy as np

from .. import dispatch
from ..errors import TracerBoolError
from ..func import vmap
from ..functions.random import generator, randn_like
from ..graph import dtypes
from ..functions.torch_rng import TorchRNG
from . import engine
from .custom_function import BackwardCFunction, _backward

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]

_SEED = 67280421310721          # torch.Generator()'s default seed


class GradcheckError(RuntimeError):
    """Error raised by :func:`gradcheck` and :func:`gradgradcheck`."""




FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:

If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `fast_mode=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_fast_mode=False`
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_fast_mode=False`
""".strip()


# ---- small helpers ----------------------------------------------------------------------
def _is_tensor(x) -> bool:
    return isinstance(x, dispatch.Tensor)


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _differentiable_outputs(x):
    return tuple(o for o in _as_tuple(x) if o.requires_grad)


def _is_float(x) -> bool:
    return _is_tensor(x) and x.is_floating_point()


def _tensor(a: np.ndarray):
    return dispatch.Tensor._from_array(a, dtypes.from_numpy_dtype(a.dtype))


def _array(t) -> np.ndarray:
    return t._eager_data("gradcheck")


def _diff_inputs(inputs) -> list:
    return [x for x in inputs if _is_tensor(x) and x.requires_grad]


def _allclose(a: np.ndarray, b: np.ndarray, rtol, atol) -> bool:
    dt = np.promote_types(a.dtype, b.dtype)
    return bool(np.allclose(a.astype(dt), b.astype(dt), rtol=rtol, atol=atol))


def _notallclose_msg(analytical, numerical, output_idx, input_idx) -> str:
    return (f"Jacobian mismatch for output {output_idx:d} with respect to input "
            f"{input_idx:d},\nnumerical:{numerical}\nanalytical:{analytical}\n")


# ---- inputs and outputs -------------------------------------------------------------------
def _check_inputs(tupled_inputs) -> None:
    any_requiring = False
    for idx, inp in enumerate(tupled_inputs):
        if _is_tensor(inp) and inp.requires_grad:
            if inp.dtype is not dtypes.float64:
                warnings.warn(f"Input #{idx} requires gradient and is not a double precision "
                              "floating point or complex. This check will likely fail if all "
                              "the inputs are not of double precision floating point or "
                              "complex. ", stacklevel=3)
            a = _array(inp)
            if not all(st > 0 or n <= 1 for st, n in zip(a.strides, a.shape)):
                raise RuntimeError(
                    f"The {idx}th input has a dimension with stride 0. gradcheck only supports "
                    "inputs that are non-overlapping to be able to compute the numerical "
                    "gradients correctly. You should call .contiguous on the input before "
                    "passing it to gradcheck.")
            any_requiring = True
    if not any_requiring:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")


def _outputs_checked(out_a, out_b, eps, idx=None) -> None:
    on_index = f"on index {idx} " if idx is not None else ""
    if out_a.shape != out_b.shape:
        raise AssertionError(f"Expected `func` to return outputs with the same shape when "
                             f"inputs are perturbed {on_index}by {eps}, but got: shapes "
                             f"{out_a.shape} and {out_b.shape}.")
    if out_a.dtype is not out_b.dtype:
        raise AssertionError(f"Expected `func` to return outputs with the same dtype when "
                             f"inputs are perturbed {on_index}by {eps}, but got: dtypes "
                             f"{out_a.dtype} and {out_b.dtype}.")


def _call(fn, inputs) -> tuple:
    """fn's outputs as a tuple of (cloned) tensors."""
    return tuple(o.clone() for o in _as_tuple(fn(*inputs)))


# ---- numerical ----------------------------------------------------------------------------
def _central_difference(fn, inputs, entry: np.ndarray, where, delta, eps, idx=None):
    """(f(x + delta) - f(x - delta)) / (2 eps) for each output, flattened; `entry[where]`
    is perturbed in place (the input's storage, no version bump: PyTorch's ``.data``)."""
    orig = np.array(entry[where], copy=True)
    entry[where] = orig - delta
    outa = _call(fn, inputs)
    entry[where] = orig + delta
    outb = _call(fn, inputs)
    entry[where] = orig
    res = []
    for a, b in zip(outa, outb):
        _outputs_checked(a, b, eps, idx)
        res.append(((_array(b) - _array(a)) / (2 * eps)).reshape(-1))
    return res


def _numerical_jacobian(fn, inputs, outputs, eps) -> list:
    """[per input requiring grad] -> [per floating-point output] Jacobian, shaped
    (input numel, output numel) in the output's dtype."""
    jacobians = []
    float_outs = [o for o in outputs if _is_float(o)]
    for inp in _diff_inputs(inputs):
        entry = _array(inp)
        cols = [np.zeros((inp.numel(), o.numel()), dtype=o.dtype.np) for o in float_outs]
        for d_idx, x_idx in enumerate(product(*[range(m) for m in inp.shape])):
            diffs = _central_difference(fn, inputs, entry, x_idx, eps, eps, idx=x_idx)
            diffs = [d for d, o in zip(diffs, outputs) if _is_float(o)]
            for col, d in zip(cols, diffs):
                col[d_idx] = d
        jacobians.append(cols)
    return jacobians


# ---- analytical ---------------------------------------------------------------------------
def _vjp_rows(output, diff_inputs, grad_outputs) -> list:
    """[per input] the gradient (array or None) for each grad_output in turn."""
    rows = [[] for _ in diff_inputs]
    for go in grad_outputs:
        grads = engine.grad([output], diff_inputs, [_tensor(go)], retain_graph=True,
                            allow_unused=True)
        for i, g in enumerate(grads):
            rows[i].append(None if g is None else np.array(_array(g), copy=True))
    return rows


def _stack(rows, diff_inputs, width):
    """Jacobians (input numel, width) from the vjp rows, with size and dtype checks."""
    jacobians, sizes_ok, types_ok = [], True, True
    for inp, col_list in zip(diff_inputs, rows):
        jac = np.zeros((inp.numel(), width), dtype=inp.dtype.np)
        for j, g in enumerate(col_list):
            if g is not None and tuple(g.shape) != tuple(inp.shape):
                sizes_ok = False
            elif g is not None and g.dtype != inp.dtype.np:
                types_ok = False
            if g is not None:
                jac[:, j] = g.reshape(-1)
        jacobians.append(jac)
    return jacobians, sizes_ok, types_ok


def _analytical_jacobian(inputs, output, nondet_tol, check_grad_dtypes, v=None) -> list:
    """[per input requiring grad] Jacobian of `output`, computed twice (reentrancy);
    with `v`, the single row vᵀ J (fast mode)."""
    diff_inputs = _diff_inputs(inputs)
    shape, dt = tuple(output.shape), output.dtype.np
    if v is not None:
        gos = [v.reshape(shape)]
    else:
        gos = []
        for j in range(output.numel()):
            e = np.zeros(output.numel(), dtype=dt)
            e[j] = 1.0
            gos.append(e.reshape(shape))
    width = len(gos)
    jac1, types_ok, sizes_ok = _stack(_vjp_rows(output, diff_inputs, gos), diff_inputs, width)
    jac2, _, _ = _stack(_vjp_rows(output, diff_inputs, gos), diff_inputs, width)
    # (PyTorch's names: the size flag reads as types_ok and the type flag as sizes_ok)
    reentrant = all(j1.size == 0 or np.abs(j1 - j2).max() <= nondet_tol
                    for j1, j2 in zip(jac1, jac2))
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and "
            "grad_output multiple times gives different values, although analytical "
            "gradient matches numerical gradient."
            f"The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG)
    return jac1


# ---- slow and fast mode ---------------------------------------------------------------------
def _check_no_differentiable_outputs(func, inputs, func_out, eps) -> None:
    for per_input in _numerical_jacobian(func, inputs, func_out, eps):
        for jac in per_input:
            if (jac != 0).sum() > 0:
                raise GradcheckError("Numerical gradient for function expected to be zero")


def _slow_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes,
                    nondet_tol) -> None:
    func_out = _as_tuple(func_out)
    if not outputs:
        _check_no_differentiable_outputs(func, inputs, func_out, eps)
        return
    per_input = _numerical_jacobian(func, inputs, func_out, eps)
    numerical = list(zip(*per_input)) if per_input else []
    numerical = [nj for o, nj in zip(func_out, numerical) if o.requires_grad]
    for i, o in enumerate(outputs):
        analytical = _analytical_jacobian(inputs, o, nondet_tol, check_grad_dtypes)
        for j, (a, n) in enumerate(zip(analytical, numerical[i])):
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(_notallclose_msg(_tensor(a), _tensor(n), i, j))


def _unit_vector(t, state: TorchRNG) -> np.ndarray:
    vec = state.random((t.numel(),), np.float32).astype(t.dtype.np)   # torch.rand(n, generator=g)
    return vec / np.sqrt(np.sum(vec * vec, dtype=vec.dtype), dtype=vec.dtype)


def _fast_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes,
                    nondet_tol) -> None:
    idx = [i for i, t in enumerate(inputs) if _is_tensor(t) and t.requires_grad]
    state = TorchRNG(_SEED)
    all_u = [_unit_vector(inputs[i], state) for i in idx]
    all_v = [_unit_vector(o, state) for o in outputs]
    func_out_t = _as_tuple(func_out)
    numerical = []                          # [input][float output] v · J u
    for i, u in zip(idx, all_u):
        inp = inputs[i]
        delta = (u.reshape(tuple(inp.shape)) * eps).astype(inp.dtype.np)
        jus = _central_difference(func, inputs, _array(inp), Ellipsis, delta, eps)
        jus = [ju for ju, o in zip(jus, func_out_t) if _is_float(o)]
        if not outputs:
            for ju in jus:
                if ju.size and np.abs(ju).max() > nondet_tol:
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        numerical.append([np.sum(v * ju) for v, ju in zip(all_v, jus)])
    analytical = []                         # [output][input] vᵀ J · u
    for o, v in zip(outputs, all_v):
        vjs = _analytical_jacobian(inputs, o, nondet_tol, check_grad_dtypes, v=v)
        analytical.append([np.dot(vj.T.reshape(-1), u) for vj, u in zip(vjs, all_u)])
    for i, per_out in enumerate(numerical):
        for j, n in enumerate(per_out):
            a = analytical[j][i]
            adjusted = atol * float(all_u[i].sum()) * float(all_v[j].sum())
            if not _allclose(np.asarray(a), np.asarray(n), rtol, adjusted):
                raise GradcheckError(
                    _notallclose_msg(_tensor(np.asarray(a)), _tensor(np.asarray(n)), j, i)
                    + _slow_mode_error(func, inputs, outputs, i, j, rtol, atol, eps))


def _slow_mode_error(func, inputs, outputs, input_idx, output_idx, rtol, atol, eps) -> str:
    n = _numerical_jacobian(func, inputs, outputs, eps)[input_idx][output_idx]
    a = _analytical_jacobian(inputs, outputs[output_idx], float("inf"), False)[input_idx]
    max_diff = _tensor(np.asarray(np.abs(n - a).max()))
    msg = ("\nThe above quantities relating the numerical and analytical jacobians are "
           "computed \nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for "
           "more background \nabout fast mode. Below, we recompute numerical and analytical "
           "jacobians in slow mode:\n\n"
           f"Numerical:\n {_tensor(n)}\n"
           f"Analytical:\n{_tensor(a)}\n\n"
           f"The max per-element difference (slow mode) is: {max_diff}.\n")
    if _allclose(a, n, rtol, atol):
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


# ---- the checks after the Jacobians ------------------------------------------------------
FAILED_BATCHED_GRAD_MSG = """
gradcheck or gradgradcheck failed while testing batched gradient computation.
This could have been invoked in a number of ways (via a test that calls
gradcheck/gradgradcheck directly or via an autogenerated test).

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `check_batched_grad=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `check_batched_grad=False` and/or `check_batched_gradgrad=False`.

If you're modifying an existing operator that supports batched grad computation,
or wish to make a new operator work with batched grad computation, please read
the following.

To compute batched grads (e.g., jacobians, hessians), we vmap over the backward
computation. The most common failure case is if there is a 'vmap-incompatible
operation' in the backward pass. Please see
NOTE: [How to write vmap-compatible backward formulas]
in the codebase for an explanation of how to fix this.
""".strip()


def _test_batched_grad(inputs, output, output_idx) -> None:
    """The backward of `output` vmapped over two random grad_outputs equals the two
    backward passes stacked (``allclose``), as PyTorch checks it."""
    diff_inputs = _diff_inputs(inputs)

    def vjp(v):
        grads = engine.grad(output, diff_inputs, v, retain_graph=True, allow_unused=True)
        return tuple(g if g is not None else _tensor(np.zeros(tuple(x.shape), x.dtype.np))
                     for g, x in zip(grads, diff_inputs))

    grad_outputs = [randn_like(output) for _ in range(2)]
    expected = [np.stack([_array(a), _array(b)]) for a, b in
                zip(*(vjp(g) for g in grad_outputs))]
    stacked = _tensor(np.stack([_array(g) for g in grad_outputs]))
    try:
        result = vmap(vjp)(stacked)
    except (RuntimeError, TracerBoolError) as ex:      # (a value the backward needs)
        raise GradcheckError(f"While computing batched gradients, got: {ex}\n\n"
                             f"{FAILED_BATCHED_GRAD_MSG}") from ex
    for input_idx, (res, exp) in enumerate(zip(result, expected)):
        if np.allclose(_array(res), exp, rtol=1e-05, atol=1e-08):
            continue
        raise GradcheckError(f"For output {output_idx} and input {input_idx}:\n\n"
                             f"{FAILED_BATCHED_GRAD_MSG}\n\nGot:\n{res}\n\nExpected:\n"
                             f"{_tensor(exp)}")

def _test_backward_mul_by_grad_output(outputs, inputs) -> None:
    diff_inputs = _diff_inputs(inputs)
    if not diff_inputs:
        raise GradcheckError("no Tensors requiring grad found in input")
    zeros = [_tensor(np.zeros(tuple(o.shape), o.dtype.np)) for o in outputs]
    grads = engine.grad(list(outputs), diff_inputs, zeros, allow_unused=True)
    for gi, di in zip(grads, diff_inputs):
        if gi is None:
            continue
        if not (_array(gi) == 0).all():
            raise GradcheckError("backward not multiplied by grad_output")
        if gi.dtype is not di.dtype:
            raise GradcheckError("grad is incorrect type")
        if tuple(gi.shape) != tuple(di.shape):
            raise GradcheckError("grad is incorrect size")


def _custom_nodes(outputs) -> list:
    """The custom Function nodes in the graph of `outputs`."""
    seen, stack, found = set(), [o.grad_fn for o in outputs if o.grad_fn is not None], []
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, BackwardCFunction):
            found.append(fn)
        stack.extend(n for n, _ in fn.next_functions if n is not None)
    return found


def _test_undefined_backward_mode(func, inputs) -> None:
    """PyTorch feeds undefined gradients to every node of the graph and expects undefined
    or zero input gradients. Built-in nodes pass undefined gradients through; what can
    fail is a custom Function's backward, so each gets them here: all outputs' gradients
    undefined, and (several outputs) one undefined with the others zero."""
    if not _diff_inputs(inputs):
        raise GradcheckError("no Tensors requiring grad found in input")

    def warn_bc_breaking():
        warnings.warn("Backwards compatibility: New undefined gradient support checking "
                      "feature is enabled by default, but it may break existing callers of "
                      "this function. If this is true for you, you can call this function "
                      'with "check_undefined_grad=False" to disable the feature',
                      stacklevel=3)

    outputs = [o for o in _differentiable_outputs(func(*inputs)) if _is_tensor(o)]
    for node in _custom_nodes(outputs):
        cases = [[None] * node._nout]
        meta = node._out_meta
        if len(outputs) > 1 and node._nout > 1:
            for u in range(node._nout):
                cases.append([None if k == u or m is None else _tensor(np.zeros(m[0], m[1].np))
                              for k, m in enumerate(meta)])
        wanted = [e[0] is not None for e in node.next_functions]
        for grads in cases:
            try:
                got = _backward(node, grads, wanted)
            except RuntimeError as e:
                warn_bc_breaking()
                raise GradcheckError(
                    "Expected backward function to handle undefined output grads. Please "
                    'look at "Notes about undefined output gradients" in '
                    '"tools/autograd/derivatives.yaml"') from e
            for gi in got:
                if gi is not None and not (_array(gi) == 0).all():
                    warn_bc_breaking()
                    raise GradcheckError(
                        "Expected all input grads to be undefined or zero when all output "
                        'grads are undefined or zero. Please look at "Notes about undefined '
                        'output gradients" in "tools/autograd/derivatives.yaml"')


# ---- the public functions -----------------------------------------------------------------
def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked: bool | None = None) -> bool:
    """Check the gradients of `func` at `inputs` (the tensors requiring grad) against
    finite differences; True, or GradcheckError (False with ``raise_exception=False``).
    Meant for float64 inputs (others warn, as in PyTorch)."""
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad "
                             "to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to "
                             "be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires "
                             "check_forward_ad to be True")
    if check_forward_ad or check_batched_forward_grad:
        raise NotImplementedError("gradcheck(check_forward_ad=True): symgrad has no "
                                  "forward-mode AD in eager mode (torch.autograd.forward_ad)")
    try:
        return _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                          check_grad_dtypes, fast_mode, check_batched_grad)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
               check_grad_dtypes, fast_mode, check_batched_grad) -> bool:
    tupled_inputs = _as_tuple(inputs)
    _check_inputs(tupled_inputs)
    func_out = func(*tupled_inputs)
    outputs = _differentiable_outputs(func_out)
    check = _fast_gradcheck if fast_mode else _slow_gradcheck
    check(func, func_out, tupled_inputs, outputs, eps, rtol, atol, check_grad_dtypes,
          nondet_tol)
    if check_batched_grad:
        for i, o in enumerate(outputs):
            _test_batched_grad(tupled_inputs, o, i)
    _test_backward_mul_by_grad_output(outputs, tupled_inputs)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, tupled_inputs)
    return True


def _random_grad_output(x, noncontiguous: bool):
    """A tensor like x (double for a non-float x) of values uniform in [-1, 1) that
    requires grad (``torch.testing.make_tensor(..., low=-1, high=1)``)."""
    dt = x.dtype if x.is_floating_point() else dtypes.float64
    shape = tuple(x.shape)
    if noncontiguous and x.numel() > 1:
        wide = generator().uniform(-1, 1, size=shape[:-1] + (2 * shape[-1],)) if shape \
            else generator().uniform(-1, 1, size=(2,))
        values = wide.astype(dt.np)[..., ::2]
    else:
        values = generator().uniform(-1, 1, size=shape).astype(dt.np)
    t = dispatch.Tensor._from_array(values, dt)
    return t.requires_grad_()


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:
    """gradcheck of the gradients of `func` (a backward built with create_graph) with
    respect to the inputs and grad_outputs (random in [-1, 1) when not given)."""
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or "
                             "check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev "
                             "to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to "
                             "be True")
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = _differentiable_outputs(func(*tupled_inputs))
        tupled_grad_outputs = tuple(_random_grad_output(x, gen_non_contig_grad_outputs)
                                    for x in outputs)
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_input_idx = {i for i, x in enumerate(tupled_inputs) if _is_tensor(x) and x.requires_grad}
    diff_grad_output_idx = {i for i, x in enumerate(tupled_grad_outputs) if x.requires_grad}

    def new_func(*args):
        input_args = tuple(x.requires_grad_() if i in diff_input_idx else x
                           for i, x in enumerate(args[:-num_outputs]))
        outputs = _differentiable_outputs(func(*input_args))
        grad_outs = tuple(x.requires_grad_() if i in diff_grad_output_idx else x
                          for i, x in enumerate(args[-num_outputs:]))
        diff_input_args = tuple(x for i, x in enumerate(input_args) if i in diff_input_idx)
        grad_inputs = engine.grad(outputs, diff_input_args, grad_outs, create_graph=True,
                                  allow_unused=True)
        return tuple(g for g in grad_inputs if g is not None)

    return gradcheck(new_func, tupled_inputs + tupled_grad_outputs, eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, masked=masked)
