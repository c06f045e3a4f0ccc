"""Differentially private stochastic gradient descent, DP-SGD.

Two algorithms share this module and the loop of :mod:`._gradient_loop`:

* :func:`fit` — mini-batch DP-SGD with per-example clipping (Abadi, Chu,
  Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep Learning with
  Differential Privacy", CCS 2016, Algorithm 1).  Each step clips every
  per-example gradient to ℓ2 norm C, sums the batch, adds N(0, (σC)² I) and
  divides by the expected batch size.  Batches are drawn by Poisson sampling
  with rate q (default) — the event is ``PoissonSampled(q, Gaussian(σ))``
  per step, add/remove-one relation (Mironov, Talwar, Zhang 2019, "Rényi
  Differential Privacy of the Sampled Gaussian Mechanism") — or by fixed-size
  sampling without replacement / per-epoch shuffling (replace-one, see
  ``sampling``).
* :func:`fit_single_sample` — the noisy SGD of Bassily, Smith, Thakurta
  ("Private Empirical Risk Minimization: Efficient Algorithms and Tight
  Error Bounds", FOCS 2014, Algorithm 1): one example drawn uniformly at
  random (with replacement across steps) per step, its gradient plus
  Gaussian noise.  Privacy by amplification by subsampling and composition
  (BST14, Theorem 2.1); here each step is accounted exactly as
  ``SampledWithoutReplacement(1, n, Gaussian(z))`` — a single uniform draw
  is a uniformly random subset of size 1 — and composed by the RDP
  accountant (Wang, Balle, Kasiviswanathan, AISTATS 2019, Theorem 9), much
  tighter than the advanced-composition constant of the paper.

Sensitivity (the clipped *sum* of the batch, before the division):

* ``poisson``: add/remove-one, sensitivity C,
  event ``PoissonSampled(q, Gaussian(z))`` per step;
* ``without_replacement``: replace-one, sensitivity 2C,
  event ``SampledWithoutReplacement(b, n, Gaussian(z))`` per step;
* ``shuffle``: replace-one, sensitivity 2C, one ``Gaussian(z)`` per *epoch*
  (no amplification claimed, see :class:`._gradient_loop.ShuffleSampler`);
* single sample: replace-one, sensitivity 2C with C = L,
  event ``SampledWithoutReplacement(1, n, Gaussian(z))`` per step.

The noise standard deviation added to the sum is z × sensitivity (so for
Poisson sampling z is Abadi et al.'s σ).  Under replace-one a replaced record
changes one term of the sum from g to g′ with ‖g − g′‖ ≤ 2C — the factor 2
that is easy to forget.
"""

from __future__ import annotations

import math

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, check_epsilon, check_positive, check_probability
from ..exceptions import InvalidPrivacyParameter
from ..schedules import get_schedule
from . import _gradient_loop as gl
from .base import Result

__all__ = ["default_hyperparameters", "fit", "fit_single_sample"]


