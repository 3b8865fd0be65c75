"""The primitive registry (IR layer): what a primitive is, and one table per
transformation. Part of ``symgrad.graph``, so it imports nothing else of the project:
the front end (``symgrad.ops``) fills the tables, the backend (``codegen``) reads them.

Every primitive has an entry in each of:

* ``SHAPE_RULES[name](avals, **attrs) -> (shape, dtype)`` — abstract evaluation;
* ``NUMPY_RULES[name](*arrays, **attrs) -> ndarray`` — the reference kernel;

and a reverse-mode rule: its own in ``VJP_RULES[name](ctx, g) -> tuple`` (written with
primitive calls, so it works on eager values and on traced nodes alike), or, for an
elementwise primitive without one, the generic rule derived from its formula
(:func:`symgrad.ops.vjp.rule` resolves both). A few structural primitives whose VJP rule
is not linear in the cotangent as a graph (PyTorch's log-space formulas) also have a
forward-mode rule ``JVP_RULES[name](args, out, tangents, **attrs) -> tangent`` (tensors;
a tangent None is zero), which forward-mode transforms use instead of transposing the VJP.

Elementwise primitives are defined once by a formula over real symbols
(:func:`elementwise`; :class:`Formula`): the built-ins in symgrad's own formula type
(:mod:`symgrad.graph.formula`), a user's in sympy. Their shape, numpy and VJP entries —
and their partial derivatives, themselves elementwise primitives — derive from that
formula, lazily and once.

sympy is imported only where its form of a formula is needed: a user's sympy formula
(and its partials) and inspection (``symbolic()``, ``formulas()``, LaTeX), which read the
sympy form converted from the own one. ``import symgrad``, eager computation, gradients
of any order and the whole compiler (fusion, code generation, dynamic sizes, cache keys)
do not load it.
"""
from __future__ import annotations

import functools
import inspect
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np
from . import dtypes
from . import formula as F
from .division import product_order
from .fpstate import enter as fp_enter, leave as fp_leave
from .shapes import broadcast_shapes

if TYPE_CHECKING:
    import sympy

__all__ = ["Primitive", "Formula", "PRIMITIVES", "SHAPE_RULES", "NUMPY_RULES", "VJP_RULES",
           "JVP_RULES", "FAMILIES", "family_of", "family_ops", "out_symbol", "fused_symbols", "elementwise",
           "register_structural", "get", "derivative", "derivative_primitive", "fingerprint",
           "resolve"]

PRIMITIVES: dict[str, "Primitive"] = {}
SHAPE_RULES: dict[str, Callable] = {}
NUMPY_RULES: dict[str, Callable] = {}
VJP_RULES: dict[str, Callable] = {}
JVP_RULES: dict[str, Callable] = {}

_lock = threading.Lock()
_build_lock = threading.RLock()


def _sympy():
    """sympy, imported on first use (deliberately lazy: it costs ~0.2 s, and only
    differentiating, lambdifying or compiling a formula needs it)."""
    import sympy
    return sympy


@functools.cache
def keep():
    """The sympy function ``keep(u) = u`` that holds a subformula together inside a fused
    formula: sympy's automatic evaluation would otherwise merge its numbers with the
    enclosing ones (``(x + 1) - 1`` to ``x``, ``(2*x)*0.5`` to ``1.0*x``), distribute a
    factor over it (``3*(x + 1)`` to ``3*x + 3``) or see through a power
    (``sqrt(x**2)`` to ``|x|``) -- exact for real numbers, not in IEEE arithmetic, where
    PyTorch computes each step in turn. Both backends evaluate it as its argument."""
    sympy = _sympy()

    class keep(sympy.Function):
        nargs = 1

        def fdiff(self, argindex=1):
            return sympy.S.One

        def _eval_is_real(self):
            return self.args[0].is_real

    keep.__qualname__ = "keep_function"     # pickled by reference: see __getattr__
    return keep


