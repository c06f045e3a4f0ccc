"""Differentially private stochastic gradient descent, DP-SGD.

Two algorithms share this module and the loop of :mod:`._gradient_loop`:

* :func:`fit` — mini-batch DP-SGD with per-example clipping (Abadi, Chu,
  Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep Learning with
  Differential Privacy", CCS 2016, Algorithm 1).  Each step clips every
  per-example gradient to ℓ2 norm C, sums the batch, adds Gaussian noise and
  divides by the public expected batch size.  Batches are drawn by Poisson
  sampling with rate q (default) — the event is
  ``PoissonSampled(q, Gaussian(z, neighbouring=...))`` per step, under
  add/remove-one (Mironov, Talwar, Zhang 2019, "Rényi Differential Privacy of
  the Sampled Gaussian Mechanism") or replace-one neighbours (dp-accounting's
  REPLACE_ONE privacy-loss distribution) — or by fixed-size sampling without
  replacement / per-epoch shuffling (replace-one only, see ``sampling``).
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

* ``poisson``, add/remove-one: sensitivity C, normaliser q·N with N the
  caller's public ``dataset_size``;
* ``poisson``, replace-one: sensitivity 2C, normaliser q·n (n public);
* ``without_replacement``: replace-one, sensitivity 2C,
  event ``SampledWithoutReplacement(b, n, Gaussian(z))`` per step;
* ``shuffle``: replace-one, sensitivity 2C, one ``Gaussian(z)`` per *epoch*
  (no amplification claimed, see :class:`._gradient_loop.ShuffleSampler`);
* single sample: replace-one, sensitivity 2C with C = L,
  event ``SampledWithoutReplacement(1, n, Gaussian(z))`` per step.

The noise standard deviation added to the sum is z × sensitivity (so for
add/remove Poisson sampling z is Abadi et al.'s σ).  Under replace-one a
replaced record changes one term of the sum from g to g′ with ‖g − g′‖ ≤ 2C —
the factor 2 that is easy to forget.

Public constants.  Under add/remove neighbours the number of records |D| is
private: two neighbours differ in it.  So no constant of a run — the
normaliser q·N, q, the batch size, the number of steps T, the noise
multiplier z, the learning-rate damping and schedule, the averaging weights —
is computed from ``X.shape[0]``; those that need a size use the caller's
public ``dataset_size``, and a run that needs one without it raises
:class:`~dperm.exceptions.InvalidPrivacyParameter`.  The data rows are only
iterated over (one Bernoulli(q) draw per actual row).  Under replace-one
neighbours n = ``X.shape[0]`` is the same for both neighbours, hence public,
and is used.  See docs/gradient_perturbation.md, "Public constants and the
neighbouring relation".
"""

from __future__ import annotations

import math

import numpy as np

from .._rng import check_random_state
from .._validation import check_count, check_epsilon, check_positive, check_probability
from ..bounds import sgd_gradient_second_moment
from ..exceptions import InvalidPrivacyParameter, UnknownNameError
from ..schedules import get_schedule, inverse_sqrt_learning_rate
from . import _gradient_loop as gl
from . import adaptive_clipping as ac
from . import private_scaling as ps
from .base import Result, private_fit

__all__ = [
    "check_plan",
    "check_sampling",
    "default_hyperparameters",
    "fit",
    "fit_single_sample",
    "prefetch_noise",
]


