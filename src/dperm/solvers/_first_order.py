"""First-order solvers: L-BFGS-B (box constraints, non-smooth losses) and
accelerated proximal gradient (regularizers with a prox, general convex sets)."""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize as so

from ._common import (
    SmoothObjective,
    SolverResult,
    gradient_mapping_norm,
    prox_factory,
    smoothness_bound,
)

__all__ = ["fista", "lbfgs"]


def lbfgs(obj: SmoothObjective, theta0, constraint, tol: float, max_iter: int) -> SolverResult:
    """scipy's L-BFGS-B on f (bounds from a Box constraint), the residual recomputed
    at the point it stops: ‖∇f‖₂, or the gradient mapping at t = 1 with a box."""
    d = theta0.shape[0]
    bounds = constraint.bounds(d) if constraint is not None else None
    if constraint is not None:
        theta0 = constraint.project(theta0)
    prox = prox_factory(None, constraint)
    # far-off trial points (e.g. a gigantic perturbation term) overflow the loss: they
    # are rejected by the line search and the certified residual, not warned about
    with np.errstate(over="ignore", invalid="ignore"):
        res = so.minimize(
            obj.fg,
            theta0,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={
                "maxiter": max_iter,
                "gtol": tol / (10.0 * math.sqrt(d)),
                "ftol": 1e-15,
                "maxcor": 20,
            },
        )
        theta = res.x
        f, g = obj.fg(theta)
        if constraint is None:
            opt = float(np.linalg.norm(g))
        else:
            opt = gradient_mapping_norm(theta, g, prox, 1.0)
    return obj.result(theta, f, opt, tol, res.nit, "L-BFGS-B")


def fista(obj: SmoothObjective, theta0, regularizer, constraint, tol, max_iter) -> SolverResult:
    """Accelerated proximal gradient (FISTA with backtracking and adaptive restart,
    Beck & Teboulle 2009; O'Donoghue & Candès 2015) on f + r over C; the residual
    is the gradient mapping at the final step size."""
    fg = obj.fg
    prox = prox_factory(regularizer, constraint)
    Lk = max(smoothness_bound(obj.loss, obj.X, obj.l2) * 0.1, 1e-12)
    x = prox(theta0, 1.0 / Lk)
    z = x.copy()
    t_mom = 1.0
    reg = (lambda th: regularizer.value(th)) if regularizer is not None else (lambda th: 0.0)
    fx = fg(x)[0] + reg(x)
    opt = math.inf
    it = 0
    for it in range(1, max_iter + 1):
        fz, gz = fg(z)
        while True:  # backtracking on the smooth part
            x_new = prox(z - gz / Lk, 1.0 / Lk)
            diff = x_new - z
            f_new, _ = fg(x_new)
            if f_new <= fz + float(gz @ diff) + 0.5 * Lk * float(diff @ diff) + 1e-15 * abs(fz):
                break
            Lk *= 2.0
        F_new = f_new + reg(x_new)
        # adaptive restart (O'Donoghue & Candès 2015); a plain proximal step from x
        # (t_mom == 1, z == x) is a descent step, so it is accepted even when rounding
        # makes F_new a hair above fx near the optimum (otherwise the loop stalls)
        if F_new > fx and t_mom > 1.0:
            t_mom = 1.0
            z = x.copy()
            continue
        t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t_mom * t_mom))
        z = x_new + ((t_mom - 1.0) / t_next) * (x_new - x)
        x, fx, t_mom = x_new, F_new, t_next
        if it % 5 == 0 or it == max_iter:
            _, gx = fg(x)
            opt = gradient_mapping_norm(x, gx, prox, 1.0 / Lk)
            if opt <= tol:
                break
        Lk *= 0.9  # let the step grow again
    _, gx = fg(x)
    opt = gradient_mapping_norm(x, gx, prox, 1.0 / Lk)
    return obj.result(x, fx, opt, tol, it, "FISTA")