@functools.cache
def fmod():
    """The sympy function ``fmod(x, y)``: the remainder of x / y rounded toward zero (C's
    fmod, exact in IEEE arithmetic; the sign of x). Its partials are 1 and ``-trunc(x/y)``
    (PyTorch's); numpy evaluates it as ``np.fmod``, the LLVM backend as ``frem`` (``srem``
    for integers)."""
    sympy = _sympy()

    class fmod(sympy.Function):
        nargs = 2

        def fdiff(self, argindex=1):
            if argindex == 1:
                return sympy.S.One
            q = self.args[0] / self.args[1]
            return -sympy.Piecewise((sympy.ceiling(q), q < 0), (sympy.floor(q), True))

        def _eval_is_real(self):
            return self.args[0].is_real and self.args[1].is_real

    fmod.__qualname__ = "fmod_function"     # pickled by reference: see __getattr__
    return fmod


def __getattr__(name: str):
    if name == "keep_function":             # the class keep() makes (for pickle)
        return keep()
    if name == "fmod_function":             # the class fmod() makes (for pickle)
        return fmod()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=None)
def fused_symbols(n: int) -> "tuple[F.Expr, ...]":
    """The symbols ``a0, a1, ...`` a ``fused`` node's formula (its ``expr`` attribute, of
    symgrad's own formula type) is written over, one per argument in order."""
    return tuple(F.symbol(f"a{i}") for i in range(n))


@functools.cache
def out_symbol() -> "sympy.Symbol":
    """The symbol ``out`` that closed-form partials may use for the formula's result."""
    return _sympy().Symbol("out", real=True)


OUT = F.symbol("out")
"""The formula symbol closed-form partials may use for the formula's result."""


class Formula:
    """An elementwise formula over real symbols, optionally with closed-form partial
    derivatives that may use the output symbol ``out``, held in two forms built on first
    use: symgrad's own formula type (``fsymbols``, ``node``, ``fgiven``: what
    differentiation, numpy evaluation and the compiler read, no sympy needed) and
    sympy's (``symbols``, ``expr``, ``given_partials``: what inspection reads).

    ``native`` builds the own form -- a function returning ``(symbols, node, given)`` --
    and the sympy form is converted from it; or ``build`` returns the sympy form (a user's
    sympy formula) and the own form is converted from that. A derived partial gives both
    (``native`` and ``build``): each form from the same form of its parent; its own
    partials (second derivatives) are the own form's (:func:`formula.diff`) for a
    built-in's, sympy's converted (``sympy_partials``) for a user's sympy formula."""

    def __init__(self, symbols: "tuple[sympy.Symbol, ...]" = (), expr: "sympy.Expr" = None,
                 given_partials: tuple | None = None, *, build: Callable | None = None,
                 native: Callable | None = None, sympy_partials: bool = False,
                 second: Callable | None = None):
        self.second = second        # closed-form partials of the partials (grad_grads=)
        if build is None and native is None:
            parts = (tuple(symbols), expr, given_partials)
            build = lambda: parts           # noqa: E731  (given built)
        self._build, self._native = build, native
        self._sympy_partials = sympy_partials or native is None
        self._parts = self._fparts = None
        self._partials: dict = {}
        self._fpartials: dict = {}

    @property
    def native_first(self) -> bool:
        """Whether the own form is the definition (the built-ins) rather than sympy's."""
        return self._native is not None

    def _get(self) -> tuple:
        if self._parts is None:
            with _build_lock:
                if self._parts is None:
                    if self._build is not None:
                        self._parts = self._build()
                    else:
                        syms, node, given = self._fget()
                        conv = _to_sympy
                        self._parts = (tuple(conv(x) for x in syms), conv(node),
                                       None if given is None else tuple(conv(d) for d in given))
        return self._parts

    def _fget(self) -> tuple:
        if self._fparts is None:
            with _build_lock:
                if self._fparts is None:
                    if self._native is not None:
                        self._fparts = self._native()
                    else:
                        syms, expr, given = self._get()
                        self._fparts = (
                            tuple(F.symbol(x.name) for x in syms), F.from_sympy(expr),
                            None if given is None else
                            tuple(F.from_sympy(_sympy().sympify(d)) for d in given))
        return self._fparts

    symbols = property(lambda self: self._get()[0], doc="The input symbols (sympy, real).")
    expr = property(lambda self: self._get()[1], doc="The formula (sympy).")
    given_partials = property(lambda self: self._get()[2],
                              doc="Closed-form partials (sympy), or None (derived).")
    fsymbols = property(lambda self: self._fget()[0], doc="The input symbols.")
    node = property(lambda self: self._fget()[1], doc="The formula.")
    fgiven = property(lambda self: self._fget()[2],
                      doc="Closed-form partials, or None (derived).")

    def partial(self, i: int) -> "sympy.Expr":
        """d expr / d symbols[i] (sympy), with `out` substituted for the formula where it
        appears, DiracDelta dropped and Heaviside taken as 0 at 0 (PyTorch's convention)."""
        if i not in self._partials:
            sympy = _sympy()
            if self.given_partials is not None:
                d = sympy.sympify(self.given_partials[i])
            else:
                d = derivative(self.expr, self.symbols[i])
                if not isinstance(self.expr, sympy.Symbol):
                    d = d.subs(self.expr, out_symbol())
            if d.has(sympy.Derivative, sympy.Subs):
                raise ValueError(f"sympy cannot differentiate {self.expr} with respect to "
                                 f"{self.symbols[i]}: pass grads= to elementwise()")
            self._partials[i] = d
        return self._partials[i]

    def fpartial(self, i: int) -> F.Expr:
        """d node / d fsymbols[i] in the own form, the formula replaced by ``OUT`` where it
        appears: for a built-in, its closed form or :func:`formula.diff`; for a sympy
        formula, :meth:`partial` converted (the same expression sympy derives)."""
        if i not in self._fpartials:
            if self._sympy_partials:
                d = F.from_sympy(self.partial(i))
            elif self.fgiven is not None:
                d = F.as_expr(self.fgiven[i])
            else:
                d = F.diff(self.node, self.fsymbols[i])
                if not self.node.is_symbol:
                    d = F.substitute([d], {self.node: OUT})[0]
            self._fpartials[i] = d
        return self._fpartials[i]


