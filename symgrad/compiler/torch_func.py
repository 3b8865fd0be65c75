"""``torch.func``'s transforms -- ``grad``, ``grad_and_value``, ``vjp``, ``jvp``,
``jacrev``, ``jacfwd``, ``hessian`` -- with PyTorch's signatures, result layouts and
errors, on the compiler's transforms (re-exported by :mod:`symgrad.func`).

Each is a compiled program (``symgrad.compile`` of a function that applies the JAX-style
transform inside its trace): traced once per signature, gradients symbolic, run natively.
Because the program is an ordinary compiled function, its results join eager autograd
(:mod:`symgrad.autograd.compiled_function`): ``torch.func.grad(f)(x)`` with an ``x``, or
parameters ``f`` closes over, that require grad is itself differentiable, as in PyTorch;
the transforms nest (``jacrev(jacrev(f))``) and compose with ``vmap``.

What differs from PyTorch: ``f`` runs when a signature is traced, not at every call (as
``jax.jit``), so Python side effects in it happen once per signature; ``chunk_size`` of
``jacrev`` and ``randomness`` of ``jacfwd`` change nothing (one batched program).
"""
from __future__ import annotations

from typing import Any, Callable

from ..autograd import grad_mode
from ..autograd.engine import grad as _autograd_grad
from ..functions.creation import zeros_like
from ..graph import pytree
from ..tensor import Tensor
from . import api
from .transforms import Jacobian

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian"]

def _program(func, key, make):
    """The compiled program ``make()`` builds for ``func`` and ``key``, kept per function
    (weakly, beside :func:`~symgrad.compiler.api.vjp`'s): ``torch.func.grad(f)(x)``
    written inside a loop traces once."""
    return api._cached_wrapper(func, ("torch.func",) + key, make)


def _compiled(program, func):
    """``program`` (which calls ``func``) compiled, its guards searching ``func``: a global
    or closed-over tensor ``func`` reads that is rebound traces again (``__wrapped__``,
    which the search unwraps)."""
    program.__wrapped__ = func
    return api.compile(program)


# ---- PyTorch's argument checks ---------------------------------------------------------------
def _argnum(argnum, n: int) -> int:
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < n:
        return argnum
    if -n <= argnum < 0:
        return argnum + n
    raise RuntimeError(f"Got argnum={argnum}, but only {n} positional inputs")


def _argnums(argnums, n: int):
    if isinstance(argnums, int):
        return _argnum(argnums, n)
    if not isinstance(argnums, tuple):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    nums = tuple(_argnum(a, n) for a in argnums)
    if not nums:
        raise RuntimeError("argnums must be non-empty")
    if len(set(nums)) != len(nums):
        raise RuntimeError(f"argnums elements must be unique, got {nums}")
    return nums


def _check_differentiable(args: tuple, nums, forward: bool = False) -> None:
    """The differentiated arguments are floating-point tensors (torch's errors: forward
    mode -- jacfwd, hessian -- names the primal's dtype)."""
    for i in ((nums,) if isinstance(nums, int) else nums):
        for leaf in pytree.flatten(args[i])[0]:
            if not isinstance(leaf, Tensor):
                raise ValueError(f"Thing passed to transform API must be Tensor, got "
                                 f"{_torch_type(leaf)}")
            if not leaf.is_floating_point():
                if forward:
                    raise ValueError("Expected primal to be floating point or complex, but "
                                     f"got: {leaf.dtype}")
                raise RuntimeError("only Tensors of floating point dtype can require gradients")


def _torch_type(v) -> str:
    return "<class 'torch.Tensor'>" if isinstance(v, Tensor) else str(type(v))


def _split_aux(out, has_aux: bool, api_name: str):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api_name}: output of function f should be a tuple: "
                           "(output, aux) if has_aux is True")
    for leaf in pytree.flatten(out[1])[0]:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(leaf)}")
    return out


# ---- grad, grad_and_value ----------------------------------------------------------------------
_GV = "grad_and_value(f)(*args)"


def _scalar_checked(func, has_aux: bool):
    def checked(*args, **kwargs):
        out = func(*args, **kwargs)
        value, _ = _split_aux(out, has_aux, _GV)
        if not isinstance(value, Tensor):
            raise RuntimeError(f"{_GV}: Expected f(*args) to return a Tensor, got "
                               f"{_torch_type(value)}")
        if value.dim() != 0:
            raise RuntimeError(f"{_GV}: Expected f(*args) to return a scalar Tensor, got "
                               f"tensor with {value.dim()} dims. Maybe you wanted to use the "
                               "vjp or jacrev APIs instead?")
        return out
    checked.__name__ = getattr(func, "__name__", "f")
    return checked


