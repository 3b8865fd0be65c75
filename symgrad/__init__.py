"""symgrad: a symbolic-to-numeric autograd compiler with PyTorch's eager API.

``import symgrad as torch`` runs PyTorch autograd tutorials unchanged; underneath,
operations are primitives whose gradients are symbolic (see ``symgrad.graph``) and which
``symgrad.compile`` lowers to native code.

>>> import symgrad as torch
>>> x = torch.ones(2, 2, requires_grad=True)
>>> y = x + 2
>>> y.grad_fn.name()
'AddBackward0'
"""
from __future__ import annotations

import typing as _typing

import numpy as _np

from .version import __version__
from . import memory as _memory
_memory.tune()
from .graph import dtypes as _dtypes
from .graph.dtypes import (DType as dtype, bool_ as bool, float16, float32, float64, int8, int16,
                     int32, int64, uint8, get_default_dtype, set_default_dtype)
from .tensor import Size, Tensor
from .device import check_device as _check_device, cuda, device
from .ops import (conversion as _conversion, formulas as _formulas, indexing as _indexing,  # noqa: F401
                  layout as _layout, linalg as _linalg, loops as _loops, order as _order,
                  bitwise as _bitwise, decompositions as _decompositions,
                  reductions as _reductions)  # registration
from .graph.primitives import elementwise
from .dispatch import bind as apply
from .functions import methods as _methods
from .functions.creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full,
                                 full_like, linspace, logspace, ones, ones_like, scalar_tensor, tensor,
                                 zeros, zeros_like)
from .functions.random import (Generator, bernoulli, manual_seed, multinomial, normal, rand,
                               rand_like, randint, randint_like, randn, randn_like, randperm,
                               seed)
from .functions.random import get_rng_state, initial_seed, set_rng_state
from . import backends
from .flags import (are_deterministic_algorithms_enabled, get_deterministic_debug_mode,
                    get_float32_matmul_precision, is_deterministic_algorithms_warn_only_enabled,
                    set_deterministic_debug_mode, set_float32_matmul_precision,
                    use_deterministic_algorithms)
from .functions.legacy import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,
                               HalfTensor, IntTensor, LongTensor, ShortTensor)
from .functions.elementwise import clamp, where
from .functions.reduction import (all, amax, amin, any, argmax, argmin, logsumexp, max,
                                  mean, min, norm, prod, return_types, sum)
from .functions.control_flow import fori_loop, scan, while_loop
from .functions.branching import cond
from .functions.selection import (argsort, chunk, gather, index_select, masked_fill, narrow,
                                  masked_select, sort, split, square, topk, tril, triu,
                                  unbind)
from .functions.statistics import (aminmax, cummax, cummin, cumprod, cumsum, logcumsumexp,
                                   nanmean, nansum, std, std_mean, var, var_mean)
from .functions.search import (argwhere, bincount, bucketize, count_nonzero, nonzero, searchsorted,
                               tril_indices, triu_indices, unique, unique_consecutive)
from .functions.order import kthvalue, median, mode, nanmedian, nanquantile, quantile
from .functions.finite import (isclose, isfinite, isinf, isneginf, isposinf, nan_to_num,
                               nan_to_num_, roll)
from .functions.predicates import logical_xor, signbit
from .functions.linalg import bmm, dot, matmul, mm, mv, outer
from .functions.matrix import diag, diag_embed, diagonal, trace
from .functions.einsum import einsum
from .functions.repeat import repeat_interleave, tile
from .functions.scatter import index_add, scatter, scatter_add, scatter_reduce
from .functions.indexed import index_copy, index_fill, index_put, take, take_along_dim
from .functions.solvers import _torch_slogdet as slogdet, det, inverse, logdet
from .functions.solvers import _torch_cholesky as cholesky, _torch_svd as svd
from .functions.factorizations import matrix_power, pinverse, triangular_solve
from .functions.arithmetic import (addcdiv, addcmul, addmm, copysign, deg2rad, exp2,
                                   float_power, fmax, fmin, hypot, lerp, log2, log10, logaddexp,
                                   logaddexp2, logit, positive, rad2deg, sinc, xlogy)