def _to_sympy(e) -> "sympy.Expr":
    """A formula (or number) of the own type as sympy, with the pipeline's own sympy
    functions for ``fmod`` and ``keep``."""
    return F.to_sympy(F.as_expr(e), {"fmod": fmod(), "keep": keep()})


def _is_step_derivative(e) -> bool:
    """Derivative (or Subs of one) of floor / ceiling: zero wherever it exists."""
    sympy = _sympy()
    if isinstance(e, sympy.Subs):
        e = e.expr
    return isinstance(e, sympy.Derivative) and isinstance(e.expr, (sympy.floor, sympy.ceiling))


def derivative(expr: "sympy.Expr", symbol: "sympy.Symbol") -> "sympy.Expr":
    """d expr / d symbol as every formula's gradient uses it (the one derivative clean-up):
    the derivatives of steps (DiracDelta, of floor / ceiling) are 0 where they exist,
    Heaviside is the 0/1 Piecewise, and powers are combined (also inside Piecewise
    branches: x**(y-1)*(y-1)/x -> (y-1)*x**(y-2), finite at x = 0).

    >>> import sympy
    >>> x = sympy.Symbol("x", real=True)
    >>> derivative(sympy.floor(x) + sympy.Abs(x), x)
    sign(x)
    """
    sympy = _sympy()
    mpow = _masked_pow()
    masked = expr.replace(lambda e: isinstance(e, sympy.Pow), lambda e: mpow(*e.args))
    d = sympy.diff(masked, symbol).replace(lambda e: isinstance(e, mpow),
                                           lambda e: sympy.Pow(*e.args))
    return _sanitize(d).replace(lambda e: isinstance(e, sympy.Mul), sympy.powsimp)


@functools.lru_cache(maxsize=1)
def _masked_pow():
    """``b ** e`` differentiated as PyTorch's pow backward does, at every order: the
    partials are 0 where ``e == 0`` (d/db) and where ``b == 0, e >= 0`` (d/de), else
    ``e * b**(e - 1)`` and ``b**e * log b`` -- so a masked partial (pow's own, and every
    partial of a partial) keeps its mask when differentiated again (``x ** 1``'s second
    derivative at 0 is 0, not 1 * 0 * 0**-1 = NaN)."""
    sympy = _sympy()

    class MaskedPow(sympy.Function):
        def fdiff(self, argindex=1):
            b, e = self.args
            if argindex == 1:
                return sympy.Piecewise((0, sympy.Eq(e, 0)), (e * MaskedPow(b, e - 1), True))
            return sympy.Piecewise((0, sympy.Eq(b, 0) & (e >= 0)), (self * sympy.log(b), True))
    return MaskedPow


