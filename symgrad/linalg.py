"""``symgrad.linalg``: PyTorch's ``torch.linalg`` namespace -- ``inv``, ``solve``, ``det``,
``slogdet``, ``cholesky``, ``svd``, ``svdvals``, ``norm`` / ``vector_norm`` / ``matrix_norm`` and
``LinAlgError`` (defined in :mod:`symgrad.functions.solvers`); ``eigh``, ``eigvalsh``,
``qr``, ``solve_triangular``, ``pinv``, ``lstsq``, ``matrix_power``, ``multi_dot``,
``vecdot``, ``matrix_rank``, ``cond``, ``diagonal`` (in
:mod:`symgrad.functions.factorizations`), ``cross``, plus the matrix products."""
from __future__ import annotations

from .functions.combine import linalg_cross as cross
from .functions.factorizations import (cond, diagonal, eigh, eigvalsh, lstsq, matrix_power,
                                       matrix_rank, multi_dot, pinv, qr, solve_triangular,
                                       vecdot)
from .functions.linalg import matmul
from .functions.solvers import (LinAlgError, cholesky, det, inv, matrix_norm, norm, slogdet,
                                solve, svd, svdvals, vector_norm)

__all__ = ["inv", "solve", "det", "slogdet", "cholesky", "svd", "svdvals", "norm", "vector_norm",
           "matrix_norm", "matmul", "LinAlgError", "eigh", "eigvalsh", "qr", "solve_triangular",
           "pinv", "lstsq", "matrix_power", "cross", "multi_dot", "vecdot", "matrix_rank",
           "cond", "diagonal"]
