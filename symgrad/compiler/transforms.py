"""Program transformations on traced graphs: identity (compile), gradients, value and
gradient, Jacobians, Hessians, JVPs and VJPs — all by symbolic reverse mode
(:func:`symgrad.compiler.autodiff.grad_graph`), so their results are graphs again."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .autodiff import grad_graph
from ..graph import dtypes
from ..graph.node import Node, const
from ..graph.shapes import numel
from ..graph import pytree
from .batching import batch_graph
from .forward_mode import forward_tangents, has_while
from .rewrite import mk
from ..graph.node import make_node

__all__ = ["Transform", "Identity", "Grad", "Jacobian", "Jvp", "Vjp"]


@dataclass
class Built:
    outputs: list[Node]
    structure: object
    names: list[str]
    aux: list = None          # placeholder inputs fed zeros (see Jvp)


class Transform:
    """Maps the traced outputs (a pytree of nodes) to the program's outputs."""

    name = "compile"

    def spec(self) -> tuple | None:
        """Everything that decides what :meth:`build` makes of a traced program, as a
        tuple of literals (part of the disk cache key), or None if that is not known
        (then programs under this transform are not cached by trace)."""
        return None

    def build(self, out_nodes, out_structure, arg_groups, arg_names) -> Built:
        raise NotImplementedError


class Identity(Transform):
    def spec(self):
        return ("compile",)

    def build(self, out_nodes, out_structure, arg_groups, arg_names):
        return Built(out_nodes, out_structure, pytree.leaf_paths(out_structure, "out"))


def _check_argnums(argnums, n, grad=False):
    """``argnums`` as positions in [0, n), with JAX's errors: grad / value_and_grad given
    too few arguments a TypeError, other bad positions a ValueError."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")
    if grad and nums and max(nums) >= n:
        raise TypeError(f"differentiating with respect to argnums={argnums} requires at least "
                        f"{max(nums) + 1} positional arguments to be passed by the caller, but "
                        f"got only {n} positional arguments.")
    for a in nums:
        if not -n <= a < n:
            raise ValueError("Positional argument indices, e.g. for `static_argnums`, must "
                             "have value greater than or equal to -len(args) and less than "
                             f"len(args), but got value {a} for len(args) == {n}.")
    return tuple(a % n for a in nums)


def _wrt(arg_groups, arg_names, nums, what):
    nodes = []
    for a in nums:
        for node, name in zip(arg_groups[a][0], arg_groups[a][1]):
            if not node.dtype.is_floating_point:
                raise TypeError(f"{what} with respect to argument {name!r} is not possible: it "
                                f"has dtype {node.dtype.name}, and only floating-point inputs "
                                "have gradients")
            nodes.append(node)
    return nodes


def _grad_structure(arg_groups, nums, single):
    parts = [arg_groups[a][2] for a in nums]
    return parts[0] if single else pytree.tuple_of(parts)


class Grad(Transform):
    """grad / value_and_grad of a scalar function."""

    def __init__(self, argnums=0, value=False, has_aux=False, name="grad"):
        self.argnums, self.value, self.has_aux, self.name = argnums, value, has_aux, name

    def spec(self):
        return ("grad", self.argnums, self.value, self.has_aux, self.name)

    def build(self, out_nodes, out_structure, arg_groups, arg_names):
        nums = _check_argnums(self.argnums, len(arg_groups), grad=True)
        single = isinstance(self.argnums, int)
        wrt = _wrt(arg_groups, arg_names, nums, self.name)
        value, aux_nodes, aux_structure = _split_aux(out_nodes, out_structure, self.has_aux,
                                                     self.name)
        if value.shape != () and numel(value.shape) != 1:     # (JAX's errors)
            raise TypeError("Gradient only defined for scalar-output functions. Output had "
                            f"shape: {tuple(value.shape)}.")
        if not value.dtype.is_floating_point:
            raise TypeError(f"{self.name} requires real-valued outputs (output dtype that is a "
                            f"sub-dtype of np.floating), but got {value.dtype.name}. For "
                            "differentiation of functions with integer outputs, use jax.vjp "
                            "directly.")
        grads = grad_graph([value], wrt)
        gstruct = _grad_structure(arg_groups, nums, single)
        # JAX's layouts: grad -> g, (g, aux); value_and_grad -> (v, g), ((v, aux), g)
        if self.value:
            head = pytree.tuple_of([pytree.LEAF, aux_structure]) if self.has_aux else pytree.LEAF
            outs = [value] + list(aux_nodes) + list(grads)
            structure = pytree.tuple_of([head, gstruct])
        elif self.has_aux:
            outs = list(grads) + list(aux_nodes)
            structure = pytree.tuple_of([gstruct, aux_structure])
        else:
            outs, structure = list(grads), gstruct
        return Built(outs, structure, pytree.leaf_paths(structure, "out"))


def _split_aux(out_nodes, out_structure, has_aux, name):
    if not has_aux:
        if out_structure != pytree.LEAF:
            raise TypeError(f"{name} requires the function to return one scalar tensor "
                            "(use has_aux=True to return (value, aux))")
        return out_nodes[0], [], None
    if out_structure[0] not in ("tuple", "list") or len(out_structure[1]) != 2 \
            or out_structure[1][0] != "*":
        raise TypeError(f"{name}(has_aux=True) requires the function to return a pair "
                        "(scalar value, aux)")
    return out_nodes[0], out_nodes[1:], out_structure[1][1]


def _jacobian_nodes(outs: list[Node], wrt: list[Node]) -> list[list[Node]]:
    """J[i][j] = d outs[i] / d wrt[j], shaped outs[i].shape + wrt[j].shape, by reverse
    mode, as ``jacrev``: the VJP for each basis cotangent of all the outputs together
    (the other outputs' cotangents zeros then, as torch's), batched over the cotangents.
    A singular element's 0 * inf NaNs are its column."""
    stacked = _over_basis(lambda cs: grad_graph(outs, wrt, cs), outs, len(wrt))
    table = []
    for o, blocks in zip(outs, _blocks(stacked, outs, wrt)):
        table.append([mk("reshape", blk, shape=o.shape + w.shape) if blk is not None
                      else mk("full", shape=o.shape + w.shape, value=0, dtype=w.dtype)
                      for blk, w in zip(blocks, wrt)])
    return table