def default_hyperparameters(
    n_samples: int,
    n_features: int,
    epsilon: float | None,
    *,
    clipping_norm: float,
    smoothness: float | None = None,
) -> dict:
    """Defaults of mini-batch DP-SGD from public quantities only (n, d, ε, C, β).

    No test set and no statistic of the data is used, and n must be a *public*
    size: :func:`fit` passes the caller's ``dataset_size`` under add/remove
    neighbours and ``X.shape[0]`` only under replace-one.  The rule:

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
    n_samples : int
        Public dataset size.
    n_features : int
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


def check_sampling(sampling: str, neighbouring: str | None) -> str:
    """The relation of a run drawn by ``sampling``: ``neighbouring`` checked, by default
    add/remove for Poisson sampling and replace-one for the others, whose accounting
    exists for replace-one only.  Shared with :mod:`dperm.networks.dp_sgd`.

    Raises
    ------
    UnknownNameError
        Unknown ``sampling``.
    InvalidPrivacyParameter
        An unknown relation, or add/remove with a sampling other than Poisson.
    """
    if sampling not in gl.SAMPLINGS:
        raise UnknownNameError(f"unknown sampling {sampling!r}; choose one of {list(gl.SAMPLINGS)}")
    if neighbouring is None:
        neighbouring = gl.ADD_REMOVE if sampling == "poisson" else gl.REPLACE_ONE
    neighbouring = gl.check_neighbouring(neighbouring)
    if neighbouring == gl.ADD_REMOVE and sampling != "poisson":
        raise InvalidPrivacyParameter(
            f"sampling={sampling!r} is accounted for replace-one neighbours only (its "
            "batch law depends on the number of records n, which add/remove neighbours "
            "do not share); use sampling='poisson' or neighbouring='replace-one', got "
            "neighbouring='add-remove'"
        )
    return neighbouring


def check_plan(sampling_rate, batch_size, epochs, steps) -> tuple:
    """(q, b, epochs, T) as given (None: the default), each checked: q in (0, 1], b and T
    whole ≥ 1, epochs > 0; at most one of q and b, one of epochs and T.  Shared with
    :func:`dperm.networks.plan.make_plan`.

    Raises
    ------
    InvalidPrivacyParameter
    """
    given = {
        "sampling_rate": (sampling_rate, check_probability),
        "batch_size": (batch_size, check_count),
        "epochs": (epochs, check_positive),
        "steps": (steps, check_count),
    }
    v = {name: None if x is None else check(x, name) for name, (x, check) in given.items()}
    for a, b in (("sampling_rate", "batch_size"), ("epochs", "steps")):
        if v[a] is not None and v[b] is not None:
            raise InvalidPrivacyParameter(
                f"give {a} or {b}, not both (got {a}={v[a]!r}, {b}={v[b]!r})"
            )
    return tuple(v.values())


def run_plan(
    sampling, n_rows, size, defaults, sampling_rate, batch_size, epochs, steps, neighbouring,
    dataset_size,
):  # fmt: skip
    """(sampler, steps) of a run: the batch size and epochs given, else ``defaults``'
    (:func:`default_hyperparameters`, public numbers only; ``size`` the public dataset
    size of ``neighbouring``).  Shared with :mod:`dperm.networks.dp_sgd`."""
    if sampling_rate is None and batch_size is None:
        batch_size = min(size, defaults["batch_size"])
    if batch_size is not None and batch_size > size:
        raise InvalidPrivacyParameter(
            f"batch_size must be ≤ the dataset size {size}, got {batch_size}"
        )
    sampler = gl.make_sampler(
        sampling,
        n_rows,
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        neighbouring=neighbouring,
        dataset_size=dataset_size,
    )
    if steps is None:
        if epochs is None:
            epochs = defaults["epochs"]
        if isinstance(sampler, gl.ShuffleSampler):
            steps = max(1, math.ceil(epochs * sampler.batches_per_epoch))
        else:
            # round first: b/n·n is not always exactly b in floating point
            steps = max(1, math.ceil(round(epochs / sampler.sampling_rate, 6)))
    return sampler, steps


def prefetch_noise(
    n_rows: int,
    *,
    epsilon,
    delta,
    neighbouring: str,
    dataset_size=None,
    sampling: str = "poisson",
    sampling_rate=None,
    batch_size=None,
    epochs=None,
    steps=None,
    accountant=None,
    noise_multiplier=None,
    **settings,
) -> None:
    """Start the noise calibration of the run that :func:`fit` with these arguments
    will make (:func:`dperm.algorithms._gradient_calibration.prefetch_noise`: a
    background thread that the fit's own calibration then waits for) — from public
    numbers only: the number of rows ``n_rows`` (the caller's ``dataset_size`` under
    add/remove), ε, δ and the plan.  Only a plan fully given (``batch_size`` or
    ``sampling_rate``, ``epochs`` or ``steps``) is prefetched; ``settings`` that do not
    change the plan (learning rate, averaging, …) are ignored, and so is anything
    invalid (the fit reports it).  Never raises."""
    if epsilon is None or delta is None or noise_multiplier is not None:
        return
    if (batch_size is None and sampling_rate is None) or (epochs is None and steps is None):
        return
    try:
        neighbouring = gl.check_neighbouring(neighbouring)
        size = gl.public_size(neighbouring, dataset_size, n_rows, "the dataset size")
        sampler, steps = run_plan(
            sampling, n_rows, size, {}, sampling_rate, batch_size, epochs, steps, neighbouring,
            dataset_size,
        )  # fmt: skip
        accountant = gl.resolve_accountant(accountant, sampler)
    except Exception:  # the fit raises it, with its own checks
        return
    gl.prefetch_noise(sampler, steps, epsilon=epsilon, delta=delta, accountant=accountant)


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    loss,
    X,
    y,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    neighbouring: str | None = None,
    dataset_size: int | None = None,
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
    accountant: str | None = None,
    target_unclipped_quantile: float | None = None,
    clipping_learning_rate: float = 0.2,
    count_noise_share: float | None = None,
    max_clipping_norm: float | None = None,
    feature_scaling: str | None = None,
    scaling_share: float | None = None,
    per_example_grad=None,
    theta0=None,
    n_classes: int | None = None,
    callback=None,
    progress: bool | str = False,
    random_state=None,
) -> Result:
    """Mini-batch DP-SGD with per-example clipping (Abadi et al., CCS 2016, Algorithm 1).

    Neighbouring relation: ``neighbouring``, by default **add/remove-one** for
    ``sampling="poisson"`` (the standard DP-SGD guarantee) and **replace-one**
    for ``"without_replacement"`` and ``"shuffle"`` (whose accounting exists
    only for replace-one; asking for add/remove with them raises).
    Assumptions: none on the loss for privacy (per-example clipping bounds
    every contribution by C); convexity/smoothness matter only for utility.

    **Public constants.**  Under add/remove the dataset size is private, so
    nothing of the run is computed from ``X.shape[0]``: the noisy sum is
    divided by q·``dataset_size``, an expected ``batch_size`` gives
    q = b/``dataset_size``, and the default batch size, epochs → steps, noise
    multiplier and learning-rate damping are functions of (``dataset_size``,
    d, ε, δ, C, β) only.  ``dataset_size`` is therefore **required** under
    add/remove (the normaliser always needs it): it is an integer the caller
    asserts is public (e.g. a published count) and need not equal
    ``X.shape[0]``; every actual row still gets its own Bernoulli(q) draw.
    Under replace-one, n = ``X.shape[0]`` is public and is used
    (``dataset_size`` may be omitted, or must equal n).

    Parameters
    ----------
    loss : GLMLoss or Softmax, or None with ``per_example_grad``
    X : ndarray, csr_matrix or Design of shape (n, d)
        Viewed as a :class:`~dperm.design.Design`: rows clipped to ``data_norm`` by
        a per-row scale, batches gathered from X (only the batch is copied), float32
        kept with products in float64.
    y : ndarray of shape (n,)
    epsilon, delta : float, optional
        Target (ε, δ) for ``neighbouring``; the noise multiplier is then the
        smallest that ``accountant`` certifies for the sampling and number of
        steps.  δ has no default (it would be a function of the size).
    neighbouring : {"add-remove", "replace-one"}, optional
        Relation of the guarantee (default: see above).  Recorded in the event
        (``Gaussian(z, neighbouring=...)``) and in ``diagnostics["neighbouring"]``.
    dataset_size : int, optional
        Public number of records N.  Required under add/remove; under
        replace-one it must equal ``X.shape[0]`` if given.
    data_norm : float, optional
        Public bound on ‖xᵢ‖ (rows above are clipped and counted).  Used for
        the default clipping norm C = L(data_norm) of a GLM/softmax loss.
    clipping_norm : float, optional
        C > 0.  Default: the Lipschitz constant of ``loss`` over
        ‖x‖ ≤ ``data_norm`` (so clipping never binds).
    sampling_rate : float in (0, 1], optional
        q.  Give this or ``batch_size`` (q = b/N), not both.  Default from
        :func:`default_hyperparameters` with the public size N.
    batch_size : int, optional
        Expected (Poisson) or exact (other samplings) batch size, ≤ N.
    epochs : float, optional
        Passes over the data; steps = ⌈epochs/q⌉ (shuffle: epochs·⌊n/b⌋).
        Give this or ``steps``, not both.
    steps : int, optional
        T ≥ 1.
    learning_rate : float, optional
        η > 0 (the constant, or the scale of other schedules).  Default: the rule of
        :func:`default_hyperparameters`, except ``schedule="inverse_sqrt"`` with a
        ``constraint``: Lecture 15, Lemma 15.6's own step η_t = D/(G√t), D the
        constraint's diameter and G the run's gradient bound
        (:func:`dperm.schedules.inverse_sqrt_learning_rate`), for which the last
        iterate has Shamir & Zhang's (ICML 2013, Thm 2) bound
        (:func:`dperm.theory.lecture15_sgd_bound`).
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
    accountant : {"rdp", "pld"}, optional
        Default: the tightest accountant that supports the event — "pld"
        (Poisson sampling, shuffling), "rdp" for sampling without replacement
        (PLD has no such event).  "rdp" cannot account replace-one Poisson
        sampling (raises :class:`~dperm.exceptions.UnsupportedEventError`).
    target_unclipped_quantile : float in (0, 1), optional
        γ: **adaptive clipping** (Andrew, Thakkar, McMahan, Ramaswamy, NeurIPS 2021;
        :mod:`dperm.algorithms.adaptive_clipping`): the clipping norm starts at C
        (``clipping_norm`` or its default) and moves every step towards the γ-quantile
        of the batch's per-example gradient norms, by a noisy count of the unclipped
        examples released with the step.  The event is the one of fixed clipping with
        the calibrated multiplier z (the count takes a share of z⁻²), so (ε, δ) are
        spent as without it.  None (default): the clipping norm is fixed.
    clipping_learning_rate : float > 0, default 0.2
        η_C of the geometric update Cₜ₊₁ = Cₜ·exp(−η_C(b̃ₜ − γ)).
    count_noise_share : float in (0, 1), optional
        f, the count's share of z⁻².  Default
        :func:`~dperm.algorithms.adaptive_clipping.count_share` (noise ≈ 0.05 on the
        released fraction of unclipped examples), and the clipping stays fixed when
        even the largest share leaves that noise above
        :data:`~dperm.algorithms.adaptive_clipping.MAX_FRACTION_NOISE` (the count would
        be noise; ``diagnostics["clipping"]`` says so).  Given, adaptive clipping runs.
    max_clipping_norm : float, optional
        A public ceiling of Cₜ (the auto rule: its own C, so that the clipping only
        comes down to the gradients).  Default: none.
    feature_scaling : {None, "private"}, default None
        "private": before the steps, a private location and scale of every column
        (:mod:`dperm.algorithms.private_scaling`: three Gaussian releases within the
        public row bound, replace-one) and the steps run on the standardized features
        (xⱼ − mⱼ)/(sⱼ√d), mapped inside the oracle (only the batch is copied); the
        released θ is mapped back to the original features (post-processing).  The
        scaling takes the share ``scaling_share`` of the budget (of μ² = z⁻² of the
        Gaussian mechanism that meets (ε, δ)), and the steps' noise is calibrated for the
        *composition*: the event is ``Composed((scaling, steps))`` and spends (ε, δ).
        Needs ε and δ, a GLM or softmax loss, replace-one neighbours and an intercept.
    scaling_share : float in (0, 1), optional
        Default :data:`dperm.algorithms.private_scaling.DEFAULT_SHARE`.
    per_example_grad : callable, optional
        ``per_example_grad(theta, X_batch, y_batch) -> (b, *theta.shape)``.
    theta0 : ndarray, optional
    n_classes : int, optional
        k for :class:`~dperm.losses.Softmax`.
    callback : callable, optional
        ``callback(t, T, theta)`` after every step.
    progress : bool or str, default False
        Show a rich progress bar (a string is its description; default "DP-SGD").
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    Result
        diagnostics keys: ``noise_multiplier``, ``steps``, ``sampling_rate``,
        ``accountant``, ``sampling``, ``batch_size``, ``epochs``,
        ``clipping_norm``, ``noise_std`` (of the noise on the normalized
        gradient), ``normalizer``, ``dataset_size`` (the public size used),
        ``learning_rate``, ``n_clipped``, ``neighbouring``, ``epsilon``,
        ``delta``, ``epsilon_spent``.

    Raises
    ------
    InvalidPrivacyParameter
        Sampling rate ∉ (0, 1], steps ≤ 0, clipping norm ≤ 0, learning
        rate ≤ 0, a noise multiplier that does not meet the target ε; no
        ``dataset_size`` under add/remove; an unknown ``neighbouring``;
        add/remove with a sampling whose accounting is replace-one only; …
    UnsupportedEventError
        ``accountant="rdp"`` with replace-one Poisson sampling, or "pld" with
        sampling without replacement.
    UnknownNameError
        Unknown ``sampling``, ``accountant``, ``averaging`` or ``schedule``.
    InvalidDataError, LabelError
        Bad data or labels; ``per_example_grad`` returning a wrong shape.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.losses import Logistic
    >>> X = np.tile([[0.6, 0.0]], (200, 1)); y = np.ones(200)
    >>> r = fit(Logistic(), X, y, epsilon=1.0, delta=1e-6, data_norm=1.0,
    ...         dataset_size=200, sampling_rate=0.1, epochs=1, random_state=0)
    >>> r.diagnostics["neighbouring"], r.diagnostics["normalizer"], r.diagnostics["steps"]
    ('add-remove', 20.0, 10)
    """
    # ---- validate every public parameter before touching the data --------------------
    gl.check_loss_or_gradient(loss, per_example_grad)
    neighbouring = check_sampling(sampling, neighbouring)
    dataset_size = gl.check_dataset_size(dataset_size)
    if neighbouring == gl.ADD_REMOVE:
        gl.public_size(neighbouring, dataset_size, 0, "the normaliser q·dataset_size")
    if accountant is not None:
        gl.check_accountant(accountant)
    opts = gl.check_options(
        alpha, momentum, averaging, data_norm, clipping_norm, constraint, regularizer
    )
    sampling_rate, batch_size, epochs, steps = check_plan(sampling_rate, batch_size, epochs, steps)
    if learning_rate is not None:
        learning_rate = check_positive(learning_rate, "learning_rate")
    adaptive = ac.check(
        target_unclipped_quantile, clipping_learning_rate, count_noise_share, max_clipping_norm
    )
    if epsilon is not None:
        check_epsilon(epsilon)
    scaling = ps.plan(
        feature_scaling, scaling_share, epsilon, delta, neighbouring, per_example_grad
    )
    rng = check_random_state(random_state)

    run = gl.Run.prepare(loss, X, y, per_example_grad, n_classes, opts, rng)
    n_rows, d = run.X.shape
    # The size every constant below may use: the caller's public dataset_size under
    # add/remove (X.shape[0] is private there), n = X.shape[0] under replace-one.
    size = gl.public_size(neighbouring, dataset_size, n_rows, "the dataset size")

    # ---- clipping norm C [P2] --------------------------------------------------------
    clipping_norm = run.resolve_clipping_norm()

    # ---- public hyper-parameters (functions of size, d, ε, C, β only) ---------------
    defaults = default_hyperparameters(
        size, d, epsilon, clipping_norm=clipping_norm, smoothness=run.smoothness()
    )
    sampler, steps = run_plan(
        sampling, n_rows, size, defaults, sampling_rate, batch_size, epochs, steps,
        neighbouring, dataset_size,
    )  # fmt: skip
    accountant = gl.resolve_accountant(accountant, sampler)
    lr_default = learning_rate is None and (schedule is None or isinstance(schedule, str))
    # built now to validate the schedule before the (slower) calibration
    sched = get_schedule(
        schedule, 1.0 if lr_default else learning_rate, strong_convexity=opts.alpha or None
    )

    # ---- noise [P3] (composed with the private scaling's release, if any) -----------
    z, event, spent = gl.resolve_noise(
        sampler,
        steps,
        epsilon=epsilon,
        delta=delta,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
        prior=None if scaling is None else scaling.event,
    )
    transform = None
    if scaling is not None:  # the releases of the scaling, then the map inside the oracle
        scaled = scaling.run(run.X, rng)
        transform = scaled.transform
    noise_std_sum = z * sampler.sensitivity_factor * clipping_norm
    # adaptive clipping: the same event, the count takes a share of z⁻² (or None: fixed)
    clipping = ac.start(adaptive, z, sampler, clipping_norm)
    if clipping is not None:
        noise_std_sum = clipping.vector_noise * clipping_norm
    theta0 = run.initial_theta(theta0)
    if lr_default:
        # public noise-aware damping: the second moment of a noisy gradient is
        # ≤ C² + p·s² (s = noise std on the averaged gradient, p parameters); the
        # normaliser is public (q·dataset_size under add/remove)
        s_rel = noise_std_sum / sampler.normalizer / clipping_norm
        learning_rate = defaults["learning_rate"] / math.sqrt(1.0 + theta0.size * s_rel**2)
        if schedule == "inverse_sqrt" and opts.constraint is not None:
            # Lecture 15, Lemma 15.6's own step η_t = D/(G√t) over the constraint set
            g2 = sgd_gradient_second_moment(
                clipping_norm=clipping_norm, noise_std=s_rel * clipping_norm, dim=theta0.size,
                sampling_rate=sampler.sampling_rate, batch_size=sampler.normalizer,
            )  # fmt: skip
            g = math.sqrt(g2) + opts.alpha * opts.constraint.l2_radius  # + the ridge's αθ
            learning_rate = inverse_sqrt_learning_rate(opts.constraint.diameter, g)
        sched = get_schedule(schedule, learning_rate, strong_convexity=opts.alpha or None)

    # ---- the loop -----------------------------------------------------------------
    label = (progress if isinstance(progress, str) else "DP-SGD") if progress else None
    out = run.descend(
        sampler, theta0, steps, sched, noise_std_sum, callback=callback, progress=label,
        clipping=clipping, transform=transform,
    )  # fmt: skip
    theta = np.asarray(out.theta)
    head = {
        "mechanism": "dp-sgd",
        **gl.sampler_diagnostics(sampler, z, steps, accountant, clipping_norm, noise_std_sum),
        "lipschitz": run.lipschitz,
        "dataset_size": size,
        **ac.diagnostics(adaptive, clipping),
    }
    if scaling is not None:  # θ on the original features (post-processing)
        theta = scaled.unscale(theta)
        head["feature_scaling"] = scaled.diagnostics
    diagnostics = run.diagnostics(head, sampler, learning_rate, sched, epsilon, delta, spent)
    return Result(theta=theta, event=event, diagnostics=diagnostics)


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit_single_sample(
    loss,
    X,
    y,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    neighbouring: str = "replace-one",
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
    accountant: str | None = None,
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

    Neighbouring relation: **replace-one** (n = ``X.shape[0]`` public; it
    sets the sampling law 1/n and the default T = n).  ``neighbouring=
    "add-remove"`` raises: the law of the uniform draw changes with |D|, so
    no add/remove accounting applies.  Assumption: ℓ is L-Lipschitz
    over ‖x‖ ≤ ``data_norm`` (the gradient is also clipped at C = L, a no-op
    for a correct L), so the sensitivity of the one-example gradient is 2L.
    Privacy: amplification by subsampling and composition (BST14, Theorem 2.1);
    each step is accounted as ``SampledWithoutReplacement(1, n, Gaussian(z))``
    (exact for one uniform draw; Wang, Balle, Kasiviswanathan 2019) and the T
    steps are composed by ``accountant`` (default and only supported: RDP) —
    never as Poisson sampling, which this is not.

    The paper's T = n² steps is impractical; the default is T = ``epochs``·n
    with ``epochs`` = 1, a η_t = η/√t schedule with η as in
    :func:`default_hyperparameters` (1/β for smooth losses, else 1/C²), and the
    uniform average of the iterates (the averaged-SGD form of the analysis).

    The parameters are those of :func:`fit`; ``sampling_rate``/``batch_size``/
    ``sampling``/``dataset_size`` do not apply (b = 1, replace-one): this is
    :func:`fit` with ``batch_size=1`` and ``sampling="without_replacement"``.

    Returns
    -------
    Result
        As :func:`fit`, with ``mechanism`` "dp-sgd-single".

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, InvalidDataError, LabelError
    """
    arguments = dict(locals())  # this call's arguments, all forwarded to fit()
    gl.check_loss_or_gradient(loss, per_example_grad)
    if gl.check_neighbouring(neighbouring) == gl.ADD_REMOVE:
        raise InvalidPrivacyParameter(
            "single-sample SGD draws one of the n records uniformly; its accounting "
            "(SampledWithoutReplacement(1, n, ·)) holds for replace-one neighbours only "
            "(n public), got neighbouring='add-remove'"
        )
    if steps is None and epochs is None:
        arguments["epochs"] = 1  # the default T = n: one pass
    arguments.update(
        batch_size=1,
        sampling="without_replacement",
        progress="DP-SGD-SINGLE" if progress else False,
    )
    result = fit(**arguments)
    result.diagnostics.update(mechanism="dp-sgd-single", sampling="single")
    return result
