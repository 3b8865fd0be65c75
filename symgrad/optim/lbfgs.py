"""``LBFGS`` (limited-memory BFGS with a closure), step by step PyTorch's iteration:
two-loop recursion over at most ``history_size`` curvature pairs, the first step scaled
by the gradient's 1-norm, fixed steps of ``lr`` or a strong-Wolfe line search
(``line_search_fn="strong_wolfe"``: bracketing, then zooming with safeguarded cubic
interpolation, as minFunc and PyTorch), the stopping tests on gradient, step and loss
change.

Scalars (directional derivatives, step lengths) are numpy scalars of the parameters'
dtype where PyTorch's are 0-d tensors of it, so float32 problems round as PyTorch's do;
the state (``d``, ``t``, ``old_dirs``, ...) holds tensors under the first parameter, as
PyTorch's, so it saves and loads with ``symgrad.save``."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..tensor import Tensor
from .optimizer import Optimizer, _array, _bump

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2,
    clipped to ``bounds`` (default: the interval between the points); the middle of the
    bounds when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 ** 2 - g1 * g2
    if not disc >= 0:
        return (lo + hi) / 2.0
    d2 = np.sqrt(disc)
    if x1 > x2:                                   # the formula is written from the far point
        x1, g1, x2, g2 = x2, g2, x1, g1
    at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    return min(max(at, lo), hi)


def _strong_wolfe(evaluate: Callable, t, d: np.ndarray, f: float, g: np.ndarray, gtd,
                  c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                  max_ls: int = 25):
    """A step ``t`` along ``d`` meeting the strong Wolfe conditions (sufficient decrease
    ``c1``, curvature ``c2``), from at most ``max_ls`` evaluations beyond the first.
    ``evaluate(t)`` gives (loss, flat gradient) at ``x + t d``.
    Returns (loss, gradient, t, number of evaluations)."""
    d_norm = np.abs(d).max()
    f_new, g_new = evaluate(t)
    evals = 1
    new = [t, f_new, g_new, g_new.dot(d)]         # a point: step, loss, gradient, slope
    prev = [0, f, g, gtd]
    done, it, bracket = False, 0, None
    # 1. bracketing: grow the step until an interval holds an acceptable point
    while it < max_ls:
        t, f_new, gtd_new = new[0], new[1], new[3]
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= prev[1]):
            bracket = [prev, new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, done = [new], True
            break
        if gtd_new >= 0:
            bracket = [prev, new]
            break
        t_next = _cubic_min(prev[0], prev[1], prev[3], t, f_new, gtd_new,
                            bounds=(t + 0.01 * (t - prev[0]), t * 10))
        prev = new
        f_new, g_new = evaluate(t_next)
        evals += 1
        new = [t_next, f_new, g_new, g_new.dot(d)]
        it += 1
    if bracket is None:                           # out of evaluations
        bracket = [[0, f, g, None], new]
    # 2. zoom: shrink the bracket around a point meeting both conditions
    low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    insufficient = False
    while not done and it < max_ls:
        a, b = bracket
        if abs(b[0] - a[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(a[0], a[1], a[3], b[0], b[1], b[3])
        top, bottom = max(a[0], b[0]), min(a[0], b[0])
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:     # too close to an end of the bracket
            if insufficient or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        point = [t, f_new, g_new, g_new.dot(d)]
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = point
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if abs(point[3]) <= -c2 * gtd:
                done = True
            elif point[3] * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = point
    t, f_new, g_new = bracket[low][0], bracket[low][1], bracket[low][2]
    return f_new, g_new, t, evals


def _wrap(value):
    """State entries as PyTorch keeps them: arrays and array scalars become tensors."""
    if isinstance(value, (np.ndarray, np.generic)):
        return Tensor._from_array(np.asarray(value))
    return value


def _unwrap(value):
    if isinstance(value, Tensor):
        a = _array(value)
        return a[()] if a.ndim == 0 else a
    return value


class LBFGS(Optimizer):
    """``step(closure)`` runs up to ``max_iter`` quasi-Newton iterations; ``closure``
    re-evaluates the loss (zeroing gradients and calling ``backward``).

    >>> import symgrad as torch
    >>> x = torch.nn.Parameter(torch.tensor([3.0, -2.0], dtype=torch.float64))
    >>> opt = torch.optim.LBFGS([x], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((x - 1.0) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure); [round(v, 12) for v in x.detach().tolist()]
    [1.0, 1.0]
    """

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the parameters as one flat vector -------------------------------------------------
    def _flat_grad(self) -> np.ndarray:
        parts = []
        for p in self._params:
            if p.grad is None:
                parts.append(np.zeros(p.numel(), _array(p).dtype))
            else:
                parts.append(np.ravel(_array(p.grad)))
        return np.concatenate(parts)

    def _add_grad(self, step, direction: np.ndarray) -> None:
        offset = 0
        for p in self._params:
            x = _array(p)
            n = x.size
            x += step * direction[offset:offset + n].reshape(x.shape)
            _bump(p)
            offset += n

    def _set_params(self, saved: list[np.ndarray]) -> None:
        for p, value in zip(self._params, saved):
            _array(p)[...] = value
            _bump(p)

    def _evaluate(self, closure) -> float:
        loss = self._closure_loss(closure)
        return float(loss.detach() if isinstance(loss, Tensor) else loss)

    def _traced_step(self) -> None:
        raise RuntimeError(
            "LBFGS cannot run inside symgrad.compile: its step calls the closure a number "
            "of times that depends on the values computed (line search, convergence tests). "
            "Compile the closure instead and call opt.step(closure) eagerly")

    # ---- the iteration ---------------------------------------------------------------------
    def step(self, closure):
        if closure is None:
            raise TypeError("LBFGS requires a closure that reevaluates the model and "
                               "returns the loss")
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        state = self._state(self._params[0])
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = self._closure_loss(closure)
        loss = float(orig_loss.detach() if isinstance(orig_loss, Tensor) else orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss

        d, t = _unwrap(state.get("d")), _unwrap(state.get("t"))
        old_dirs = [_unwrap(v) for v in state.get("old_dirs") or []]
        old_stps = [_unwrap(v) for v in state.get("old_stps") or []]
        ro = [_unwrap(v) for v in state.get("ro") or []]
        h_diag = _unwrap(state.get("H_diag"))
        prev_flat_grad, prev_loss = _unwrap(state.get("prev_flat_grad")), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            # the direction: steepest descent first, then the two-loop recursion
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        del old_dirs[0], old_stps[0], ro[0]
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                al = [None] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q -= al[i] * old_dirs[i]
                d = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(d) * ro[i]
                    d += (al[i] - be_i) * old_stps[i]
                state["al"] = [_wrap(a) for a in al] + [None] * (history_size - len(al))
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            # the step length
            t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tol_change:
                break
            ls_evals = 0
            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                start = [_array(p).copy() for p in self._params]

                def evaluate(step, start=start, d=d):
                    self._add_grad(step, d)
                    value = self._evaluate(closure)
                    grad = self._flat_grad()
                    self._set_params(start)
                    return value, grad
                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    evaluate, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                optimal = np.abs(flat_grad).max() <= tol_grad
            else:
                self._add_grad(t, d)
                optimal = False
                if n_iter != max_iter:        # the last iteration's loss is not needed
                    loss = self._evaluate(closure)
                    flat_grad = self._flat_grad()
                    optimal = np.abs(flat_grad).max() <= tol_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or current_evals >= max_eval or optimal:
                break
            if np.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=_wrap(d), t=_wrap(t), old_dirs=[_wrap(v) for v in old_dirs],
                     old_stps=[_wrap(v) for v in old_stps], ro=[_wrap(v) for v in ro],
                     H_diag=_wrap(h_diag), prev_flat_grad=_wrap(prev_flat_grad),
                     prev_loss=prev_loss)
        return orig_loss
