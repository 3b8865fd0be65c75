"""Gradients where infinities, NaN, subnormals, overflow and cancellation meet: each case a
wrong gradient (or a failure) the differential fuzzer found (tests/fuzz), checked eagerly
and compiled on both backends, both dtypes, against PyTorch (NaN and inf where PyTorch
puts them) or, where PyTorch's own rounding is the difference, JAX or mpmath."""
import numpy as np
import pytest
import torch

import symgrad as sg

BACKENDS = ("eager", "numpy", "llvm")
DTYPES = ("float32", "float64")


def _grads(fn, arrays, backend):
    if backend == "eager":
        ts = [sg.tensor(a, requires_grad=True) for a in arrays]
        fn(sg, *ts).backward()
        return [t.grad.numpy() for t in ts]
    g = sg.grad(lambda *xs: fn(sg, *xs), argnums=tuple(range(len(arrays))), backend=backend)
    return [np.asarray(v) for v in g(*arrays)]


def _torch_grads(fn, arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn(torch, *ts).backward()
    return [t.grad.numpy() for t in ts]


def _check(fn, arrays, backend, ref_fn=None):
    got = _grads(fn, arrays, backend)
    want = _torch_grads(ref_fn or fn, arrays)
    for g, w in zip(got, want):
        tol = 1e-5 if g.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)     # NaN / inf positions equal


