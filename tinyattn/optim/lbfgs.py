"""L-BFGS (Nocedal, 1980; Liu & Nocedal, 1989), PyTorch's form: a quasi-Newton step from the last
``history_size`` changes of the parameters and of the gradient, driven by a closure that recomputes the loss."""

import copy

from .. import backend
from ..engine import Tensor
from ..grad_mode import enable_grad
from .optimizer import Optimizer, non_negative


class LBFGS(Optimizer):
    """``LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
    history_size=100, line_search_fn=None)``: ``step(closure)`` runs up to ``max_iter`` iterations, each
    calling ``closure()`` (which clears the gradients, computes the loss, calls ``backward`` and returns the loss)
    at least once.

    All parameters are one flat vector ``x`` with gradient ``g``. The direction is ``d = -H g``, ``H`` the inverse
    Hessian approximated from the pairs ``s = x_{k+1} - x_k``, ``y = g_{k+1} - g_k`` (with ``yᵀs > 1e-10``) by
    the two-loop recursion, scaled by ``yᵀs / yᵀy``; the step is ``x = x + t d`` with ``t = lr`` (the first one
    ``min(1, 1 / |g|₁) · lr``) or the step the strong Wolfe line search finds (``line_search_fn="strong_wolfe"``).
    It stops when ``max|g| <= tolerance_grad``, when the step or the change of the loss falls below
    ``tolerance_change``, or after ``max_eval`` (``max_iter · 5 / 4``) evaluations. One parameter group only.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> x = ta.tensor([1.5, -0.5], requires_grad=True)
    >>> opt = optim.LBFGS([x], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((x - ta.tensor([3.0, 1.0])) ** 2).sum() + (x[0] * x[1]) ** 2 / 10
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 3) for v in x.tolist()]
    [2.915, 0.541]
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _check(self, group):
        non_negative(group["lr"], "learning rate", "lr")
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {group['line_search_fn']!r}")

    def add_param_group(self, param_group):
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _loaded_state_value(self, value, param, index, name):
        """The search's history (flat vectors, lists of them, numbers), put on the parameter's device."""
        if isinstance(value, list):
            return [self._loaded_state_value(v, param, index, name) for v in value]
        if backend.is_array(value):
            return backend.to_device(value, param.device).astype(param.dtype)
        return copy.deepcopy(value)

    # ------------------------------------------------------------------------- the flat vector

    def _gather_flat_grad(self):
        xp = backend.namespace(self._params[0]._data)
        return xp.concatenate([xp.zeros(p._data.size, dtype=p._data.dtype) if p._grad is None
                               else p._grad.reshape(-1) for p in self._params])

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            p._data += step_size * update[offset:offset + p._data.size].reshape(p._data.shape)
            offset += p._data.size

    def _directional_evaluate(self, closure, x, t, d):
        """Loss and flat gradient at ``x + t d``; the parameters are put back to ``x``."""
        self._add_grad(t, d)
        loss = _as_float(closure())
        flat_grad = self._gather_flat_grad()
        for p, saved in zip(self._params, x):
            p._data[...] = saved
        return loss, flat_grad

    def step(self, closure):
        """Up to ``max_iter`` iterations from ``closure``'s loss and gradients; returns the first loss."""
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        xp = backend.namespace(self._params[0]._data)

        def evaluate():
            with enable_grad():
                return closure()

        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = _as_float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if float(xp.abs(flat_grad).max()) <= tolerance_grad:  # optimal already
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, H_diag = -flat_grad, [], [], [], 1.0
            else:  # the two-loop recursion: d = -H g
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(xp.dot(y, s))
                if ys > 1e-10:  # keep the pair: curvature is positive along s
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(xp.dot(y, y))
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(xp.dot(old_stps[i], q)) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = float(xp.dot(old_dirs[i], r)) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / float(xp.abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(xp.dot(flat_grad, d))
            if gtd > -tolerance_change:  # not a descent direction
                break
            ls_func_evals = 0
            if group["line_search_fn"] == "strong_wolfe":
                x_init = [p._data.copy() for p in self._params]

                def obj_func(x, t, d):
                    return self._directional_evaluate(evaluate, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(xp, obj_func, x_init, t, d, loss, flat_grad,
                                                                  gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = _as_float(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(xp.abs(d * t).max()) <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break  # no progress
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss


def _as_float(loss):
    return loss.item() if isinstance(loss, Tensor) else float(loss)


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through ``(x1, f1)``, ``(x2, f2)`` with slopes ``g1``, ``g2``, kept in
    ``bounds`` (the interval by default); the middle where the cubic has no minimum."""
    xmin_bound, xmax_bound = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square**0.5
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(xp, obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step ``t`` along ``d`` meeting the strong Wolfe conditions (sufficient decrease ``f(t) <= f + c1 t gtd``
    and curvature ``|g(t)ᵀd| <= -c2 gtd``): bracketing, then zooming by cubic interpolation (Nocedal & Wright,
    algorithms 3.5 and 3.6). Returns ``(f_new, g_new, t, evaluations)``."""
    d_norm = float(xp.abs(d).max())
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = float(xp.dot(g_new, d))
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:  # bracketing
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g, done = [t], [f_new], [g_new], True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(xp.dot(g_new, d))
        ls_iter += 1
    if ls_iter == max_ls:  # reached the most evaluations
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:  # zoom
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:  # too close to an end: step away from it
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(xp.dot(g_new, d))
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos], bracket_g[high_pos], bracket_gtd[high_pos] = \
                t, f_new, g_new, gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos], bracket_g[high_pos], bracket_gtd[high_pos] = \
                    bracket[low_pos], bracket_f[low_pos], bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos], bracket_g[low_pos], bracket_gtd[low_pos] = t, f_new, g_new, gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals
