"""symgrad's own formula type: immutable, hash-consed expression nodes for elementwise
formulas, with differentiation, common subexpressions, a numpy evaluator, pickling and
conversion to and from sympy -- without importing sympy (which costs ~0.2 s).

A node (:class:`Expr`) is an operation ``op`` over ``args``; leaves are symbols
(``Expr.symbol("x")``), exact numbers (int, :class:`fractions.Fraction`, float, bool) and
the constant ``pi``. Arithmetic is binary and kept in the order it was written: nothing
is rewritten automatically (``(x + 1) - 1`` stays as written, ``3*(x + 1)`` is not
distributed), so the order of IEEE operations is the one the formula states. Two nodes
built alike are the same object (hash-consing), so ``is`` / ``==`` compare structure.

Operations (``op``: arguments):

* ``sym``: name; ``num``: value; ``pi``;
* ``add``, ``sub``, ``mul``, ``div``, ``pow``: two operands; ``neg``: one;
* the functions of :data:`FUNCTIONS` (``exp``, ``log``, ..., ``max``, ``min``, ``fmod``);
* comparisons ``lt``, ``le``, ``gt``, ``ge``, ``eq``, ``ne`` (0/1 valued as conditions),
  logic ``and``, ``or``, ``not``;
* ``select``: ``c1, v1, c2, v2, ..., default`` -- the first ``v`` whose condition holds
  (sympy's ``Piecewise``).

Every traversal here is iterative: a formula as deep as a 10,000-step chain differentiates,
evaluates, prints and pickles at Python's default recursion limit.

:func:`diff` follows the derivative conventions the pipeline uses (PyTorch's): the
derivative of a step (floor, ceil, round, sign, a comparison) is 0, the Heaviside step of
``max`` / ``min`` / ``abs`` is 0 at 0 (``abs'`` is ``sign``), and only structural zeros and
ones are simplified away (a term whose derivative is exactly 0 disappears, ``1*u`` is
``u``); nothing else is rewritten.
"""
from __future__ import annotations

import math
import threading
import weakref
from fractions import Fraction
from typing import Callable, Iterable, Sequence

import numpy as np

from .fpstate import quiet
from .node import toposort

__all__ = ["Expr", "symbol", "number", "as_expr", "pi", "select", "call", "FUNCTIONS",
           "RELATIONS", "postorder", "free_symbols", "substitute", "fold", "diff", "cse",
           "lambdify", "flat_text", "to_sympy", "from_sympy", "lt", "le", "gt", "ge", "eq", "ne",
           "logical_and", "logical_or", "logical_not"]

_NUMBER_TYPES = (bool, int, float, Fraction)

# one node per structure: (op, args) -> node, entries going when their node does
_TABLE: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_TABLE_LOCK = threading.Lock()


