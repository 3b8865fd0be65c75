"""Scalar sympy formulas -> LLVM IR values (the generic elementwise emitter).

An elementwise primitive is a sympy formula; this module turns one formula, with IR
values for its symbols, into IR at a builder's position.  Every value is computed in
one *compute dtype* (numpy's result type of the arguments, widened to float64 when the
formula needs floats), conditions are ``i1``.  Lowering rules:

* Add in sympy's argument order, negative-coefficient terms as ``fsub``; a float product
  in the order of :mod:`symgrad.graph.division` (compound factors first; with divisions,
  PyTorch's chain), an integer product in sympy's order;
* integer powers by repeated squaring, ``x**(1/2)`` -> ``sqrt``, ``x**(-1/2)`` -> ``1/sqrt``,
  other powers -> :func:`codegen.vecmath.pow`;
* fmod -> ``frem`` (integers: ``srem``, guarded against a zero or -1 divisor);
* exp/log/log1p/expm1/sin/cos/tan/tanh/floor/ceiling/Abs/round -> :mod:`codegen.vecmath`
  (branch-free, vectorisable: never a scalar libm call); ``log1p(exp(a))`` ->
  ``log1pexp(a)`` and ``1/(1 + exp(-a))`` (also as a divisor) -> ``sigmoid(a)``: the
  stable forms, which share one ``exp(-|a|)`` (softplus and the logistic losses);
* Piecewise -> a chain of ``select`` (both branches are computed: NaN in an untaken
  branch cannot leak), relations -> ordered compares (``!=`` unordered, as numpy),
  ``isnan`` -> ``fcmp uno``, sign/Max/Min -> selects / ``llvm.maximum``.

Common subexpressions are emitted once (memo per emitter).

>>> import sympy, llvmlite.ir as ir
>>> from symgrad.graph import dtypes
>>> x = sympy.Symbol("a0", real=True)
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), "f")
>>> b = ir.IRBuilder(f.append_basic_block())
>>> e = FormulaEmitter(b, dtypes.float64, {x: (f.args[0], dtypes.float64)})
>>> _ = b.ret(e.emit(3 * x**2))
>>> "fmul" in str(m)
True
"""
from __future__ import annotations

import functools

from typing import Mapping

import llvmlite.ir as ir
import numpy as np
import sympy
from sympy.codegen.cfunctions import expm1, log1p

from symgrad.graph import dtypes
from symgrad.graph.dtypes import DType
from symgrad.graph.division import DivisionChain, product_order

from .. import types as T
from .. import vecmath

__all__ = ["FormulaEmitter", "unsupported", "compute_dtype", "op_cost"]

_VECMATH = {sympy.exp: "exp", sympy.log: "log", log1p: "log1p", expm1: "expm1",
            sympy.sin: "sin", sympy.cos: "cos", sympy.tan: "tan", sympy.tanh: "tanh"}
_ROUNDING = {sympy.floor: "floor", sympy.ceiling: "ceil"}
_NAMED = {"round": "rint"}          # opaque sympy Functions used by the formulas
_RELATIONS = {sympy.StrictLessThan: "<", sympy.LessThan: "<=", sympy.StrictGreaterThan: ">",
              sympy.GreaterThan: ">=", sympy.Equality: "==", sympy.Unequality: "!="}
_SIMPLE_FUNCS = (sympy.Abs, sympy.sign, sympy.Max, sympy.Min, sympy.sinh, sympy.cosh)


