"""scipy.optimize with a compiled value-and-gradient: numpy arrays in, numpy arrays out.

Run: python examples/scipy_optimize.py
"""
import numpy as np
import scipy.optimize

import symgrad


def rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


fg = symgrad.value_and_grad(rosenbrock)
x0 = np.full(20, -1.0)
res = scipy.optimize.minimize(fg, x0, jac=True, method="L-BFGS-B")
print("converged:", res.success, "| f =", float(res.fun), "| iterations:", res.nit)
print("x =", np.round(res.x, 4))
print("cache:", fg.cache_info())
