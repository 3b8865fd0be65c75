"""``nn.Module``: parameters, buffers and submodules registered by attribute assignment,
their traversal, state dicts, train / eval, hooks and PyTorch's repr."""
from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator

from ... import dispatch
from ...autograd import grad_mode
from ...device import check_device
from ...functions.methods import to_target
from ...tensor import Tensor
from ..parameter import Buffer, Parameter
from ...autograd.engine import zero_grads
from ...tracing import python_effect
from ...compiler.sources import registration_changed, registration_version
from .registration import TABLES, RegistrationTable
from .module_hooks import (ModuleExtras, finish_backward_hooks, has_backward_hooks,
                           run_load_pre_hooks, setup_backward_hooks)
from ...utils.hooks import RemovableHandle

__all__ = ["Module"]

_ABSENT = object()


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _assigned_while_traced(module, name: str, value) -> None:
    """``module.name = value`` inside a trace: a change of Python state a compiled program
    would not make again (a counter, a tensor rebound to a traced value: d2l's
    ``self.moving_mean = ...``), so a compile trace stops and the call runs uncompiled.
    Assigning what is already there (``model.train()`` in train mode) changes nothing."""
    d = module.__dict__
    old = _ABSENT
    for table in ("_parameters", "_buffers", "_modules"):
        if name in d.get(table, ()):
            old = d[table][name]
            break
    else:
        old = d.get(name, _ABSENT)
    if old is value:
        return
    if not isinstance(value, Tensor) and type(old) is type(value):
        try:
            if bool(old == value):
                return
        except Exception:
            pass
    what = ("rebound to a traced tensor" if isinstance(value, Tensor) and value._data is None
            else "assigned")
    python_effect(f"{type(module).__name__}.{name} {what}")