def _jacobian_nodes_forward(outs: list[Node], wrt: list[Node]):
    """(J, aux) with J[i][j] = d outs[i] / d wrt[j] by forward mode, as ``jacfwd``: J t
    for each basis tangent t of all of ``wrt`` together (the other arguments' tangents
    are zeros then, as torch's), as the transpose of the VJP (reverse mode applied
    twice: the VJP ``u -> u J`` is linear in the placeholder cotangents u, which drop
    out, fed zeros should a node still mention them), batched over the tangents. The
    products are forward mode's -- a partial times a tangent's entry -- so a singular
    element's NaNs (a partial inf times a tangent 0) are where ``jacfwd`` has them: its
    row, not its column."""
    if has_while(outs):                   # (no reverse mode through a while loop)
        us = []
        stacked = _over_basis(lambda ts: forward_tangents(outs, wrt, ts), wrt, len(outs))
    else:
        us = [make_aux(f"jacfwd.u{i}", o.shape, o.dtype) for i, o in enumerate(outs)]
        vjps = grad_graph(outs, wrt, us)
        stacked = _over_basis(lambda ts: grad_graph(vjps, us, ts), wrt, len(outs))
    columns = _blocks(stacked, wrt, outs)        # columns[j][i]: d outs[i] along wrt[j]
    table = []
    for i, out in enumerate(outs):
        row = []
        for j, w in enumerate(wrt):
            blk = columns[j][i]
            if blk is None:
                row.append(mk("full", shape=out.shape + w.shape, value=0, dtype=out.dtype))
                continue
            a, b = len(w.shape), len(out.shape)
            blk = mk("reshape", blk, shape=w.shape + out.shape)
            if a and b:
                blk = mk("permute", blk, perm=tuple(range(a, a + b)) + tuple(range(a)))
            row.append(blk)
        table.append(row)
    return table, us