def grad_and_value(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
                   has_aux: bool = False) -> Callable[..., Any]:
    """``torch.func.grad_and_value``: ``(gradient, value)``, or ``(gradient, (value,
    aux))`` with ``has_aux``; the gradient shaped as the argument(s) ``argnums``."""
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args))
        _check_differentiable(args, nums)

        def make():
            inner = api.value_and_grad(_scalar_checked(func, has_aux), nums, has_aux)

            def program(*a, **k):
                value, g = inner(*a, **k)
                return g, value            # (JAX's (value, grad) -> PyTorch's order)
            program.__name__ = f"grad_and_value_{getattr(func, '__name__', 'f')}"
            return _compiled(program, func)
        return _program(func, ("grad_and_value", nums, has_aux), make)(*args, **kwargs)
    wrapper.__name__ = f"grad_and_value({getattr(func, '__name__', 'f')})"
    return wrapper


def grad(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
         has_aux: bool = False) -> Callable[..., Any]:
    """``torch.func.grad``: the gradient of a function returning a 0-dim tensor (with
    ``has_aux``: ``(gradient, aux)``)."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = both(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    wrapper.__name__ = f"grad({getattr(func, '__name__', 'f')})"
    return wrapper


# ---- vjp, jvp ------------------------------------------------------------------------------------
def _tensors_out(out, api_name: str) -> None:
    leaves = pytree.flatten(out)[0]
    if not leaves or (len(leaves) == 1 and leaves[0] is None):
        raise RuntimeError(f"{api_name}: Expected f to be a function that has non-empty output "
                           f"(got output = {leaves})")
    for o in leaves:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api_name}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(o)}")


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False):
    """``torch.func.vjp``: ``(func(*primals), vjp_fn)`` (with ``has_aux``: ``(output,
    vjp_fn, aux)``); ``vjp_fn(cotangents)`` returns one gradient per primal, as a tuple."""
    _check_differentiable(primals, tuple(range(len(primals))))
    forward = _program(func, ("vjp.forward", has_aux), lambda: api.compile(func))
    full = forward(*primals)
    out, aux = _split_aux(full, has_aux, "vjp(f, *primals)")
    _tensors_out(out, "vjp(f, *primals)")
    out_leaves, out_structure = pytree.flatten(out)

    def make():
        def backward(primals, cotangents):
            wrt = [p if p.requires_grad else p.detach().requires_grad_()
                   for p in pytree.flatten(primals)[0]]
            p_args = pytree.unflatten(pytree.flatten(primals)[1], wrt)
            with grad_mode.enable_grad():
                o, _ = _split_aux(func(*p_args), has_aux, "vjp(f, *primals)")
            outs = pytree.flatten(o)[0]
            pairs = [(x, c) for x, c in zip(outs, cotangents) if x.requires_grad]
            if not pairs:
                return tuple(zeros_like(w) for w in wrt)
            return _autograd_grad([x for x, _ in pairs], wrt, [c for _, c in pairs],
                                  create_graph=True, allow_unused=True, materialize_grads=True)
        backward.__name__ = f"vjp_{getattr(func, '__name__', 'f')}"
        return _compiled(backward, func)
    back = _program(func, ("vjp.backward", has_aux), make)

    def vjp_fn(cotangents, *, retain_graph: bool | None = None,
               create_graph: bool | None = None):
        ct_leaves, ct_structure = pytree.flatten(cotangents)
        if ct_structure != out_structure:
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure "
                f"of outputs to the function. cotangents: {_spec(ct_structure)}, primal "
                f"output: {_spec(out_structure)}")
        for k, (c, o) in enumerate(zip(ct_leaves, out_leaves)):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of "
                                   f"torch.Size({list(c.shape)}) and output[{k}] has a shape of "
                                   f"torch.Size({list(o.shape)}).")
        flat = back(primals, tuple(ct_leaves))
        it = iter(flat)
        return tuple(pytree.unflatten(pytree.flatten(p)[1],
                                      [next(it) for _ in pytree.flatten(p)[0]])
                     for p in primals)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _spec(structure) -> str:
    return "*" if structure == pytree.LEAF else repr(structure)


_JVP = "jvp(f, primals, tangents)"


def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False):
    """``torch.func.jvp``: ``(func(*primals), J @ tangents)`` (with ``has_aux``: and
    ``aux``). ``primals`` and ``tangents`` are tuples of the same structure."""
    for name, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, tuple):
            if name == "primals":
                raise RuntimeError(f"{_JVP}: Expected primals to be a tuple. E.g. it should be "
                                   "valid to call f(*primals).")
            raise RuntimeError(f"{_JVP}: Expected tangents to be a tuple of Tensors, got "
                               f"{type(v)}")
    p_leaves, p_structure = pytree.flatten(primals)
    t_leaves, t_structure = pytree.flatten(tangents)
    if p_structure != t_structure:
        raise RuntimeError(f"{_JVP}: Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, "
                           "tangents also must be. Got primals with structure "
                           f"{_spec(p_structure)} and tangents with structure "
                           f"{_spec(t_structure)}")
    if not p_leaves:
        raise RuntimeError(f"{_JVP}: Expected primals to contain at least one Tensor.")
    for p, t in zip(p_leaves, t_leaves):
        for v, what in ((p, "primals"), (t, "tangents")):
            if not isinstance(v, Tensor):
                raise RuntimeError(f"{_JVP}: Expected {what} to only contain Tensors, got "
                                   f"{type(v)}")
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError("Trying to set a forward gradient that has a different size than "
                               "that of the original Tensor, this is not supported. Tensor is of "
                               f"size {list(p.shape)} while the given forward gradient is of size "
                               f"{list(t.shape)}.")
    _check_differentiable((primals,), 0, forward=True)

    if strict:                 # (checked eagerly: whether any output depends on a primal)
        with grad_mode.enable_grad():
            out, _ = _split_aux(func(*pytree.unflatten(
                p_structure, [p.detach().requires_grad_() for p in p_leaves])), has_aux, _JVP)
        if not any(o.requires_grad for o in pytree.flatten(out)[0] if isinstance(o, Tensor)):
            raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                               "independent of the inputs. This is not allowed with strict=True.")

    def make():
        def main(*p):
            out, _ = _split_aux(func(*p), has_aux, _JVP)
            _tensors_out(out, _JVP)
            return out
        inner = api.jvp

        def program(primals, tangents):
            out, tangent_out = inner(main, primals, tangents)
            if has_aux:
                return out, tangent_out, _split_aux(func(*primals), True, _JVP)[1]
            return out, tangent_out
        program.__name__ = f"jvp_{getattr(func, '__name__', 'f')}"
        return _compiled(program, func)
    return _program(func, ("jvp", has_aux), make)(primals, tangents)


# ---- jacrev, jacfwd, hessian -------------------------------------------------------------------
def _jacobian(func, argnums, has_aux: bool, name: str, hessian: bool = False):
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args))
        _check_differentiable(args, nums, forward=name != "jacrev")

        def make():
            def main(*a, **k):
                out, _ = _split_aux(func(*a, **k), has_aux, f"{name}(f, ...)(*args)")
                if name != "jacfwd":        # (reverse mode: torch's vjp refuses them)
                    for o in pytree.flatten(out)[0]:
                        if isinstance(o, Tensor) and not o.dtype.is_floating_point:
                            raise RuntimeError(
                                "vjp(f, ...): All outputs of f must be floating-point or "
                                f"complex Tensors, got Tensor with dtype {o.dtype}")
                return out
            main.__name__ = getattr(func, "__name__", "f")
            inner = api.hessian(main, nums) if hessian else \
                api.Compiled(main, (), None, Jacobian(nums, forward=name == "jacfwd"))

            def program(*a, **k):
                jac = inner(*a, **k)
                if has_aux:
                    return jac, _split_aux(func(*a, **k), True, f"{name}(f, ...)(*args)")[1]
                return jac
            program.__name__ = f"{name}_{getattr(func, '__name__', 'f')}"
            return _compiled(program, func)
        return _program(func, (name, nums, has_aux), make)(*args, **kwargs)
    wrapper.__name__ = f"{name}({getattr(func, '__name__', 'f')})"
    return wrapper


def jacrev(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, *,
           has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False) -> Callable[..., Any]:
    """``torch.func.jacrev``: the Jacobian of ``func`` with respect to the argument(s)
    ``argnums``, shaped output.shape + input.shape (nested as the outputs and argnums)."""
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    return _jacobian(func, argnums, has_aux, "jacrev")


def jacfwd(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
           has_aux: bool = False, *, randomness: str = "error") -> Callable[..., Any]:
    """``torch.func.jacfwd``: the Jacobian by forward mode, column by column (one batched
    program); its values are :func:`jacrev`'s, where 0 * inf makes NaN is forward mode's."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    return _jacobian(func, argnums, has_aux, "jacfwd")


def hessian(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """``torch.func.hessian``: second derivatives of a function returning one element,
    shaped input.shape + input.shape."""
    return _jacobian(func, argnums, False, "hessian", hessian=True)