class Expr:
    """A formula node: ``op`` and ``args`` (other nodes; for ``sym`` its name, for
    ``num`` its value). Build with :func:`symbol`, :func:`number`, Python's arithmetic
    operators (``+ - * / ** -``, ``abs``, and ``< <= > >=`` for comparisons) and the
    functions of this module; never mutate."""

    __slots__ = ("op", "args", "_hash", "__weakref__")

    def __new__(cls, op: str, args: tuple):
        key = (op, _key(op, args))
        node = _TABLE.get(key)
        if node is None:
            with _TABLE_LOCK:       # one node per structure, also when threads build it
                node = _TABLE.get(key)
                if node is None:
                    node = object.__new__(cls)
                    object.__setattr__(node, "op", op)
                    object.__setattr__(node, "args", args)
                    object.__setattr__(node, "_hash", hash(key))
                    _TABLE[key] = node
        return node

    def __setattr__(self, name, value):
        raise AttributeError("formula nodes are immutable")

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __reduce__(self):
        return _unflatten, (_flatten(self),)

    def __repr__(self):
        return to_text(self)

    # queries
    @property
    def is_number(self) -> bool:
        return self.op == "num"

    @property
    def is_symbol(self) -> bool:
        return self.op == "sym"

    @property
    def value(self):
        """A number's value (``num`` nodes only)."""
        if self.op != "num":
            raise TypeError(f"{self} is not a number")
        return self.args[0]

    @property
    def name(self) -> str:
        if self.op != "sym":
            raise TypeError(f"{self} is not a symbol")
        return self.args[0]

    # arithmetic, in the order written
    def __add__(self, o): return Expr("add", (self, as_expr(o)))
    def __radd__(self, o): return Expr("add", (as_expr(o), self))
    def __sub__(self, o): return Expr("sub", (self, as_expr(o)))
    def __rsub__(self, o): return Expr("sub", (as_expr(o), self))
    def __mul__(self, o): return Expr("mul", (self, as_expr(o)))
    def __rmul__(self, o): return Expr("mul", (as_expr(o), self))
    def __truediv__(self, o): return Expr("div", (self, as_expr(o)))
    def __rtruediv__(self, o): return Expr("div", (as_expr(o), self))
    def __pow__(self, o): return Expr("pow", (self, as_expr(o)))
    def __rpow__(self, o): return Expr("pow", (as_expr(o), self))
    def __neg__(self): return Expr("neg", (self,))
    def __pos__(self): return self
    def __abs__(self): return Expr("abs", (self,))
    def __lt__(self, o): return Expr("lt", (self, as_expr(o)))
    def __le__(self, o): return Expr("le", (self, as_expr(o)))
    def __gt__(self, o): return Expr("gt", (self, as_expr(o)))
    def __ge__(self, o): return Expr("ge", (self, as_expr(o)))
    def __and__(self, o): return Expr("and", (self, as_expr(o)))
    def __rand__(self, o): return Expr("and", (as_expr(o), self))
    def __or__(self, o): return Expr("or", (self, as_expr(o)))
    def __ror__(self, o): return Expr("or", (as_expr(o), self))
    def __invert__(self): return Expr("not", (self,))

    def __bool__(self):
        raise TypeError("a formula has no truth value (compare with `is`, or build a "
                        "condition with lt/gt/eq/...)")


def _key(op: str, args: tuple):
    if op == "num":
        v = args[0]
        # 1, 1.0, True and Fraction(1) are different numbers here; so are 0.0 and -0.0
        return (type(v).__name__, repr(v) if isinstance(v, float) else v)
    return args


def symbol(name: str) -> Expr:
    """The (real) symbol called ``name``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"a symbol's name is a non-empty string, not {name!r}")
    return Expr("sym", (name,))


def number(value) -> Expr:
    """The exact number ``value`` (bool, int, Fraction or float; numpy scalars become
    the Python number they hold; a Fraction with denominator 1 is its int)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, Fraction) and value.denominator == 1:
        value = int(value)
    if not isinstance(value, _NUMBER_TYPES):
        raise TypeError(f"not a number: {value!r}")
    return Expr("num", (value,))


def as_expr(x) -> Expr:
    """``x`` as a formula: a node as it is, a number as :func:`number`."""
    if isinstance(x, Expr):
        return x
    return number(x)


pi = Expr("pi", ())

# function name -> arity
FUNCTIONS = {"exp": 1, "log": 1, "log1p": 1, "expm1": 1, "sqrt": 1, "sin": 1, "cos": 1,
             "tan": 1, "tanh": 1, "sinh": 1, "cosh": 1, "asin": 1, "acos": 1, "atan": 1,
             "atan2": 2, "erf": 1, "erfinv": 1, "abs": 1, "sign": 1, "floor": 1, "ceil": 1,
             "round": 1, "isnan": 1, "signbit": 1, "max": 2, "min": 2, "fmod": 2, "keep": 1}
RELATIONS = ("lt", "le", "gt", "ge", "eq", "ne")
_LOGIC = {"and": 2, "or": 2, "not": 1}
_ARITH = {"add": 2, "sub": 2, "mul": 2, "div": 2, "pow": 2, "neg": 1}


def call(name: str, *args) -> Expr:
    """The function ``name`` (:data:`FUNCTIONS`) applied to ``args``."""
    arity = FUNCTIONS.get(name) or _ARITH.get(name) or _LOGIC.get(name) or \
        (2 if name in RELATIONS else None)
    if arity is None:
        raise ValueError(f"unknown formula function {name!r}")
    if len(args) != arity:
        raise TypeError(f"{name} takes {arity} argument(s), got {len(args)}")
    return Expr(name, tuple(as_expr(a) for a in args))