def default_hyperparameters(
    n_samples: int,
    n_features: int,
    epsilon: float | None,
    *,
    clipping_norm: float,
    smoothness: float | None = None,
) -> dict:
    """Defaults of mini-batch DP-SGD from public quantities only (n, d, ε, C, β).

    No test set and no statistic of the data is used.  The rule:

    * expected batch size b = clip(round(√n), 16, n), so q = b/n ≈ 1/√n and an
      epoch has ≈ √n steps.  (At fixed epochs, the RDP noise multiplier grows
      roughly like √(qT) = √epochs, so the noise on the average gradient per
      epoch is nearly independent of b; √n balances steps and batch noise.)
    * epochs E = clip(round(2 + 2ε), 2, 10): two passes at small ε, more when the
      budget affords them (the noise multiplier grows like √E);
    * learning rate η = 1/β for a β-smooth loss (the classical gradient-descent
      step), else η = 1/C² (same units: β ~ R², C ~ R for GLMs).  :func:`fit`
      then damps it by 1/√(1 + p s²/C²), with p the number of parameters and s
      the (public) noise standard deviation on the averaged gradient: the
      second moment of a noisy clipped gradient is ≤ C² + p s², which is what
      SGD step sizes scale with (e.g. Bassily, Smith, Thakurta 2014, Algorithm 1).
      The factor is ≈ 1 for mini-batches and matters for single-sample SGD;
    * clipping norm C: chosen by the caller — :func:`fit` uses the Lipschitz
      constant L of the loss over ‖x‖ ≤ ``data_norm`` (L = R for logistic and
      Huber SVM, √2·R for softmax), so clipping never binds and adds no bias.

    Parameters
    ----------
    n_samples, n_features : int
    epsilon : float or None
        None (a given noise multiplier) is treated as ε = 1.
    clipping_norm : float
        C > 0.
    smoothness : float, optional
        β of the per-example loss over the data-norm ball (None or ∞ when not smooth).

    Returns
    -------
    dict
        ``batch_size`` (int), ``epochs`` (int), ``learning_rate`` (float).

    Examples
    --------
    >>> default_hyperparameters(10_000, 20, 0.1, clipping_norm=1.0, smoothness=0.25)
    {'batch_size': 100, 'epochs': 2, 'learning_rate': 4.0}
    """
    n = check_count(n_samples, "n_samples")
    check_count(n_features, "n_features")
    C = check_positive(clipping_norm, "clipping_norm")
    b = int(min(n, max(16, round(math.sqrt(n)))))
    eps = 1.0 if epsilon is None else check_epsilon(epsilon)
    epochs = int(min(10, max(2, round(2 + 2 * eps))))
    if smoothness is not None and 0 < smoothness < math.inf:
        lr = 1.0 / smoothness
    else:
        lr = 1.0 / C**2
    return {"batch_size": b, "epochs": epochs, "learning_rate": float(lr)}