from .functions.combine import (atleast_1d, atleast_2d, atleast_3d, block_diag, cartesian_prod,
                                cdist, column_stack, cross,
                                diff, dstack, hstack, kron, rot90, row_stack, tensor_split,
                                tensordot, vstack)
from .functions.compat import (absolute, broadcast_tensors, broadcast_to, clamp_max, clamp_min,
                               clip, concat, concatenate, divide, greater, greater_equal, less,
                               less_equal, meshgrid, moveaxis, multiply, negative, not_equal,
                               ravel, subtract, swapaxes, swapdims)
from . import linalg
from .functions.shape import (cat, clone, flatten, flip, fliplr, flipud, movedim, permute,
                              reshape, squeeze, stack, t, transpose, unsqueeze)
from .functions import elementwise as _E
from .autograd import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                       set_grad_enabled)
from .autograd.grad_mode import is_inference_mode_enabled
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled
from .printing import set_printoptions, get_printoptions
from .parallelism import (get_num_interop_threads, get_num_threads, set_num_interop_threads,
                          set_num_threads)
from . import autograd
from .ops import fused as _fused  # registers the `fused` primitive
from .compiler import (grad, value_and_grad, jacobian, hessian, jit, jvp, vjp, vmap)
from . import _dynamo  # noqa: F401  (torch._dynamo.reset)
from .torch_compile import compile

if _typing.TYPE_CHECKING:   # annotations only (``bool``, ``int``, ``float`` are dtypes here)
    from collections.abc import Callable
    import os
    from typing import IO, Any
    from .exporting import Exported
    from .types import DeviceLike, DTypeLike, TensorOrScalar, _bool, _float, _int

float = float32
double = float64
half = float16
long = int64
int = int32
short = int16

_methods.install()
autograd._export_api()



def _unary_fn(name: str) -> Callable[[Tensor], Tensor]:
    def fn(input: Tensor) -> Tensor:
        return _E.unary(name, input)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (see ``symgrad.ops.formulas`` for its formula)."
    return fn


for _n in _E.UNARY_NAMES:
    globals()[_n] = _unary_fn(_n)


def round(input: Tensor, *, decimals: _int | None = None) -> Tensor:  # noqa: A001
    """Rounded half to even; ``decimals``: to that many decimal places (see
    ``symgrad.functions.rounding.round``)."""
    if decimals is None:
        return _E.unary("round", input)
    return _rounding.round(input, decimals=decimals)


from .functions import rounding as _rounding  # noqa: E402
from .functions.rounding import div, equal, fix, frac, fmod, heaviside, sgn, trunc  # noqa: E402


def add(input: TensorOrScalar, other: TensorOrScalar, *, alpha: TensorOrScalar = 1) -> Tensor:
    return _E.binary("add", input, other if alpha == 1 else other * alpha)


def sub(input: TensorOrScalar, other: TensorOrScalar, *, alpha: TensorOrScalar = 1) -> Tensor:
    return _E.binary("sub", input, other if alpha == 1 else other * alpha)


def _binary_fn(name: str, prim: str) -> Callable[[TensorOrScalar, TensorOrScalar], Tensor]:
    def fn(input: TensorOrScalar, other: TensorOrScalar) -> Tensor:
        return _E.binary(prim, input, other)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting and PyTorch's type promotion."
    return fn


def _bitwise_fn(name: str) -> Callable[[Tensor, TensorOrScalar], Tensor]:
    def fn(input: Tensor, other: TensorOrScalar) -> Tensor:
        return getattr(Tensor, name)(input, other)
    fn.__name__ = name
    fn.__doc__ = f"``Tensor.{name}``: bool operands logically, integers bit by bit."
    return fn


for _n in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
           "bitwise_right_shift"):
    globals()[_n] = _bitwise_fn(_n)


def bitwise_not(input: Tensor) -> Tensor:
    """``Tensor.bitwise_not``: logical not on bool, bit by bit on integers."""
    return input.bitwise_not()


for _n, _p in (("mul", "mul"), ("true_divide", "div"),
               ("maximum", "maximum"), ("minimum", "minimum"), ("remainder", "remainder"),
               ("floor_divide", "floor_divide"), ("eq", "eq"), ("ne", "ne"), ("lt", "lt"),
               ("le", "le"), ("gt", "gt"), ("ge", "ge"), ("atan2", "atan2"),
               ("arctan2", "atan2")):
    globals()[_n] = _binary_fn(_n, _p)