def _over_basis(linear, space: list[Node], n_results: int) -> list[Node] | None:
    """``linear(seeds)`` (a list of n_results nodes, linear in seeds shaped as the nodes
    of ``space``) for every basis vector of the concatenated space, stacked along a new
    leading axis: batched (one kernel), or per basis vector where a primitive has no
    batching rule. None if the space is empty."""
    sizes = [numel(s.shape) for s in space]
    total = sum(sizes)
    if total == 0:
        return None
    offsets = [sum(sizes[:k]) for k in range(len(space))]
    if total > 1:
        seeds = [make_aux(f"jacobian.seed{k}", s.shape, s.dtype) for k, s in enumerate(space)]
        stacked = batch_graph(linear(seeds), {
            id(t): _basis(total, s.shape, s.dtype, (o, o + n))
            for t, s, o, n in zip(seeds, space, offsets, sizes)}, total)
        if stacked is not None:
            return stacked
    per = []
    for k in range(total):
        e = np.zeros(total)
        e[k] = 1
        seeds = [const(e[o:o + n].astype(s.dtype.np).reshape(s.shape), s.dtype)
                 for s, o, n in zip(space, offsets, sizes)]
        per.append([mk("reshape", r, shape=(1,) + r.shape) for r in linear(seeds)])
    return [per[0][i] if total == 1 else mk("cat", *[p[i] for p in per], axis=0)
            for i in range(n_results)]


def _blocks(stacked: list[Node] | None, space: list[Node], results: list[Node]):
    """blocks[k][i]: the rows of ``stacked[i]`` belonging to ``space[k]`` (None where
    either is empty)."""
    sizes = [numel(s.shape) for s in space]
    total = sum(sizes)
    blocks = []
    for k, n in enumerate(sizes):
        o = sum(sizes[:k])
        row = []
        for i, r in enumerate(results):
            if n == 0 or numel(r.shape) == 0 or stacked is None:
                row.append(None)
                continue
            blk = stacked[i]
            if n != total:
                rank = len(blk.shape)
                blk = mk("slice", blk, starts=(o,) + (0,) * (rank - 1),
                         stops=(o + n,) + tuple(blk.shape[1:]), steps=(1,) * rank)
            row.append(blk)
        blocks.append(row)
    return blocks


def _basis(m: int, shape: tuple, dtype, cols: tuple[int, int] | None = None) -> Node:
    """The m basis vectors of an m-element space, stacked (an identity), columns
    ``cols`` of it (all by default) reshaped to ``shape``: shape (m,) + shape."""
    index = dtypes.int64
    eye = mk("cast", mk("eq", mk("iota", shape=(m, m), axis=0, dtype=index),
                        mk("iota", shape=(m, m), axis=1, dtype=index)), dtype=dtype)
    if cols is not None and cols != (0, m):
        eye = mk("slice", eye, starts=(0, cols[0]), stops=(m, cols[1]), steps=(1, 1))
    return mk("reshape", eye, shape=(m,) + tuple(shape))


class Jacobian(Transform):
    """jacobian (reverse mode, as ``jacrev``; ``forward=True``: as ``jacfwd``) and hessian
    (forward over reverse, as JAX's and ``torch.func.hessian``). The two modes agree on
    finite values but not on where 0 * inf makes NaN: reverse mode builds row i from the
    cotangent e_i, forward mode column j from the tangent e_j -- at a singular element of
    1/x the NaNs are that element's column in one, its row in the other."""

    def __init__(self, argnums=0, hessian=False, forward=None):
        self.argnums, self.hessian = argnums, hessian
        self.forward = hessian if forward is None else forward
        self.name = "hessian" if hessian else "jacobian"

    def spec(self):
        return ("jacobian", self.argnums, self.hessian, self.forward)

    def build(self, out_nodes, out_structure, arg_groups, arg_names):
        nums = _check_argnums(self.argnums, len(arg_groups))
        single = isinstance(self.argnums, int)
        wrt = _wrt(arg_groups, arg_names, nums, self.name)
        outs = out_nodes
        for o in outs:                  # (JAX's jacrev / hessian refuse these)
            if not o.dtype.is_floating_point and not (self.forward and not self.hessian):
                raise TypeError(f"jacrev requires real-valued outputs (output dtype that is "
                                f"a sub-dtype of np.floating), but got {o.dtype.name}. For "
                                "differentiation of functions with integer outputs, use "
                                "jax.vjp directly.")
        if self.hessian:
            if out_structure != pytree.LEAF:
                raise ValueError("hessian requires a function returning one tensor")
            # a scalar: its gradient; any other shape: its jacobian (jax.hessian's and
            # torch.func.hessian's out.shape + in.shape + in.shape)
            outs = (grad_graph([out_nodes[0]], wrt) if out_nodes[0].shape == ()
                    else _jacobian_nodes([out_nodes[0]], wrt)[0])
            out_structure = _grad_structure(arg_groups, nums, single)
        aux: list[Node] = []
        if self.forward and all(o.dtype.is_floating_point for o in outs):
            table, aux = _jacobian_nodes_forward(outs, wrt)
        else:
            table = _jacobian_nodes(outs, wrt)
        gstruct = _grad_structure(arg_groups, nums, single)
        flat, per_out = [], []
        for row in table:
            flat.extend(row)
            per_out.append(gstruct)
        structure = pytree.replace_leaves(out_structure, per_out)
        built = Built(flat, structure, pytree.leaf_paths(structure, "jac"))
        built.aux = aux
        return built


