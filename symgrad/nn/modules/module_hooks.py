"""What ``nn.Module`` adds beyond registration and traversal (mixed into
:class:`~symgrad.nn.modules.module.Module`): backward hooks -- full (``hook(module,
grad_input, grad_output)``), pre (``hook(module, grad_output)``) and the deprecated
per-node ones of ``register_backward_hook`` with PyTorch's warnings --, state-dict hooks,
extra state, ``get_buffer``, ``to_empty`` and ``Module.compile``.

Full backward hooks work as PyTorch's ``BackwardHook``: the tensors a module receives and
the tensors it returns pass through an identity ``BackwardHookFunction``; a pre-hook on
the outputs' node sees (and may replace) ``grad_output``, a hook on the inputs' node sees
``grad_input`` and the remembered ``grad_output`` (and may replace ``grad_input``).
Inside ``symgrad.compile`` a module with backward hooks runs uncompiled (the hooks are
Python run at each backward)."""
from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Callable

from ... import dispatch
from ...autograd import grad_mode
from ...autograd.custom_function import Function
from ...functions.creation import empty_like
from ...tensor import Tensor
from ...tracing import python_effect
from ...utils.hooks import RemovableHandle

__all__ = ["ModuleExtras", "BackwardHookFunction", "has_backward_hooks", "setup_backward_hooks",
           "finish_backward_hooks", "run_load_pre_hooks"]

_MIXED = ("Cannot use both regular backward hooks and full backward hooks on a single Module. "
          "Please use only one of them.")


class BackwardHookFunction(Function):
    """The identity, as a node on which a module's backward hooks are registered."""

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return tuple(a.view_as(a) for a in args)

    @staticmethod
    def backward(ctx, *grads):
        return grads


def _pack_with_none(indices, values, size) -> tuple:
    res = [None] * size
    for i, v in zip(indices, values):
        res[i] = v
    return tuple(res)


