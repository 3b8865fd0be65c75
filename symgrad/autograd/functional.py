"""``symgrad.autograd.functional``: vjp, jvp, jacobian, hessian with PyTorch's signatures
and output structure, computed with the eager engine (reverse mode; jvp by the
double-vjp trick)."""
from __future__ import annotations

from . import engine, grad_mode
from ..functions.shape import reshape, stack
from ..ops import lax
from ..tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _tup(x):
    return (tuple(x), True) if isinstance(x, (tuple, list)) else ((x,), False)


def _prep(inputs, create_graph):
    out = []
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            raise TypeError(f"The inputs given to jacobian must be either a Tensor or a tuple of "
                            f"Tensors but the value at index {i} has type {type(x).__name__}.")
        x = x if create_graph and x.requires_grad else x.detach()
        out.append(x.requires_grad_(True) if not x.requires_grad else x)
    return tuple(out)


def _zeros_like(t):
    return lax.zeros(tuple(t.shape), t.dtype)


def _grads(outs, inputs, seeds, create_graph):
    diff = [(o, s) for o, s in zip(outs, seeds) if o.requires_grad]
    if not diff:
        return tuple(_zeros_like(x) for x in inputs)
    g = engine.grad([o for o, _ in diff], inputs, [s for _, s in diff], retain_graph=True,
                    create_graph=create_graph, allow_unused=True)
    return tuple(_zeros_like(x) if gi is None else gi for gi, x in zip(g, inputs))


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ J)."""
    with grad_mode.enable_grad():
        inputs, is_tuple = _tup(inputs)
        inputs = _prep(inputs, create_graph)
        outs = func(*inputs)
        outs_t, out_tuple = _tup(outs)
        if v is None:
            if any(o.numel() != 1 for o in outs_t):
                raise RuntimeError("The vector v can only be None if the user-provided function "
                                   "returns a single Tensor with a single element.")
            v_t = tuple(lax.full(tuple(o.shape), 1, o.dtype) for o in outs_t)
        else:
            v_t, _ = _tup(v)
        res = _grads(outs_t, inputs, v_t, create_graph)
    outs_r = tuple(o if create_graph else o.detach() for o in outs_t)
    res = tuple(r if create_graph else r.detach() for r in res)
    return (outs_r if out_tuple else outs_r[0]), (res if is_tuple else res[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v) via the double-vjp trick."""
    with grad_mode.enable_grad():
        inputs, is_tuple = _tup(inputs)
        inputs = _prep(inputs, create_graph)
        if v is None:
            if any(x.numel() != 1 for x in inputs):
                raise RuntimeError("The vector v can only be None if the input to the "
                                   "user-provided function is a single Tensor with a single "
                                   "element.")
            v_t = tuple(lax.full(tuple(x.shape), 1, x.dtype) for x in inputs)
        else:
            v_t, _ = _tup(v)
        outs = func(*inputs)
        outs_t, out_tuple = _tup(outs)
        us = tuple(lax.zeros(tuple(o.shape), o.dtype).requires_grad_(True) for o in outs_t)
        g = _grads(outs_t, inputs, us, create_graph=True)
        pairs = [(gi, vi) for gi, vi in zip(g, v_t) if gi.requires_grad]
        if pairs:
            jv = engine.grad([p[0] for p in pairs], us, [p[1] for p in pairs],
                             retain_graph=True, create_graph=create_graph, allow_unused=True)
            jv = tuple(_zeros_like(o) if j is None else j for j, o in zip(jv, outs_t))
        else:
            jv = tuple(_zeros_like(o) for o in outs_t)
    outs_r = tuple(o if create_graph else o.detach() for o in outs_t)
    jv = tuple(j if create_graph else j.detach() for j in jv)
    return (outs_r if out_tuple else outs_r[0]), (jv if out_tuple else jv[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """d func / d inputs: for each (output, input) pair a tensor of shape
    output.shape + input.shape."""
    with grad_mode.enable_grad():
        inputs, is_tuple = _tup(inputs)
        inputs = _prep(inputs, create_graph)
        outs = func(*inputs)
        outs_t, out_tuple = _tup(outs)
        table = []
        for o in outs_t:
            flat = reshape(o, (o.numel(),))
            rows = [[] for _ in inputs]
            for k in range(o.numel()):
                seed = lax.zeros((o.numel(),), o.dtype)
                seed._data[k] = 1 if seed._data is not None else seed._data
                g = _grads([flat], inputs, [seed], create_graph)
                for j, gj in enumerate(g):
                    rows[j].append(gj)
            jac_o = []
            for j, x in enumerate(inputs):
                if rows[j]:
                    jj = reshape(stack(rows[j]), tuple(o.shape) + tuple(x.shape))
                else:
                    jj = lax.zeros(tuple(o.shape) + tuple(x.shape), x.dtype)
                jac_o.append(jj if create_graph else jj.detach())
            table.append(tuple(jac_o) if is_tuple else jac_o[0])
    return tuple(table) if out_tuple else table[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """Second derivatives of a scalar function: shape input.shape + input.shape."""
    inputs_t, is_tuple = _tup(inputs)

    def gradient(*xs):
        out = func(*xs)
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        g = _grads([out.reshape(())], xs, [_one_like(out)], create_graph=True)
        return g if is_tuple else g[0]

    return jacobian(gradient, inputs_t if is_tuple else inputs_t[0], create_graph=create_graph)


def _one_like(t):
    return lax.full((), 1, t.dtype)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ H)."""
    inputs_t, is_tuple = _tup(inputs)
    with grad_mode.enable_grad():
        xs = _prep(inputs_t, create_graph)
        out = func(*xs)
        g = _grads([out.reshape(())], xs, [_one_like(out)], create_graph=True)
        v_t, _ = _tup(v)
        res = _grads(list(g), xs, list(v_t), create_graph)
    res = tuple(r if create_graph else r.detach() for r in res)
    return (out if create_graph else out.detach()), (res if is_tuple else res[0])


hvp = vhp   # the Hessian is symmetric
