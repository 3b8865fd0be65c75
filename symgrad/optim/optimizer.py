"""``Optimizer``: parameter groups with per-group options, per-parameter state, state
dicts, ``zero_grad`` -- and the checks and error texts of ``torch.optim.Optimizer``.

Updates run on the parameters' numpy storage in place (as PyTorch's run under
``no_grad`` on the tensors' storage), bumping each parameter's version counter like any
in-place operation, so a graph that saved a parameter before the step notices.

Inside ``symgrad.compile`` the same update code runs on traced tensors
(:mod:`symgrad.optim.traced`): the parameters and the state become state of the compiled
call, the options a step reads as numbers (``lr``, ``betas``, ...) are fed per call (a
scheduler's change needs no recompile), and the options and state layout that decide
the step's control flow are guarded (a change traces again)."""
from __future__ import annotations

import functools
import math
import warnings
from collections import defaultdict
from copy import deepcopy
from typing import Any, Callable, Iterable

import numpy as np

from .. import dispatch
from ..autograd import grad_mode
from ..autograd.engine import zero_grads
from ..graph import dtypes
from ..tensor import Tensor
from .observed import (GroupDict, ObservedDict, ObservedList, ObservedState, changes, observe_groups,
                       observed)
from .observed import bump as _bump_changes
from .traced import TracedArray, as_array as _array

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()

_UNSUPPORTED = {"differentiable": "differentiable=True (autograd through the update)",
                "capturable": "capturable=True (CUDA graphs)"}


def _typename(x) -> str:
    return x.type() if isinstance(x, Tensor) else type(x).__name__