def _rel(name):
    def make(x, y):
        return Expr(name, (as_expr(x), as_expr(y)))
    make.__name__ = name
    make.__doc__ = f"The condition ``{name}(x, y)``."
    return make


lt, le, gt, ge, eq, ne = (_rel(n) for n in RELATIONS)


def logical_and(x, y) -> Expr:
    return Expr("and", (as_expr(x), as_expr(y)))


def logical_or(x, y) -> Expr:
    return Expr("or", (as_expr(x), as_expr(y)))


def logical_not(x) -> Expr:
    return Expr("not", (as_expr(x),))


def select(*pairs, default) -> Expr:
    """The first value whose condition holds, else ``default``:
    ``select((v1, c1), (v2, c2), default=d)`` (sympy's ``Piecewise`` order)."""
    args = []
    for v, c in pairs:
        args += [as_expr(c), as_expr(v)]
    return Expr("select", tuple(args) + (as_expr(default),))


# ----------------------------------------------------------------------- traversal

def _children(node: Expr) -> tuple:
    return () if node.op in ("sym", "num") else node.args


def postorder(roots: Iterable[Expr]) -> list[Expr]:
    """Every node reachable from ``roots``, each once, operands before their users."""
    return toposort(roots, children=_children)


def free_symbols(*roots: Expr) -> set[Expr]:
    return {n for n in postorder(roots) if n.op == "sym"}


def substitute(roots: Sequence[Expr], mapping: dict) -> list[Expr]:
    """``roots`` with every node in ``mapping`` replaced by its value (whole subtrees:
    a replaced node's operands are not visited for it)."""
    mapping = {k: as_expr(v) for k, v in mapping.items()}
    new: dict = {}
    for node in postorder(roots):
        if node in mapping:
            new[node] = mapping[node]
        elif node.op in ("sym", "num", "pi"):
            new[node] = node
        else:
            args = tuple(new[a] for a in node.args)
            new[node] = node if args == node.args else Expr(node.op, args)
    return [mapping.get(r, new[r]) for r in roots]


_EXACT = {"lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y,
          "ge": lambda x, y: x >= y, "eq": lambda x, y: x == y, "ne": lambda x, y: x != y,
          "and": lambda x, y: bool(x) and bool(y), "or": lambda x, y: bool(x) or bool(y),
          "not": lambda x: not x}
_INTEGER = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
            "mul": lambda x, y: x * y, "neg": lambda x: -x}


def fold(expr: Expr) -> Expr:
    """``expr`` with what is exact on numbers alone decided: comparisons and logic of
    numbers, a ``select`` on such conditions (its untaken values go), integer sums,
    differences and products, ``x ** 1``. Nothing a rounding could change is folded."""
    new: dict = {}
    for node in postorder([expr]):
        op = node.op
        if op in ("sym", "num", "pi"):
            new[node] = node
            continue
        args = tuple(new[a] for a in node.args)
        nums = all(a.op == "num" for a in args)
        if nums and op in _EXACT:
            new[node] = number(bool(_EXACT[op](*[a.value for a in args])))
        elif nums and op in _INTEGER and all(type(a.value) is int for a in args):
            new[node] = number(_INTEGER[op](*[a.value for a in args]))
        elif op == "pow" and args[1] is ONE:
            new[node] = args[0]            # x ** 1 is x, NaN and infinities included
        elif op == "select":
            pairs, default = [], args[-1]
            for i in range(0, len(args) - 1, 2):
                c, v = args[i], args[i + 1]
                if c.op == "num":
                    if c.value:
                        default = v        # the first condition that holds
                        break
                    continue               # never taken
                pairs.append((v, c))
            new[node] = select(*pairs, default=default) if pairs else default
        else:
            new[node] = node if args == node.args else Expr(op, args)
    return new[expr]


# ------------------------------------------------------------------- differentiation

ZERO, ONE = number(0), number(1)


def _neg(a):
    """-a; a number's negation is the negative number (exact)."""
    if a.op == "num" and not isinstance(a.value, bool):
        return number(-a.value)
    return -a


def _mul(a, b):
    """a * b with structural ones and zeros only (what differentiation may simplify)."""
    if a is ONE:
        return b
    if b is ONE:
        return a
    if a is ZERO or b is ZERO:
        return ZERO
    if a is number(-1):
        return _neg(b)
    if b is number(-1):
        return _neg(a)
    return a * b


