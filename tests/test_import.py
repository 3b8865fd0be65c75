"""``import symgrad`` loads only what it needs: numpy and symgrad itself. sympy (formulas),
scipy (BLAS, special functions) and llvmlite (native code) load when first used."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("sympy", "scipy", "llvmlite", "codegen", "torch")


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_loads_no_heavy_library() -> None:
    loaded = run(f"import sys, symgrad; print([m for m in {HEAVY!r} if m in sys.modules])")
    assert loaded == "[]"


def test_eager_forward_without_grad_needs_no_sympy() -> None:
    code = ("import sys, symgrad as torch\n"
            "x = torch.ones(2, 2) * 3 + torch.arange(4.).reshape(2, 2).exp()\n"
            "print(float(x.sum()), 'sympy' in sys.modules)")
    value, sympy_loaded = run(code).split()
    assert abs(float(value) - (12 + sum(2.718281828459045 ** k for k in range(4)))) < 1e-5  # float32
    assert sympy_loaded == "False"


def test_eager_gradients_need_no_sympy() -> None:
    """The built-in formulas and their first partials are symgrad's own formula type;
    sympy loads only for inspection (tests/compiler/test_compile_without_sympy.py:
    the compiler neither)."""
    code = ("import sys, symgrad as torch\n"
            "x = torch.ones(2, 2, requires_grad=True)\n"
            "((x + 2) * (x + 2) * 3).mean().backward()\n"
            "y = torch.tensor([0.5, 2.0], requires_grad=True)\n"
            "(y.tanh() * y.sqrt() / y.exp().log1p()).pow(2).sum().backward()\n"
            "print(x.grad.tolist(), 'sympy' in sys.modules)")
    assert run(code) == "[[4.5, 4.5], [4.5, 4.5]] False"
