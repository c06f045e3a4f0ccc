"""Output perturbation (Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 1 / Theorem 6).

Solve the Λ-strongly convex regularized *mean* risk exactly,

    θ̂ = argmin_{θ ∈ C} J(θ),   J(θ) = (1/n) Σᵢ ℓ(θ; xᵢ, yᵢ) + (Λ/2)‖θ‖² + r(θ),

and release θ̂ + b.  Neighbouring relation: **replace-one**.

Sensitivity.  If every ℓ(·; z) is L-Lipschitz on C (L = ``loss.lipschitz(R)``
for rows ‖x‖ ≤ R = ``data_norm``) and J is Λ_J-strongly convex on C
(Λ_J = Λ + the regularizer's ``strong_convexity``), then for neighbours D, D'

    ‖θ̂(D) − θ̂(D')‖₂ ≤ 2L/(nΛ_J).

Chaudhuri et al. prove it (in the proof of their Theorem 6) for differentiable
ℓ and N; the same bound holds for any convex r and convex C (e.g. Bassily,
Smith, Thakurta 2014; Wu et al. 2017, "Bolt-on differential privacy"): with
F, F' the two objectives and θ, θ' their minimizers over C, strong convexity
and optimality give F(θ') − F(θ) ≥ (Λ_J/2)‖θ − θ'‖² and
F'(θ) − F'(θ') ≥ (Λ_J/2)‖θ − θ'‖²; adding them,
(F − F')(θ') − (F − F')(θ) ≥ Λ_J‖θ − θ'‖², and F − F' = (ℓ(·; z) − ℓ(·; z'))/n
is (2L/n)-Lipschitz, so ‖θ − θ'‖ ≤ 2L/(nΛ_J).  Elastic net's ℓ2 part adds to Λ_J.

Noise.

* ε-DP (δ = 0): b with density ∝ exp(−ε‖b‖/Δ₂), Δ₂ = 2L/(nΛ_J):
  ‖b‖ ~ Gamma(d, Δ₂/ε) = Gamma(d, 2L/(nΛ_J ε)), uniform direction — the
  paper's β = nΛε/2 (Algorithm 1) for L = 1.  Event ``PureEpsilon(ε)``.
* (ε, δ)-DP: b ~ N(0, σ² I) with σ = Δ₂ · σ_mult(ε, δ), σ_mult from the analytic
  Gaussian mechanism (Balle & Wang 2018, Theorem 8 / Algorithm 1) — the
  Gaussian version of output perturbation (e.g. Kifer, Smith, Thakurta 2012,
  Section 1; Dwork & Roth 2014, Theorem A.1 for the classical constant).  The
  event is ``Gaussian(noise_multiplier=σ_mult)``, which the accountants compose
  more tightly than (ε, δ).

With a constraint, θ̂ + b is projected back onto C (post-processing, free).
The theorem assumes the exact minimizer θ̂ (it tolerates no optimization
error): the solver must reach the optimality residual ``tol`` (default 1e-10,
recomputed independently of the solver) or
:class:`~dperm.exceptions.ConvergenceError` is raised.  By strong convexity the
released centre is within tol/Λ_J of θ̂ — a numerical gap the theorem does not
cover (adding 2·tol/Λ_J to Δ₂ would, by the triangle inequality; at the default
tol this is ~10⁻⁸ relative and is not done).  Raising depends on the private
data (a rare data-dependent event outside the guarantee); the message carries
only ``tol`` and ``max_iter``.  Proof sketch: ``docs/output_perturbation.md``.
"""

from __future__ import annotations

import math

from .._docstrings import compose_doc
from .._validation import check_count, check_delta_size, check_positive
from ..accounting.events import Gaussian, PureEpsilon
from ..constraints import Constraint
from ..exceptions import InvalidPrivacyParameter
from ..losses.base import GLMLoss
from ..mechanisms.gamma_norm import gamma_norm_noise
from ..mechanisms.gaussian import gaussian_noise
from ..regularizers import Regularizer
from .base import Result, private_fit
from .objective_perturbation import _PERTURBATION_DOCS, _prepare, _solve

__all__ = ["fit", "output_sensitivity"]


def output_sensitivity(n: int, lipschitz: float, strong_convexity: float) -> float:
    """ℓ2 sensitivity 2L/(nΛ) of the minimizer of a Λ-strongly convex mean risk
    with L-Lipschitz losses, replace-one (Chaudhuri et al. 2011, proof of Theorem 6;
    module docstring for the constrained / non-smooth-regularizer case).

    Raises
    ------
    InvalidPrivacyParameter
        If a parameter is not positive (Λ = 0 has unbounded sensitivity).
    """
    n = check_count(n, "n")
    lip = check_positive(lipschitz, "lipschitz")
    strong = check_positive(strong_convexity, "strong_convexity")
    return 2.0 * lip / (n * strong)  # [OUT-1] ‖θ̂(D) − θ̂(D')‖ ≤ 2L/(nΛ_J)