class Module(ModuleExtras):
    """Base class of every layer and model, as PyTorch's ``torch.nn.Module``.

    >>> import symgrad as torch
    >>> class Net(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = torch.nn.Linear(2, 1)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> net = Net(); net
    Net(
      (fc): Linear(in_features=2, out_features=1, bias=True)
    )
    >>> [name for name, _ in net.named_parameters()]
    ['fc.weight', 'fc.bias']
    """

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but "
                            f"{len(args) + 1} were given" if args else
                            f"{type(self).__name__}.__init__() got an unexpected keyword "
                            f"argument '{next(iter(kwargs))}'")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = RegistrationTable()    # (each write reports itself to compiled
        d["_buffers"] = RegistrationTable()       # functions' guards)
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = RegistrationTable()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_pre_hooks_with_kwargs"] = set()

    # ---- forward -------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call_impl")      # (Module.compile)
        if compiled is not None:
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        guard = getattr(dispatch._lifter[0], "guard", None)
        if guard is not None:    # symgrad.compile: a compiled call is for this mode only
            guard(f"{type(self).__name__}.training", lambda: self.training, self.training,
                  registration_version)     # (training is assigned through __setattr__)
        pre, post = self.__dict__.get("_forward_pre_hooks"), self.__dict__.get("_forward_hooks")
        backward = has_backward_hooks(self)
        if not pre and not post and not backward:
            return self.forward(*args, **kwargs)
        if guard is not None:    # (torch.compile runs hooks at every call: uncompiled here)
            python_effect(f"a forward {'pre-' if pre else ''}hook of {type(self).__name__}")
        for hid, hook in list(pre.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        bw, fargs = setup_backward_hooks(self, args) if backward else (None, args)
        out = self.forward(*fargs, **kwargs)
        for hid, hook in list(post.items()):
            res = (hook(self, args, kwargs, out) if hid in self._forward_hooks_with_kwargs
                   else hook(self, args, out))
            if res is not None:
                out = res
        return finish_backward_hooks(self, bw, fargs, out) if backward else out

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` (or ``hook(module, args, kwargs)``) before forward; a
        non-None result replaces the arguments."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` after forward; a non-None result replaces the
        output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    # ---- registration --------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if dispatch._lifter[0] is not None:
            _assigned_while_traced(self, name, value)
        try:
            self._assign_attribute(name, value)
        finally:        # after the write (compiled functions re-read the paths to tensors)
            registration_changed()

    def _assign_attribute(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, "_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        if isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, "_modules")
            d["_modules"][name] = value
            return
        modules = d.get("_modules")
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            modules[name] = value
            return
        if isinstance(value, Buffer):
            if d.get("_buffers") is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._forget(name, "_buffers")
            self.register_buffer(name, value, persistent=value.persistent)
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(torch.nn.Buffer, torch.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str) -> None:
        """Drop `name` from the instance and from every table but `keep` (assigning to an
        existing entry keeps its place in the order, as PyTorch's ``remove_from``)."""
        d = self.__dict__
        d.pop(name, None)
        for key in TABLES:
            if key != keep:
                d[key].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for key in TABLES:
            table = d.get(key)
            if table is not None:
                value = table.get(name, _ABSENT)     # (one C call: as fast as a plain dict)
                if value is not _ABSENT:
                    return value
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for key in TABLES:
            if name in self.__dict__[key]:
                del self.__dict__[key][name]
                self.__dict__["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)
        registration_changed()

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(name, "parameter", self)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as "
                             "a function of another Tensor, compute the value in the forward() "
                             "method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(name, "buffer", self)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            tensor = Tensor._from_array(tensor._data, tensor._dtype)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        _check_name(name, "module", self, allow_dot_error="module name can't contain \".\", "
                    f"got: {name}")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return p

    # ---- traversal -----------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, get, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for mod_prefix, mod in modules:
            for name, value in get(mod):
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                   remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                   remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes and bulk changes ----------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> "Module":
        """Replace every parameter's and buffer's value by ``fn(value)`` in place (the
        Parameter objects stay, so optimizers holding them keep working)."""
        for m in (self.children() if recurse else ()):
            m._apply(fn)
        for name, p in self._parameters.items():
            if p is None:
                continue
            with grad_mode.no_grad():
                new = fn(p)
            if new is not p:
                p.data = new
                if p.grad is not None:
                    with grad_mode.no_grad():
                        p.grad.data = fn(p.grad)
        for name, b in self._buffers.items():
            if b is not None:
                self._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs) -> "Module":
        dt = to_target(args, kwargs)
        if dt is None:
            return self
        if not dt.is_floating_point:
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dt}")
        return self._apply(lambda t: t.to(dt) if t.is_floating_point() else t)

    def cpu(self) -> "Module":
        return self

    def cuda(self, device=None) -> "Module":
        check_device("cuda")
        return self

    def type(self, dst_type) -> "Module":
        return self._apply(lambda t: t.type(dst_type))

    def float(self) -> "Module":
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self) -> "Module":
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self) -> "Module":
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    # ---- state dicts ---------------------------------------------------------------------
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state("get_extra_state"):
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        if args:
            destination = args[0] if len(args) > 0 else destination
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        for hook in self.__dict__.get("_state_dict_pre_hooks", {}).values():
            hook(self, prefix, keep_vars)
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):        # each module's version, as PyTorch's
            destination._metadata[prefix[:-1]] = local_metadata
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self.__dict__.get("_state_dict_hooks", {}).values():
            result = hook(self, destination, prefix, local_metadata)
            if result is not None:
                destination = result
        return destination

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy ``state_dict``'s tensors into this module's parameters and buffers
        (checked first: on any error nothing is modified)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        state_dict = self._upgraded(state_dict)
        hooked_missing, hooked_unexpected, errors = [], [], []
        state_dict = run_load_pre_hooks(self, state_dict, strict, hooked_missing,
                                        hooked_unexpected, errors)
        own = self.state_dict(keep_vars=True)
        extra = {name + "." + "_extra_state" if name else "_extra_state": m
                 for name, m in self.named_modules() if m._has_extra_state("set_extra_state")}
        for key in extra:
            own.pop(key, None)
        missing = [k for k in own if k not in state_dict] + [k for k in extra
                                                             if k not in state_dict]
        missing += [k for k in hooked_missing if k not in missing]
        unexpected = [k for k in state_dict if k not in own and k not in extra]
        unexpected += [k for k in hooked_unexpected if k not in unexpected]
        post_hooks = [(m, hook) for _, m in self.named_modules()
                      for hook in m.__dict__.get("_load_state_dict_post_hooks", {}).values()]
        plan = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected '
                              f"torch.Tensor or Tensor-like object from checkpoint but received "
                              f"{type(value)}")
                continue
            if tuple(value.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{value.shape} from checkpoint, the shape in current model is "
                              f"{target.shape}.")
                continue
            plan.append((key, target, value))
        if post_hooks and not errors:    # (PyTorch: loaded, then its hooks, then strict's
            self._load_planned(plan, extra, state_dict, assign)          # key errors)
            keys = _IncompatibleKeys(missing, unexpected)
            for m, hook in post_hooks:
                if hook(m, keys) is not None:
                    raise AssertionError("Hooks registered with "
                                         "``register_load_state_dict_post_hook`` are not "
                                         "expected to return new values, if incompatible_keys "
                                         "need to be modified, it should be done inplace.")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t"
                               + "\n\t".join(errors))
        if not post_hooks:
            self._load_planned(plan, extra, state_dict, assign)
        return _IncompatibleKeys(missing, unexpected)

    def _load_planned(self, plan, extra, state_dict, assign: bool) -> None:
        """Copy (or assign) the checked tensors of a state dict, and set extra states."""
        with grad_mode.no_grad():
            for key, target, value in plan:
                if assign:
                    self._assign(key, value)
                else:
                    target.copy_(value)
        for key, m in extra.items():
            if key in state_dict:
                m.set_extra_state(state_dict[key])

    def _upgraded(self, state_dict):
        """A copy of ``state_dict`` in which modules that changed their state between
        versions (a ``_upgrade_state_dict(state, prefix, version)`` method) filled in what
        older versions lacked; the versions come from the state dict's ``_metadata``."""
        hooked = [(name, m) for name, m in self.named_modules()
                  if hasattr(m, "_upgrade_state_dict")]
        if not hooked:
            return state_dict
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        for name, m in hooked:
            version = (metadata or {}).get(name, {}).get("version")
            m._upgrade_state_dict(state_dict, name + "." if name else "", version)
        return state_dict

    def _assign(self, key: str, value: Tensor) -> None:
        path, _, name = key.rpartition(".")
        mod = self.get_submodule(path)
        if name in mod._parameters:
            mod._parameters[name] = (value if isinstance(value, Parameter)
                                     else Parameter(value, mod._parameters[name].requires_grad))
        else:
            mod._buffers[name] = value

    # ---- printing ------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, module in self._modules.items():
            lines.append("(" + name + "): " + _addindent(repr(module), 2))
        head = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                return head + lines[0] + ")"
            return head + "\n  " + "\n  ".join(lines) + "\n)"
        return head + ")"

    # ---- copying and pickling ------------------------------------------------------------
    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        d = self.__dict__
        for key in TABLES:          # (a pickle made before the tables were RegistrationTables)
            if isinstance(d.get(key), dict) and not isinstance(d[key], RegistrationTable):
                d[key] = RegistrationTable(d[key])
        registration_changed()


def _typename(value) -> str:
    """PyTorch's ``torch.typename``: a tensor by its legacy type name."""
    if isinstance(value, Tensor):
        return value.type()
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ not in ("builtins",) else t.__name__


def _check_name(name: str, what: str, module: Module, allow_dot_error: str | None = None) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(allow_dot_error or f'{what} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{what} name can\'t be empty string ""')
    tables = {"parameter": "_parameters", "buffer": "_buffers", "module": "_modules"}
    if hasattr(module, name) and name not in module.__dict__[tables[what]]:
        if what == "module":
            raise KeyError(f"attribute '{name}' already exists")
        raise KeyError(f"attribute '{name}' already exists")