def _add(a, b):
    if a is ZERO:
        return b
    if b is ZERO:
        return a
    return a + b


def _sub(a, b):
    if b is ZERO:
        return a
    if a is ZERO:
        return _neg(b)
    return a - b


def _heaviside(cond: Expr) -> Expr:
    """1 where ``cond`` holds, else 0 (the step at 0 taken as 0: PyTorch's)."""
    return select((1, cond), default=0)


def _trunc(q: Expr) -> Expr:
    return select((call("ceil", q), q < 0), default=call("floor", q))


def _partials(node: Expr) -> tuple:
    """d node / d each operand, as formulas over the operands (and the node itself)."""
    op, a = node.op, node.args
    if op == "add":
        return ONE, ONE
    if op == "sub":
        return ONE, number(-1)
    if op == "neg":
        return (number(-1),)
    if op == "mul":
        return a[1], a[0]
    if op == "div":
        return 1 / a[1], -((a[0] / a[1]) / a[1])
    if op == "pow":
        x, y = a
        if y.op == "num":
            k = y.value - 1
            dx = _mul(y, ONE if k == 0 else x if k == 1 else x ** number(k))
            return dx, ZERO
        # PyTorch's masks (its pow backward), kept at every order: see primitives'
        # derivative, which differentiates the partials of partials the same way
        return (select((ZERO, eq(y, ZERO)), default=y * x ** (y - 1)),
                select((ZERO, eq(x, ZERO) & (y >= 0)), default=node * call("log", x)))
    u = a[0] if a else None
    table = {
        "exp": lambda: node,
        "log": lambda: 1 / u,
        "log1p": lambda: 1 / (1 + u),
        "expm1": lambda: call("exp", u),
        "sqrt": lambda: 1 / (2 * node),
        "sin": lambda: call("cos", u),
        "cos": lambda: -call("sin", u),
        "tan": lambda: 1 + node ** 2,
        "tanh": lambda: 1 - node ** 2,
        "sinh": lambda: call("cosh", u),
        "cosh": lambda: call("sinh", u),
        "asin": lambda: 1 / call("sqrt", 1 - u ** 2),
        "acos": lambda: -(1 / call("sqrt", 1 - u ** 2)),
        "atan": lambda: 1 / (1 + u ** 2),
        "erf": lambda: 2 / call("sqrt", pi) * call("exp", -(u ** 2)),
        "erfinv": lambda: call("sqrt", pi) / 2 * call("exp", node ** 2),
        "abs": lambda: call("sign", u),
        "keep": lambda: ONE,
    }
    if op in table:
        return (table[op](),)
    if op in ("sign", "floor", "ceil", "round"):
        return (ZERO,)
    if op == "atan2":
        y, x = a
        r = x ** 2 + y ** 2
        return x / r, -y / r
    if op == "max":
        return _heaviside(a[0] > a[1]), _heaviside(a[1] > a[0])
    if op == "min":
        return _heaviside(a[1] > a[0]), _heaviside(a[0] > a[1])
    if op == "fmod":
        return ONE, -_trunc(a[0] / a[1])
    if op in RELATIONS or op in _LOGIC or op in ("isnan", "signbit"):
        return tuple(ZERO for _ in a)
    raise ValueError(f"cannot differentiate formula operation {op!r}")


def diff(expr: Expr, sym: Expr) -> Expr:
    """d expr / d sym (forward through the formula, operands before users; see the
    module docstring for the conventions and the only simplifications made)."""
    d: dict = {}
    for node in postorder([expr]):
        if node.op == "sym":
            d[node] = ONE if node is sym else ZERO
            continue
        if node.op in ("num", "pi"):
            d[node] = ZERO
            continue
        args = node.args
        if node.op == "select":
            values = [d[args[i]] for i in range(1, len(args) - 1, 2)] + [d[args[-1]]]
            if all(v is ZERO for v in values):
                d[node] = ZERO
                continue
            pairs = [(d[args[i + 1]], args[i]) for i in range(0, len(args) - 1, 2)]
            d[node] = select(*pairs, default=d[args[-1]])
            continue
        if all(d[a] is ZERO for a in args):
            d[node] = ZERO
            continue
        total = ZERO
        for k, p in enumerate(_partials(node)):
            da = d[args[k]]
            if da is ZERO:
                continue
            if node.op == "sub" and k == 1:              # d(a - b) = da - db
                total = _sub(total, da)
            elif node.op == "div" and k == 0 and da is not ONE:
                total = _add(total, da / args[1])        # d(a / b) = da / b
            else:
                total = _add(total, _mul(p, da))
        d[node] = total
    return d[expr]


