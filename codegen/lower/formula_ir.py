"""Scalar formulas -> LLVM IR values (the generic elementwise emitter).

An elementwise primitive is a formula of symgrad's own type (:mod:`symgrad.graph.formula`:
binary operations in the order they are computed, nothing rewritten); this module turns
one formula, with IR values for its symbols, into IR at a builder's position. Every value
is computed in one *compute dtype* (numpy's result type of the arguments, widened to
float64 when the formula needs floats), conditions are ``i1``. Lowering rules:

* every operation in the formula's order (``add``, ``sub``, ``mul``, ``div``, ``neg``);
* powers with exponent 2, 3, -1, -2 (also written as floats) multiply (and divide), as
  PyTorch's pow kernel; +-1/2 is a square root; other powers -> :func:`codegen.vecmath.pow`;
  an integer to an integer power is computed in integers as PyTorch's ``powi`` (wrapping;
  a negative exponent: 1 ** -n = 1, (-1) ** -n = +-1, else 0);
* a negation flips the sign bit through an integer mask LLVM cannot see (it would move
  ``-(x * c)`` into ``x * -c``, ``-x * y`` into ``x * -y``, ``a + -b`` into ``a - b``, and
  turn ``x * -1``, ``x / -1``, ``-0.0 - x`` into a negation: all legal in LLVM, where the
  sign of a NaN result is unspecified, but ``signbit`` of such a NaN then differs from
  PyTorch's, whose kernels run these operations as written); a constant -1 or -0.0
  operand of a product, quotient or difference comes through the same mask;
* fmod -> ``frem`` (integers: ``srem``, guarded against a zero or -1 divisor);
* exp/log/log1p/expm1/sin/cos/tan/tanh/sqrt/floor/ceil/abs/round -> :mod:`codegen.vecmath`
  (branch-free, vectorisable: never a scalar libm call); ``log1p(exp(a))`` ->
  ``log1pexp(a)`` and ``1/(1 + exp(-a))`` (also as a divisor) -> ``sigmoid(a)``: the
  stable forms, which share one ``exp(-|a|)`` (softplus and the logistic losses);
* select -> a chain of ``select`` (both branches are computed: NaN in an untaken
  branch cannot leak), relations -> ordered compares (``!=`` unordered, as numpy),
  ``isnan`` -> ``fcmp uno``, sign/max/min -> selects / ``llvm.maximum``.

Common subexpressions are emitted once (memo per emitter; formula nodes are hash-consed).
Every walk is iterative: a formula's depth is not bounded by Python's recursion limit.

>>> import llvmlite.ir as ir
>>> from symgrad.graph import dtypes, formula as F
>>> x = F.symbol("a0")
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), "f")
>>> b = ir.IRBuilder(f.append_basic_block())
>>> e = FormulaEmitter(b, dtypes.float64, {x: (f.args[0], dtypes.float64)})
>>> _ = b.ret(e.emit(3 * x ** 2))
>>> "fmul" in str(m)
True
"""
from __future__ import annotations

from fractions import Fraction
import math
from typing import Mapping

import llvmlite.ir as ir
import numpy as np

from symgrad.graph import dtypes
from symgrad.graph import formula as F
from symgrad.graph.dtypes import DType
from symgrad.graph.node import toposort

from .. import types as T
from .. import vecmath

__all__ = ["FormulaEmitter", "unsupported", "divides", "compute_dtype", "op_cost"]

# formula operations (not primitives) lowered to vecmath's routine of the same name
_VECMATH = frozenset("exp log log1p expm1 sin cos tan tanh".split())
_ROUNDING = {"floor": "floor", "ceil": "ceil", "round": "rint"}
_RELATIONS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_SUPPORTED = ({"sym", "num", "pi", "add", "sub", "mul", "div", "pow", "neg", "select",
               "and", "or", "not", "abs", "sign", "max", "min", "sinh", "cosh", "sqrt",
               "isnan", "signbit", "keep", "fmod"} | _VECMATH | set(_ROUNDING) | set(_RELATIONS))
# operations whose result is a float whatever their operands
_FLOAT_OPS = _VECMATH | {"div", "sqrt", "sinh", "cosh", "pi"}


def unsupported(expr: F.Expr) -> str | None:
    """None if :class:`FormulaEmitter` lowers ``expr``, else the first unsupported operation."""
    for e in F.postorder([expr]):
        if e.op not in _SUPPORTED:
            return e.op
    return None