ROWS = [[np.inf, 80.0, 3.0], [-np.inf, -np.inf, -np.inf], [np.nan, 1.0, 2.0],
        [1e30, -1e30, 5.0], [np.inf, -np.inf, 1.0], [0.5, -2.0, 1.0]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_logsumexp_of_rows_with_infinities(backend, dtype):
    # a row holding +inf: its finite elements get exp(x - inf) = 0 in PyTorch (shifting
    # by 0 instead made exp(80) overflow in float32: inf / inf = NaN)
    x = np.array(ROWS, dtype=dtype)
    w = np.arange(1, 7, dtype=dtype)
    _check(lambda L, v: (L.logsumexp(v, 1) * L.tensor(w)).sum(), [x], backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ("numpy", "llvm"))
def test_written_out_logsumexp_is_stabilised_like_logsumexp(backend, dtype):
    # compiled code rewrites log(sum(exp(x))) to the shifted form: same gradients as
    # PyTorch's logsumexp (the written-out form overflows in PyTorch itself)
    x = np.array(ROWS, dtype=dtype)
    w = np.arange(1, 7, dtype=dtype)
    _check(lambda L, v: (L.log(L.exp(v).sum(1)) * L.tensor(w)).sum(), [x], backend,
           ref_fn=lambda L, v: (L.logsumexp(v, 1) * L.tensor(w)).sum())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_division_by_a_subnormal_under_a_zero_cotangent(backend, dtype):
    # amax routes a zero cotangent to the non-maximal quotient: 0 / b is 0, where
    # 0 * (1 / b) was 0 * inf = NaN for a subnormal b
    tiny = np.finfo(dtype).smallest_subnormal
    a = np.array([[1.0, 2.0, -3.0]], dtype=dtype)
    b = np.array([[tiny], [1.0]], dtype=dtype)
    _check(lambda L, x, y: (x / y).amax(1).sum(), [a, b], backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_log_of_a_subnormal_under_a_zero_cotangent(backend, dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([tiny, 1.0, 2.0], dtype=dtype)
    _check(lambda L, v: (L.log(v) * L.tensor(np.array([0.0, 1.0, 1.0], dtype=dtype))).sum(),
           [x], backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ("numpy", "llvm"))
def test_guarded_where_whose_condition_broadcasts_the_branch(backend, dtype):
    # where(v > 0, sqrt(v), c) with v = a + b broadcast ([7] + [2, 1]): the untaken
    # branch's leaves are guarded at the condition's shape (the guard was skipped when it
    # broadcast a leaf up, and sqrt's NaN gradient at v < 0 leaked into a and b)
    a = np.array([-1.0, 2, 3, -4, 5, 6, 7], dtype=dtype)
    b = np.array([[0.5], [-0.5]], dtype=dtype)
    c = np.ones((1, 7), dtype=dtype)

    def fn(L, x, y):
        v = x + y
        return L.where(v > 0, v.sqrt(), L.tensor(c)).sum()

    def ref(L, x, y):         # PyTorch eager has no guard: the reference writes it out
        v = x + y
        return L.where(v > 0, L.where(v > 0, v, 1).sqrt(), L.tensor(c)).sum()
    _check(fn, [a, b], backend, ref_fn=ref)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_division_by_a_small_divisor(backend):
    # d(x/y)/dy = -(g * (x / y)) / y: squaring y first makes a subnormal of y near 1e-20
    # in float32 (digits lost: a relative error up to 1e-3) or 0 (an infinite gradient)
    y = np.geomspace(1e-23, 1e-18, 41).astype(np.float32)
    x = np.linspace(-1e-18, 1e-18, 41).astype(np.float32)
    _check(lambda L, a, b: (a / b).sum(), [x, y], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_gradient_of_a_damped_ratio_at_huge_values(backend):
    # d/db a / (b*b + 1) = -2ab / (b^2 + 1)^2: a*b or 2*b overflows first in the folded
    # formula (inf / inf = NaN) where PyTorch's chain of steps gives 0 or a finite value
    a = np.array([3.4e38, -3e38, 1e30, 5.0, 1e-30], dtype=np.float32)
    b = np.array([3.4e38, 2e19, -1e20, 1e19, 3e38], dtype=np.float32)
    _check(lambda L, x, y: (x / (y * y + 1)).sum(), [a, b], backend)


def _values_and_grads(fn, arrays, backend):
    """(value, grads) eagerly or compiled (value_and_grad: forward values shared with the
    gradient's kernels)."""
    if backend == "eager":
        ts = [sg.tensor(a, requires_grad=True) for a in arrays]
        out = fn(sg, *ts)
        out.backward()
        return out.detach().numpy(), [t.grad.numpy() for t in ts]
    f = sg.value_and_grad(lambda *xs: fn(sg, *xs), argnums=tuple(range(len(arrays))),
                          backend=backend)
    v, g = f(*arrays)
    return np.asarray(v), [np.asarray(a) for a in g]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_product_of_a_huge_and_a_vanishing_factor(backend, dtype):
    # d/dx c / (x*x + 1) sums to -2 * (c*w) * r**2 * x with r = 1/(x*x + 1): for float32
    # x = 3e38, r = 0 and (c*w) * x overflowed first in sympy's factor order (inf * 0 =
    # NaN); PyTorch forms r*r first (0), as a fused product now does (compound factors
    # first: symgrad/graph/division.py). Found by the fuzzer (seed 2027001065)
    x = np.array([3e38, -3e38, 1e19, 2.0, -0.5, 0.0, 7.0], dtype=dtype)
    w = np.array([1.26, -2.5, 3.0, 0.7, 1.0, -1.0, 2.0], dtype=dtype)
    fn = lambda L, v: ((0.97 / (v * v + 1)) * L.tensor(w)).sum()    # noqa: E731
    got_v, got = _values_and_grads(fn, [x], backend)
    want = _torch_grads(fn, [x])
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
    t = torch.tensor(x)
    np.testing.assert_allclose(got_v, fn(torch, t).numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_product_gradient_whose_running_products_overflow_float32(backend, dtype):
    # the product of the other elements, by exclusive running products from both sides:
    # 1e30 * 1e30 overflowed float32 (inf) before 1e-30 brought it back; PyTorch's CPU
    # scans accumulate float32 in double, and so do symgrad's (fuzz seeds 2028002799,
    # 2028007043). The reference: PyTorch in float64 (no zero or infinity: its
    # result / x is exact there), rounded to the dtype -- in float32 PyTorch's forward
    # product overflows itself, and its result / x is inf everywhere
    x = np.array([[1e30, 1e30, 1e-30, 1e-20, 2.0], [3e38, -1.5, 0.5, 1e-10, 4.0]], dtype=dtype)
    w = np.array([0.75, -1.25], dtype=dtype)

    def fn(L, v):
        return (v.prod(1) * L.tensor(w.astype(str(v.dtype).split(".")[-1]))).sum()
    got = _grads(fn, [x], backend)[0]
    want = _torch_grads(fn, [x.astype(np.float64)])[0].astype(dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-14)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_cumprod_whose_running_product_overflows_float32(backend, dtype):
    x = np.array([1e30, 1e30, 1e-30, 1e-20, -3.0], dtype=dtype)
    if backend == "eager":
        got = sg.tensor(x).cumprod(0).numpy()
    else:
        got = np.asarray(sg.compile(lambda v: v.cumprod(0), backend=backend)(x))
    want = torch.tensor(x).cumprod(0).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-14)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_logsumexp_gradient_of_tied_huge_maxima(backend, dtype):
    # two equal maxima at 3e38: each gets half the cotangent (JAX's answer, the exact
    # one). PyTorch's g * exp(x - result) reads the result rounded by |result| * eps,
    # far more than log 2 here, and gives 1 to each (fuzz seed 2028004634)
    import jax
    from jax.scipy.special import logsumexp as jlse
    x = np.array([[3e38, 3e38, 1.0, -2.0], [1e20, -1e20, 1e20, 1e20]], dtype=dtype)
    w = np.array([1.5, 0.5], dtype=dtype)
    got = _grads(lambda L, v: (L.logsumexp(v, 1) * L.tensor(w)).sum(), [x], backend)[0]
    with jax.enable_x64(dtype == "float64"):
        want = np.asarray(jax.grad(lambda v: (jlse(v, axis=1) * w).sum())(x))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_tanh_gradient_next_to_saturation(backend, dtype):
    # 1 - t*t for t = tanh(x) next to +-1: t*t rounded first loses digits (a relative
    # error up to eps / (1 - t^2): 5e-12 at x = tan(-1.42) in float64, fuzz seed
    # 2028005510); (1 - t)(1 + t) is within 2 ulps of 1 - t^2 for the t computed, as
    # PyTorch's fused 1 - t*t (reference: the exact 1 - t^2 of that t, by mpmath; the
    # backends' t differ from PyTorch's by an ulp, which 1 / (1 - t^2) amplifies)
    import mpmath
    x = np.concatenate([np.linspace(2.0, 8.5, 27), -np.linspace(2.0, 8.5, 27)]).astype(dtype)
    got = _grads(lambda L, v: L.tanh(v).sum(), [x], backend)[0]
    t = sg.tensor(x).tanh().numpy() if backend == "eager" else \
        np.asarray(sg.compile(lambda v: v.tanh(), backend=backend)(x))
    with mpmath.workdps(40):
        want = np.array([float(1 - mpmath.mpf(float(v)) ** 2) for v in t])
    np.testing.assert_allclose(got, want, rtol=2 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ("numpy", "llvm"))
def test_empty_strided_slice_flattened(backend, dtype):
    # a zero-size slice of a non-contiguous view, flattened: the strided reshape walked
    # past the new shape's dims (IndexError at compile time: fuzz seed 2028001939)
    x = np.random.default_rng(0).normal(size=(7, 1)).astype(dtype)
    _check(lambda L, v: (v[:, 0:0:2].flatten().log1p()).sum() + (v * v).sum(), [x], backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_pow_base_gradient_under_an_infinite_cotangent_at_exponent_zero(backend, dtype):
    # |c| ** (|b| ** a): at a = 0 the inner power is 1 and the outer one's cotangent is
    # inf * log|c|; PyTorch's pow_backward_self selects 0 where the exponent is 0 (the
    # base's gradient was inf * 0 = NaN, fuzz seed 2029001560), while its exponent's
    # gradient is the product grad * partial (NaN at base 0 and exponent >= 0) as before
    a = np.array([0.0, 0.0, 2.0, 1.0, 0.0], dtype=dtype)
    b = np.array([1.75, 0.0, 0.0, 1.0, -3.0], dtype=dtype)
    c = np.array([-np.inf, 3.0, np.inf, np.inf, np.nan], dtype=dtype)
    _check(lambda L, x, y, z: (z.abs() ** (y.abs() ** x)).sum(), [a, b, c], backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("exponent", [0, 0.0, 2.0])
def test_pow_by_a_scalar_exponent_under_an_infinite_cotangent(backend, dtype, exponent):
    x = np.array([0.0, 2.0, -1.5, np.inf], dtype=dtype)
    _check(lambda L, v: (L.exp(v ** exponent * 1000.0)).sum(), [x], backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0,), (2, 0)])
def test_index_list_into_an_empty_expanded_axis(backend, dtype, shape):
    # the gradient of x.expand(3, ...)[list] when the other axes are empty: its
    # scatter-add reshaped an empty array with an axis of -1 (ValueError eagerly: fuzz
    # seed 2029004365)
    x = np.zeros(shape, dtype=dtype)
    _check(lambda L, v: (v.expand(3, *shape)[[-3, -2, -3, 2, 0]] * 2).sum(), [x], backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_of_a_ratio_to_its_own_square_at_huge_values(backend, dtype):
    # d/dx x / (x*x + 1) = 1/d - 2 x^2 / d^2 with d = x*x + 1 = inf: PyTorch forms
    # (x / d) / d (0) before the factor x; the fused x**2 / d / d was inf / inf = NaN
    # (fuzz seed 2029003166)
    big = 1e300 if dtype == "float64" else 3e38
    x = np.array([big, -big, 2.0, -0.5, 1e150 if dtype == "float64" else 1e19], dtype=dtype)
    w = np.array([0.75, 1.25, -1.0, 2.0, 0.5], dtype=dtype)
    _check(lambda L, v: ((v / (v * v + 1)) * L.tensor(w)).sum(), [x], backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_extremum_of_a_value_and_its_negation_keeps_nan(backend, dtype, op):
    # maximum(s, -s): fused, the tie branch (s + (-s)) / 2 was folded to 0 by sympy, so
    # a NaN s (sqrt of a negative number) gave 0 on the compiled backends (fuzz seed
    # 2028006050); such a cluster now keeps its arguments apart
    x = np.array([-1.0, 4.0, np.nan, np.inf, 0.25, 9.0], dtype=dtype)
    w = np.array([1.0, 0.5, 2.0, 1.5, -1.0, 0.75], dtype=dtype)

    def fn(L, v):
        return (getattr(L, op)(v.sqrt(), -v.sqrt()) * L.tensor(w)).sum()
    got_v, got_g = _values_and_grads(fn, [x], backend)
    t = torch.tensor(x, requires_grad=True)
    want = fn(torch, t)
    want.backward()
    np.testing.assert_allclose(got_v, want.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(got_g[0], t.grad.numpy(), rtol=1e-6)
    each = (lambda v: getattr(sg, op)(v.sqrt(), -v.sqrt()))
    got = each(sg.tensor(x)).numpy() if backend == "eager" else \
        np.asarray(sg.compile(each, backend=backend)(x))
    tx = torch.tensor(x)
    np.testing.assert_allclose(got, getattr(torch, op)(tx.sqrt(), -tx.sqrt()).numpy(), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_quotient_gradient_with_the_cotangent_last(backend):
    # d/dy of w * x / y is -w * ((x / y) / y) in PyTorch: the cotangent after both
    # divisions; fused, w * (x / y) overflowed first at x = 3e38 (fuzz seed 2028007955)
    x = np.array([3e38, 3e38, -3e38, 1e30, 2.0], dtype=np.float32)
    y = np.array([1.1507828, 1.75, 1.2, 1e-5, 0.5], dtype=np.float32)
    w = np.array([1.4763182, 1.9, 1.3, 0.5, 2.0], dtype=np.float32)
    _check(lambda L, a, b: ((a / b) * L.tensor(w)).sum(), [x, y], backend)


@pytest.mark.parametrize("backend", ("eager", "numpy"))
def test_float32_sum_whose_partial_sums_overflow(backend):
    # numpy's float32 sums accumulate in float64, as the LLVM backend's block sums and
    # PyTorch's float64 reference: a partial sum 3e38 + 3e38 no longer overflows to inf
    # before a -3e38 or a -inf term (inf - inf = NaN where the sum is finite or -inf:
    # fuzz seed 2028003556). Reference: PyTorch in float64, rounded to float32
    x = np.array([[3e38, 3e38, -np.inf, 1.0], [3e38, 3e38, -3e38, -2.5e38],
                  [-3e38, -3e38, np.inf, 0.5], [1e8, 1.0, 1.0, 1.0]], dtype=np.float32)

    def fn(v):
        return v.sum(1) + v.mean(1)
    got = fn(sg.tensor(x)).numpy() if backend == "eager" else \
        np.asarray(sg.compile(fn, backend=backend)(x))
    want = fn(torch.tensor(x.astype(np.float64))).numpy().astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# sympy's automatic evaluation merged the steps of a fused formula: (x + 1) - 1 ran as x,
# (x*2)*0.5 as x, sqrt(x*x) as |x|, 3*(x + 1) as 3*x + 3 -- exact for real numbers, not
# in IEEE arithmetic (review finding r12). Fused formulas keep such steps apart
# (symgrad.graph.primitives.keep).
MERGING = {
    "add_then_subtract": lambda m, x: (x + 1) - 1,
    "scale_then_unscale": lambda m, x: (x * 2) * 0.5,
    "sqrt_of_square": lambda m, x: m.sqrt(x * x),
    "distributed_factor": lambda m, x: (x + 1) * 3,
    "shifted_sums": lambda m, x: (x + 1) + (x * 0.5 + 2),
    "cancelled_term": lambda m, x: (x + 1e8) - x,
    # powers of one base combined, a product flattened into another (review 2026-11-26)
    "square_over_itself": lambda m, x: x * x / x,
    "square_method_over_itself": lambda m, x: x.square() / x,
    "over_its_square": lambda m, x: x / (x * x),
    "root_of_fourth_power": lambda m, x: x.pow(4).sqrt(),
    "reciprocal_of_reciprocal": lambda m, x: 1 / (1 / x),
    "scaled_product": lambda m, x: (x * 2) * (x * 0.5 + 1),
    "cubed_into_log1p": lambda m, x: m.log1p(x ** 3),        # fuzz seed 2031002365
}


TRANSCENDENTAL = {"root_of_fourth_power", "cubed_into_log1p"}   # (not exact in IEEE)


@pytest.mark.parametrize("name", sorted(MERGING))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ("numpy", "llvm"))
def test_fused_steps_are_not_merged(backend, dtype, name):
    fn = MERGING[name]
    big = np.finfo(dtype).max / 1.5
    x = np.array([1e-20, big, -big, 0.1, 1e16, -1e16, 3.0, -0.0], dtype=dtype)
    want = fn(torch, torch.tensor(x)).numpy()
    got = np.asarray(sg.compile(lambda v: fn(sg, v), backend=backend)(x))
    if name in TRANSCENDENTAL:
        # pow / log1p are each library's own routine (PyTorch's Sleef or libm, ours or
        # numpy's), within an ulp or two of each other and not the same on every CPU:
        # inf / NaN / zero positions must agree exactly, finite values to a few ulp
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)
    else:
        np.testing.assert_array_equal(got, want)
    # and the gradient of a weighted sum of it, against PyTorch's
    w = np.linspace(-2, 2, x.size).astype(dtype)
    _check(lambda m, v: (fn(m, v) * m.tensor(w)).sum(), [x], backend)


@pytest.mark.parametrize("divisor", [3, 255.0, 7, 0.1])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ("numpy", "llvm"))
def test_division_by_a_number_divides(backend, dtype, divisor):
    """x / 3 compiled divides, as PyTorch does (and eager mode): multiplying by the rounded
    reciprocal 1/3 is 1 ulp off for a third of the elements. Its gradient too."""
    x = np.random.default_rng(0).standard_normal(1000).astype(dtype)
    want = (torch.tensor(x) / divisor).numpy()
    got = np.asarray(sg.compile(lambda v: v / divisor, backend=backend)(x))
    np.testing.assert_array_equal(got, want)
    got = np.asarray(sg.compile(lambda v: v.div(divisor) * 2, backend=backend)(x))
    np.testing.assert_array_equal(got, (torch.tensor(x).div(divisor) * 2).numpy())
    xt = torch.tensor(x, requires_grad=True)
    (torch.sin(xt) / divisor).sum().backward()
    g = sg.grad(lambda v: (sg.sin(v) / divisor).sum(), backend=backend)(x)
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-6 if dtype == "float32" else 1e-14)


EXTREMUM_INPUTS = {
    "two NaN": [[1., np.nan, 2.], [3., 0., np.nan]],
    "one NaN": [[1., 5., 2.], [np.nan, 0., 5.]],
    "all NaN": [[np.nan, np.nan], [np.nan, np.nan]],
    "NaN and inf": [[np.inf, np.nan], [-np.inf, 1.]],
    "ties, no NaN": [[1., 5., 5.], [-3., 5., -3.]],
    "-inf only": [[-np.inf, -np.inf], [-np.inf, -np.inf]],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("case", list(EXTREMUM_INPUTS))
def test_full_max_min_with_nan_share_gradient_among_nan(case, kind, backend, dtype):
    """review5 #1: full max() / min() of a tensor holding NaN is NaN and its gradient is
    shared among the NaN elements (0 elsewhere), as PyTorch's evenly_distribute_backward;
    compiled gave NaN everywhere. Value checked too."""
    x = np.array(EXTREMUM_INPUTS[case], dtype=dtype)
    fn = (lambda L, v: getattr(v * 2, kind)() * 3)
    _check(fn, [x], backend)
    want = fn(torch, torch.tensor(x)).numpy()
    got = (fn(sg, sg.tensor(x)).numpy() if backend == "eager"
           else sg.compile(lambda v: fn(sg, v), backend=backend)(x))
    np.testing.assert_array_equal(np.asarray(got), want)