# ----------------------------------------------------------------------------- CSE

def cse(roots: Sequence[Expr], prefix: str = "_t") -> tuple[list, list]:
    """Common subexpressions: ``(assignments, reduced)`` -- ``assignments`` is
    ``[(symbol, formula), ...]`` in evaluation order, each formula over the symbols before
    it, naming every operation used more than once; ``reduced`` are ``roots`` over them."""
    order = postorder(roots)
    uses: dict = {}
    for node in order:
        for c in _children(node):
            uses[c] = uses.get(c, 0) + 1
    shared = [n for n in order if uses.get(n, 0) > 1 and n.op not in ("sym", "num", "pi")]
    names = {s.name for s in free_symbols(*roots)}
    mapping: dict = {}
    assignments = []
    k = 0
    for node in shared:
        while f"{prefix}{k}" in names:
            k += 1
        tmp = symbol(f"{prefix}{k}")
        k += 1
        assignments.append((tmp, substitute([node], mapping)[0]))
        mapping[node] = tmp
    return assignments, substitute(list(roots), mapping)


# ------------------------------------------------------------------ numpy evaluation

def torch_pow(x, y):
    """``x ** y`` as PyTorch computes it: a Python-number exponent of a float tensor takes
    its special kernels -- 0.5 a square root, -0.5 one over it (so ``(-0.0) ** -0.5`` is
    -inf and ``(-inf) ** 0.5`` NaN, as sqrt gives them), 2 and 3 products, -1 and -2
    reciprocals of them, 1 a copy (``x ** 2``'s backward reads ``x ** 1``: numpy's
    general power cost as much as the rest of it) --, anything else (a tensor exponent,
    a 0-d one included) is ``pow``."""
    if isinstance(y, (int, float, np.number)) and not isinstance(y, bool) \
            and getattr(x, "dtype", None) is not None and x.dtype.kind == "f":
        if y == 1:
            return np.positive(x)
        if y == 0.5:
            return np.sqrt(x)
        if y == -0.5:
            return 1 / np.sqrt(x)
        if y == 2:
            return x * x
        if y == 3:
            return x * x * x
        if y == -1:
            return 1 / x
        if y == -2:
            return 1 / (x * x)
    if type(y) is np.ndarray and y.dtype.kind == "f" and (y.ndim == 0 or 0 in y.strides):
        # numpy's power takes an exponent that is one number (0-d, or broadcast) as a
        # number -- sqrt for 0.5: (-inf) ** 0.5 NaN --; PyTorch's tensor exponent is pow
        shape = np.broadcast_shapes(np.shape(x), y.shape)
        full = np.array(np.broadcast_to(y, shape or (1,)))
        out = np.power(np.reshape(x, (1,)) if not shape else x, full)
        return out.reshape(()) if not shape else out
    if isinstance(y, (np.ndarray, np.integer)) and y.dtype.kind in "iu" \
            and np.asarray(x).dtype.kind in "iu" and np.any(y < 0):
        return _int_pow_negative(x, y)
    return np.power(x, y)


def _int_pow_negative(x, y):
    """Integers to integer powers some negative, as PyTorch's kernel (numpy refuses):
    1 ** -n is 1, (-1) ** -n is 1 or -1 by n's parity, anything else ** -n is 0."""
    out = np.power(x, np.maximum(y, 0))
    neg = y < 0
    inverse = np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 == 0, 1, -1), 0))
    return np.where(neg, inverse, out).astype(out.dtype)


def _erf(x):
    from scipy.special import erf      # late: scipy loads only when erf is evaluated
    return erf(x)


def _erfinv(x):
    from scipy.special import erfinv   # late: scipy loads only when erfinv is evaluated
    return np.copysign(erfinv(x), x)     # (scipy's erfinv(-0.0) is +0.0; PyTorch's -0.0)


