"""``LBFGS`` (limited-memory BFGS with a closure), step by step PyTorch's iteration:
two-loop recursion over at most ``history_size`` curvature pairs, the first step scaled
by the gradient's 1-norm, the stopping tests on gradient, step and loss change.
``line_search_fn="strong_wolfe"`` is not available (fixed steps of ``lr``)."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _array, _bump

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    """``step(closure)`` runs up to ``max_iter`` quasi-Newton iterations; ``closure``
    re-evaluates the loss (zeroing gradients and calling ``backward``)."""

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn is not None:
            if line_search_fn != "strong_wolfe":
                raise RuntimeError("only 'strong_wolfe' is supported")
            raise NotImplementedError("symgrad's LBFGS has no strong-Wolfe line search yet: "
                                      "use line_search_fn=None (fixed steps of lr)")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self) -> np.ndarray:
        parts = []
        for p in self._params:
            if p.grad is None:
                parts.append(np.zeros(p.numel(), _array(p).dtype))
            else:
                parts.append(np.ravel(_array(p.grad)))
        return np.concatenate(parts)

    def _add_grad(self, step: float, direction: np.ndarray) -> None:
        offset = 0
        for p in self._params:
            x = _array(p)
            n = x.size
            x += (step * direction[offset:offset + n]).reshape(x.shape).astype(x.dtype)
            _bump(p)
            offset += n

    def step(self, closure):
        if closure is None:
            raise RuntimeError("LBFGS requires a closure that reevaluates the model and "
                               "returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self._state(self._params[0])
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = self._closure_loss(closure)
        loss = float(orig_loss.detach() if hasattr(orig_loss, "detach") else orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r = r + (al[i] - be_i) * old_stps[i]
                d = r
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)
            if gtd > -tol_change:
                break
            self._add_grad(t, d)
            ls_evals = 0
            if n_iter != max_iter:
                new = self._closure_loss(closure)
                loss = float(new.detach() if hasattr(new, "detach") else new)
                flat_grad = self._flat_grad()
                ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or current_evals >= max_eval:
                break
            if np.abs(flat_grad).max() <= tol_grad:
                break
            if np.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
