"""The user API of the compiler: ``symgrad.compile`` and the compiled transforms
(grad, value_and_grad, jacobian, hessian, jvp, vjp). Each returns a
:class:`~symgrad.compiler.dispatcher.Compiled` (see there for caching, and
:mod:`symgrad.compiler.stages` for what ``.lower()`` shows).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, overload

from ..graph import pytree
from .dispatcher import CacheInfo, Compiled
from .stages import Lowered
from .transforms import Grad, Jacobian, Jvp, Vjp

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from ..types import PyTree, TargetSpec

__all__ = ["compile", "jit", "grad", "value_and_grad", "jacobian", "hessian", "jvp", "vjp",
           "Compiled", "Lowered", "CacheInfo"]


# ---- public API ----------------------------------------------------------------------------
@overload
def compile(fn: Callable[..., Any], static_argnums: int | Sequence[int] = (),
            backend: str | None = None, *, target: TargetSpec | None = None,
            static_argnames: str | Sequence[str] = ()) -> Compiled: ...
@overload
def compile(fn: None = None, static_argnums: int | Sequence[int] = (),
            backend: str | None = None, *, target: TargetSpec | None = None,
            static_argnames: str | Sequence[str] = ()
            ) -> Callable[[Callable[..., Any]], Compiled]: ...


def compile(fn: Callable[..., Any] | None = None, static_argnums: int | Sequence[int] = (),
            backend: str | None = None, *, target: TargetSpec | None = None,
            static_argnames: str | Sequence[str] = ()
            ) -> Compiled | Callable[[Callable[..., Any]], Compiled]:
    """Compile `fn`: trace once per input signature, optimise, run natively, cache.

    Usable as a decorator (``@symgrad.compile`` or ``@symgrad.compile(backend="numpy")``).
    ``target``: the machine to build for -- a ``codegen.target.Target`` or a string such
    as ``"x86-64-v3"`` or ``"aarch64-unknown-linux-gnu:neoverse-n1"`` (default: this host,
    or ``SYMGRAD_TARGET_*``). Code for a machine this process cannot run can be inspected
    (``f.lower(*args).as_text("asm")``); calling it raises a clear error.
    Python ``bool`` arguments are static (each value its own program, as torch.compile
    specialises on them), and so are ``static_argnums`` and the keyword arguments named
    in ``static_argnames`` (JAX's ``jit``); other numbers are traced.

    >>> import symgrad, numpy as np
    >>> f = symgrad.compile(lambda x: (3 * (x + 2) ** 2).mean(), backend="numpy")
    >>> float(f(np.ones((2, 2))))
    27.0
    """
    if fn is None:
        return lambda f: Compiled(f, static_argnums, backend, target=target,
                                  static_argnames=static_argnames)
    return Compiled(fn, static_argnums, backend, target=target, static_argnames=static_argnames)


jit = compile      # JAX's name for it


def grad(fn: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
         static_argnums: int | Sequence[int] = (), backend: str | None = None,
         target: TargetSpec | None = None) -> Compiled:
    """The gradient of a scalar function, compiled (JAX's ``grad``): shaped like the
    argument(s) ``argnums`` names; with ``has_aux``, ``fn`` returns ``(value, aux)`` and the
    result is ``(gradient, aux)``.

    >>> import numpy as np, symgrad
    >>> g, aux = symgrad.grad(lambda x: ((x ** 2).sum(), x.mean()), has_aux=True)(np.ones(2))
    >>> g.tolist(), float(aux)
    ([2.0, 2.0], 1.0)
    """
    return Compiled(fn, static_argnums, backend, Grad(argnums, has_aux=has_aux, name="grad"),
                    target=target)


def value_and_grad(fn: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
                   has_aux: bool = False, *, static_argnums: int | Sequence[int] = (),
                   backend: str | None = None, target: TargetSpec | None = None) -> Compiled:
    """(value, gradient) of a scalar function, compiled (JAX's ``value_and_grad``); with
    ``has_aux``, ``fn`` returns ``(value, aux)`` and the result is ``((value, aux),
    gradient)``."""
    return Compiled(fn, static_argnums, backend,
                    Grad(argnums, value=True, has_aux=has_aux, name="value_and_grad"),
                    target=target)


def jacobian(fn: Callable[..., Any], argnums: int | tuple[int, ...] = 0, *,
             static_argnums: int | Sequence[int] = (), backend: str | None = None,
             target: TargetSpec | None = None) -> Compiled:
    """d fn / d argument, shaped output.shape + input.shape, compiled."""
    return Compiled(fn, static_argnums, backend, Jacobian(argnums), target=target)


def hessian(fn: Callable[..., Any], argnums: int | tuple[int, ...] = 0, *,
            static_argnums: int | Sequence[int] = (), backend: str | None = None,
            target: TargetSpec | None = None) -> Compiled:
    """Second derivatives of a scalar function, shaped input.shape + input.shape."""
    return Compiled(fn, static_argnums, backend, Jacobian(argnums, hessian=True), target=target)


def _wrapper(fn, n):
    def wrapped(*args):
        return fn(*args[:n])
    wrapped.__name__ = getattr(fn, "__name__", "fn")
    return wrapped


# the compiled wrappers jvp / vjp build for a function, per function (weakly)
_WRAPPERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def jvp(fn: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], *,
        backend: str | None = None) -> tuple[PyTree, PyTree]:
    """(fn(*primals), J · tangents), compiled (cached per fn and signature)."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    key = ("jvp", len(primals), backend)
    c = _cached_wrapper(fn, key, lambda: Compiled(_wrapper(fn, len(primals)), (), backend,
                                                  Jvp(len(primals))))
    return c(*primals, *tangents)


def vjp(fn: Callable[..., Any], *primals: Any, backend: str | None = None
        ) -> tuple[PyTree, Callable[..., tuple[Any, ...]]]:
    """(fn(*primals), vjp_fn) where vjp_fn(cotangent) returns the tuple of the primals'
    cotangents (one per primal, as JAX's); both compiled."""
    n = len(primals)
    fwd = _cached_wrapper(fn, ("fwd", backend), lambda: Compiled(fn, (), backend))
    back = _cached_wrapper(fn, ("vjp", n, backend),
                           lambda: Compiled(_wrapper(fn, n), (), backend, Vjp(n)))
    out = fwd(*primals)

    def vjp_fn(*cotangents: Any) -> tuple[Any, ...]:
        leaves, _ = pytree.flatten(cotangents if len(cotangents) != 1 else cotangents[0])
        return back(*primals, *leaves)
    return out, vjp_fn


def _cached_wrapper(fn, key, make):
    try:
        per_fn = _WRAPPERS.setdefault(fn, {})
    except TypeError:
        return make()
    if key not in per_fn:
        per_fn[key] = make()
    return per_fn[key]