def _select(*args):
    out = args[-1]
    for i in range(len(args) - 3, -1, -2):
        cond, choice = args[i], args[i + 1]
        if type(cond) is bool or type(cond) is np.bool_:
            out = choice if cond else out
        else:
            out = np.where(cond, choice, out)
    return out


def _num(v):
    return float(v) if isinstance(v, Fraction) else v


NUMPY_FUNCTIONS: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "pow": torch_pow, "neg": np.negative, "exp": np.exp, "log": np.log, "log1p": np.log1p,
    "expm1": np.expm1, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2, "erf": _erf,
    "erfinv": _erfinv, "abs": np.abs, "sign": np.sign, "floor": np.floor, "ceil": np.ceil,
    "round": np.round, "isnan": np.isnan, "signbit": np.signbit, "max": np.maximum, "min": np.minimum,
    "fmod": np.fmod, "keep": lambda u: u, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "and": np.logical_and, "or": np.logical_or, "not": np.logical_not, "select": _select,
}


def lambdify(symbols: Sequence[Expr], exprs) -> Callable:
    """The numpy function of ``symbols`` computing ``exprs`` (one formula, or a list:
    then a list of results), each shared operation once. Python scalars stay scalars
    (NumPy's weak-scalar rules apply, as in compiled PyTorch expressions); operations on
    numbers alone are evaluated once, to Python numbers."""
    single = isinstance(exprs, Expr)
    roots = [exprs] if single else list(exprs)
    order = postorder(roots)
    slot = {s: i for i, s in enumerate(symbols)}
    missing = [n.name for n in order if n.op == "sym" and n not in slot]
    if missing:
        raise ValueError(f"formula uses symbols {missing} not among the arguments")
    index: dict = {}
    program = []            # (kind, payload, operand slots)
    for node in order:
        index[node] = len(program)
        if node.op == "sym":
            program.append((0, slot[node], ()))
        elif node.op == "num":
            program.append((1, _num(node.value), ()))
        elif node.op == "pi":
            program.append((1, math.pi, ()))
        else:
            ops = tuple(index[a] for a in node.args)
            if all(program[i][0] == 1 for i in ops):
                # numbers only: folded now, to a Python number -- numpy's scalar result
                # (2 - 1 is an int64) would not be weak, and would widen float32 arrays
                with quiet():
                    v = NUMPY_FUNCTIONS[node.op](*[program[i][1] for i in ops])
                program.append((1, v.item() if isinstance(v, np.generic) else v, ()))
            else:
                program.append((2, NUMPY_FUNCTIONS[node.op], ops))
    outs = [index[r] for r in roots]

    def fn(*arrays):
        vals = []
        with quiet():           # log(0), 0 * inf ...: no warnings, as in PyTorch
            for kind, payload, ops in program:
                if kind == 0:
                    vals.append(arrays[payload])
                elif kind == 1:
                    vals.append(payload)
                else:
                    vals.append(payload(*[vals[i] for i in ops]))
        return vals[outs[0]] if single else [vals[i] for i in outs]
    return fn


# ----------------------------------------------------------------------- printing

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&", "or": "|"}


def to_text(expr: Expr) -> str:
    """A readable, fully parenthesised text of ``expr`` (every operation as written)."""
    text: dict = {}
    for node in postorder([expr]):
        op, a = node.op, node.args
        if op == "sym":
            text[node] = a[0]
        elif op == "num":
            v = a[0]
            text[node] = str(v) if not isinstance(v, Fraction) else f"({v})"
        elif op == "pi":
            text[node] = "pi"
        elif op in _INFIX:
            text[node] = f"({text[a[0]]} {_INFIX[op]} {text[a[1]]})"
        elif op == "neg":
            text[node] = f"(-{text[a[0]]})"
        elif op == "not":
            text[node] = f"(~{text[a[0]]})"
        elif op == "select":
            parts = [f"({text[a[i + 1]]}, {text[a[i]]})" for i in range(0, len(a) - 1, 2)]
            text[node] = f"select({', '.join(parts)}, default={text[a[-1]]})"
        else:
            text[node] = f"{op}({', '.join(text[x] for x in a)})"
    return text[expr]


# ------------------------------------------------------------------------- pickling