def _gaussian_multiplier(epsilon: float, delta: float) -> float:
    """σ/Δ₂ of the exact (ε, δ) Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8 /
    Algorithm 1), for every perturbation release of :mod:`dperm.algorithms`."""
    from ..accounting.gaussian import analytic_gaussian_noise_multiplier

    return float(analytic_gaussian_noise_multiplier(epsilon, delta))


@private_fit  # an active dperm.budget: reserve, run, commit the event
@compose_doc(**_PERTURBATION_DOCS)
def fit(
    loss: GLMLoss,
    X,
    y,
    *,
    epsilon: float,
    delta: float | None = 0.0,
    data_norm: float,
    alpha: float,
    noise: str = "auto",
    constraint: Constraint | None = None,
    regularizer: Regularizer | None = None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    random_state=None,
) -> Result:
    """Output perturbation: ε-DP (Chaudhuri et al. 2011, Algorithm 1, Theorem 6) or
    (ε, δ)-DP with the analytic Gaussian mechanism (Balle & Wang 2018).

    Neighbouring relation: replace-one.  See the module docstring.

    Parameters
    ----------
    loss : GLMLoss or Softmax
        A smooth loss (Logistic, HuberSVM, Squared with a constraint), or
        ``Softmax(k)``: the multinomial model Θ of shape (d, k), one release with
        the whole budget, sensitivity 2L/(nΛ) in Frobenius norm with L = √2·R
        (‖x(p − e_y)ᵀ‖_F ≤ √2‖x‖; no constraint or regularizer).
    {inputs}
    alpha : float ≥ 0
        Λ.  Λ plus the regularizer's strong convexity must be > 0.
    {noise}
    constraint : Constraint, optional
        Closed convex set; the released θ is projected onto it.
    regularizer : Regularizer, optional
    {solver}
    {seed}

    Returns
    -------
    Result
        ``theta`` of shape (d,) (or (d, k)); ``event`` ``PureEpsilon(ε)`` or
        ``Gaussian(noise_multiplier)``;
        ``diagnostics`` with ``sensitivity``, ``noise_scale``, ``n_clipped`` (the
        latter and ``solver_*`` are data-dependent, not privatized).

    Raises
    ------
    InvalidPrivacyParameter
        Bad ε, δ, ``data_norm``, Λ_J = 0, a non-smooth loss, …
    InvalidDataError, LabelError, UnknownNameError, ConvergenceError
    """
    algorithm = "output perturbation"
    p = _prepare(loss, X, y, epsilon, data_norm, alpha, constraint, regularizer, algorithm)
    loss, X, y, epsilon, alpha = p.loss, p.X, p.y, p.epsilon, p.alpha
    lip, strong, constraint = p.lipschitz, p.strong_convexity, p.constraint
    if strong <= 0:  # [OUT-1] the bound needs Λ_J > 0
        raise InvalidPrivacyParameter(
            "output perturbation needs a strongly convex objective: alpha (plus the "
            f"regularizer's strong convexity) must be > 0, got alpha={alpha!r}"
        )
    p.check_run(noise, delta, tol, max_iter, random_state)
    kind, delta_used, rng = p.noise, p.delta, p.rng
    n = X.shape[0]
    check_delta_size(delta_used, n)  # δ ≥ 1/n: a void guarantee, refused (#32)
    n_coords = math.prod(p.shape)  # d, or d·k for the softmax loss (Frobenius norm)

    sensitivity = output_sensitivity(n, lip, strong)
    theta_hat, res = _solve(  # [OUT-2] exact minimizer (ConvergenceError otherwise)
        loss, X, y, alpha, None, p.regularizer, constraint, p.tol, p.max_iter, algorithm
    )

    diagnostics = p.diagnostics("output_perturbation", sensitivity=sensitivity)
    diagnostics.update(
        solver_method=res.method,
        solver_iterations=res.n_iter,
        solver_optimality=res.optimality,
        solver_passes=res.n_passes,
    )
    if kind == "gamma":
        b = gamma_norm_noise(n_coords, epsilon, sensitivity, rng)  # [OUT-3] ε-DP
        event: PureEpsilon | Gaussian = PureEpsilon(epsilon=epsilon)
        diagnostics.update(
            theorem="Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 1 / Theorem 6",
            noise_scale=sensitivity / epsilon,  # Gamma scale of ‖b‖
        )
    else:
        mult = _gaussian_multiplier(epsilon, delta_used)
        sigma = mult * sensitivity  # [OUT-4] analytic Gaussian, (ε, δ)-DP
        b = gaussian_noise(n_coords, sigma, rng)
        event = Gaussian(noise_multiplier=mult)
        diagnostics.update(
            theorem="output perturbation with the analytic Gaussian mechanism "
            "(Balle & Wang 2018, Theorem 8)",
            noise_multiplier=mult,
            noise_scale=sigma,
        )
    theta = theta_hat + b.reshape(p.shape)  # [OUT-3/4] the release
    if constraint is not None:
        theta = constraint.project(theta)  # [OUT-5] post-processing
    return Result(theta=theta, event=event, diagnostics=diagnostics)
