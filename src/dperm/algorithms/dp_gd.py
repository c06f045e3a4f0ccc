"""Differentially private (projected) gradient descent, DP-GD.

Full-batch gradient descent with Gaussian noise on every average gradient:

    θ_{t+1} = Π_C( θ_t − η_t [ (1/n) Σᵢ clip_{C}(∇ℓ(θ_t; xᵢ, yᵢ)) + N(0, σ² I) + α θ_t ] ),

the "noisy gradient descent" analysed by Bassily, Smith, Thakurta (FOCS 2014,
"Private Empirical Risk Minimization: Efficient Algorithms and Tight Error
Bounds", Algorithm 1 and Theorem 2.1 for its privacy; here with the full
batch in every step) and, as a sequence of Gaussian mechanisms, by every
moments/RDP accountant since Abadi et al. (CCS 2016).

Privacy.  For a loss that is L-Lipschitz over the rows (‖xᵢ‖ ≤ ``data_norm``,
enforced by clipping rows), every per-example gradient has norm ≤ L, and the
clipping at C = L is then a no-op that makes the bound hold unconditionally.

* Replace-one (default; n = ``X.shape[0]`` public): replacing one record
  changes the clipped sum by at most 2C, so the average gradient Σ/n by 2C/n;
  each step is the Gaussian mechanism with noise multiplier z = σ n/(2C).
* Add/remove-one: adding or removing a record changes the clipped sum by at
  most C.  The size is private, so the sum is divided by the caller's public
  ``dataset_size`` N (never by ``X.shape[0]``), and the default number of steps
  uses N as well; z = σ N/C.

T adaptive steps are the event ``SelfComposed(Gaussian(z, neighbouring=...), T)``;
everything else (the step, the ℓ2 term, momentum, projection, averaging) is
post-processing.
"""

from __future__ import annotations

import math

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, check_delta, check_epsilon, check_positive
from ..exceptions import InvalidPrivacyParameter, UnknownNameError
from ..schedules import get_schedule
from . import _gradient_loop as gl
from .base import Result, private_fit

__all__ = ["advanced_composition_noise_multiplier", "default_steps", "fit"]

CALIBRATIONS = ("rdp", "pld", "advanced")