def _sanitize(d: "sympy.Expr") -> "sympy.Expr":
    sympy = _sympy()
    d = d.replace(sympy.DiracDelta, lambda *a: sympy.S.Zero)
    d = d.xreplace({e: sympy.S.Zero for e in sympy.preorder_traversal(d)
                    if _is_step_derivative(e)})     # top-down: a whole Subs(...) goes
    d = d.replace(sympy.Heaviside,
                  lambda arg, *h: sympy.Piecewise((1, arg > 0), (0, True)))
    return d


# A primitive's family: what kind of computation it is, for every pass that treats a kind
# alike (the backend's lowering, batching, fusion). Elementwise primitives are "elementwise"
# ("fused" too: one elementwise kernel); the others are declared with theirs.
FAMILIES = ("elementwise", "view", "window", "window-sum", "index", "reduction",
            "reduction-gradient", "arg-reduction", "scan", "linalg", "conversion", "creation",
            "control", "other")
BATCHING = (None, "leading", "stacked")   # Primitive.batching


@dataclass(eq=False)
class Primitive:
    """A primitive operation. `kind` is "elementwise" (defined by a formula) or
    "structural"; `family` is one of :data:`FAMILIES`.

    `out_dtype` (elementwise): "same" (the operands' common dtype), "float" (integer
    operands give the default float dtype) or "bool". `grad_name` is the PyTorch name of the
    backward Function recorded when the primitive is used directly."""

    name: str
    kind: str
    nin: int
    differentiable: bool = True
    grad_name: str | None = None
    formula: Formula | None = None
    out_dtype: str = "same"
    user: bool = False
    opaque: bool = False          # defined by Python callables from outside symgrad
    derived_from: "Primitive | None" = None     # d prim / d input: the primitive it is of
    family: str = "elementwise"
    saves: tuple[int, ...] = ()   # structural: the inputs the eager tape keeps for backward
    saves_out: bool = False       # ... and whether it keeps the output
    # how ``vmap``-style batching treats it when its family has no rule: "leading" -- any
    # leading axes of its operands are a batch (numpy's LAPACK solvers), "stacked" -- the
    # same, with every operand given the batch axis; None: no batching rule
    batching: str | None = None
    # how many leading inputs have an entry in ``grad_fn.next_functions`` (None: all);
    # PyTorch lists no index operand of gather / index
    edges: int | None = None
    _definition: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


def fingerprint(prim: Primitive, *, formula: bool = False) -> str | None:
    """What defines ``prim`` beyond the code that runs it, as a stable string: the one
    description of a primitive every cache key uses.

    * a built-in: its name -- or, with ``formula=True`` (a key that does not cover
      symgrad's own source, such as the native code's), an elementwise one's formula;
    * a user's elementwise primitive: its formula (symbols, expression as ``srepr``,
      given partials, dtype rule), as another process may define another formula under
      the same name;
    * a derivative: its own name and its primitive's fingerprint;
    * None when Python callables define it (``numpy=`` / ``vjp=`` rules, structural
      primitives registered from outside symgrad), which no key can capture -- except
      with ``formula=True``, where only an elementwise formula (what native code is
      generated from) counts.

    >>> fingerprint(get("exp")), fingerprint(get("reshape"), formula=True)
    ('exp', 'reshape')
    >>> print(fingerprint(get("neg"), formula=True))
    ('neg', 1, 'same', True, ['x'], "(('sym', ('x',)), ('neg', (0,)))", None)
    """
    if formula:
        return _formula_text(prim) if prim.kind == "elementwise" and prim.formula else prim.name
    if prim.derived_from is not None:
        base = fingerprint(prim.derived_from)
        return None if base is None else f"{prim.name}<-{base}"
    if prim.opaque:
        return None
    return _formula_text(prim) if prim.user else prim.name


def _formula_text(prim: Primitive) -> str:
    """An elementwise primitive's formula as stable text (made once): name, arity, dtype
    rule, symbols, expression and given partials (the own formula type's flat form:
    every node once, unambiguous; no sympy needed)."""
    if prim._definition is None:
        f = prim.formula
        given = None if f.fgiven is None else [F.flat_text(F.as_expr(d)) for d in f.fgiven]
        prim._definition = repr((prim.name, prim.nin, prim.out_dtype, prim.differentiable,
                                 [s.name for s in f.fsymbols], F.flat_text(f.node), given))
    return prim._definition


