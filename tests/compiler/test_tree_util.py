"""symgrad.tree_util against jax.tree_util (flatten, unflatten, map, registered classes
and dataclasses), registered nodes through compiled transforms, vmap and scan carries, and
torch / jax arrays as arguments of compiled functions."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import symgrad as sg
from symgrad import tree_util as tu

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
torch = pytest.importorskip("torch")


class Pair:
    """A class registered by hand with the same functions in both libraries."""

    def __init__(self, a, b, tag="t"):
        self.a, self.b, self.tag = a, b, tag


def _flat(p):
    return (p.a, p.b), p.tag


def _unflat(tag, kids):
    return Pair(kids[0], kids[1], tag)


tu.register_pytree_node(Pair, _flat, _unflat)
jax.tree_util.register_pytree_node(Pair, _flat, _unflat)


@tu.register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    b: object
    act: str = dataclasses.field(default="tanh", metadata=dict(static=True))


jax.tree_util.register_dataclass(Layer, data_fields=["w", "b"], meta_fields=["act"])

TREES = [
    {"x": 1, "y": (2, [3, None]), "z": Pair(4, {"k": 5})},
    [Layer(1.0, 2.0), Layer(3.0, 4.0, act="relu")],
    (None, (), [], {}),
]


@pytest.mark.parametrize("tree", TREES)
def test_flatten_unflatten_map_as_jax(tree):
    leaves, tdef = tu.tree_flatten(tree)
    jleaves, jdef = jax.tree_util.tree_flatten(tree)
    assert leaves == jleaves and tdef.num_leaves == jdef.num_leaves
    again = tu.tree_unflatten(tdef, [v * 10 for v in leaves])
    jagain = jax.tree_util.tree_unflatten(jdef, [v * 10 for v in jleaves])
    assert tu.tree_leaves(again) == jax.tree_util.tree_leaves(jagain)
    assert tu.tree_structure(again) == tdef
    assert tu.tree_leaves(tu.tree_map(lambda a, b: a + b, tree, tree)) == \
        jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda a, b: a + b, tree, tree))


def test_registered_nodes_go_through_transforms():
    rng = np.random.default_rng(0)
    layers = [Layer(rng.normal(size=(3, 3)), rng.normal(size=3)),
              Layer(rng.normal(size=(3, 2)), rng.normal(size=2), act="sin")]
    x = rng.normal(size=(4, 3))

    def loss(m, ls, x):
        for layer in ls:
            x = (m.tanh if layer.act == "tanh" else m.sin)(x @ layer.w + layer.b)
        return (x ** 2).sum()
    got = sg.grad(lambda ls, x: loss(sg, ls, x))(layers, x)
    want = jax.grad(lambda ls, x: loss(jnp, ls, x))(layers, x)
    assert [type(g) for g in got] == [Layer, Layer] and got[1].act == "sin"
    for g, h in zip(tu.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-12)
    per = sg.vmap(lambda p, x: (x * p.a + p.b).sum(), in_axes=(None, 0))(
        Pair(sg.tensor(2.0), sg.tensor(1.0)), sg.tensor(x))
    np.testing.assert_allclose(per.numpy(), (x * 2 + 1).sum(axis=1))
    c, _ = sg.compile(lambda xs: sg.scan(lambda p, x: (Pair(p.a + x.sum(), p.b * 2, p.tag), None),
                                         Pair(sg.tensor(0.0, dtype=sg.float64),
                                              sg.tensor(1.0, dtype=sg.float64)), xs))(x)
    assert isinstance(c, Pair) and float(c.a) == pytest.approx(x.sum()) and float(c.b) == 16


def test_bad_registrations():
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        tu.register_pytree_node(Pair, _flat, _unflat)
    with pytest.raises(TypeError, match="expects a dataclass"):
        tu.register_dataclass(Pair)

    class Unhashable:
        def __init__(self, v):
            self.v = v
    tu.register_pytree_node(Unhashable, lambda o: ((o.v,), [1]), lambda aux, k: Unhashable(k[0]))
    with pytest.raises(TypeError, match="must be hashable"):
        tu.tree_flatten(Unhashable(1))
    with pytest.raises(ValueError, match="Too few leaves"):
        tu.tree_unflatten(tu.tree_structure((1, 2)), [1])


@pytest.mark.parametrize("make", [
    lambda a: torch.tensor(a), lambda a: torch.tensor(a, requires_grad=True),
    lambda a: jnp.asarray(a), lambda a: a.T.copy().T])
def test_torch_and_jax_arrays_are_arguments(make):
    a = np.random.default_rng(1).normal(size=(3, 4))
    f = sg.value_and_grad(lambda x: (sg.sin(x) * x).sum())
    v, g = f(make(a))
    np.testing.assert_allclose(v, (np.sin(a) * a).sum(), rtol=1e-12)
    np.testing.assert_allclose(g, np.sin(a) + a * np.cos(a), rtol=1e-12)
    v2, _ = f(make(a[:2]))                 # another shape: another signature, not a stale hit
    np.testing.assert_allclose(v2, (np.sin(a[:2]) * a[:2]).sum(), rtol=1e-12)
