"""``symgrad.vmap``: a function mapped over an axis of its arguments, as JAX's ``vmap``
(and ``torch.func.vmap``), as a transform of the symbolic graph.

The function is traced once on one example (the mapped axes removed), the graph is
batched (:func:`symgrad.compiler.batching.batch_graph`: one more leading axis on every
value that depends on a mapped argument), and the batched graph is applied to the
arguments with the ordinary primitives -- so the result is recorded by the autograd tape
eagerly, traced inside ``compile`` / ``grad``, and vmap nests.  A primitive without a
batching rule makes the call fall back to calling the function once per example and
stacking the results (the same answer, more operations).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..functions.subtrace import Capture, finish_body, node_of, trace_body
from ..functions.random import generator as default_generator
from ..functions.torch_rng import leading_axis
from ..functions.creation import as_tensor
from ..functions.shape import movedim, stack, strides_of
from ..graph import pytree
from ..graph.node import toposort
from ..ops import loops as L
from ..tensor import Tensor
from .batching import batch_graph
from .replay import replay

__all__ = ["vmap", "RANDOMNESS"]

RANDOMNESS = ("error", "different", "same")
RANDOMNESS_ERROR = ("vmap: called random operation while in randomness error mode. Please "
                    "either use the 'same' or 'different' randomness flags on vmap or perform "
                    "the randomness operation out of vmap")


def vmap(func: Callable, in_axes: Any = 0, out_axes: Any = 0, *,
         randomness: str = "different", axis_size: int | None = None) -> Callable:
    """``func`` mapped over axis ``in_axes`` of its arguments; results stacked along
    ``out_axes``.  ``in_axes``: an int, None (not mapped), or a tuple with one entry per
    positional argument, each an int / None or a pytree of them matching that argument.
    ``out_axes``: likewise for the results (None: the result does not depend on the
    mapped arguments).
    ``randomness``: what random draws inside ``func`` (``rand``, ``randn_like``, dropout
    masks, ...) do -- ``"different"``: each example its own numbers (one draw of the
    batched shape, torch's numbers for ``torch.func.vmap(randomness="different")``; JAX
    has no implicit generator: this is what a JAX user gets by mapping over split keys);
    ``"same"``: one draw shared by every example (JAX with an unmapped key); ``"error"``:
    a random draw raises (``torch.func.vmap``'s default).
    Keyword arguments are mapped over their axis 0, as JAX maps them. ``axis_size``: the
    size of the mapped axis (needed when no argument is mapped; else it must agree).

    >>> import symgrad
    >>> symgrad.vmap(lambda x, y: x @ y, in_axes=(0, None))(symgrad.ones(5, 3),
    ...                                                      symgrad.ones(3)).shape
    torch.Size([5])
    """
    return mapped_function(func, in_axes, out_axes, randomness, "jax", axis_size)


def mapped_function(func: Callable, in_axes, out_axes, randomness: str,
                    api: str, axis_size: int | None = None) -> Callable:
    """:func:`vmap`'s function under ``api``'s rules: ``"jax"`` (keyword arguments mapped,
    JAX's errors) or ``"torch"`` (``torch.func.vmap``: keyword arguments passed to every
    example whole, torch's errors)."""
    if not callable(func):
        raise TypeError(f"vmap expects a callable, got {type(func).__name__}")
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")
    if randomness not in RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")

    def mapped(*args, **kwargs):
        if api == "jax" and kwargs:
            return _call(_keywords_last(func, len(args)), _with_keywords_axis(in_axes, args),
                         out_axes, args + (kwargs,), {}, randomness, axis_size)
        if api == "torch":
            _torch_checks(func, in_axes)
            return _call(func if out_axes is None else _tensors_only(func), in_axes, out_axes,
                         args, kwargs, randomness, axis_size, api)
        return _call(func, in_axes, out_axes, args, kwargs, randomness, axis_size)
    # name and doc only: a compiled func's attributes must not make this look compiled
    functools.update_wrapper(mapped, func, assigned=("__module__", "__name__", "__qualname__",
                                                     "__doc__"), updated=())
    del mapped.__wrapped__
    return mapped


def _keywords_last(func, n: int):
    """``func`` taking its keyword arguments as one trailing dict argument."""
    def call(*args):
        return func(*args[:n], **args[n])
    return call


def _with_keywords_axis(in_axes, args):
    """``in_axes`` for the positional arguments and a trailing dict of keywords (mapped
    over axis 0). A tuple's length is checked against the positional arguments only."""
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, tuple):
        _check_in_axes_length(in_axes, args)
        return in_axes + (0,)
    return (in_axes,) * len(args) + (0,)


def _check_in_axes_length(in_axes: tuple, args) -> None:
    if len(in_axes) != len(args):
        raise ValueError("vmap in_axes must be an int, None, or a tuple of entries "
                         "corresponding to the positional arguments passed to the function, "
                         f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")


def _check_axes_spec(spec, name: str) -> None:
    leaves, _ = pytree.flatten(spec)
    for a in leaves:
        if not (a is None or (isinstance(a, int) and not isinstance(a, bool))):
            raise TypeError(f"vmap {name} must be an int, None, or (nested) container with "
                            f"those types as leaves, but got {a!r}")


def _axes_per_leaf(spec, tree, what: str) -> list:
    """One axis (int or None) per leaf of ``tree``, from ``spec``, a prefix of it."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(pytree.flatten(tree)[0])
    if isinstance(spec, (tuple, list)) and isinstance(tree, (tuple, list)) \
            and len(spec) == len(tree):
        return [a for s, t in zip(spec, tree) for a in _axes_per_leaf(s, t, what)]
    if isinstance(spec, dict) and isinstance(tree, dict) and set(spec) == set(tree):
        keys = sorted(tree, key=repr)
        return [a for k in keys for a in _axes_per_leaf(spec[k], tree[k], what)]
    raise ValueError(f"vmap {what} specification must be a tree prefix of the corresponding "
                     f"value, got specification {spec!r} for value tree "
                     f"{pytree.flatten(tree)[1]!r}.")


def _type(t: Tensor) -> str:
    return f"{t.dtype.name}[{','.join(map(str, t.shape))}]"


def _torch_checks(func, in_dims) -> None:
    if in_dims is None:
        name = getattr(func, "__name__", "func")
        raise ValueError(f"vmap({name}, in_dims=None, ...)(<inputs>): expected `in_dims` to be "
                         "int or a (potentially nested) tuple matching the structure of "
                         "inputs, got: <class 'NoneType'>.")


def _tensors_only(func):
    """``func`` refusing outputs that are not tensors, as torch.func.vmap does."""
    name = getattr(func, "__name__", "func")

    def call(*args, **kwargs):
        out = func(*args, **kwargs)
        for leaf in pytree.flatten(out)[0]:
            if not isinstance(leaf, Tensor):
                raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got "
                                 f"type {type(leaf)}. Did you mean to set out_dims= to None "
                                 "for output?")
        return out
    return call


def _call(func, in_axes, out_axes, args, kwargs, randomness, axis_size=None, api="jax"):
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, tuple):
        _check_in_axes_length(in_axes, args)
    spec = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    leaves, struct = pytree.flatten(tuple(args))
    axes = _axes_per_leaf(spec, tuple(args), "in_axes")
    paths = pytree.leaf_paths(struct, "args")
    tensors, sized = [], []
    for leaf, ax, path in zip(leaves, axes, paths):
        t = leaf if isinstance(leaf, Tensor) else as_tensor(leaf)
        if ax is not None:
            nd = t.dim()
            if not -nd <= ax < nd:
                raise ValueError(f"vmap was requested to map its argument {path} along axis "
                                 f"{ax}, which implies that its rank should be at least "
                                 f"{(ax if ax >= 0 else -ax - 1) + 1}, but is only {nd} (its "
                                 f"shape is {tuple(t.shape)})")
            ax = ax % nd
            sized.append((t.shape[ax], ax, path, t))
            t = movedim(t, ax, 0) if ax != 0 else t
        tensors.append(t)
    if not sized and axis_size is None:
        raise ValueError("vmap must have at least one non-None value in in_axes or axis_size "
                         "must be specified")
    sizes = {s for s, *_ in sized} | ({axis_size} if axis_size is not None else set())
    if len(sizes) > 1 and api == "torch":
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {[s for s, *_ in sized]} for the mapped "
                         "dimension")
    if len(sizes) > 1:
        lines = [f"  * one axis had size {s}: axis {ax} of {path} of type {_type(t)}"
                 for s, ax, path, t in sized]
        if axis_size is not None:
            lines.insert(0, f"  * the `axis_size` argument was {axis_size}")
        raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                         + ";\n".join(lines))
    size = sizes.pop()
    mapped = [ax is not None for ax in axes]
    out = _batched(func, struct, tensors, mapped, size, kwargs, randomness)
    if out is None:
        out = _per_example(func, struct, tensors, mapped, size, kwargs, randomness)
    out_leaves, out_struct, batched = out
    oaxes = _axes_per_leaf(out_axes, pytree.unflatten(out_struct, out_leaves), "out_axes")
    result = []
    for t, ax, b in zip(out_leaves, oaxes, batched):
        if ax is None:
            if b:
                raise ValueError("vmap has mapped output but out_axes is None")
            result.append(t[0])
            continue
        nd = t.dim()
        if not -nd <= ax < nd:
            raise ValueError(f"vmap out_axes {ax} is out of range for an output of rank "
                             f"{nd - 1}")
        result.append(movedim(t, 0, ax % nd) if ax % nd != 0 else t)
    return pytree.unflatten(out_struct, result)


class _Capture(Capture):
    """The lifter while vmap traces its example: a loop body's capture, plus the random
    draws of ``randomness`` (see :func:`vmap`): a draw is a closed-over input of the
    body -- mapped (``"different"``: drawn with the batch axis) or not (``"same"``) --,
    drawn again at each call of an enclosing compiled function."""

    def __init__(self, level, first, size: int, randomness: str):
        super().__init__(level, first)
        self.size, self.randomness = size, randomness
        self.mapped_draws: set[int] = set()

    def runtime_value(self, getter, dtype, name: str) -> Tensor:
        if self.randomness == "error":
            raise RuntimeError(RANDOMNESS_ERROR)
        different = self.randomness == "different"
        get = (lambda: _draws(getter, self.size)) if different else getter
        outer = getattr(self.parent, "runtime_value", None)
        t = (outer(get, dtype, name) if outer is not None
             else Tensor._from_array(np.asarray(get(), dtype=dtype.np), dtype))
        shape = tuple(t.shape[1:]) if different else tuple(t.shape)
        k = len(self.captured)
        node = L.body_input(self.level, self.first + k, f"k{k}", shape, dtype)
        self.captured[id(t)] = (t, node)
        if different:
            self.mapped_draws.add(id(t))
        return Tensor._from_node(node)


def _draws(getter, size: int) -> np.ndarray:
    """``size`` examples of ``getter()``'s draw, stacked: one draw of the batched shape
    (torch's numbers), or -- for a draw of a count rather than a shape -- one per example."""
    with leading_axis(size) as used:
        first = np.asarray(getter())
    if used[0]:
        return first
    return np.stack([first] + [np.asarray(getter()) for _ in range(size - 1)])


def _batched(func, struct, tensors, mapped, size, kwargs, randomness):
    """Trace one example, batch its graph, apply it: (outputs, their structure, which
    depend on the mapped arguments); None if a primitive on the way has no batching rule."""
    avals = [((tuple(t.shape[1:]) if m else tuple(t.shape)), t.dtype)
             for t, m in zip(tensors, mapped)]

    def one(*example):
        return func(*pytree.unflatten(struct, example), **kwargs)
    # an example of an argument mapped over another dim than the first has the layout of
    # the moved tensor without its batch dim (torch's physical view: view() must fit it)
    strides = [strides_of(t)[1:] if m else None for t, m in zip(tensors, mapped)]
    inputs, result, cap = trace_body(one, [pytree.LEAF] * len(tensors), [[av] for av in avals],
                                      [f"a{i}_" for i in range(len(avals))],
                                      lambda level, first: _Capture(level, first, size,
                                                                    randomness), strides)
    out_leaves, out_struct = pytree.flatten(result)
    body, closures = finish_body(inputs, [node_of(v, cap) for v in out_leaves], cap)
    if any(n.op == "custom_vjp" for n in body.nodes()):
        return None      # batching keeps a custom Function's value, not its backward
    level = L.next_level(body)
    # mapped: the mapped arguments, and the draws of randomness="different"
    mapped = list(mapped) + [id(t) in cap.mapped_draws for t in closures]
    stacked = {id(node): L.body_input(level, k, f"b{k}", (size,) + node.shape, node.dtype)
               for k, (node, m) in enumerate(zip(body.inputs, mapped)) if m}
    batched_outs = batch_graph(list(body.outputs), stacked, size)
    if batched_outs is None:
        return None
    env = {}
    for node, t in zip(body.inputs, list(tensors) + closures):
        env[id(stacked.get(id(node), node))] = t
    dep = _depends(body, mapped)
    return replay(batched_outs, env), out_struct, [dep[id(o)] for o in body.outputs]


def _depends(body, mapped) -> dict[int, bool]:
    """Which nodes of the body depend on a mapped argument."""
    dep = {id(node): m for node, m in zip(body.inputs, mapped)}
    for node in toposort(list(body.outputs)):
        if id(node) not in dep:
            dep[id(node)] = any(dep.get(id(a), False) for a in node.args)
    return dep


def _per_example(func, struct, tensors, mapped, size, kwargs, randomness):
    """Call ``func`` on each example and stack (for graphs without a batching rule).
    ``randomness="same"``: each example draws from the default generator's state as
    the first one found it."""
    results = []
    gen = default_generator()
    state = gen.state
    for b in range(size):
        if randomness == "same":
            gen.state = state
        example = [t[b] if m else t for t, m in zip(tensors, mapped)]
        leaves, out_struct = pytree.flatten(func(*pytree.unflatten(struct, example), **kwargs))
        results.append([v if isinstance(v, Tensor) else as_tensor(v) for v in leaves])
    n = len(results[0])
    outs = [stack([r[j] for r in results]) for j in range(n)]
    same = [all(_equal(results[0][j], r[j]) for r in results[1:]) for j in range(n)]
    return outs, out_struct, [not s for s in same]


def _equal(a: Tensor, b: Tensor) -> bool:
    if a._data is None or b._data is None:       # traced: cannot tell; treat as mapped
        return a is b
    return a._data.shape == b._data.shape and bool(np.array_equal(a._data, b._data,
                                                                    equal_nan=True))