def divides(expr: F.Expr) -> bool:
    """Whether ``expr`` divides (its value is then computed in floats)."""
    return any(e.op == "div" for e in F.postorder([expr]))


def _is_int_number(e: F.Expr) -> bool:
    return e.op == "num" and isinstance(e.value, (bool, int))


def _needs_float(expr: F.Expr) -> bool:
    for e in F.postorder([expr]):
        if e.op in _FLOAT_OPS:
            return True
        if e.op == "num" and not isinstance(e.value, (bool, int)):
            return True
        # (an exponent that is not a number is an integer when the arguments are: an
        # integer power of integers is computed in integers, as PyTorch's kernel)
        if e.op == "pow" and e.args[1].op == "num" and \
                not (_is_int_number(e.args[1]) and e.args[1].value >= 0):
            return True
    return False


def compute_dtype(expr: F.Expr, arg_dtypes: list[DType]) -> DType:
    """The dtype a formula is evaluated in: numpy's result type of the arguments; an
    integer/bool result type becomes int64, or float64 if the formula needs floats."""
    res = np.result_type(*[d.np for d in arg_dtypes]) if arg_dtypes else np.dtype("float64")
    if res.kind == "f":
        return dtypes.float64 if res.itemsize > 4 else dtypes.float32
    return dtypes.float64 if _needs_float(expr) else dtypes.int64


_COSTS: dict = {}


def op_cost(expr: F.Expr) -> int:
    """Rough cost of evaluating ``expr`` once (arithmetic 1, transcendental 16; each
    shared operation once)."""
    cost = _COSTS.get(expr)
    if cost is None:
        cost = 0
        for e in F.postorder([expr]):
            if e.op in _VECMATH or e.op == "sqrt" or \
                    e.op == "pow" and not _is_int_number(e.args[1]):
                cost += 16
            elif e.op not in ("sym", "num", "pi", "keep"):
                cost += 1
        if len(_COSTS) > 4096:
            _COSTS.clear()
        _COSTS[expr] = cost
    return cost


def _is_one(e: F.Expr) -> bool:
    return e.op == "num" and not isinstance(e.value, bool) and e.value == 1


def _sigmoid_of(e: F.Expr) -> F.Expr | None:
    """``a`` if ``e`` is ``1 + exp(-a)`` (so ``1/e`` is sigmoid(a)), else None."""
    if e.op == "add":
        x, y = e.args
        other = y if _is_one(x) else x if _is_one(y) else None
        if other is not None and other.op == "exp":
            u = other.args[0]
            return u.args[0] if u.op == "neg" else -u
    return None


def _exponent(e: F.Expr) -> float | None:
    """A numeric exponent's value as a float (a formula of numbers evaluated in float64,
    as PyTorch's pow gradient forms ``exponent - 1`` of its double scalar), else None."""
    if e.op == "num":
        return None if isinstance(e.value, bool) else float(e.value)
    if e.op in ("sym", "pi") or F.free_symbols(e):
        return None
    v = F.lambdify([], e)()
    return float(v) if isinstance(v, (int, float, Fraction)) and not isinstance(v, bool) \
        else None


def _number(v) -> float | int:
    return float(v) if isinstance(v, Fraction) else v


_MULTIPLIED_POWERS = (0.0, 1.0, 2.0, 3.0, -1.0, -2.0)
_SIGN_MASK = "symgrad.sign_mask"


def _sign_mask_global(module: ir.Module) -> ir.GlobalVariable:
    """The module's i64 sign-bit mask: a variable (internal, kept by ``@llvm.used``, so no
    pass learns its value), read with ``!invariant.load`` (hoisted out of loops)."""
    g = module.globals.get(_SIGN_MASK)
    if g is None:
        g = ir.GlobalVariable(module, T.I64, _SIGN_MASK)
        g.initializer, g.linkage = ir.Constant(T.I64, -2 ** 63), "internal"
        ty = ir.ArrayType(ir.PointerType(), 1)
        used = ir.GlobalVariable(module, ty, "llvm.used")
        used.linkage, used.section = "appending", "llvm.metadata"
        used.initializer = ir.Constant(ty, [g])
    return g