def get(name: str) -> Primitive:
    return PRIMITIVES[name]


def family_of(op: str) -> str | None:
    """The family of primitive ``op`` (None: not a primitive, e.g. ``input``, ``const``).

    >>> family_of("reshape"), family_of("exp"), family_of("input")
    ('view', 'elementwise', None)
    """
    prim = PRIMITIVES.get(op)
    return None if prim is None else prim.family


def family_ops(*families: str) -> frozenset[str]:
    """The names of the registered primitives in ``families`` (what a backend or a pass
    treats alike), read from the registry when called.

    >>> sorted(family_ops("window"))
    ['cat', 'pad_slice']
    """
    for f in families:
        if f not in FAMILIES:
            raise ValueError(f"unknown primitive family {f!r}; choose one of {FAMILIES}")
    return frozenset(n for n, p in PRIMITIVES.items() if p.family in families)


def _pascal(name: str) -> str:
    return "".join(p.capitalize() for p in name.replace(".", "_").split("_"))


def register_structural(name: str, nin: int, shape_rule: Callable, numpy_rule: Callable,
                        vjp_rule: Callable | None = None, *, differentiable: bool = True,
                        grad_name: str | None = None, family: str = "other",
                        saves: tuple[int, ...] = (), saves_out: bool = False,
                        batching: str | None = None, jvp_rule: Callable | None = None
                        ) -> Primitive:
    """Register a structural primitive with its shape, numpy and VJP rules (and, should
    its VJP rule not be linear in the cotangent as a graph, a JVP rule), its family,
    what the eager tape saves for the VJP rule (``saves``: input positions, or
    ``"all"``; ``saves_out``: the output) and how batching treats it (see
    :class:`Primitive`)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown primitive family {family!r}; choose one of {FAMILIES}")
    if batching not in BATCHING:
        raise ValueError(f"unknown batching {batching!r}; choose one of {BATCHING}")
    own = all(getattr(rule, "__module__", "").startswith("symgrad.")
              for rule in (shape_rule, numpy_rule, vjp_rule) if rule is not None)
    prim = Primitive(name, "structural", nin, differentiable,
                     grad_name or f"{_pascal(name)}Backward0", opaque=not own,
                     family=family, saves=saves if saves == "all" else tuple(saves),
                     saves_out=saves_out, batching=batching)
    PRIMITIVES[name] = prim
    SHAPE_RULES[name] = shape_rule
    NUMPY_RULES[name] = numpy_rule
    if vjp_rule is not None:
        VJP_RULES[name] = vjp_rule
    if jvp_rule is not None:
        JVP_RULES[name] = jvp_rule
    return prim


def _parameter_names(fn: Callable) -> tuple[str, ...]:
    names = tuple(inspect.signature(fn).parameters)
    if "out" in names:
        raise ValueError("'out' is reserved for the output in derivative formulas")
    return names


def _formula_builder(name: str, formula: Callable, names: tuple[str, ...],
                     grads: Callable | None, native: bool) -> Callable:
    """The function building a formula's parts from the user's or the registry's
    Python functions: over sympy symbols, or (``native``) over formula symbols."""
    def build() -> tuple:
        if native:
            syms = tuple(F.symbol(n) for n in names)
            expr, out, conv = F.as_expr(formula(*syms)), OUT, F.as_expr
        else:
            sympy = _sympy()
            syms = tuple(sympy.Symbol(n, real=True) for n in names)
            expr, out, conv = sympy.sympify(formula(*syms)), out_symbol(), lambda d: d
        given = None
        if grads is not None:
            given = tuple(conv(d) for d in grads(*syms, out))
            if len(given) != len(syms):
                raise ValueError(f"grads for {name} must return {len(syms)} partials")
        return syms, expr, given
    return build


def elementwise(name: str, formula: Callable, *, numpy: Callable | None = None,
                grads: Callable | None = None, out_dtype: str = "same",
                differentiable: bool = True, grad_name: str | None = None,
                vjp: Callable | None = None, grad_grads: Callable | None = None,
                _builtin: bool = False) -> Primitive:
    """Define an elementwise primitive from a sympy formula; its gradient, numpy kernel
    and (with the LLVM backend) native code follow from the formula.

    `grads`, if given, returns closed-form partials (they may use the symbol ``out`` for
    the result) — for numerical stability; tests check them against ``sympy.diff``.
    `vjp` replaces the generic formula-derived VJP rule (used by ``where``, whose
    condition operand is boolean). `grad_grads` (built-ins only), called as `grads` is,
    returns for each partial None (differentiate it) or its own closed-form partials, one
    per input: where PyTorch's double backward is a formula of its own, not the derivative
    of its backward formula (binary_cross_entropy's).

    >>> import sympy, symgrad
    >>> sp = symgrad.elementwise("my_softplus", lambda x: sympy.log(1 + sympy.exp(x)))
    >>> x = symgrad.tensor([0.0], requires_grad=True)
    >>> symgrad.apply(sp, x).sum().backward(); x.grad
    tensor([0.5000])
    """
    names = _parameter_names(formula)
    builder = _formula_builder(name, formula, names, grads, native=_builtin)
    if grad_grads is not None and not _builtin:
        raise ValueError("grad_grads is for built-in primitives")
    form = Formula(native=builder, second=grad_grads) if _builtin else Formula(build=builder)
    if not _builtin:
        form.expr       # a user's formula is checked now (and sympy is loaded: they use it)
    with _lock:
        if name in PRIMITIVES and not _builtin and not PRIMITIVES[name].user:
            raise ValueError(f"{name!r} is a built-in primitive and cannot be redefined")
        prim = Primitive(name, "elementwise", len(names), differentiable,
                         grad_name or f"{_pascal(name)}Backward0",
                         form, out_dtype, user=not _builtin,
                         opaque=not _builtin and (numpy is not None or vjp is not None))
        if name in PRIMITIVES:
            _forget_derivatives(name)
        PRIMITIVES[name] = prim
        SHAPE_RULES[name] = _elementwise_shape(prim)
        NUMPY_RULES[name] = numpy or _lambdified(form)
        VJP_RULES.pop(name, None)
        if vjp is not None:         # else the front end's generic rule, from the formula
            VJP_RULES[name] = vjp
    return prim


def _select(condlist, choicelist, default=np.nan):
    """numpy.select that broadcasts scalar conditions / choices (sympy prints Piecewise
    as select, and numpy's own select rejects mixed scalar and array entries)."""
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        if type(cond) is bool or type(cond) is np.bool_:   # a condition on scalars only
            out = choice if cond else out
        else:
            out = np.where(cond, choice, out)
    return out


class _Fold:
    """Stands in for np.logical_and / np.logical_or in lambdified code: sympy prints
    And(a, b) as ``logical_and.reduce((a, b))``, which fails for differently shaped a, b."""

    def __init__(self, ufunc):
        self.ufunc = ufunc

    def reduce(self, args):
        out = args[0]
        for a in args[1:]:
            out = self.ufunc(out, a)
        return out

    def __call__(self, *args, **kwargs):
        return self.ufunc(*args, **kwargs)


# numpy as the module object, not the name "numpy": lambdify then takes numpy's loaded
# namespace as it is, where "numpy" makes it star-import numpy (which loads f2py, testing,
# ... : ~0.14 s on the first compile of a process)
def _erf(x):
    from scipy.special import erf      # late: scipy loads only when erf is evaluated
    return erf(x)


def _erfinv(x):
    from scipy.special import erfinv      # late: scipy loads only when erfinv is evaluated
    return erfinv(x)


LAMBDIFY_MODULES = [{"select": _select, "logical_and": _Fold(np.logical_and),
                     "logical_or": _Fold(np.logical_or), "erf": _erf, "erfinv": _erfinv,
                     "keep": lambda u: u, "fmod": np.fmod, "torch_pow": F.torch_pow,
                     # (the printer prints isnan as numpy.isnan, a name the generated
                     # function's namespace -- numpy's names -- lacks: printed bare)
                     "isnan": np.isnan}, np]


def lambdify(syms, expr, cse: bool = False) -> Callable:
    """The numpy function of `syms` computing `expr` (Piecewise-safe; products with
    divisions in the order of :mod:`symgrad.graph.division`)."""
    return _sympy().lambdify(syms, expr, modules=LAMBDIFY_MODULES,
                             cse=_cse if cse else False, printer=_printer())


def _cse(exprs):
    """sympy's common subexpressions, except integer powers: a divisor ``y**2`` named
    ``x0`` would be one division by ``x0`` where the division chain divides by ``y``
    twice (``(x/y)/y``, as PyTorch: ``x*x/y**2`` at y = 1e300 is inf, not inf/inf)."""
    replacements, reduced = _sympy().cse(exprs, list=False)   # as lambdify's own call
    subs: dict = {}
    kept = []
    for sym, value in replacements:
        value = value.xreplace(subs)
        if value.is_Pow and value.exp.is_Integer:
            subs[sym] = value
        else:
            kept.append((sym, value))
    if isinstance(reduced, (list, tuple)):
        return kept, type(reduced)(e.xreplace(subs) for e in reduced)
    return kept, reduced.xreplace(subs)


@functools.lru_cache(maxsize=1)
def _printer():
    """sympy's numpy printer, printing a product in the order of
    :mod:`symgrad.graph.division` (as the LLVM backend evaluates it)."""
    import sympy                                      # late: sympy loads when first needed
    from sympy.printing.numpy import NumPyPrinter

    class ChainPrinter(NumPyPrinter):
        def _print_Mul(self, expr):
            chain = product_order(expr)
            if not chain.steps or chain.steps == (("*", chain.steps[0][1]),):
                return super()._print_Mul(expr)         # one multiplication: any order
            out = "1.0" if chain.steps[0][0] == "/" else None
            for op, f in chain.steps:
                out = f"({self._print(f)})" if out is None else f"({out}){op}({self._print(f)})"
            if chain.coeff == -1:
                return f"(-({out}))"
            return out if chain.coeff == 1 else f"({out})*({self._print(chain.coeff)})"

        def _print_Pow(self, expr, rational=False):
            # as PyTorch's pow computes it (formula.torch_pow: a number exponent takes
            # its kernels, (-0.0)**-0.5 is -inf; an exponent y - 1 of a derivative is a
            # number when y is), whether the exponent is a Float, a Rational or a formula
            e = expr.exp
            if e.is_Number:
                e = sympy.Integer(e) if e.is_Integer else sympy.Float(float(e))
            return f"torch_pow({self._print(expr.base)}, {self._print(e)})"

    return ChainPrinter({"fully_qualified_modules": False, "inline": True,
                         "allow_unknown_functions": True,
                         "user_functions": {k: k for k in LAMBDIFY_MODULES[0]}})


_SCALARS = (int, float, bool, np.generic)


def _lambdified(formula: Formula) -> Callable:
    """The numpy kernel of a formula, made on its first call: the own form evaluated
    (:func:`formula.lambdify`) when it is the definition, else sympy's lambdified."""
    made: list = []

    def kernel(*arrays):
        if not made:
            made.append(F.lambdify(formula.fsymbols, formula.node) if formula.native_first
                        else lambdify(formula.symbols, formula.expr))
        fn = made[0]
        shape = None
        same = True          # the common case: one array shape, Python / numpy scalars
        for a in arrays:
            if type(a) is np.ndarray:
                if shape is None:
                    shape = a.shape
                elif a.shape != shape:
                    same = False
            elif not isinstance(a, _SCALARS):
                same = False
        if not same or shape is None:
            shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
            # lambdified Piecewise conditions (logical_and.reduce) need equal shapes; Python
            # scalars stay scalars (weak: x > 0.3 compares in x's dtype, as PyTorch does)
            arrays = [np.broadcast_to(a, shape) if isinstance(a, np.ndarray) else a
                      for a in arrays]
        token = fp_enter()   # log(0), 0 * inf ...: no warnings, as in PyTorch
        try:
            res = fn(*arrays)
        finally:
            fp_leave(token)
        if np.shape(res) != shape:
            res = np.broadcast_to(res, shape).copy()
        return res
    return kernel


def _elementwise_shape(prim: Primitive) -> Callable:

    def rule(avals, **_):
        shape = broadcast_shapes(*(a[0] for a in avals))
        if prim.out_dtype == "bool":
            return shape, dtypes.bool_
        dt = avals[-1][1] if prim.name != "where" else avals[1][1]
        if prim.out_dtype == "float" and not dt.is_floating_point:
            dt = dtypes.get_default_dtype()
        return shape, dt
    return rule


def derivative_primitive(prim: Primitive, i: int):
    """How to compute d prim / d input i: a number or symbol (of the own formula type,
    ``OUT`` for the output) when the partial is that simple, ``1 / v`` (a division of 1
    by a symbol), else ``(dprim, symbols)`` -- an elementwise primitive over just the
    symbols (inputs and/or ``OUT``) the partial uses, registered once."""
    form = prim.formula
    d = form.fpartial(i)
    if d.is_number or d.is_symbol:
        return d
    if d.op == "div" and d.args[0] is F.number(1) and d.args[1].is_symbol:
        return d                # 1 / v: the rule divides by v (see ops.vjp)
    name = f"{prim.name}.d{i}"
    cached = _DERIVED.get(name)
    if cached is not None:
        return cached
    free = F.free_symbols(d)
    syms = tuple(s for s in form.fsymbols + (OUT,) if s in free)
    # inside the derived primitive, prim's output is an ordinary input: rename it, so `out`
    # keeps meaning the derived primitive's own output when it is differentiated in turn
    own_name = f"out_{name.replace('.', '_')}"
    own_out = F.symbol(own_name)
    own = tuple(own_out if s is OUT else s for s in syms)
    d_own = F.substitute([d], {OUT: own_out})[0]

    def native():
        return own, d_own, _given_second(form, i, syms)

    def build():                # sympy's form: the parent's sympy partial, renamed
        sympy = _sympy()
        sd = form.partial(i)
        s_own_out = sympy.Symbol(own_name, real=True)
        by_name = {x.name: x for x in form.symbols}
        s_own = tuple(s_own_out if s is OUT else by_name[s.name] for s in syms)
        second = _given_second(form, i, syms)
        return (s_own, sd.subs(out_symbol(), s_own_out),
                None if second is None else tuple(_to_sympy(e) for e in second))
    # a built-in's partials, and theirs, are computed from the own form (no sympy for a
    # gradient or a hessian); a user's sympy formula's as sympy derives them
    derived = Formula(build=build, native=native,
                      sympy_partials=form._sympy_partials or not form.native_first)
    with _lock:
        dprim = Primitive(name, "elementwise", len(syms), True, f"{_pascal(prim.name)}Backward0",
                          derived, "same", derived_from=prim)
        PRIMITIVES[name] = dprim
        SHAPE_RULES[name] = _elementwise_shape(dprim)
        NUMPY_RULES[name] = _lambdified(derived)
        _DERIVED[name] = (dprim, syms)
    return _DERIVED[name]


_DERIVED: dict[str, tuple] = {}


def _given_second(form: Formula, i: int, syms: tuple) -> tuple | None:
    """The closed-form partials of partial ``i`` of ``form`` (its ``grad_grads``), one per
    symbol of ``syms`` (the ones that partial uses), or None: it is differentiated."""
    if form.second is None:
        return None
    parts = form.second(*form.fsymbols, OUT)[i]
    if parts is None:
        return None
    if OUT in syms or len(parts) != len(form.fsymbols):
        raise ValueError("grad_grads: one partial per input, of a partial without `out`")
    by_symbol = dict(zip(form.fsymbols, parts))
    return tuple(F.as_expr(by_symbol[s]) for s in syms)


def resolve(name: str) -> "Primitive | None":
    """The primitive called ``name``, deriving it if it is a partial derivative not
    derived in this process yet (``pow.d0``, ``tanh.d0.d0``); None if there is none."""
    prim = PRIMITIVES.get(name)
    if prim is not None:
        return prim
    base, sep, last = name.rpartition(".d")
    if not sep or not last.isdigit():
        return None
    parent = resolve(base)
    if parent is None or parent.kind != "elementwise" or int(last) >= parent.nin:
        return None
    d = derivative_primitive(parent, int(last))
    return d[0] if isinstance(d, tuple) else None


def _forget_derivatives(name: str) -> None:
    """A user primitive is being redefined: its derivatives (and theirs) describe the old
    formula; they are derived again when needed. (VJP plans are keyed by primitive
    object, so the new primitive gets its own.)"""
    for n in [n for n in _DERIVED if n.startswith(name + ".")]:
        del _DERIVED[n]