def _flatten(expr: Expr) -> tuple:
    order = postorder([expr])
    index = {n: i for i, n in enumerate(order)}
    return tuple((n.op, n.args) if n.op in ("sym", "num") else
                 (n.op, tuple(index[a] for a in n.args)) for n in order)


def flat_text(expr: Expr) -> str:
    """``expr`` as stable, unambiguous text (every node once, numbers with their type):
    what cache keys hold of a formula."""
    return repr(_flatten(expr))


def _unflatten(flat: tuple) -> Expr:
    nodes = []
    for op, args in flat:
        if op in ("sym", "num"):
            nodes.append(Expr(op, args))
        else:
            nodes.append(Expr(op, tuple(nodes[i] for i in args)))
    return nodes[-1]


# ---------------------------------------------------------------- sympy, on request

def _sympy_functions(sympy) -> dict:
    from sympy.codegen.cfunctions import expm1, log1p   # late: only inspection uses sympy
    return {"exp": sympy.exp, "log": sympy.log, "log1p": log1p, "expm1": expm1,
            "sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan,
            "tanh": sympy.tanh, "sinh": sympy.sinh, "cosh": sympy.cosh, "asin": sympy.asin,
            "acos": sympy.acos, "atan": sympy.atan, "atan2": sympy.atan2, "erf": sympy.erf,
            "erfinv": sympy.erfinv, "abs": sympy.Abs, "sign": sympy.sign,
            "floor": sympy.floor, "ceil": sympy.ceiling,
            "round": sympy.Function("round"), "isnan": sympy.Function("isnan"),
            "signbit": sympy.Function("signbit"),
            "max": sympy.Max, "min": sympy.Min, "fmod": sympy.Function("fmod"),
            "keep": lambda u: u}


def to_sympy(expr: Expr, functions: dict | None = None):
    """``expr`` as a sympy expression over real symbols (for inspection: sympy's
    automatic evaluation may reorder or combine what the formula keeps apart);
    ``functions`` overrides the sympy function made of an operation (name -> callable)."""
    import sympy                       # late: only inspection and user formulas need it
    fns = _sympy_functions(sympy)
    fns.update(functions or {})
    rel = {"lt": sympy.Lt, "le": sympy.Le, "gt": sympy.Gt, "ge": sympy.Ge,
           "eq": sympy.Eq, "ne": sympy.Ne}
    out: dict = {}
    for node in postorder([expr]):
        op, a = node.op, node.args
        if op == "sym":
            r = sympy.Symbol(a[0], real=True)
        elif op == "num":
            v = a[0]
            r = sympy.true if v is True else sympy.false if v is False else \
                sympy.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else \
                sympy.Integer(v) if isinstance(v, int) else sympy.Float(v)
        elif op == "pi":
            r = sympy.pi
        else:
            x = [out[c] for c in a]
            if op == "add":
                r = x[0] + x[1]
            elif op == "sub":
                r = x[0] - x[1]
            elif op == "mul":
                r = x[0] * x[1]
            elif op == "div":
                r = x[0] / x[1]
            elif op == "pow":
                r = x[0] ** x[1]
            elif op == "neg":
                r = -x[0]
            elif op in rel:
                r = rel[op](x[0], x[1])
            elif op == "and":
                r = sympy.And(_cond(sympy, x[0]), _cond(sympy, x[1]))
            elif op == "or":
                r = sympy.Or(_cond(sympy, x[0]), _cond(sympy, x[1]))
            elif op == "not":
                r = sympy.Not(_cond(sympy, x[0]))
            elif op == "select":
                pairs = [(x[i + 1], _cond(sympy, x[i])) for i in range(0, len(x) - 1, 2)]
                r = sympy.Piecewise(*pairs, (x[-1], True))
            else:
                r = fns[op](*x)
        out[node] = r
    return out[expr]


def _cond(sympy, c):
    """A 0/1-valued sympy expression as a condition."""
    if isinstance(c, (sympy.logic.boolalg.Boolean, sympy.core.relational.Relational)):
        return c
    return sympy.Ne(c, 0)