def _is_supported_node(e: sympy.Basic) -> bool:
    if e.is_Symbol or e.is_Number or e in (sympy.pi, sympy.E) or e is sympy.true or e is sympy.false:
        return True
    if isinstance(e, (sympy.Add, sympy.Mul, sympy.Pow, sympy.Piecewise, sympy.And, sympy.Or,
                      sympy.Not, sympy.Xor, sympy.logic.boolalg.BooleanTrue,
                      sympy.logic.boolalg.BooleanFalse)):
        return True
    if type(e) in _RELATIONS or e.func in _VECMATH or e.func in _ROUNDING:
        return True
    if isinstance(e, _SIMPLE_FUNCS) or isinstance(e, sympy.logic.boolalg.BooleanAtom):
        return True
    if isinstance(e, sympy.core.containers.Tuple) or isinstance(e, sympy.functions.elementary.piecewise.ExprCondPair):
        return True
    return getattr(e.func, "__name__", None) in ("round", "isnan", "signbit", "keep", "fmod")


def unsupported(expr: sympy.Basic) -> str | None:
    """None if :class:`FormulaEmitter` lowers ``expr``, else the first unsupported piece."""
    for e in sympy.preorder_traversal(expr):
        if not _is_supported_node(e):
            return str(e.func)
    return None


def _needs_float(expr: sympy.Basic) -> bool:
    for e in sympy.preorder_traversal(expr):
        if e.is_Number and not e.is_Integer:
            return True
        if isinstance(e, sympy.Pow) and not (e.exp.is_Integer and e.exp >= 0):
            return True
        if e.func in _VECMATH or isinstance(e, (sympy.sinh, sympy.cosh)) or e in (sympy.pi, sympy.E):
            return True
    return False


def compute_dtype(expr: sympy.Basic, arg_dtypes: list[DType]) -> DType:
    """The dtype a formula is evaluated in: numpy's result type of the arguments; an
    integer/bool result type becomes int64, or float64 if the formula needs floats."""
    res = np.result_type(*[d.np for d in arg_dtypes]) if arg_dtypes else np.dtype("float64")
    if res.kind == "f":
        return dtypes.float64 if res.itemsize > 4 else dtypes.float32
    return dtypes.float64 if _needs_float(expr) else dtypes.int64


@functools.lru_cache(maxsize=4096)
def op_cost(expr: sympy.Basic) -> int:
    """Rough cost of evaluating ``expr`` once (arithmetic 1, transcendental 16)."""
    cost = 0
    for e in sympy.preorder_traversal(expr):
        if e.func in _VECMATH or isinstance(e, sympy.Pow) and not e.exp.is_Integer:
            cost += 16
        elif isinstance(e, (sympy.Add, sympy.Mul)):
            cost += len(e.args) - 1
        elif not (e.is_Symbol or e.is_Number or getattr(e.func, "__name__", "") == "keep"):
            cost += 1
    return cost


def _sigmoid_of(e: sympy.Basic) -> sympy.Basic | None:
    """``a`` if ``e`` is ``1 + exp(-a)`` (so ``1/e`` is sigmoid(a)), else None."""
    if isinstance(e, sympy.Add) and len(e.args) == 2 and sympy.S.One in e.args:
        other = e.args[1] if e.args[0] == sympy.S.One else e.args[0]
        if other.func is sympy.exp:
            return -other.args[0]
    return None


_MULTIPLIED_POWERS = (0.0, 1.0, 2.0, 3.0, -1.0, -2.0)