class Jvp(Transform):
    """(f(primals), J · tangents). The compiled wrapper takes the n primal arguments
    followed by n tangent arguments (same structure); the JVP is the transpose of the
    VJP (reverse mode applied twice), the placeholder cotangent `u` drops out because
    the VJP is linear in it (it is fed zeros should a node still mention it)."""

    name = "jvp"

    def __init__(self, n_primals: int):
        self.n = n_primals

    def spec(self):
        return ("jvp", self.n)

    def build(self, out_nodes, out_structure, arg_groups, arg_names):
        n = self.n
        wrt = _wrt(arg_groups, arg_names, range(n), "jvp")
        tangents = [t for g in arg_groups[n:] for t in g[0]]
        for w, t in zip(wrt, tangents):
            if w.shape != t.shape:
                raise ValueError(f"jvp: tangent shape {list(t.shape)} does not match primal "
                                 f"shape {list(w.shape)}")
        tangents = [t if t.dtype is w.dtype else mk("cast", t, dtype=w.dtype)
                    for w, t in zip(wrt, tangents)]
        if has_while(out_nodes):          # (no reverse mode through a while loop)
            us, jv = [], forward_tangents(list(out_nodes), wrt, tangents)
        else:
            us = [make_aux(f"u{k}", o.shape, o.dtype) for k, o in enumerate(out_nodes)]
            g = grad_graph(out_nodes, wrt, us)
            jv = grad_graph(g, us, tangents)
        structure = pytree.tuple_of((out_structure, out_structure))
        built = Built(list(out_nodes) + jv, structure, pytree.leaf_paths(structure, "out"))
        built.aux = us
        return built


class Vjp(Transform):
    """cotangents · J: the wrapper takes the n primal arguments then the cotangents
    (structured like the outputs)."""

    name = "vjp"

    def __init__(self, n_primals: int):
        self.n = n_primals

    def spec(self):
        return ("vjp", self.n)

    def build(self, out_nodes, out_structure, arg_groups, arg_names):
        n = self.n
        wrt = _wrt(arg_groups, arg_names, range(n), "vjp")
        cts = [c for g in arg_groups[n:] for c in g[0]]
        if len(cts) != len(out_nodes):
            raise ValueError(f"vjp: expected {len(out_nodes)} cotangents, got {len(cts)}")
        seeds = []
        for o, c in zip(out_nodes, cts):
            if o.shape != c.shape:
                raise ValueError(f"vjp: cotangent shape {list(c.shape)} does not match output "
                                 f"shape {list(o.shape)}")
            seeds.append(c if c.dtype is o.dtype else mk("cast", c, dtype=o.dtype))
        grads = grad_graph(out_nodes, wrt, seeds)
        structure = _grad_structure(arg_groups, range(n), False)   # a tuple, as JAX's
        return Built(grads, structure, pytree.leaf_paths(structure, "ct"))


def make_aux(name: str, shape, dtype) -> Node:
    """A placeholder input fed zeros at run time."""
    return make_node("input", (), (("name", name), ("slot", ("aux", name))), tuple(shape), dtype)