def advanced_composition_noise_multiplier(epsilon: float, delta: float, steps: int) -> float:
    """Noise multiplier z of the textbook DP-GD calibration (for comparison).

    Each of the T steps is made (ε₀, δ₀)-DP with the classical Gaussian
    mechanism (Dwork & Roth 2014, Theorem A.1: z = √(2 ln(1.25/δ₀))/ε₀ for
    ε₀ < 1), with ε₀ = ε / (2√(2T ln(2/δ))) and δ₀ = δ/(2T); the advanced
    composition theorem (Dwork, Rothblum, Vadhan, FOCS 2010, Theorem III.3;
    Dwork & Roth 2014, Theorem 3.20) with δ' = δ/2 then gives
    ε₀√(2T ln(2/δ)) + T ε₀(e^{ε₀} − 1) ≤ ε and Tδ₀ + δ' = δ.  This is the
    composition argument of Bassily, Smith, Thakurta (FOCS 2014), proof of
    Theorem 2.1.  With sensitivity 2L/n of the average gradient it is the
    familiar

        σ² = (2L/n)² z² = 64 L² T ln(2/δ) ln(2.5 T/δ) / (n² ε²).

    Parameters
    ----------
    epsilon, delta : float
        Target (ε, δ), 0 < δ < 1.
    steps : int
        T ≥ 1.

    Returns
    -------
    float
        z (noise standard deviation in units of the sensitivity 2L/n).

    Raises
    ------
    InvalidPrivacyParameter
        If the formula does not certify the target: ε₀ ≥ 1 (the classical
        Gaussian mechanism needs ε₀ < 1) or the second composition term pushes
        the total above ε (large ε).  Use ``calibration="rdp"`` instead.

    Examples
    --------
    >>> z = advanced_composition_noise_multiplier(1.0, 1e-5, 100)  # L = 1, n = 1
    >>> math.isclose((2 * z) ** 2, 64 * 100 * math.log(2e5) * math.log(2.5e7))
    True
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=False)
    steps = check_count(steps, "steps")
    eps0 = epsilon / (2.0 * math.sqrt(2.0 * steps * math.log(2.0 / delta)))
    delta0 = delta / (2.0 * steps)
    total = eps0 * math.sqrt(2.0 * steps * math.log(2.0 / delta)) + steps * eps0 * math.expm1(eps0)
    if eps0 >= 1.0 or total > epsilon:
        raise InvalidPrivacyParameter(
            f"the advanced-composition calibration cannot certify epsilon={epsilon:g} with "
            f"delta={delta:g} and steps={steps} (per-step epsilon {eps0:.3g}, composed bound "
            f"{total:.3g}); use calibration='rdp'"
        )
    from ..accounting.gaussian import classical_gaussian_noise_multiplier

    return classical_gaussian_noise_multiplier(eps0, delta0)


def default_steps(n_samples: int, n_features: int, epsilon: float | None) -> int:
    """Default number of DP-GD steps: T = clip(⌈n ε / √d⌉, 20, 200).

    A public rule (n, d, ε only; no data statistic, no test set): the noise
    on the average gradient has norm ≈ 2zL√d/n with z growing like √T/ε, so
    the number of affordable steps grows with the signal-to-noise scale
    nε/√d; the clip keeps the run short and never below a useful length.
    With ``epsilon=None`` (a given noise multiplier) T = 100.

    Examples
    --------
    >>> default_steps(30_000, 100, 0.1)
    200
    """
    if epsilon is None:
        return 100
    t = math.ceil(n_samples * epsilon / math.sqrt(n_features))
    return int(min(200, max(20, t)))


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    loss,
    X,
    y,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    data_norm: float | None = None,
    steps: int | None = None,
    learning_rate: float | None = None,
    alpha: float = 0.0,
    constraint=None,
    regularizer=None,
    calibration: str | None = None,
    neighbouring: str = "replace-one",
    dataset_size: int | None = None,
    averaging: str = "last",
    schedule="constant",
    momentum: float = 0.0,
    noise_multiplier: float | None = None,
    clipping_norm: float | None = None,
    per_example_grad=None,
    theta0=None,
    n_classes: int | None = None,
    callback=None,
    progress: bool = False,
    random_state=None,
) -> Result:
    """DP-GD: full-batch projected gradient descent with Gaussian noise.

    Neighbouring relation: ``neighbouring``, default **replace-one**.
    Assumptions: the loss is L-Lipschitz in θ over rows with
    ‖x‖ ≤ ``data_norm`` (rows above are clipped and counted); per-example
    gradients are additionally clipped at C = ``clipping_norm`` (default
    C = L, a no-op for a correct L), so the ℓ2 sensitivity of the clipped sum
    is 2C under replace-one and C under add/remove, whatever the data
    (Bassily, Smith, Thakurta, FOCS 2014, Algorithm 1 / Theorem 2.1 with the
    full batch).  Replace-one: the sum is divided by n = ``X.shape[0]``
    (public), the noise on the average gradient has standard deviation
    σ = z · 2C/n.  Add/remove: the size is private, so the sum is divided by
    the public ``dataset_size`` N (required; it need not equal
    ``X.shape[0]``), σ = z · C/N, and the default T uses N.  The run is the
    event ``SelfComposed(Gaussian(z, neighbouring=...), T)``.

    Parameters
    ----------
    loss : GLMLoss or Softmax, or None with ``per_example_grad``
    X : ndarray, csr_matrix or Design of shape (n, d)
        Viewed as a :class:`~dperm.design.Design` (rows clipped to ``data_norm`` by
        a per-row scale, never copied; float32 kept, products in float64).
    y : ndarray of shape (n,)
        ±1 for classification GLM losses, 0…k−1 for :class:`~dperm.losses.Softmax`.
    epsilon, delta : float, optional
        Target (ε, δ); z is then the smallest noise certified by
        ``calibration``.  Optional when ``noise_multiplier`` is given.
    data_norm : float, optional
        Public bound R on ‖xᵢ‖₂ (rows above are clipped).  Required for a
        ``loss`` unless ``clipping_norm`` is given.
    steps : int, optional
        T; default :func:`default_steps` of the public size.
    learning_rate : float, optional
        Step size η (constant schedule).  Default 1/β with β the smoothness of
        the mean objective (smooth losses), or D/(L√T) with D the diameter of
        ``constraint`` (non-smooth losses with a constraint).
    alpha : float, default 0
        Coefficient of the data-independent term (α/2)‖θ‖².
    regularizer : Regularizer, optional
        Data-independent non-smooth penalty r(θ) (e.g. :class:`~dperm.regularizers.L1`),
        applied by a proximal step after every gradient step (post-processing).
    constraint : Constraint, optional
        Projection after every step (an ℓ2 ball is needed for the squared loss).
    calibration : {"pld", "rdp", "advanced"}, optional
        Accountant used to calibrate z; default "pld" (the tightest);
        "advanced" uses :func:`advanced_composition_noise_multiplier` (for
        comparison).
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
    dataset_size : int, optional
        Public number of records N: required under add/remove (the
        normaliser); under replace-one it must equal ``X.shape[0]`` if given.
    averaging : {"last", "uniform", "tail"}
    schedule : {"constant", "inverse_sqrt", "inverse_time"} or Schedule or callable
    momentum : float in [0, 1)
    noise_multiplier : float, optional
        z (relative to the sensitivity, 2C/n or C/N).  0 gives non-private GD and
        the event :class:`~dperm.accounting.NonPrivate` (ε = ∞).
    clipping_norm : float, optional
        C; default the Lipschitz bound L of ``loss``.  Required with
        ``per_example_grad``.
    per_example_grad : callable, optional
        ``per_example_grad(theta, X_batch, y_batch) -> (b, *theta.shape)``
        (generic path; ``loss`` may be None).
    theta0 : ndarray, optional
        Public starting point (default zeros).
    n_classes : int, optional
        k for the softmax loss (default ``loss.n_classes``).
    callback : callable, optional
        ``callback(t, T, theta)`` after every step.
    progress : bool, default False
        Show a rich progress bar.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        ``theta`` (shape (d,) or (d, k)), ``event``, and diagnostics with keys
        ``noise_multiplier``, ``steps``, ``sampling_rate`` (1.0),
        ``accountant``, ``noise_std``, ``sensitivity``, ``clipping_norm``,
        ``learning_rate``, ``n_clipped``, ``neighbouring``, ``normalizer``,
        ``dataset_size``, ``epsilon``, ``delta``, ``epsilon_spent``.

    Raises
    ------
    InvalidPrivacyParameter
        Invalid ε, δ, steps, learning rate, clipping norm; a given noise
        multiplier that does not meet ε; no (ε, δ) and no noise multiplier;
        no ``dataset_size`` under add/remove; an unknown ``neighbouring``.
    UnknownNameError
        Unknown ``calibration``, ``averaging`` or ``schedule``.
    InvalidDataError, LabelError
        Bad data, labels, or a ``per_example_grad`` of the wrong shape.
    """
    if calibration is None:
        calibration = "pld"
    if calibration not in CALIBRATIONS:
        raise UnknownNameError(
            f"unknown calibration {calibration!r}; choose one of {list(CALIBRATIONS)}"
        )
    gl.check_loss_or_gradient(loss, per_example_grad)
    neighbouring = gl.check_neighbouring(neighbouring)
    dataset_size = gl.check_dataset_size(dataset_size)
    if neighbouring == gl.ADD_REMOVE:
        gl.public_size(neighbouring, dataset_size, 0, "the normaliser of the noisy sum")
    opts = gl.check_options(
        alpha, momentum, averaging, data_norm, clipping_norm, constraint, regularizer
    )
    rng = check_random_state(random_state)

    run = gl.Run.prepare(loss, X, y, per_example_grad, n_classes, opts, rng)
    n_rows, d = run.X.shape
    # public size: dataset_size under add/remove (X.shape[0] is private), n under replace-one
    sampler = gl.FullBatchSampler(n_rows, neighbouring=neighbouring, dataset_size=dataset_size)
    size = sampler.batch_size

    # ---- the clipping norm C: sensitivity of the sum is 2C (replace-one) or C [P2]
    clipping_norm = run.resolve_clipping_norm()

    if steps is None:
        steps = default_steps(size, d, epsilon)
    steps = check_count(steps, "steps")

    # ---- step size (public)
    if learning_rate is None and (schedule is None or isinstance(schedule, str)):
        learning_rate = _default_learning_rate(
            run.smoothness(), opts.alpha, constraint, steps, clipping_norm
        )
    sched = get_schedule(schedule, learning_rate, strong_convexity=opts.alpha or None)

    # ---- noise [P3]
    if calibration == "advanced":
        # the certificate is the advanced-composition theorem; an RDP value is reported too
        if epsilon is None and noise_multiplier is None:
            raise InvalidPrivacyParameter("give epsilon and delta or noise_multiplier, got neither")
        if epsilon is not None:
            required = advanced_composition_noise_multiplier(epsilon, delta, steps)
            if noise_multiplier is None:
                noise_multiplier = required
            elif check_positive(noise_multiplier, "noise_multiplier") < required:
                raise InvalidPrivacyParameter(
                    f"noise_multiplier={noise_multiplier:g} is below the {required:.6g} that "
                    f"advanced composition needs for epsilon={epsilon:g}, delta={delta:g}, "
                    f"steps={steps}"
                )
    z, event, spent = gl.resolve_noise(
        sampler,
        steps,
        epsilon=None if calibration == "advanced" else epsilon,
        delta=delta,
        noise_multiplier=noise_multiplier,
        accountant="rdp" if calibration == "advanced" else calibration,
    )
    if calibration == "advanced" and epsilon is not None and spent is not None:
        spent = min(spent, float(epsilon))
    sensitivity_sum = sampler.sensitivity_factor * clipping_norm
    noise_std_sum = z * sensitivity_sum

    label = "DP-GD" if progress else None
    out = run.descend(
        sampler, theta0, steps, sched, noise_std_sum, callback=callback, progress=label
    )
    head = {
        "mechanism": "dp-gd",
        "noise_multiplier": z,
        "steps": steps,
        "sampling_rate": 1.0,
        "sampling": "full",
        "batch_size": size,
        "accountant": calibration,
        "noise_std": noise_std_sum / sampler.normalizer,
        "sensitivity": sensitivity_sum / sampler.normalizer,
        "normalizer": sampler.normalizer,
        "dataset_size": size,
        "clipping_norm": clipping_norm,
        "lipschitz": run.lipschitz,
    }
    diagnostics = run.diagnostics(head, sampler, learning_rate, sched, epsilon, delta, spent)
    return Result(theta=out.theta, event=event, diagnostics=diagnostics)


def _default_learning_rate(smoothness, alpha, constraint, steps, clipping_norm):
    """1/(β + α) for smooth losses (β = ``smoothness``, the run's ``Run.smoothness()``);
    D/(C√T) for non-smooth ones with a bounded domain."""
    if smoothness is not None:
        beta = smoothness + alpha
        if np.isfinite(beta) and beta > 0:
            return 1.0 / beta
    if constraint is not None:
        return float(constraint.diameter) / (clipping_norm * math.sqrt(steps))
    raise InvalidPrivacyParameter(
        "learning_rate is required here (no smoothness bound and no bounded constraint to "
        "derive a default from), got None"
    )