class _BackwardHook:
    """One call's hooks (PyTorch's ``torch.utils.hooks.BackwardHook``)."""

    def __init__(self, module, user_hooks, pre_hooks) -> None:
        self.module, self.user_hooks, self.pre_hooks = module, user_hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs, self.input_index = 0, None
        self.n_outputs, self.output_index = 0, None

    @staticmethod
    def _wrap(args, on_node):
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not (grad_mode.is_grad_enabled() and any(args[i].requires_grad for i in index)):
            return args, None
        wrapped = BackwardHookFunction.apply(*[args[i] for i in index])
        if not isinstance(wrapped, tuple):
            wrapped = (wrapped,)
        node = next(w.grad_fn for w in wrapped if w.grad_fn is not None)
        on_node(node)
        out = list(args)
        for i, w in zip(index, wrapped):
            out[i] = w
        return tuple(out), index

    def setup_input_hook(self, args: tuple) -> tuple:
        def on_node(node):
            def hook(grad_input, _):
                if self.grad_outputs is None:
                    return None
                res = _pack_with_none(self.input_index, grad_input, self.n_inputs)
                for user_hook in self.user_hooks:
                    out = user_hook(self.module, res, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(res):
                        raise RuntimeError(f"Backward hook returned an invalid number of "
                                           f"grad_input, got {len(out)}, but expected "
                                           f"{len(res)}")
                    res = out
                self.grad_outputs = None
                return tuple(res[i] for i in self.input_index)
            node.register_hook(hook)
        res, self.input_index = self._wrap(args, on_node)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result):
        def on_node(node):
            def hook(grad_output):
                self.grad_outputs = _pack_with_none(self.output_index, grad_output,
                                                    self.n_outputs)
                for pre in self.pre_hooks:
                    out = pre(self.module, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(self.grad_outputs):
                        raise RuntimeError(f"Backward pre hook returned an invalid number of "
                                           f"grad_output, got {len(out)}, but expected "
                                           f"{len(self.grad_outputs)}")
                    self.grad_outputs = out
                if self.input_index is None:
                    grad_inputs = _pack_with_none([], [], self.n_inputs)
                    for user_hook in self.user_hooks:
                        res = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if res is not None and not (isinstance(res, tuple) and
                                                    all(r is None for r in res)):
                            raise RuntimeError("Backward hook for Modules where no input "
                                               "requires gradient should always return None "
                                               "or None for all gradients.")
                    self.grad_outputs = None
                if self.grad_outputs is not None:
                    return tuple(self.grad_outputs[i] for i in self.output_index)
                return None
            node.register_prehook(hook)
        single = not isinstance(result, tuple)
        outs = (result,) if single else result
        outs, self.output_index = self._wrap(outs, on_node)
        self.n_outputs = len(outs)
        return outs[0] if single else outs


def has_backward_hooks(module) -> bool:
    d = module.__dict__
    return bool(d.get("_backward_hooks") or d.get("_backward_pre_hooks"))


def setup_backward_hooks(module, args: tuple):
    """(the call's hook state, the arguments to call forward with) -- before forward."""
    if dispatch.tracing():
        python_effect(f"a backward hook of {type(module).__name__}")
    d = module.__dict__
    full = list(d.get("_backward_hooks", {}).values()) if d.get("_is_full_backward_hook") else []
    pre = list(d.get("_backward_pre_hooks", {}).values())
    if not (full or pre):
        return None, args
    bw = _BackwardHook(module, full, pre)
    return bw, bw.setup_input_hook(args)


def finish_backward_hooks(module, bw, args: tuple, result):
    """The result of forward (after the forward hooks) with the backward hooks set up."""
    if bw is not None:
        result = bw.setup_output_hook(result)
    d = module.__dict__
    legacy = [] if d.get("_is_full_backward_hook") else list(d.get("_backward_hooks", {}).values())
    if legacy:
        var = result
        while not isinstance(var, Tensor):
            var = next(v for v in var.values() if isinstance(v, Tensor)) \
                if isinstance(var, dict) else var[0]
        node = var.grad_fn
        if node is not None:
            for hook in legacy:
                node.register_hook(lambda gi, go, hook=hook: hook(module, gi, go))
            _maybe_warn_non_full_backward_hook(args, result, node)
    return result


def _maybe_warn_non_full_backward_hook(inputs, result, grad_fn) -> None:
    """PyTorch's FutureWarnings where a per-node hook misses gradients."""
    if not isinstance(result, Tensor):
        if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
            warnings.warn("Using non-full backward hooks on a Module that does not return a "
                          "single Tensor or a tuple of Tensors is deprecated and will be removed "
                          "in future versions. This hook will be missing some of the "
                          "grad_output. Please use register_full_backward_hook to get the "
                          "documented behavior.", FutureWarning, stacklevel=3)
            return
    else:
        result = (result,)
    if not isinstance(inputs, Tensor):
        if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
            warnings.warn("Using non-full backward hooks on a Module that does not take as input "
                          "a single Tensor or a tuple of Tensors is deprecated and will be "
                          "removed in future versions. This hook will be missing some of the "
                          "grad_input. Please use register_full_backward_hook to get the "
                          "documented behavior.", FutureWarning, stacklevel=3)
            return
    else:
        inputs = (inputs,)
    out_fns = {r.grad_fn for r in result if r.grad_fn is not None}
    if not out_fns or (len(out_fns) == 1 and grad_fn not in out_fns):
        warnings.warn("Using a non-full backward hook when outputs are nested in python data "
                      "structure is deprecated and will be removed in future versions. This "
                      "hook will be missing some grad_output.", FutureWarning, stacklevel=3)
    elif len(out_fns) > 1:
        warnings.warn("Using a non-full backward hook when outputs are generated by different "
                      "autograd Nodes is deprecated and will be removed in future versions. "
                      "This hook will be missing some grad_output. Please use "
                      "register_full_backward_hook to get the documented behavior.",
                      FutureWarning, stacklevel=3)
    else:
        in_fns = {i.grad_fn for i in inputs if i.grad_fn is not None}
        nexts = {n[0] for n in grad_fn.next_functions}
        if in_fns != nexts:
            warnings.warn("Using a non-full backward hook when the forward contains multiple "
                          "autograd Nodes is deprecated and will be removed in future versions. "
                          "This hook will be missing some grad_input. Please use "
                          "register_full_backward_hook to get the documented behavior.",
                          FutureWarning, stacklevel=3)


def run_load_pre_hooks(root, state_dict, strict: bool, missing: list, unexpected: list,
                       errors: list):
    """Run the load-state-dict pre-hooks of ``root``'s modules (a class's own
    ``_own_load_pre_hook`` first -- PyTorch's ``_load_from_state_dict`` overrides --, then the
    registered ones; each
    ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
    unexpected_keys, error_msgs)``, which may edit a copy of ``state_dict`` in place);
    the state dict to load."""
    hooked = [(name, m, ([lambda _, *a, m=m: m._own_load_pre_hook(*a)]
                         if hasattr(m, "_own_load_pre_hook") else [])
               + list(m.__dict__.get("_load_state_dict_pre_hooks", {}).values()))
              for name, m in root.named_modules()
              if m.__dict__.get("_load_state_dict_pre_hooks") or hasattr(m, "_own_load_pre_hook")]
    if not hooked:
        return state_dict
    metadata = getattr(state_dict, "_metadata", None)
    state_dict = OrderedDict(state_dict)
    if metadata is not None:
        state_dict._metadata = metadata
    for name, m, hooks in hooked:
        local = (metadata or {}).get(name, {})
        prefix = name + "." if name else ""
        for hook in hooks:
            hook(m, state_dict, prefix, local, strict, missing, unexpected, errors)
    return state_dict


def _hook_dict(module, name: str) -> OrderedDict:
    d = module.__dict__
    if name not in d:
        d[name] = OrderedDict()
    return d[name]


def _add(hooks: OrderedDict, hook, prepend: bool = False) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


class ModuleExtras:
    """The methods of ``nn.Module`` this file owns (see the module docstring)."""

    # ---- backward hooks ------------------------------------------------------------------
    def register_full_backward_hook(self, hook: Callable, prepend: bool = False
                                    ) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` once the gradients with respect to the
        module's inputs are computed; a non-None result replaces ``grad_input``."""
        if self.__dict__.get("_is_full_backward_hook") is False:
            raise RuntimeError(_MIXED)
        self.__dict__["_is_full_backward_hook"] = True
        return _add(_hook_dict(self, "_backward_hooks"), hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False
                                        ) -> RemovableHandle:
        """``hook(module, grad_output)`` when the gradients with respect to the module's
        outputs are known; a non-None result replaces ``grad_output``."""
        return _add(_hook_dict(self, "_backward_pre_hooks"), hook, prepend)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """Deprecated: ``hook(module, grad_input, grad_output)`` on the node that made the
        module's (first) output -- its inputs' and outputs' gradients."""
        if self.__dict__.get("_is_full_backward_hook") is True:
            raise RuntimeError(_MIXED)
        self.__dict__["_is_full_backward_hook"] = False
        return _add(_hook_dict(self, "_backward_hooks"), hook)

    # ---- state-dict hooks and extra state ---------------------------------------------------
    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, prefix, keep_vars)`` before ``state_dict`` saves the module."""
        return _add(_hook_dict(self, "_state_dict_pre_hooks"), hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` after ``state_dict`` saved
        the module (and its children)."""
        return _add(_hook_dict(self, "_state_dict_hooks"), hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before ``load_state_dict`` reads the module's
        entries; it may rename or add entries of the (copied) ``state_dict``."""
        return _add(_hook_dict(self, "_load_state_dict_pre_hooks"), hook)

    def _register_load_state_dict_pre_hook(self, hook: Callable, with_module: bool = False
                                           ) -> RemovableHandle:
        """PyTorch's private form: ``hook`` without the module unless ``with_module``."""
        return self.register_load_state_dict_pre_hook(
            hook if with_module else (lambda module, *args: hook(*args)))

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, incompatible_keys)`` after ``load_state_dict``; it may remove keys
        from ``incompatible_keys.missing_keys`` / ``unexpected_keys`` before ``strict``
        checks them."""
        return _add(_hook_dict(self, "_load_state_dict_post_hooks"), hook)

    def get_extra_state(self):
        """The module's extra (non-tensor) state for ``state_dict`` -- only when a subclass
        defines it (with :meth:`set_extra_state`)."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never "
                           "be called. Please file an issue at https://github.com/pytorch/"
                           "pytorch/issues/new?template=bug-report.yml to report this bug.")

    def set_extra_state(self, state) -> None:
        """Restore what :meth:`get_extra_state` returned."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never "
                           "be called. Please file an issue at https://github.com/pytorch/"
                           "pytorch/issues/new?template=bug-report.yml to report this bug.")

    def _has_extra_state(self, what: str) -> bool:
        return getattr(type(self), what) is not getattr(ModuleExtras, what)

    # ---- lookups, storage, compiling ---------------------------------------------------------
    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        buffer = getattr(mod, name)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return buffer

    def to_empty(self, *, device=None, recurse: bool = True):
        """Parameters and buffers replaced by uninitialised tensors of their shapes and
        dtypes (on ``device``)."""
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's calls with ``symgrad.compile(..., *args, **kwargs)``; the
        module itself (its state dict, its hooks' registrations) is unchanged."""
        from ...torch_compile import compile as compile_fn   # late: it imports nn itself
        self.__dict__["_compiled_call_impl"] = compile_fn(self._call_impl, *args, **kwargs)
