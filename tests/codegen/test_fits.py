"""vecmath's fitted coefficient tables against codegen.fits: each table is at least as
accurate as a fresh fit by the procedure fits.py documents (so the numbers in vecmath
are reproducible, not folklore), and the log1p-on-[0,1] table is the fit bit for bit."""
import pytest

from codegen import fits, vecmath


@pytest.mark.parametrize("table", fits.TABLES, ids=lambda t: t.name)
def test_table_is_as_accurate_as_a_fresh_fit(table):
    used = eval(table.name, vars(vecmath.core))     # noqa: S307 - names from fits.TABLES
    assert len(used) == table.n
    # 1%: the highest coefficients barely move the error, and the Remez iteration's
    # stopping point decides their last bits (equal errors to 4 digits where reproduced)
    assert table.error(used, points=401) <= table.error(table.fit(), points=401) * 1.01


def test_log1p_unit_coefficients_are_the_fit():
    for fmt, bound in (("f64", 2.0 ** -56), ("f32", 2.0 ** -29)):
        assert vecmath.core.LOG1P_UNIT_COEFFS[fmt] == fits.log1p_unit(fmt)
        assert fits.log1p_unit_error(vecmath.core.LOG1P_UNIT_COEFFS[fmt], points=201) < bound