def pow(input: TensorOrScalar, exponent: TensorOrScalar) -> Tensor:
    return _E.pow(input, exponent)


def _functional():
    """``symgrad.nn.functional``, imported on first use (``nn`` is a lazy submodule: the
    bare name ``nn`` is unbound here until something imports it)."""
    from .nn import functional      # late: nn loads on first use (see _LAZY_SUBMODULES)
    return functional


def rrelu(input: Tensor, lower: _float = 1.0 / 8, upper: _float = 1.0 / 3,
          training: _bool = False, generator: Generator | None = None) -> Tensor:
    """``torch.rrelu`` (see ``symgrad.nn.rrelu``)."""
    return _functional().rrelu(input, lower, upper, training, generator=generator)


def rrelu_(input: Tensor, lower: _float = 1.0 / 8, upper: _float = 1.0 / 3,
            training: _bool = False, generator: Generator | None = None) -> Tensor:
    return _functional().rrelu_(input, lower, upper, training, generator=generator)


def softmax(input: Tensor, dim: _int | None = None, dtype: DTypeLike | None = None) -> Tensor:
    return _functional().softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: _int | None = None,
                dtype: DTypeLike | None = None) -> Tensor:
    return _functional().log_softmax(input, dim, dtype=dtype)


def softplus(input: Tensor, beta: _float = 1.0, threshold: _float = 20.0) -> Tensor:
    return _functional().softplus(input, beta, threshold)


def is_tensor(obj: Any) -> _bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> _int:
    return input.numel()


def is_floating_point(input: Tensor) -> _bool:
    return input.is_floating_point()


def is_inference(input: Tensor) -> _bool:
    """Whether `input` is an inference tensor (made in ``inference_mode()``)."""
    if not isinstance(input, Tensor):
        raise TypeError("is_inference(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input.is_inference()


def allclose(a: Tensor, b: Tensor, rtol: _float = 1e-05, atol: _float = 1e-08,
             equal_nan: _bool = False) -> _bool:
    """Whether every element of ``isclose(a, b, ...)`` holds (PyTorch's rules: integers
    compared in the default float dtype, a finite error, its errors)."""
    return isclose(a, b, rtol, atol, equal_nan, _name="allclose").all().item()


def set_default_device(device: DeviceLike | None) -> None:
    """Only the CPU exists here: ``"cpu"`` (or None) is accepted, anything else raises
    PyTorch's error."""
    _check_device(device)


def get_default_device() -> device:
    return device("cpu")


# ``nn``, ``optim``, ``utils``, ``func`` and ``serialization`` load on first use (PEP 562):
# ``import symgrad`` stays cheap for compile-only users.
_LAZY_SUBMODULES = ("tree_util", "dask", "lax", "nn", "optim", "utils", "func", "serialization")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        import importlib
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'symgrad' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))


def save(obj: Any, f: str | os.PathLike[str] | IO[bytes], pickle_module: Any = None,
         pickle_protocol: _int = 2, **kw: Any) -> None:
    """Write ``obj`` to ``f`` (see :func:`symgrad.serialization.save`)."""
    from .serialization import save as _save      # late: loads on first use
    return _save(obj, f, pickle_module, pickle_protocol, **kw)


def load(f: str | os.PathLike[str] | IO[bytes], map_location: Any = None,
         pickle_module: Any = None, **kw: Any) -> Any:
    """Read what :func:`save` wrote, weights-only by default (see
    :func:`symgrad.serialization.load`)."""
    from .serialization import load as _load      # late: loads on first use
    return _load(f, map_location, pickle_module, **kw)


def export(f: Callable[..., Any], *example_args: Any) -> Exported:
    """``f``'s program for arguments like ``example_args``, to serialize (see
    :func:`symgrad.exporting.export`)."""
    from .exporting import export as _export      # late: loads on first use
    return _export(f, *example_args)


def deserialize(blob: bytes) -> Exported:
    """A callable from ``export(...).serialize()``'s bytes (see
    :func:`symgrad.exporting.deserialize`)."""
    from .exporting import deserialize as _deserialize      # late: loads on first use
    return _deserialize(blob)