class Optimizer:
    """Base class: subclasses define ``step`` with the update of each group."""

    def __init_subclass__(cls, **kwargs):
        """Every subclass's ``step`` notes that it ran (``_opt_called``): a learning-rate
        schedule stepped first warns, as PyTorch's."""
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_notes_call", False):
            @functools.wraps(step)
            def noted(self, *args, **kw):
                self._opt_called = True
                if not dispatch.tracing():
                    return step(self, *args, **kw)
                self._traced_step()
                with grad_mode.no_grad():
                    return step(self, *args, **kw)
            noted._notes_call = True
            cls.step = noted

    def __init__(self, params: Iterable, defaults: dict[str, Any]):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {_typename(params)}")
        self.state: defaultdict = ObservedState()      # (containers counting their changes:
        self.param_groups: list[dict] = ObservedList()   # see _layout_now)
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict) -> None:
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        names = None
        if params and isinstance(params[0], tuple):
            names = [n for n, _ in params]
            params = [p for _, p in params]
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + _typename(p))
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = GroupDict(param_group)
        group["params"] = ObservedList(params)
        if names is not None:
            group["param_names"] = names
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        for key, what in _UNSUPPORTED.items():
            if group.get(key):
                raise ValueError(f"symgrad optimizers do not support {what}")
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see github.com/pytorch/pytorch/"
                          "issues/40967 for more information", stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if seen & {id(p) for p in params}:
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    # ---- the update ----------------------------------------------------------------------
    def step(self, closure: Callable | None = None):
        raise NotImplementedError

    # options whose value (_FLAGS), or whether they are nonzero (_NONZERO), decide which
    # update a step runs: guarded when the step is compiled. None (an optimizer defined
    # elsewhere, whose step may read any option as a Python number): every option.
    _FLAGS: tuple[str, ...] | None = None
    _NONZERO: tuple[str, ...] = ()

    def _traced_step(self) -> None:
        """A step inside symgrad.compile: guard what decides its control flow (the
        options above, the parameters, which state each has -- which tensors, since the
        program reads and writes those: a loaded state dict brings new ones -- and state
        held as Python numbers, which a compiled program cannot update)."""
        dispatch._lifter[0].guard(f"{type(self).__name__} options or state", self._layout_now,
                                  self._layout_now())

    def __setattr__(self, name: str, value) -> None:
        if name in ("param_groups", "state"):
            _bump_changes()            # (plain containers: the layout is then read in full)
        object.__setattr__(self, name, value)

    def _layout_now(self) -> tuple:
        """:meth:`_layout`, read again only when an observed container changed since
        (``param_groups`` and ``state`` count their changes, see
        :mod:`symgrad.optim.observed`) -- O(groups) per compiled call instead of
        O(parameters + state entries). The same tuple comes back while nothing changed.
        Kept only when everything the layout holds and every option is immutable
        (numbers, strings, tuples of them): a list or tensor option changed in place
        would not be counted."""
        now = changes()
        memo = self.__dict__.get("_layout_memo")
        if memo is not None and memo[0] == now and observed(self.param_groups, self.state):
            return memo[1]
        layout = self._layout()
        options = tuple(v for g in self.param_groups for k, v in g.items() if k != "params")
        if observed(self.param_groups, self.state) and _immutable((layout, options)):
            self.__dict__["_layout_memo"] = (now, layout)
        else:
            self.__dict__.pop("_layout_memo", None)
        return layout

    def _layout(self) -> tuple:
        state, flags = self.state, self._FLAGS
        return tuple((tuple(g.get(k) for k in flags) if flags is not None else
                      tuple((k, repr(v)) for k, v in g.items() if k != "params"),
                      tuple(g.get(k) != 0 for k in self._NONZERO),
                      tuple(id(p) for p in g["params"]),
                      tuple(tuple((k, v if not isinstance(v, Tensor) else id(v))
                                  for k, v in state[p].items()) if p in state else ()
                            for p in g["params"]))
                     for g in self.param_groups)

    def _options(self, group: dict, *names: str):
        """The numeric options of ``group`` a step computes with: Python numbers, or
        inside symgrad.compile inputs of the program read at each call (a tuple option,
        ``betas``, gives a tuple)."""
        if not dispatch.tracing():
            return tuple(group[n] for n in names)
        i = next(k for k, g in enumerate(self.param_groups) if g is group)
        tracer = dispatch._lifter[0]

        def runtime(name, j=None):
            if j is None:
                get = lambda: self.param_groups[i][name]         # noqa: E731
            else:
                get = lambda: self.param_groups[i][name][j]      # noqa: E731
            get.draws = False      # (a number read per call: no random draw)
            label = f"{name}{'' if j is None else j}_group{i}"
            return TracedArray(tracer.runtime_value(get, dtypes.float64, label))
        return tuple(tuple(runtime(n, j) for j in range(len(group[n])))
                     if isinstance(group[n], tuple) else runtime(n) for n in names)

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with grad_mode.enable_grad():
            return closure()

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    # ---- state dicts ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: state}, "param_groups": [options + parameter indices]}``."""
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(p)]: dict(v) for p, v in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        # as PyTorch: the groups are copied, state tensors are taken as they are (cast
        # to the parameter's dtype if they differ) -- the state shares them
        groups, saved = self.param_groups, deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = {old: p for g, s in zip(groups, saved) for old, p in zip(s["params"], g["params"])}
        self.state = ObservedState()
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                self.state[p] = ObservedDict({name: _cast_state(val, p, name)
                                              for name, val in v.items()})
        new_groups = []
        for g, s in zip(groups, saved):
            s = dict(s)
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            new_groups.append(s)
        self.param_groups = observe_groups(new_groups)

    def __getstate__(self):        # (plain containers: see symgrad.optim.observed)
        return {"defaults": self.defaults,
                "state": defaultdict(dict, {p: dict(v) for p, v in self.state.items()}),
                "param_groups": [{k: (list(v) if k == "params" else v) for k, v in g.items()}
                                 for g in self.param_groups]}

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self.__dict__["param_groups"] = observe_groups(self.param_groups)
        self.__dict__["state"] = ObservedState((p, ObservedDict(v)) for p, v in self.state.items())

    def __repr__(self) -> str:
        out = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += "\n" + f"Parameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    out += f"    {key}: {group[key]}\n"
        return out + ")"

    # ---- helpers for subclasses ----------------------------------------------------------
    def _updates(self, group: dict):
        """(parameter, its storage, its gradient -- negated when the group maximizes) for
        each parameter of ``group`` that has a gradient: what every update reads."""
        for p in group["params"]:
            if p.grad is None:
                continue
            g = _array(p.grad)
            yield p, _array(p), (-g if group.get("maximize") else g)

    def _state(self, p: Tensor) -> dict:
        return self.state[p]

    def _scratch(self, p: Tensor, like: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Two work arrays shaped like ``p``, kept between steps (not state: a state dict
        holds what PyTorch's holds), so an update allocates nothing."""
        if isinstance(like, TracedArray):
            return TracedArray(None), TracedArray(None)
        bufs = self.__dict__.setdefault("_work", {})
        pair = bufs.get(id(p))
        if pair is None or pair[0].shape != like.shape or pair[0].dtype != like.dtype:
            pair = bufs[id(p)] = (np.empty_like(like), np.empty_like(like))
        return pair


def _cast_state(value, p: Tensor, key):
    """A loaded state value as PyTorch's ``load_state_dict`` takes it: a tensor itself
    (``step`` always; else cast to the parameter's floating dtype when it differs),
    containers rebuilt around their cast items, anything else as it is."""
    if isinstance(value, Tensor):
        if key != "step" and value.is_floating_point() and value.dtype != p.dtype:
            return value.to(p.dtype)
        return value
    if isinstance(value, dict):
        return {k: _cast_state(v, p, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(v, p, key) for v in value)
    return value


def _bump(t: Tensor) -> None:
    if not dispatch.tracing():            # (a compiled call bumps what it writes)
        t._vc[0] += 1


def _state_tensor(arr: np.ndarray) -> Tensor:
    """A new state tensor; inside symgrad.compile, state of the compiled call."""
    t = Tensor._from_array(arr)
    if dispatch.tracing():
        dispatch._lifter[0].adopt(t)
    return t


def _new(like, value=None) -> Tensor:
    """A state tensor shaped like ``like`` (an array, or a TracedArray), zeros or
    ``value``."""
    if isinstance(like, TracedArray):
        like = np.empty(like.shape, like.dtype.np)
    arr = np.zeros_like(like) if value is None else np.full_like(like, value)
    return _state_tensor(arr)


def _step_tensor(value: float) -> Tensor:
    """The ``step`` entry of a state, a 0-d float32 tensor as PyTorch keeps it."""
    return _state_tensor(np.array(value, dtype=np.float32))


def _count(step):
    """A step count (the storage of a ``step`` tensor) as the float64 number a bias
    correction is computed with."""
    if isinstance(step, TracedArray):
        return TracedArray(step.t.to(dtypes.float64))
    return float(step)


def _sqrt(v):
    """math.sqrt of a Python number, or of a traced one."""
    return np.sqrt(v) if isinstance(v, TracedArray) else math.sqrt(v)


_IMMUTABLE = (int, float, bool, complex, str, bytes, type(None))


def _immutable(value) -> bool:
    """Whether ``value`` (a layout: nested tuples) holds only immutable values."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is tuple:
            stack.extend(v)
        elif not isinstance(v, _IMMUTABLE):
            return False
    return True