def fit(
    loss,
    X,
    y,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    data_norm: float | None = None,
    clipping_norm: float | None = None,
    sampling_rate: float | None = None,
    batch_size: int | None = None,
    epochs: float | None = None,
    steps: int | None = None,
    learning_rate: float | None = None,
    schedule="constant",
    alpha: float = 0.0,
    constraint=None,
    regularizer=None,
    sampling: str = "poisson",
    momentum: float = 0.0,
    averaging: str = "last",
    noise_multiplier: float | None = None,
    accountant: str = "rdp",
    per_example_grad=None,
    theta0=None,
    n_classes: int | None = None,
    callback=None,
    progress: bool = False,
    random_state=None,
) -> Result:
    """Mini-batch DP-SGD with per-example clipping (Abadi et al., CCS 2016, Algorithm 1).

    Neighbouring relation: **add/remove-one** for ``sampling="poisson"``,
    **replace-one** for ``"without_replacement"`` and ``"shuffle"``.
    Assumptions: none on the loss for privacy (per-example clipping bounds
    every contribution by C); convexity/smoothness matter only for utility.

    Parameters
    ----------
    loss : GLMLoss or Softmax, or None with ``per_example_grad``
    X : ndarray or csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    epsilon, delta : float, optional
        Target (ε, δ); the noise multiplier is then the smallest that
        ``accountant`` certifies for the sampling and number of steps.
    data_norm : float, optional
        Public bound on ‖xᵢ‖ (rows above are clipped and counted).  Used for
        the default clipping norm C = L(data_norm) of a GLM/softmax loss.
    clipping_norm : float, optional
        C > 0.  Default: the Lipschitz constant of ``loss`` over
        ‖x‖ ≤ ``data_norm`` (so clipping never binds).
    sampling_rate : float in (0, 1], optional
        q.  Give this or ``batch_size`` (b = qn), not both.  Default from
        :func:`default_hyperparameters`.
    batch_size : int, optional
        Expected (Poisson) or exact (other samplings) batch size.
    epochs : float, optional
        Passes over the data; steps = ⌈epochs/q⌉ (shuffle: epochs·⌊n/b⌋).
        Give this or ``steps``, not both.
    steps : int, optional
        T ≥ 1.
    learning_rate : float, optional
        η > 0 (the constant, or the scale of other schedules).
    schedule : {"constant", "inverse_sqrt", "inverse_time"} or Schedule or callable
    alpha : float, default 0
        Coefficient of the data-independent term (α/2)‖θ‖².
    regularizer : Regularizer, optional
        Data-independent non-smooth penalty r(θ) (e.g. :class:`~dperm.regularizers.L1`),
        applied by a proximal step after every gradient step (post-processing).
    constraint : Constraint, optional
        Projection after every step.
    sampling : {"poisson", "without_replacement", "shuffle"}
        How batches are drawn; this decides the event (table in the module
        docstring).  ``"shuffle"`` is accounted without any amplification
        (one Gaussian per epoch), because shuffled batches are not
        independent samples.
    momentum : float in [0, 1)
    averaging : {"last", "uniform", "tail"}
    noise_multiplier : float, optional
        z (noise std / sensitivity).  0 gives non-private SGD and the event
        :class:`~dperm.accounting.NonPrivate` (ε = ∞).
    accountant : {"rdp", "pld"}
    per_example_grad : callable, optional
        ``per_example_grad(theta, X_batch, y_batch) -> (b, *theta.shape)``.
    theta0 : ndarray, optional
    n_classes : int, optional
        k for :class:`~dperm.losses.Softmax`.
    callback : callable, optional
        ``callback(t, T, theta)`` after every step.
    progress : bool, default False
        Show a rich progress bar.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        diagnostics keys: ``noise_multiplier``, ``steps``, ``sampling_rate``,
        ``accountant``, ``sampling``, ``batch_size``, ``epochs``,
        ``clipping_norm``, ``noise_std`` (of the noise on the normalized
        gradient), ``learning_rate``, ``n_clipped``, ``neighbouring``,
        ``epsilon``, ``delta``, ``epsilon_spent``.

    Raises
    ------
    InvalidPrivacyParameter
        Sampling rate ∉ (0, 1], steps ≤ 0, clipping norm ≤ 0, learning
        rate ≤ 0, a noise multiplier that does not meet the target ε, …
    UnknownNameError
        Unknown ``sampling``, ``accountant``, ``averaging`` or ``schedule``.
    InvalidDataError, LabelError
        Bad data or labels; ``per_example_grad`` returning a wrong shape.
    """
    return _fit(
        loss,
        X,
        y,
        mechanism="dp-sgd",
        epsilon=epsilon,
        delta=delta,
        data_norm=data_norm,
        clipping_norm=clipping_norm,
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        epochs=epochs,
        steps=steps,
        learning_rate=learning_rate,
        schedule=schedule,
        alpha=alpha,
        constraint=constraint,
        regularizer=regularizer,
        sampling=sampling,
        momentum=momentum,
        averaging=averaging,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
        per_example_grad=per_example_grad,
        theta0=theta0,
        n_classes=n_classes,
        callback=callback,
        progress=progress,
        random_state=random_state,
    )


