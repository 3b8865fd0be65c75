"""Forward mode node by node: the tangents of a graph's outputs pushed from its inputs'
tangents in graph order, for the graphs reverse mode cannot transpose -- those holding a
``while`` loop (JAX differentiates ``while_loop`` in forward mode only).

Each node's tangent is the transpose of its own VJP (reverse mode applied twice to that
node alone: the VJP is linear in its placeholder cotangent, which drops out and is
replaced by zeros should a node still mention it). A ``while`` node's tangent is a while
loop too: its carries doubled by their tangents, its body the body's values and their
tangents (built by this same pass, so nested loops work), its condition unchanged.

Entry points: :func:`has_while` and :func:`forward_tangents`."""
from __future__ import annotations

from ..graph.body import Body
from ..graph.node import Node, const, make_node, toposort
from ..graph.primitives import JVP_RULES, PRIMITIVES
from ..graph.shapes import numel
from ..ops import lax
from ..ops.loops import body_input, next_level, replace_nodes, substitute, while_outputs
from .. import dispatch
from .autodiff import grad_graph

__all__ = ["has_while", "forward_tangents"]


def has_while(outs: list[Node]) -> bool:
    """Whether ``outs`` need forward mode node by node: a ``while`` node (no reverse mode
    through it) or a primitive with its own JVP rule (its VJP rule is not linear in the
    cotangent as a graph) is among the nodes they are computed from."""
    return any(n.op == "while" or n.op in JVP_RULES for n in toposort(list(outs)))


def _t(node: Node):
    return dispatch.Tensor._from_node(node)


def _zeros(like: Node) -> Node:
    """A node of zeros shaped like ``like`` (a constant: ``full`` outside a trace is
    eager)."""
    z = lax.full(like.shape, 0, like.dtype)
    return z._node if z._node is not None else const(z._data, like.dtype)


def forward_tangents(outs: list[Node], wrt: list[Node], tangents: list[Node]) -> list[Node]:
    """d outs along ``tangents`` (one per node of ``wrt``, its shape), by forward mode;
    zeros for an output that does not depend on ``wrt``."""
    tan: dict[int, Node] = {}
    for w, t in zip(wrt, tangents):
        if w.dtype.is_floating_point:
            tan[id(w)] = t if t.dtype is w.dtype else lax.cast(_t(t), w.dtype)._node
    for n in toposort(list(outs)):
        if id(n) in tan or not n.args or not n.dtype.is_floating_point:
            continue
        ts = [tan.get(id(a)) for a in n.args]
        if all(t is None for t in ts):
            continue
        if n.op == "while":
            tan[id(n)] = _while_tangent(n, ts)
        elif n.op in JVP_RULES:
            tan[id(n)] = _own_tangent(n, ts)
        elif PRIMITIVES[n.op].differentiable:
            got = _node_tangent(n, ts)
            if got is not None:
                tan[id(n)] = got
    return [tan.get(id(o)) or _zeros(o) for o in outs]


def _own_tangent(n: Node, ts: list) -> Node:
    """The tangent of node ``n`` by its primitive's own JVP rule."""
    args = [_t(a) for a in n.args]
    tangents = [None if t is None else _t(t) for t in ts]
    return JVP_RULES[n.op](args, _t(n), tangents, **n.kwargs)._node


def _node_tangent(n: Node, ts: list) -> Node | None:
    """The tangent of node ``n`` given its operands' (None: zero): the transpose of the
    VJP of ``n`` alone (its operands stand-ins, so that an operand computed from another
    adds nothing twice), with a placeholder cotangent that drops out (zeros should it
    remain)."""
    if not any(t is not None and a.dtype.is_floating_point for a, t in zip(n.args, ts)):
        return None
    lv = next_level()
    stand = {}
    for a in n.args:               # (an operand twice: one stand-in, its VJP sums both)
        if id(a) not in stand:
            stand[id(a)] = body_input(lv, len(stand) + 1, "jvp.x", a.shape, a.dtype)
    alone = make_node(n.op, tuple(stand[id(a)] for a in n.args), n.attrs, n.shape, n.dtype)
    wrt, seeds, done = [], [], set()
    for a, t in zip(n.args, ts):
        if t is not None and a.dtype.is_floating_point and id(a) not in done:
            done.add(id(a))
            wrt.append(stand[id(a)])
            seeds.append(t)
    u = body_input(lv, 0, "jvp.u", n.shape, n.dtype)
    vjps = grad_graph([alone], wrt, [u])
    (out,) = grad_graph(vjps, [u], seeds)
    back = {id(stand[id(a)]): a for a in n.args}
    back[id(u)] = _zeros(u)
    return replace_nodes([out], back)[0]


def _while_tangent(n: Node, ts: list) -> Node:
    """The tangent of while node ``n`` (its one-dtype group ``select`` of final carries,
    flattened): a while loop over the carries and their tangents."""
    kw = dict(n.attrs)
    cond, body, m, n_cond, select = kw["cond"], kw["body"], kw["n_carry"], kw["n_cond"], \
        kw["select"]
    ops = list(n.args)
    carries, kc, kb = ops[:m], ops[m:m + n_cond], ops[m + n_cond:]
    t_carry, t_kb = ts[:m], ts[m + n_cond:]
    fc = [i for i in range(m) if body.inputs[i].dtype.is_floating_point]
    fk = [j for j, t in enumerate(t_kb) if t is not None and kb[j].dtype.is_floating_point]
    lv = next_level(body, cond)
    k = iter(range(1 << 30))

    def new(name, like):
        return body_input(lv, next(k), name, like.shape, like.dtype)
    c_in = [new(f"c{i}", body.inputs[i]) for i in range(m)]
    dc_in = [new(f"dc{i}", body.inputs[i]) for i in fc]
    kb_in = [new(f"k{j}", body.inputs[m + j]) for j in range(len(kb))]
    dkb_in = [new(f"dk{j}", body.inputs[m + j]) for j in fk]
    outs = substitute(body, c_in + kb_in)
    d_outs = forward_tangents([outs[i] for i in fc], [c_in[i] for i in fc]
                              + [kb_in[j] for j in fk], dc_in + dkb_in)
    new_body = Body(c_in + dc_in + kb_in + dkb_in, list(outs[:m]) + list(d_outs))
    cc_in = [new(f"cc{i}", cond.inputs[i]) for i in range(m)]
    cdc_in = [new(f"cdc{i}", body.inputs[i]) for i in fc]
    ck_in = [new(f"ck{j}", cond.inputs[m + j]) for j in range(n_cond)]
    new_cond = Body(cc_in + cdc_in + ck_in, substitute(cond, cc_in + ck_in))
    init_t = [t_carry[i] if t_carry[i] is not None else _zeros(carries[i]) for i in fc]
    operands = [_t(x) for x in carries + init_t + kc + kb + [t_kb[j] for j in fk]]
    final = while_outputs(operands, cond=new_cond, body=new_body, n_carry=m + len(fc),
                          n_cond=n_cond)
    parts = []
    for i in select:
        d = final[m + fc.index(i)] if i in fc else lax.full(carries[i].shape, 0, n.dtype)
        parts.append(lax.reshape(lax.cast(d, n.dtype), (numel(d.shape),)))
    flat = parts[0] if len(parts) == 1 else lax.apply("cat", *parts, axis=0)
    return flat._node
