"""``custom_vjp``: the primitive that carries a user-supplied reverse-mode rule through a
traced graph (JAX's ``custom_vjp``; here, a custom ``autograd.Function`` traced by
``symgrad.compile``).

``custom_vjp(y, x1, ..., xn; rule)`` has the value of ``y`` -- the forward computed from
the x's -- and its VJP is ``rule(needs, g)``: the cotangents of x1..xn (``needs`` says
which are wanted), computed by the user's backward on traced tensors, so they are nodes
like any others. No cotangent flows into ``y``: the rule replaces the derivative of the
forward's own operations. Once gradients are built it has done its job: simplify()
replaces it by ``y`` and batching treats it as ``y``, so it never reaches a backend.

A rule is an object with ``__call__(needs, g, node)`` -- ``node`` is the custom_vjp node
being differentiated (None on the eager tape): a pass that rebuilt the graph (a loop
body inlined with new inputs) hands the rule a node whose arguments are not the ones it
was made with -- and a ``__repr__`` (programs print it);
it is compared by identity, so each application is its own node, and it is Python code,
so programs holding it are not stored in the disk cache (the primitive is opaque).
"""
from __future__ import annotations

from .define import primitive

__all__ = ["CUSTOM_VJP"]


def _vjp(ctx, g):
    return (None,) + tuple(ctx.kwargs["rule"](ctx.needs_input_grad[1:], g,
                                              getattr(ctx, "node", None)))


CUSTOM_VJP = primitive("custom_vjp", -1, lambda av, *, rule: (av[0][0], av[0][1]),
                       lambda y, *xs, rule: y, family="other", vjp=_vjp)
CUSTOM_VJP.opaque = True          # its rule is the user's Python code: no disk-cache key