def from_sympy(expr) -> Expr:
    """The formula of the sympy expression ``expr`` (symbols by name; sums and products
    evaluated left to right in sympy's order, negative integer powers as divisions)."""
    import sympy                       # late: a sympy formula was given, so sympy is loaded
    from sympy.codegen.cfunctions import expm1, log1p
    fns = {sympy.exp: "exp", sympy.log: "log", log1p: "log1p", expm1: "expm1",
           sympy.sin: "sin", sympy.cos: "cos", sympy.tan: "tan", sympy.tanh: "tanh",
           sympy.sinh: "sinh", sympy.cosh: "cosh", sympy.asin: "asin", sympy.acos: "acos",
           sympy.atan: "atan", sympy.atan2: "atan2", sympy.erf: "erf",
           sympy.erfinv: "erfinv", sympy.Abs: "abs", sympy.sign: "sign",
           sympy.floor: "floor", sympy.ceiling: "ceil", sympy.Max: "max", sympy.Min: "min"}
    rel = {sympy.StrictLessThan: "lt", sympy.LessThan: "le", sympy.StrictGreaterThan: "gt",
           sympy.GreaterThan: "ge", sympy.Equality: "eq", sympy.Unequality: "ne"}
    out: dict = {}
    stack = [(sympy.sympify(expr), False)]
    while stack:
        e, done = stack.pop()
        if e in out:
            continue
        if not done and e.args and not e.is_Number:
            stack.append((e, True))
            stack.extend((c, False) for c in e.args if c not in out)
            continue
        a = [out[c] for c in e.args] if e.args and not e.is_Number else []
        if e.is_Symbol:
            r = symbol(e.name)
        elif type(e).__name__ == "ExprCondPair":
            r = None                    # read by its Piecewise
        elif e is sympy.nan or e is sympy.oo or e is sympy.S.NegativeInfinity:
            r = number(float(e))
        elif e is sympy.true or e is sympy.false:
            r = number(bool(e))
        elif e is sympy.pi:
            r = pi
        elif e.is_Integer:
            r = number(int(e))
        elif e.is_Rational:
            r = number(Fraction(int(e.p), int(e.q)))
        elif e.is_Float:
            r = number(float(e))
        elif e.is_Add:
            r = a[0]
            for t in a[1:]:
                r = r + t
        elif e.is_Mul:
            r = _product(e, a)
        elif e.is_Pow:
            if e.exp.is_Integer and e.exp < 0:
                b = a[0] if e.exp == -1 else a[0] ** number(-int(e.exp))
                r = 1 / b
            elif e.exp == sympy.S.Half:
                r = call("sqrt", a[0])
            else:
                r = a[0] ** a[1]
        elif isinstance(e, sympy.Piecewise):
            pairs = [(out[v], out[c]) for v, c in e.args[:-1]]
            v, c = e.args[-1]
            if c is not sympy.true:
                pairs.append((out[v], out[c]))
                r = select(*pairs, default=number(float("nan")))
            else:
                r = select(*pairs, default=out[v])
        elif type(e) in rel:
            r = Expr(rel[type(e)], tuple(a))
        elif isinstance(e, sympy.And) or isinstance(e, sympy.Or):
            op = "and" if isinstance(e, sympy.And) else "or"
            r = a[0]
            for t in a[1:]:
                r = Expr(op, (r, t))
        elif type(e).__name__ == "ITE":       # if a then b else c
            r = select((a[1], a[0]), default=a[2])
        elif isinstance(e, sympy.Not):
            r = logical_not(a[0])
        elif e.func in fns:
            r = call(fns[e.func], *a)
        elif isinstance(e, sympy.core.function.AppliedUndef) and str(e.func) in FUNCTIONS:
            r = call(str(e.func), *a)
        elif e.func.__name__ in ("keep", "fmod"):
            r = call(e.func.__name__, *a)
        else:
            raise ValueError(f"no formula operation for sympy's {e.func.__name__} in {expr}")
        out[e] = r
    return out[sympy.sympify(expr)]


def _product(e, factors: list) -> Expr:
    """A sympy product: its factors multiplied left to right, a leading -1 as negation
    (the divisions are the factors' own ``1 / b``)."""
    neg = e.args[0] == -1
    fs = factors[1:] if neg else factors
    r = fs[0]
    for f in fs[1:]:
        if f.op == "div" and f.args[0] is ONE:
            r = r / f.args[1]
        else:
            r = r * f
    return -r if neg else r