def fit_single_sample(
    loss,
    X,
    y,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    data_norm: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    learning_rate: float | None = None,
    schedule="inverse_sqrt",
    alpha: float = 0.0,
    constraint=None,
    regularizer=None,
    averaging: str = "uniform",
    noise_multiplier: float | None = None,
    accountant: str = "rdp",
    clipping_norm: float | None = None,
    per_example_grad=None,
    theta0=None,
    n_classes: int | None = None,
    callback=None,
    progress: bool = False,
    random_state=None,
) -> Result:
    """Single-sample noisy SGD (Bassily, Smith, Thakurta, FOCS 2014, Algorithm 1).

    At each of T steps one index i is drawn uniformly from {1..n} (with
    replacement across steps) and θ ← Π_C(θ − η_t (∇ℓ(θ; xᵢ, yᵢ) + b_t)),
    b_t ~ N(0, (2zL)² I).

    Neighbouring relation: **replace-one**.  Assumption: ℓ is L-Lipschitz
    over ‖x‖ ≤ ``data_norm`` (the gradient is also clipped at C = L, a no-op
    for a correct L), so the sensitivity of the one-example gradient is 2L.
    Privacy: amplification by subsampling and composition (BST14, Theorem 2.1);
    each step is accounted as ``SampledWithoutReplacement(1, n, Gaussian(z))``
    (exact for one uniform draw; Wang, Balle, Kasiviswanathan 2019) and the T
    steps are composed by ``accountant`` — never as Poisson sampling, which
    this is not.

    The paper's T = n² steps is impractical; the default is T = ``epochs``·n
    with ``epochs`` = 1, a η_t = η/√t schedule with η as in
    :func:`default_hyperparameters` (1/β for smooth losses, else 1/C²), and the
    uniform average of the iterates (the averaged-SGD form of the analysis).

    Parameters
    ----------
    See :func:`fit`; ``sampling_rate``/``batch_size``/``sampling`` do not
    apply (b = 1).

    Returns
    -------
    Result
        As :func:`fit`, with ``mechanism`` "dp-sgd-single".

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, InvalidDataError, LabelError
    """
    return _fit(
        loss,
        X,
        y,
        mechanism="dp-sgd-single",
        epsilon=epsilon,
        delta=delta,
        data_norm=data_norm,
        clipping_norm=clipping_norm,
        sampling_rate=None,
        batch_size=1,
        epochs=epochs,
        steps=steps,
        learning_rate=learning_rate,
        schedule=schedule,
        alpha=alpha,
        constraint=constraint,
        regularizer=regularizer,
        sampling="without_replacement",
        momentum=0.0,
        averaging=averaging,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
        per_example_grad=per_example_grad,
        theta0=theta0,
        n_classes=n_classes,
        callback=callback,
        progress=progress,
        random_state=random_state,
    )


