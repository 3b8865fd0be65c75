"""vecmath's fitted coefficient tables are what codegen.fits computes, and meet their
stated error (the fits are the single source of these numbers)."""
from codegen import fits, vecmath


def test_log1p_unit_coefficients_are_the_fit():
    for fmt, bound in (("f64", 2.0 ** -56), ("f32", 2.0 ** -29)):
        assert vecmath.LOG1P_UNIT_COEFFS[fmt] == fits.log1p_unit(fmt)
        assert fits.log1p_unit_error(vecmath.LOG1P_UNIT_COEFFS[fmt], points=201) < bound