def _is_constant(v: ir.Value, value: float) -> bool:
    """Whether ``v`` is the float constant ``value`` (its sign included)."""
    if not isinstance(v, ir.Constant) or not isinstance(v.constant, float):
        return False
    return v.constant == value and math.copysign(1.0, v.constant) == math.copysign(1.0, value)


class FormulaEmitter:
    """Emits formulas over given symbol values in one compute dtype."""

    def __init__(self, b: ir.IRBuilder, compute: DType,
                 symbols: Mapping[F.Expr, tuple[ir.Value, DType]]) -> None:
        self.b = b
        self.dt = compute
        self.ty = T.value_type(compute)
        self.is_float = compute.is_floating_point
        self.memo: dict[F.Expr, ir.Value] = {}
        self.symbols = symbols
        self._mask: ir.Value | None = None     # the sign-bit mask, loaded on first use

    # ---- helpers -----------------------------------------------------------------
    def const(self, v: float | int) -> ir.Constant:
        return ir.Constant(self.ty, float(v) if self.is_float else int(v))

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        suffix = "f64" if self.ty == T.F64 else "f32"
        full = f"llvm.{name}.{suffix}"
        m = self.b.module
        fn = m.globals.get(full) or ir.Function(m, ir.FunctionType(self.ty, [self.ty] * len(args)), full)
        return self.b.call(fn, list(args))

    def add(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fadd(x, y) if self.is_float else self.b.add(x, y)

    def sub(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fsub(x, y) if self.is_float else self.b.sub(x, y)

    def mul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fmul(x, y) if self.is_float else self.b.mul(x, y)

    def div(self, x: ir.Value, y: ir.Value) -> ir.Value:
        if not self.is_float:
            raise TypeError("integer division in a formula evaluated in integers")
        return self.b.fdiv(x, y)

    def neg(self, x: ir.Value) -> ir.Value:
        return self.b.fneg(x) if self.is_float else self.b.neg(x)

    # ---- sign-exact operations (see the module docstring) -------------------------
    def _sign_mask(self) -> ir.Value:
        """The compute dtype's sign-bit mask as an integer LLVM does not know."""
        mask = self._mask
        if mask is None:
            mask = self.b.load(_sign_mask_global(self.b.module))
            mask.set_metadata("invariant.load", self.b.module.add_metadata([]))
            if self.ty == T.F32:
                mask = self.b.trunc(self.b.lshr(mask, ir.Constant(T.I64, 32)), T.I32)
            self._mask = mask
        return mask

    def exact_neg(self, x: ir.Value) -> ir.Value:
        """``-x`` flipping the sign bit only (NaNs included), never folded by LLVM."""
        if not self.is_float:
            return self.b.neg(x)
        ity = T.I32 if self.ty == T.F32 else T.I64
        return self.b.bitcast(self.b.xor(self.b.bitcast(x, ity), self._sign_mask()), self.ty)

    def _opaque(self, v: ir.Value, *values: float) -> ir.Value:
        """``v``, or the same constant through the mask when it is one of ``values``."""
        if self.is_float and any(_is_constant(v, c) for c in values):
            return self.exact_neg(self.const(-v.constant) if v.constant else self.const(0.0))
        return v

    def cmp(self, op: str, x: ir.Value, y: ir.Value) -> ir.Value:
        if self.is_float:
            if op == "!=":
                return self.b.fcmp_unordered(op, x, y)
            return self.b.fcmp_ordered(op, x, y)
        return self.b.icmp_signed(op, x, y)

    def as_bool(self, v: ir.Value) -> ir.Value:
        if v.type == T.I1:
            return v
        return self.cmp("!=", v, self.const(0))

    def as_num(self, v: ir.Value) -> ir.Value:
        if v.type == T.I1:
            return self.b.uitofp(v, self.ty) if self.is_float else self.b.zext(v, self.ty)
        return v

    # ---- entry ---------------------------------------------------------------------
    def emit(self, expr: F.Expr) -> ir.Value:
        """The value of ``expr`` in the compute dtype."""
        return self.as_num(self.value(expr))

    def value(self, e: F.Expr) -> ir.Value:
        v = self.memo.get(e)
        if v is None:
            # operands first, iteratively (only those the node's lowering reads)
            for node in toposort([e], children=self._reads):
                self.memo[node] = self._emit(node)
            v = self.memo[e]
        return v

    def num(self, e: F.Expr) -> ir.Value:
        return self.as_num(self.value(e))

    def _reads(self, e: F.Expr) -> tuple:
        """The operands ``e``'s lowering reads (not yet emitted): a stable pattern
        replaces some (``log1p(exp(a))`` reads ``a``)."""
        if e in self.memo or e.op in ("sym", "num", "pi"):
            return ()
        a = e.args
        if self.is_float:
            if e.op == "div":
                s = _sigmoid_of(a[1])
                if s is not None:
                    return (s,) if _is_one(a[0]) else (a[0], s)
            elif e.op == "log1p" and a[0].op == "exp":
                return a[0].args
        if e.op == "pow":
            v = _exponent(a[1])
            if v == -1.0 and self.is_float and _sigmoid_of(a[0]) is not None:
                return (_sigmoid_of(a[0]),)
            if v is not None and (v in _MULTIPLIED_POWERS or v in (0.5, -0.5)):
                return (a[0],)
        return tuple(x for x in a if x not in self.memo)

    def _emit(self, e: F.Expr) -> ir.Value:
        op, a = e.op, e.args
        if op == "sym":
            value, dt = self.symbols[e]
            return T.convert(self.b, value, dt, self.dt)
        if op == "num":
            v = a[0]
            if isinstance(v, bool):
                return T.I1(int(v))
            return self.const(_number(v))
        if op == "pi":
            return self.const(math.pi)
        if op == "add":
            return self.add(self.num(a[0]), self.num(a[1]))
        if op == "sub":
            return self.sub(self._opaque(self.num(a[0]), -0.0), self.num(a[1]))
        if op == "mul":
            return self.mul(self._opaque(self.num(a[0]), -1.0), self._opaque(self.num(a[1]), -1.0))
        if op == "div":
            s = _sigmoid_of(a[1]) if self.is_float else None
            if s is not None:          # x / (1 + exp(-s)) = x * sigmoid(s)
                sig = vecmath.sigmoid(self.b, self.num(s))
                return sig if _is_one(a[0]) else self.mul(self.num(a[0]), sig)
            return self.div(self.num(a[0]), self._opaque(self.num(a[1]), -1.0))
        if op == "neg":
            return self.exact_neg(self.num(a[0]))
        if op == "pow":
            return self._pow(a[0], a[1])
        if op == "select":
            return self._select(a)
        if op in _RELATIONS:
            return self.cmp(_RELATIONS[op], self.num(a[0]), self.num(a[1]))
        if op in ("and", "or"):
            x, y = self.as_bool(self.value(a[0])), self.as_bool(self.value(a[1]))
            return self.b.and_(x, y) if op == "and" else self.b.or_(x, y)
        if op == "not":
            return self.b.not_(self.as_bool(self.value(a[0])))
        return self._function(e)

    def _pow(self, base: F.Expr, ex: F.Expr) -> ir.Value:
        # as PyTorch's pow kernel: exponents 2, 3, -1, -2 multiply (and divide), +-1/2 is
        # a square root (so (-inf)**0.5 is NaN, not C pow's inf), also when written as a
        # float; any other exponent is pow's, rounded once
        v = _exponent(ex)
        if v == -1.0 and self.is_float:
            s = _sigmoid_of(base)
            if s is not None:
                return vecmath.sigmoid(self.b, self.num(s))
        if v is not None and v in _MULTIPLIED_POWERS:
            n = int(v)
            if n == 0:
                return self.const(1)
            p = self._int_pow(self.num(base), abs(n))
            return p if n > 0 else self.div(self.const(1), p)
        if v == 0.5:
            return vecmath.sqrt(self.b, self.num(base))
        if v == -0.5:
            return self.div(self.const(1), vecmath.sqrt(self.b, self.num(base)))
        if not self.is_float:
            return self._int_pow_any(self.num(base), self.num(ex))
        return vecmath.pow(self.b, self.num(base), self.num(ex))

    def _int_pow_any(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """``x ** y`` for integers as PyTorch's integer pow kernel (``powi``): squaring and
        multiplying over the exponent's bits, wrapping as the integer type does; a
        negative exponent gives 1 for x = 1, +-1 for x = -1 by the exponent's parity,
        0 otherwise. Branch-free (one select per exponent bit), so the loop vectorises."""
        width = x.type.width
        one, zero = self.const(1), self.const(0)
        result, square = one, x
        for i in range(width - 1):            # the sign bit is handled below
            bit = self.b.trunc(self.b.lshr(y, ir.Constant(y.type, i)), T.I1)
            result = self.b.select(bit, self.mul(result, square), result)
            if i < width - 2:
                square = self.mul(square, square)
        odd = self.b.trunc(y, T.I1)
        minus_one = self.b.select(odd, self.const(-1), one)
        inverse = self.b.select(self.cmp("==", x, one), one,
                                self.b.select(self.cmp("==", x, self.const(-1)), minus_one, zero))
        return self.b.select(self.cmp("<", y, zero), inverse, result)

    def _int_pow(self, x: ir.Value, n: int) -> ir.Value:
        result, square = None, x
        while n:
            if n & 1:
                result = square if result is None else self.mul(result, square)
            n >>= 1
            if n:
                square = self.mul(square, square)
        return result

    def _select(self, a: tuple) -> ir.Value:
        out = self.num(a[-1])
        for i in range(len(a) - 3, -1, -2):
            cond = self.as_bool(self.value(a[i]))
            out = self.b.select(cond, self.num(a[i + 1]), out)
        return out

    def _function(self, e: F.Expr) -> ir.Value:
        name = e.op
        if name == "keep":
            return self.num(e.args[0])
        if name == "isnan":
            x = self.num(e.args[0])
            return self.b.fcmp_unordered("uno", x, x) if self.is_float else T.I1(0)
        if name == "signbit":            # the sign bit, also of -0.0 and NaN
            x = self.num(e.args[0])
            if not self.is_float:
                return self.b.icmp_signed("<", x, ir.Constant(x.type, 0))
            bits = ir.IntType(64 if self.ty == T.F64 else 32)
            return self.b.icmp_signed("<", self.b.bitcast(x, bits), ir.Constant(bits, 0))
        if name == "fmod":
            return self._fmod(self.num(e.args[0]), self.num(e.args[1]))
        if name == "log1p" and e.args[0].op == "exp" and self.is_float:
            return vecmath.log1pexp(self.b, self.num(e.args[0].args[0]))
        args = [self.num(x) for x in e.args]
        if name in _VECMATH or name == "sqrt":
            return vecmath.emit(self.b, name, *args)
        if name in _ROUNDING:
            if not self.is_float:
                return args[0]
            return vecmath.emit(self.b, _ROUNDING[name], *args)
        if name == "abs":
            if self.is_float:
                return vecmath.abs(self.b, args[0])
            return self.b.select(self.cmp("<", args[0], self.const(0)), self.neg(args[0]), args[0])
        if name == "sign":
            x, one, zero = args[0], self.const(1), self.const(0)
            inner = self.b.select(self.cmp("==", x, zero), zero, x)   # keeps NaN
            return self.b.select(self.cmp(">", x, zero), one,
                                 self.b.select(self.cmp("<", x, zero), self.const(-1), inner))
        if name in ("max", "min"):
            x, y = args
            if self.is_float:
                return self.intrinsic("maximum" if name == "max" else "minimum", x, y)
            return self.b.select(self.cmp(">" if name == "max" else "<", x, y), x, y)
        if name == "sinh":
            x = args[0]
            d = self.sub(vecmath.expm1(self.b, x), vecmath.expm1(self.b, self.neg(x)))
            return self.mul(d, self.const(0.5))
        if name == "cosh":
            x = args[0]
            s = self.add(vecmath.exp(self.b, x), vecmath.exp(self.b, self.neg(x)))
            return self.mul(s, self.const(0.5))
        raise NotImplementedError(f"no LLVM lowering for {name}")

    def _fmod(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """C's fmod: ``frem``; for integers ``srem`` with 0 where y is 0 or -1 (srem is
        undefined there: y = 0 traps, as INT_MIN % -1 does; the callers raise PyTorch's
        ZeroDivisionError before a zero divisor gets here)."""
        if self.is_float:
            return self.b.frem(x, y)
        unsafe = self.b.or_(self.cmp("==", y, self.const(0)), self.cmp("==", y, self.const(-1)))
        r = self.b.srem(x, self.b.select(unsafe, self.const(1), y))
        return self.b.select(unsafe, self.const(0), r)