def _fit(
    loss,
    X,
    y,
    *,
    mechanism,
    epsilon,
    delta,
    data_norm,
    clipping_norm,
    sampling_rate,
    batch_size,
    epochs,
    steps,
    learning_rate,
    schedule,
    alpha,
    constraint,
    regularizer,
    sampling,
    momentum,
    averaging,
    noise_multiplier,
    accountant,
    per_example_grad,
    theta0,
    n_classes,
    callback,
    progress,
    random_state,
) -> Result:
    # ---- validate every public parameter before touching the data --------------------
    if loss is None and per_example_grad is None:
        raise InvalidPrivacyParameter("give a loss or a per_example_grad function, got neither")
    if sampling not in gl.SAMPLINGS:
        from ..exceptions import UnknownNameError

        raise UnknownNameError(f"unknown sampling {sampling!r}; choose one of {list(gl.SAMPLINGS)}")
    gl.check_accountant(accountant)
    alpha, momentum, averaging = gl.check_common(alpha, momentum, averaging)
    if data_norm is not None:
        data_norm = check_positive(data_norm, "data_norm")
    if clipping_norm is not None:
        clipping_norm = check_positive(clipping_norm, "clipping_norm")
    if sampling_rate is not None:
        sampling_rate = check_probability(sampling_rate, "sampling_rate")
    if batch_size is not None:
        batch_size = check_count(batch_size, "batch_size")
    if sampling_rate is not None and batch_size is not None:
        raise InvalidPrivacyParameter(
            f"give sampling_rate or batch_size, not both (got sampling_rate={sampling_rate!r}, "
            f"batch_size={batch_size!r})"
        )
    if steps is not None:
        steps = check_count(steps, "steps")
    if epochs is not None:
        epochs = check_positive(epochs, "epochs")
    if steps is not None and epochs is not None:
        raise InvalidPrivacyParameter(
            f"give epochs or steps, not both (got epochs={epochs!r}, steps={steps!r})"
        )
    if learning_rate is not None:
        learning_rate = check_positive(learning_rate, "learning_rate")
    if epsilon is not None:
        check_epsilon(epsilon)
    rng = check_random_state(random_state)

    X, y, n_clipped, k, norms = gl.prepare_data(loss, X, y, data_norm, per_example_grad, n_classes)
    n, d = X.shape

    # ---- clipping norm C [P2] --------------------------------------------------------
    clipping_norm, lipschitz = gl.resolve_clipping_norm(
        loss, data_norm, constraint, clipping_norm, per_example_grad
    )

    # ---- public hyper-parameters ----------------------------------------------------
    smooth = None
    if loss is not None and per_example_grad is None and data_norm is not None:
        if getattr(loss, "smooth", False):
            smooth = float(loss.smoothness(data_norm))
    defaults = default_hyperparameters(
        n, d, epsilon, clipping_norm=clipping_norm, smoothness=smooth
    )
    if mechanism == "dp-sgd-single":
        defaults = {**defaults, "batch_size": 1, "epochs": 1}
    if sampling_rate is None and batch_size is None:
        batch_size = min(n, defaults["batch_size"])
    if batch_size is not None and batch_size > n:
        raise InvalidPrivacyParameter(f"batch_size must be ≤ n_samples={n}, got {batch_size}")
    sampler = gl.make_sampler(sampling, n, sampling_rate=sampling_rate, batch_size=batch_size)
    if steps is None:
        if epochs is None:
            epochs = defaults["epochs"]
        if isinstance(sampler, gl.ShuffleSampler):
            steps = max(1, math.ceil(epochs * sampler.batches_per_epoch))
        else:
            # round first: b/n·n is not always exactly b in floating point
            steps = max(1, math.ceil(round(epochs / sampler.sampling_rate, 6)))
    lr_default = learning_rate is None and (schedule is None or isinstance(schedule, str))
    # built now to validate the schedule before the (slower) calibration
    sched = get_schedule(
        schedule, 1.0 if lr_default else learning_rate, strong_convexity=alpha or None
    )

    # ---- noise [P3] ---------------------------------------------------------------
    z, event, spent = gl.resolve_noise(
        sampler,
        steps,
        epsilon=epsilon,
        delta=delta,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
    )
    noise_std_sum = z * sampler.sensitivity_factor * clipping_norm
    theta0 = gl.initial_theta(loss, X, theta0, k, per_example_grad)
    if lr_default:
        # public noise-aware damping: the second moment of a noisy gradient is
        # ≤ C² + p·s² (s = noise std on the averaged gradient, p parameters)
        s_rel = noise_std_sum / sampler.normalizer / clipping_norm
        learning_rate = defaults["learning_rate"] / math.sqrt(1.0 + theta0.size * s_rel**2)
        sched = get_schedule(schedule, learning_rate, strong_convexity=alpha or None)

    # ---- the loop -----------------------------------------------------------------
    oracle = gl.make_oracle(loss, X, y, clipping_norm, per_example_grad, norms)
    kwargs = dict(
        theta0=theta0,
        steps=steps,
        schedule=sched,
        noise_std=noise_std_sum,
        rng=rng,
        alpha=alpha,
        constraint=constraint,
        regularizer=regularizer,
        momentum=momentum,
        averaging=averaging,
    )
    out = gl.run(
        oracle,
        sampler,
        callback=callback,
        progress=mechanism.upper() if progress else None,
        **kwargs,
    )

    diagnostics = {
        "mechanism": mechanism,
        "noise_multiplier": z,
        "steps": steps,
        "sampling_rate": sampler.sampling_rate,
        "accountant": accountant,
        "sampling": "single" if mechanism == "dp-sgd-single" else sampler.name,
        "batch_size": sampler.batch_size,
        "epochs": steps * sampler.sampling_rate
        if not isinstance(sampler, gl.ShuffleSampler)
        else steps / sampler.batches_per_epoch,
        "clipping_norm": clipping_norm,
        "lipschitz": lipschitz,
        "noise_std": noise_std_sum / sampler.normalizer,
        "sensitivity": sampler.sensitivity_factor * clipping_norm,
        "learning_rate": learning_rate,
        "schedule": repr(sched),
        "averaging": averaging,
        "momentum": momentum,
        "alpha": alpha,
        "data_norm": data_norm,
        "n_clipped": n_clipped,
        "neighbouring": sampler.neighbouring,
        "epsilon": epsilon,
        "delta": delta,
        "epsilon_spent": spent,
    }
    return Result(theta=np.asarray(out.theta), event=event, diagnostics=diagnostics)
