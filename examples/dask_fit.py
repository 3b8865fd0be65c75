"""Fit a logistic regression on data that never sits in one process: a dask array of
many row chunks, generated lazily on the workers of a local Dask cluster; each
scipy.optimize step computes the loss and its gradient chunk by chunk with a compiled
symgrad gradient (symgrad.dask.value_and_grad) and adds them in a tree.

Run: python examples/dask_fit.py [--rows 4000000] [--chunk 100000] [--workers 2]
(needs pip install 'symgrad[distributed]')
"""
import argparse
import time

import dask.array as da
import numpy as np
import scipy.optimize
from distributed import Client, LocalCluster

import symgrad
import symgrad.dask

FEATURES = 20
TRUE_W = np.linspace(-2.0, 2.0, FEATURES)


def data(rows: int, chunk: int):
    """Features and labels, made chunk by chunk where they are used (never all at once)."""
    rs = da.random.RandomState(0)
    X = rs.normal(size=(rows, FEATURES), chunks=(chunk, FEATURES))
    noise = rs.logistic(size=rows, chunks=chunk)
    y = (X @ TRUE_W + noise > 0).astype(np.float64)
    return X, y


def nll(w, X, y):
    """The negative log-likelihood: a sum over rows, as symgrad.dask needs."""
    z = X @ w
    return (symgrad.nn.functional.softplus(z) - y * z).sum()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--chunk", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster):
        X, y = data(args.rows, args.chunk)
        fg = symgrad.dask.value_and_grad(nll)
        calls = [0]

        def objective(w):                 # scaled by the rows: a mean, for the optimiser
            calls[0] += 1
            value, grad = fg(w, X, y)
            return value / args.rows, grad / args.rows
        t0 = time.perf_counter()
        res = scipy.optimize.minimize(objective, np.zeros(FEATURES), jac=True,
                                      method="L-BFGS-B")
        took = time.perf_counter() - t0
    print(f"{args.rows:,} rows in {X.numblocks[0]} chunks of {args.chunk:,}, "
          f"{args.workers} workers: {calls[0]} loss+gradient evaluations in {took:.1f} s")
    print(f"converged: {res.success} | mean NLL {res.fun:.4f}")
    print("max |w - true w| =", float(np.abs(res.x - TRUE_W).max()))


if __name__ == "__main__":
    main()