class FormulaEmitter:
    """Emits formulas over given symbol values in one compute dtype."""

    def __init__(self, b: ir.IRBuilder, compute: DType,
                 symbols: Mapping[sympy.Symbol, tuple[ir.Value, DType]]) -> None:
        self.b = b
        self.dt = compute
        self.ty = T.value_type(compute)
        self.is_float = compute.is_floating_point
        self.memo: dict[sympy.Basic, ir.Value] = {}
        self.symbols = symbols

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
    def emit(self, expr: sympy.Basic) -> ir.Value:
        """The value of ``expr`` in the compute dtype."""
        return self.as_num(self.value(expr))

    def value(self, e: sympy.Basic) -> ir.Value:
        v = self.memo.get(e)
        if v is None:
            v = self._emit(e)
            self.memo[e] = v
        return v

    def num(self, e: sympy.Basic) -> ir.Value:
        return self.as_num(self.value(e))

    def _emit(self, e: sympy.Basic) -> ir.Value:
        if e.is_Symbol:
            value, dt = self.symbols[e]
            return T.convert(self.b, value, dt, self.dt)
        if e is sympy.true or isinstance(e, sympy.logic.boolalg.BooleanTrue):
            return T.I1(1)
        if e is sympy.false or isinstance(e, sympy.logic.boolalg.BooleanFalse):
            return T.I1(0)
        if e.is_Number or e in (sympy.pi, sympy.E):
            return self.const(float(e) if self.is_float else int(e))
        if isinstance(e, sympy.Add):
            return self._add(e)
        if isinstance(e, sympy.Mul):
            return self._mul(e)
        if isinstance(e, sympy.Pow):
            return self._pow(e.base, e.exp)
        if isinstance(e, sympy.Piecewise):
            return self._piecewise(e)
        if type(e) in _RELATIONS:
            return self.cmp(_RELATIONS[type(e)], self.num(e.lhs), self.num(e.rhs))
        if isinstance(e, sympy.And):
            return self._fold(e, self.b.and_)
        if isinstance(e, sympy.Or):
            return self._fold(e, self.b.or_)
        if isinstance(e, sympy.Xor):
            return self._fold(e, self.b.xor)
        if isinstance(e, sympy.Not):
            return self.b.not_(self.as_bool(self.value(e.args[0])))
        return self._function(e)

    def _fold(self, e: sympy.Basic, op) -> ir.Value:
        vals = [self.as_bool(self.value(a)) for a in e.args]
        out = vals[0]
        for v in vals[1:]:
            out = op(out, v)
        return out

    def _add(self, e: sympy.Add) -> ir.Value:
        out = None
        for term in e.args:
            coeff, rest = term.as_coeff_Mul()
            negative = coeff.is_negative and (coeff != -1 or rest != 1)
            v = self.num(-term) if negative else self.num(term)
            if out is None:
                out = self.neg(v) if negative else v
            else:
                out = self.sub(out, v) if negative else self.add(out, v)
        return out

    def _mul(self, e: sympy.Mul) -> ir.Value:
        if self.is_float:
            return self._product(product_order(e))
        coeff, rest = e.as_coeff_Mul()
        factors = sympy.Mul.make_args(rest)
        if any(f.is_Pow and f.exp.is_Integer and f.exp < 0 for f in factors):
            raise TypeError("division in an integer formula")
        out = None
        for f in factors:
            v = self.num(f)
            out = v if out is None else self.mul(out, v)
        if coeff == -1 and out is not None:
            return self.neg(out)
        if coeff != 1:
            out = self.const(coeff) if out is None else self.mul(self.const(coeff), out)
        return self.const(1) if out is None else out

    def _product(self, chain: DivisionChain) -> ir.Value:
        """A float product in the order of :mod:`symgrad.graph.division` (a chain with
        divisions in PyTorch's order)."""
        if not chain.steps:
            return self.const(chain.coeff)
        out = self.const(1) if chain.steps[0][0] == "/" else None
        for op, f in chain.steps:
            a = _sigmoid_of(f) if op == "/" else None      # x / (1 + exp(-a)) = x * sigmoid(a)
            v = self.num(f) if a is None else vecmath.sigmoid(self.b, self.num(a))
            out = v if out is None else self.div(out, v) if op == "/" and a is None else self.mul(out, v)
        if chain.coeff == -1:
            return self.neg(out)
        return out if chain.coeff == 1 else self.mul(out, self.const(chain.coeff))

    def _pow(self, base: sympy.Basic, ex: sympy.Basic) -> ir.Value:
        a = _sigmoid_of(base) if ex == -1 and self.is_float else None
        if a is not None:
            return vecmath.sigmoid(self.b, self.num(a))
        # as PyTorch's pow kernel: exponents 2, 3, -1, -2 multiply (and divide), +-1/2 is
        # a square root (so (-inf)**0.5 is NaN, not C pow's inf), also when written as a
        # float; any other exponent is pow's, rounded once
        v = float(ex) if ex.is_Number else None
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
        return vecmath.pow(self.b, self.num(base), self.num(ex))

    def _int_pow(self, x: ir.Value, n: int) -> ir.Value:
        result, square = None, x
        while n:
            if n & 1:
                result = square if result is None else self.mul(result, square)
            n >>= 1
            if n:
                square = self.mul(square, square)
        return result

    def _piecewise(self, e: sympy.Piecewise) -> ir.Value:
        pairs = list(e.args)
        if pairs[-1].cond is sympy.true:
            out = self.num(pairs[-1].expr)
            pairs = pairs[:-1]
        else:
            out = self.const(float("nan")) if self.is_float else self.const(0)
        for pair in reversed(pairs):
            cond = self.as_bool(self.value(pair.cond))
            out = self.b.select(cond, self.num(pair.expr), out)
        return out

    def _function(self, e: sympy.Basic) -> ir.Value:
        name = getattr(e.func, "__name__", "")
        if name == "keep":                 # (symgrad.graph.primitives.keep: an identity)
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
        if e.func is log1p and e.args[0].func is sympy.exp and self.is_float:
            return vecmath.log1pexp(self.b, self.num(e.args[0].args[0]))
        args = [self.num(a) for a in e.args]
        if e.func in _VECMATH:
            return vecmath.emit(self.b, _VECMATH[e.func], *args)
        if e.func in _ROUNDING or name in _NAMED:
            if not self.is_float:
                return args[0]
            return vecmath.emit(self.b, _ROUNDING.get(e.func) or _NAMED[name], *args)
        if isinstance(e, sympy.Abs):
            if self.is_float:
                return vecmath.abs(self.b, args[0])
            return self.b.select(self.cmp("<", args[0], self.const(0)), self.neg(args[0]), args[0])
        if isinstance(e, sympy.sign):
            x, one, zero = args[0], self.const(1), self.const(0)
            inner = self.b.select(self.cmp("==", x, zero), zero, x)   # keeps NaN
            return self.b.select(self.cmp(">", x, zero), one,
                                 self.b.select(self.cmp("<", x, zero), self.const(-1), inner))
        if isinstance(e, (sympy.Max, sympy.Min)):
            return self._minmax(e, args)
        if isinstance(e, sympy.sinh):
            x = args[0]
            d = self.sub(vecmath.expm1(self.b, x), vecmath.expm1(self.b, self.neg(x)))
            return self.mul(d, self.const(0.5))
        if isinstance(e, sympy.cosh):
            x = args[0]
            s = self.add(vecmath.exp(self.b, x), vecmath.exp(self.b, self.neg(x)))
            return self.mul(s, self.const(0.5))
        raise NotImplementedError(f"no LLVM lowering for {e.func}")

    def _fmod(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """C's fmod: ``frem``; for integers ``srem`` with 0 where y is 0 or -1 (srem is
        undefined there: y = 0 traps, as INT_MIN % -1 does; the callers raise PyTorch's
        ZeroDivisionError before a zero divisor gets here)."""
        if self.is_float:
            return self.b.frem(x, y)
        unsafe = self.b.or_(self.cmp("==", y, self.const(0)), self.cmp("==", y, self.const(-1)))
        r = self.b.srem(x, self.b.select(unsafe, self.const(1), y))
        return self.b.select(unsafe, self.const(0), r)

    def _minmax(self, e: sympy.Basic, args: list[ir.Value]) -> ir.Value:
        is_max = isinstance(e, sympy.Max)
        out = args[0]
        for v in args[1:]:
            if self.is_float:
                out = self.intrinsic("maximum" if is_max else "minimum", out, v)
            else:
                out = self.b.select(self.cmp(">" if is_max else "<", out, v), out, v)
        return out
