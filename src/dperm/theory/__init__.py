"""Theoretical excess-empirical-risk bounds, one per algorithm of dperm.

:func:`theoretical_bound` returns the bound on the *expected* excess empirical
risk that an algorithm's analysis gives, as a :class:`TheoryBound`
(value, rate, constant_known, source, quantity), so that a measured excess risk
(:func:`dperm.utility.excess_empirical_risk`) can be printed next to what theory
promises.

Two kinds of bounds are returned, and :attr:`TheoryBound.constant_known` says
which:

* **closed forms with known constants** (``constant_known=True``) for the
  perturbation algorithms on a Λ-strongly convex regularized objective
  J(θ) = (1/n)Σℓ(θ; xᵢ, yᵢ) + (Λ/2)‖θ‖² (output and objective perturbation,
  AMP, AMP-NT) and for the exponential mechanism over a finite candidate set.
  They combine the algorithm's exact noise calibration with three one-line facts
  about a Λ-strongly convex, (β+Λ)-smooth J with minimizer θ̂:

  (i)   if θ_p minimizes J + q with q convex, J(θ_p) − J(θ̂) ≤ ‖∇q(θ̂)‖²/(2Λ_q)
        (Λ_q the strong convexity of J + q);
  (ii)  for noise κ independent of θ with E κ = 0,
        E[J(θ + κ)] − E[J(θ)] ≤ min((β + Λ)/2 · E‖κ‖², L·E‖κ‖ + Λ/2 · E‖κ‖²);
  (iii) ‖∇J_p(θ)‖ ≤ γ for a Λ-strongly convex J_p implies ‖θ − argmin J_p‖ ≤ γ/Λ;

  the derivations are in ``docs/amp.md`` ("Utility") and ``docs/bolt_on.md``.
* **rates** (``constant_known=False``): the O(·) statement of the paper's
  utility theorem evaluated with constant 1 (and, where the theorem carries
  polylog(n) factors beyond log(1/δ), without them — the ``source`` says so).
  Read them as orders of magnitude, not as guarantees.

Units: ``lipschitz`` L bounds ‖∇ℓ‖₂ (for Frank-Wolfe the ℓ∞ bound L₁ of the
paper), ``smoothness`` β bounds the per-example Hessian, ``strong_convexity`` Λ
is the coefficient of (Λ/2)‖θ‖² in the mean-form objective (the estimators'
``alpha``), ``radius`` is sup_{θ∈C}‖θ‖ of the constraint set (ℓ1 radius for
Frank-Wolfe) and ``theta_norm`` a bound on ‖θ*‖ used when there is no constraint.

Where each bound lives: :mod:`dperm.theory.base` (:class:`TheoryBound` and the
shared noise facts), :mod:`dperm.theory.perturbation` (output, objective, AMP,
bolt-on), :mod:`dperm.theory.first_order` (DP-GD/SGD, Frank-Wolfe),
:mod:`dperm.theory.exponential`, :mod:`dperm.theory.structured` (structured
output perturbation, denoising, dual Frank-Wolfe), :mod:`dperm.theory.seeds`
(every utility theorem of the five source texts, with its proof's constants,
for the run that was made; :func:`seed_bounds_for_estimator`) and
:mod:`dperm.theory.dispatch` (:func:`theoretical_bound`,
:func:`bound_for_estimator`).  Bounds that are pure formulas needing no
algorithm live one floor lower, in :mod:`dperm.bounds`, and are re-exported here.
"""

from __future__ import annotations

from ..bounds import sgd_gradient_second_moment
from .base import TheoryBound
from .dispatch import ALGORITHMS, bound_for_estimator, seed_bounds_for_estimator, theoretical_bound
from .exponential import exponential_sampling_bound
from .seeds import (
    expmech_erm_bound,
    kd_objective_width_bound,
    kd_theorem1_bound,
    kd_theorem4_bound,
    lecture14_objective_bound,
    lecture15_sgd_bound,
)
from .structured import denoised_release_bound, dual_frank_wolfe_bound, structured_output_bound

__all__ = [
    "ALGORITHMS",
    "TheoryBound",
    "bound_for_estimator",
    "denoised_release_bound",
    "dual_frank_wolfe_bound",
    "expmech_erm_bound",
    "exponential_sampling_bound",
    "kd_objective_width_bound",
    "kd_theorem1_bound",
    "kd_theorem4_bound",
    "lecture14_objective_bound",
    "lecture15_sgd_bound",
    "seed_bounds_for_estimator",
    "sgd_gradient_second_moment",
    "structured_output_bound",
    "theoretical_bound",
]
