"""DP-SGD for any PyTorch module: per-example gradients from ``torch.func``, the
sampler, noise, loop and accountant of dperm.

Algorithm: Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep Learning
with Differential Privacy" (CCS 2016), Algorithm 1 — Lecture 15, Algorithm 4 (§15.4):
each step draws a lot by Poisson sampling with rate q, clips every per-example
gradient to ℓ2 norm C, adds N(0, (z·Δ)² I) to the sum and divides by the public
expected lot size; θ moves by the noisy average (momentum, learning-rate schedule and
iterate averaging are post-processing).

What is shared with the convex DP-SGD of :mod:`dperm.algorithms.dp_sgd` — and so is
the same code: the samplers and the events they imply (:mod:`dperm.sampling`), the
public-size rule under add/remove neighbours, the calibration of z through the
accountants and its fail-closed re-check
(:func:`dperm.algorithms._gradient_calibration.resolve_noise`),
and the loop itself (:func:`dperm.algorithms._gradient_loop.run`: batches, Gaussian
noise from dperm's generator, update).  Only step P2, the clipped per-example
gradient sum, is computed by PyTorch (:mod:`dperm.networks.per_example`), so a
network fit and a convex fit produce the same kind of :class:`~dperm.accounting.DpEvent`
and one :class:`~dperm.accounting.Ledger` covers both.

Privacy (both relations, any module and loss, no convexity): per-example clipping
bounds one record's contribution to a lot's sum by C (add/remove) or 2C (replace-one),
whatever the network; the event of a run is ``SelfComposed(PoissonSampled(q,
Gaussian(z)), T)`` — Mironov, Talwar, Zhang 2019 for the RDP of the sampled Gaussian
under add/remove, dp-accounting's REPLACE_ONE privacy-loss distribution under
replace-one.  Utility: the loss of a network is not convex and no excess-risk
theorem applies — only the privacy guarantee does (docs/neural_networks.md).

Public constants.  Under add/remove the record count |D| is private: the normaliser
q·N, q, T and z use the caller's public ``dataset_size`` only
(:func:`dperm.sampling.public_size`).  Under replace-one (dperm's default) n =
``X.shape[0]`` is public.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._rng import check_random_state
from .._validation import (
    check_count,
    check_epsilon,
    check_nonnegative,
    check_positive,
    check_probability,
)
from ..accounting.events import ADD_REMOVE, Composed, DpEvent, Gaussian
from ..algorithms import _gradient_loop as gl
from ..algorithms.base import Result, private_fit
from ..algorithms.dp_sgd import run_plan
from ..exceptions import DpermError, InvalidDataError, InvalidPrivacyParameter
from ..schedules import get_schedule
from ._torch import flat_parameters, load_flat_parameters, require_torch, resolve_device
from ._torch import torch_rng_seed as _torch_seed
from .per_example import check_module, clipped_gradient_sum, ghost_eligible, resolve_loss

__all__ = ["TorchOracle", "calibrate", "default_hyperparameters", "fit", "make_plan"]


def default_hyperparameters(n_samples: int, epsilon: float | None) -> dict:
    """Defaults of network DP-SGD from public quantities only (n and ε).

    The rule (measured on MNIST with the architecture of Abadi et al. — DP PCA to 60
    dimensions, 1 000 hidden ReLU units — at replace-one ε = 0.5 and 2,
    benchmarks/bench_mlp.py and docs/neural_networks.md):

    * lot size b = clip(round(n/50), 16, n), so q ≈ 0.02.  At a fixed number of epochs
      the noise on an epoch's averaged gradient hardly depends on b (z grows like
      √(qT)); lots of 1 200 (60 epochs) and 3 000 (100 epochs) gave the same accuracy
      on MNIST, and larger lots cost less per-step overhead;
    * epochs E = clip(round(30·(2ε)^{log 5/log 4}·√(n/60 000)), 10, 150): the
      geometric interpolation of the two measured optima on MNIST's n = 60 000 —
      30 epochs at replace-one ε = 0.5 (90.7 %; 75 epochs gave 87.1 %: at small ε
      more, noisier steps hurt) and 150 at ε = 2 (20 / 60 / 100 epochs gave
      93.1 / 94.5 / 94.8 %; one seed each, lots of 1 200) — capped at 150.  Smaller
      data sets get fewer passes (the factor √(n/60 000), at least 10), which keeps
      their runs short.  Re-checked for the default quadratic classifier of
      :class:`~dperm.estimators.mlp.DPMLPClassifier` (issue #31, validation split of
      MNIST's training rows, n = 50 000): at ε = 0.5, 15 / 27 (the rule) / 50 epochs
      gave 89.8 / 90.2 / 89.9 %;
    * learning rate η = 1 on the noisy *average* gradient with clipping norm C
      (:func:`fit` uses η/C: each step moves θ by at most η in the noiseless part), a
      constant schedule, and the uniform average of the last half of the iterates
      (``averaging="tail"``) to damp the noise.

    Parameters
    ----------
    n_samples : int
        Public dataset size (``dataset_size`` under add/remove).
    epsilon : float or None
        None (a given noise multiplier) is treated as ε = 1.

    Returns
    -------
    dict
        ``batch_size`` (int), ``epochs`` (int), ``learning_rate`` (float).

    Examples
    --------
    >>> default_hyperparameters(60_000, 2.0)
    {'batch_size': 1200, 'epochs': 150, 'learning_rate': 1.0}
    """
    n = check_count(n_samples, "n_samples")
    eps = 1.0 if epsilon is None else check_epsilon(epsilon)
    b = int(min(n, max(16, round(n / 50))))
    growth = (2.0 * eps) ** (math.log(5.0) / math.log(4.0))
    epochs = int(min(150, max(10, round(30.0 * growth * math.sqrt(n / 60_000)))))
    return {"batch_size": b, "epochs": epochs, "learning_rate": 1.0}


def make_plan(
    n_rows: int,
    *,
    epsilon: float | None,
    neighbouring: str,
    dataset_size: int | None,
    sampling: str = "poisson",
    sampling_rate: float | None = None,
    batch_size: int | None = None,
    epochs: float | None = None,
    steps: int | None = None,
):
    """The sampler and step count of a run, from public inputs only.

    Returns
    -------
    sampler : dperm.sampling.Sampler
    steps : int
    defaults : dict
        :func:`default_hyperparameters` of the public size.

    Raises
    ------
    InvalidPrivacyParameter
        Both ``sampling_rate`` and ``batch_size``, both ``epochs`` and ``steps``, a
        missing public ``dataset_size`` under add/remove, a batch larger than the data.
    UnknownNameError
        Unknown ``sampling``.
    """
    neighbouring = gl.check_neighbouring(neighbouring)
    dataset_size = gl.check_dataset_size(dataset_size)
    size = gl.public_size(neighbouring, dataset_size, n_rows, "the dataset size")
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
    sampling_rate, batch_size, epochs, steps = (v[k] for k in given)
    defaults = default_hyperparameters(size, epsilon)
    sampler, steps = run_plan(
        sampling, n_rows, size, defaults, sampling_rate, batch_size, epochs, steps,
        neighbouring, dataset_size,
    )  # fmt: skip
    return sampler, steps, defaults


_JOINT_CACHE: dict[tuple, float] = {}


def calibrate(
    sampler,
    steps: int,
    *,
    epsilon,
    delta,
    noise_multiplier=None,
    accountant: str,
    companion_ratio: float | None = None,
) -> tuple[float, DpEvent, float | None]:
    """Noise multiplier z of the training run, the event of everything the run releases,
    and ε spent at δ.

    Without ``companion_ratio`` this is
    :func:`dperm.algorithms._gradient_calibration.resolve_noise` (the event is
    ``sampler.event(z, steps)``).  With it, the run also releases one Gaussian
    mechanism of multiplier ``companion_ratio``·z under the same relation (the DP PCA
    of :class:`~dperm.networks.pca.DPPCA`, as in Abadi et al., §5.1) and z is the
    smallest multiplier for which the *composition*
    ``Composed((Gaussian(r·z), SelfComposed(PoissonSampled(q, Gaussian(z)), T)))`` is
    certified (ε, δ)-DP by ``accountant`` — one event, one calibration, re-checked
    before use (fail closed).

    Raises
    ------
    InvalidPrivacyParameter
        As :func:`~dperm.algorithms._gradient_calibration.resolve_noise`.
    """
    if companion_ratio is None:
        return gl.resolve_noise(
            sampler,
            steps,
            epsilon=epsilon,
            delta=delta,
            noise_multiplier=noise_multiplier,
            accountant=accountant,
        )
    r = check_positive(companion_ratio, "companion_ratio")
    nb = sampler.neighbouring
    if delta is not None:  # δ ≥ 1/N is a void guarantee (issue #32), as in gl.resolve_noise
        from .._validation import check_delta_size

        check_delta_size(delta, sampler.public_size, size="n" if nb == "replace-one" else "N")

    def make_event(z: float) -> DpEvent:
        return Composed((Gaussian(r * z, neighbouring=nb), sampler.event(z, steps)))

    if noise_multiplier is None:
        from .._validation import check_delta

        if epsilon is None:
            raise InvalidPrivacyParameter(
                "give epsilon and delta (the noise is then calibrated) or noise_multiplier, "
                "got neither"
            )
        eps, dlt = check_epsilon(epsilon), check_delta(delta, allow_zero=False)
        key = (make_event(1.0), eps, dlt, accountant)
        z = _JOINT_CACHE.get(key)
        if z is None:
            z = gl.calibrate_noise_multiplier(make_event, eps, dlt, accountant, neighbouring=nb)
            _JOINT_CACHE[key] = z
    else:
        z = check_positive(noise_multiplier, "noise_multiplier")
        if epsilon is not None:
            gl.check_spent(
                make_event(z), check_epsilon(epsilon), delta, accountant,
                what=f"noise_multiplier={z:g} with the companion Gaussian (ratio {r:g})",
            )  # fmt: skip
    event = make_event(z)
    spent = None if delta is None else gl.epsilon_of(event, delta, accountant)
    return z, event, spent


class TorchOracle:
    """Clipped per-example gradient sums of a torch module on the rows of X
    (:func:`~dperm.networks.per_example.clipped_gradient_sum`); θ is the flat vector of
    the module's trainable parameters.  Only the batch rows are copied (to a tensor)."""

    kind = "torch"

    def __init__(self, module, loss, X, y, clipping_norm: float, *, method="auto", device=None):
        torch = require_torch()
        self.torch = torch
        self.module, self.X, self.y, self.C = module, X, y, clipping_norm
        self.loss_fn = resolve_loss(loss)
        self.method = method
        self.device = device or torch.device("cpu")
        self.dtype = next(p for p in module.parameters()).dtype
        if loss == "cross_entropy":
            self.y_dtype = torch.int64
        elif np.issubdtype(np.asarray(y[:0]).dtype, np.floating):
            self.y_dtype = self.dtype
        else:
            self.y_dtype = None

    def batches(self, sampler, rng, steps):
        """The batches of ``sampler`` (index arrays, or None for every row)."""
        return sampler.batches(rng, steps)

    def tensors(self, idx):
        """(X_batch, y_batch) as tensors on the device (idx None: every row)."""
        torch = self.torch
        Xb = self.X if idx is None else self.X[idx]
        yb = self.y if idx is None else self.y[idx]
        Xt = torch.as_tensor(np.asarray(Xb), device=self.device).to(self.dtype)
        yt = torch.as_tensor(np.asarray(yb), device=self.device)
        if self.y_dtype is not None:
            yt = yt.to(self.y_dtype)
        return Xt, yt

    def clipped_sum(self, theta, idx):
        load_flat_parameters(self.module, theta)
        Xt, yt = self.tensors(idx)
        g = clipped_gradient_sum(self.module, self.loss_fn, Xt, yt, self.C, self.method)
        return g.detach().to("cpu", self.torch.float64).numpy()


def _check_data(X, y, loss) -> tuple[np.ndarray, np.ndarray]:
    """X (n, ...) and y (n, ...) as numpy arrays (no copy of a numpy X), finite."""
    if hasattr(X, "detach"):  # a CPU torch tensor: a view, no copy
        X = X.detach().cpu().numpy()
    if hasattr(y, "detach"):
        y = y.detach().cpu().numpy()
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim < 2 or X.shape[0] == 0:
        raise InvalidDataError(f"X must have shape (n_samples, ...) with n ≥ 1, got {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or X.dtype.kind == "c":
        raise InvalidDataError(f"X must be a real numeric array, got dtype {X.dtype}")
    if y.shape[:1] != X.shape[:1]:
        raise InvalidDataError(
            f"X and y have inconsistent numbers of samples: {X.shape[0]} and "
            f"{y.shape[0] if y.ndim else 'a scalar'}"
        )
    block = max(1, (1 << 22) // max(1, int(np.prod(X.shape[1:]))))
    for start in range(0, X.shape[0], block):
        if not np.isfinite(X[start : start + block]).all():
            raise InvalidDataError("X contains NaN or infinite values")
    if y.dtype.kind in "fc" and not np.isfinite(y).all():
        raise InvalidDataError("y contains NaN or infinite values")
    if loss == "cross_entropy" and y.dtype.kind not in "iu":
        if y.dtype.kind != "f" or not np.all(y == np.round(y)) or (y.size and y.min() < 0):
            raise InvalidDataError(
                f"loss='cross_entropy' needs integer class indices 0..k−1 in y, got dtype {y.dtype}"
            )
    return X, y


def _torch_message(exc: BaseException) -> str:
    """The first line of a torch error, shortened (it names shapes and dtypes)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _check_oracle(oracle, loss, X, y) -> None:
    """Run the module and the clipped sum once on the first two rows, so that what
    torch refuses (a module that does not take rows of X's shape, targets the loss
    cannot read, labels beyond the module's k outputs) is a dperm error naming the
    parameter, raised before any step (issue #32: torch's errors escaped ``fit``).

    Raises
    ------
    InvalidDataError
        Naming ``module``/``X``, ``y`` or ``loss``; label values are never echoed
        (only their count), since they are the training records'.
    """
    torch = oracle.torch
    devices = [oracle.device.index or 0] if oracle.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):  # the caller's torch RNG is untouched
        _dry_run(oracle, loss, X, y)


def _dry_run(oracle, loss, X, y) -> None:
    """:func:`_check_oracle`'s forward pass and clipped sum on the first two rows."""
    torch = oracle.torch
    rows = np.arange(min(2, X.shape[0]))
    try:
        Xt, _ = oracle.tensors(rows)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise InvalidDataError(
            f"y of dtype {y.dtype} cannot be read as targets of loss={loss!r}: "
            f"{_torch_message(exc)}"
        ) from None
    try:
        with torch.no_grad():
            out = oracle.module(Xt)
    except DpermError:
        raise
    except (RuntimeError, TypeError, ValueError, IndexError) as exc:
        raise InvalidDataError(
            f"module {type(oracle.module).__name__} cannot take rows of X of shape "
            f"{tuple(X.shape[1:])}: {_torch_message(exc)}"
        ) from None
    if loss == "cross_entropy":
        if out.ndim != 2:
            raise InvalidDataError(
                "loss='cross_entropy' needs a module with outputs of shape (b, k) (logits), "
                f"got shape {tuple(out.shape)}"
            )
        k = int(out.shape[1])
        labels = np.asarray(y)
        bad = int(np.count_nonzero((labels < 0) | (labels >= k)))
        if bad:  # a count, never the values
            raise InvalidDataError(
                f"loss='cross_entropy': the module outputs k={k} logits, but {bad} label(s) "
                f"of y are outside 0..{k - 1}"
            )
    try:
        oracle.clipped_sum(flat_parameters(oracle.module), rows)
    except DpermError:
        raise
    except (RuntimeError, TypeError, ValueError, IndexError) as exc:
        what = f"loss={loss!r}" if isinstance(loss, str) else "the loss callable"
        raise InvalidDataError(
            f"{what} cannot be evaluated on the outputs of module "
            f"{type(oracle.module).__name__} and y: {_torch_message(exc)}"
        ) from None


@private_fit  # an active dperm.budget: reserve, run, commit the event
def fit(
    module,
    X,
    y,
    *,
    loss="cross_entropy",
    epsilon: float | None = None,
    delta: float | None = None,
    neighbouring: str = "replace-one",
    dataset_size: int | None = None,
    clipping_norm: float = 1.0,
    sampling: str = "poisson",
    sampling_rate: float | None = None,
    batch_size: int | None = None,
    epochs: float | None = None,
    steps: int | None = None,
    learning_rate: float | None = None,
    schedule="constant",
    momentum: float = 0.0,
    averaging: str = "tail",
    weight_decay: float = 0.0,
    noise_multiplier: float | None = None,
    accountant: str | None = None,
    method: str = "auto",
    device="cpu",
    callback: Callable | None = None,
    progress: bool | str = False,
    random_state=None,
) -> Result:
    """Train ``module`` (in place) by DP-SGD and return its released parameters.

    Abadi et al., CCS 2016, Algorithm 1, with per-example gradients from PyTorch
    (module docstring).  Neighbouring relation: ``neighbouring``, **replace-one** by
    default (n = ``X.shape[0]`` public; sensitivity 2C per lot), or add/remove-one
    (sensitivity C; needs the public ``dataset_size``).  No assumption on the module
    or the loss for privacy: clipping bounds every record's contribution.

    Parameters
    ----------
    module : torch.nn.Module
        Any module whose output on a batch is the stack of its outputs on the single
        records (no batch normalisation: refused).  Its *trainable* parameters
        (``requires_grad``) are trained in place and released; frozen ones are public
        inputs.  Its initial parameters must not depend on the private data.
    X : ndarray or CPU tensor of shape (n, ...)
        Inputs, one record per row (any trailing shape the module takes).  Not
        copied: each lot's rows are gathered into a tensor of the module's dtype.
    y : ndarray of shape (n, ...)
        Targets (class indices 0..k−1 for ``loss="cross_entropy"``).
    loss : {"cross_entropy", "mse"} or callable, default "cross_entropy"
        Per-example loss ``loss(output, target) -> (b,)``
        (:func:`~dperm.networks.per_example.resolve_loss`).
    epsilon, delta : float, optional
        Target (ε, δ) for ``neighbouring``; z is then the smallest noise multiplier the
        accountant certifies for the sampling and the number of steps.
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
    dataset_size : int, optional
        Public record count N: required under add/remove (normaliser q·N, defaults);
        must equal n under replace-one if given.
    clipping_norm : float, default 1.0
        C > 0, the ℓ2 bound of every per-example gradient (all trainable parameters
        together).
    sampling : {"poisson", "without_replacement", "shuffle"}, default "poisson"
        As :func:`dperm.algorithms.dp_sgd.fit` (the latter two: replace-one only).
    sampling_rate, batch_size : optional
        q, or the expected lot size b (q = b/N).  Default b from
        :func:`default_hyperparameters`.
    epochs, steps : optional
        Passes over the data (T = ⌈epochs/q⌉) or T.  Default from
        :func:`default_hyperparameters`.
    learning_rate : float, optional
        η: θ ← θ − η·ĝ with ĝ the noisy average of the clipped gradients.  Default
        :func:`default_hyperparameters`' η / C (public).
    schedule : {"constant", "inverse_sqrt", "inverse_time"} or Schedule or callable
    momentum : float in [0, 1), default 0
        Heavy-ball momentum on the noisy gradient (post-processing).
    averaging : {"tail", "last", "uniform"}, default "tail"
        Release the mean of the last half of the iterates (default), the last
        iterate, or the mean of all (post-processing of the noisy iterates).
    noise_multiplier : float, optional
        z (noise std / sensitivity); checked against (ε, δ) when both are given.
    accountant : {"pld", "rdp"}, optional
        Default: "pld" (the tight accountant; the only one for replace-one Poisson).
    method : {"auto", "ghost", "vmap"}, default "auto"
        How per-example gradients are computed (:mod:`dperm.networks.per_example`).
    device : {"cpu", "auto"} or str or torch.device, default "cpu"
        "auto" uses a GPU when one is present.
    callback : callable, optional
        ``callback(t, T, theta)`` after every step.
    progress : bool or str, default False
        A progress bar on stderr (a string is its description).
    random_state : None, int, SeedSequence or Generator
        Lots, noise and torch-side randomness (dropout); None = fresh OS entropy.

    Returns
    -------
    Result
        ``theta``: the released trainable parameters, flat (``module.parameters()``
        order; the module holds them after the call).  ``event``:
        ``SelfComposed(PoissonSampled(q, Gaussian(z)), T)`` under ``neighbouring``.
        ``diagnostics``: ``mechanism`` ("dp-sgd-network"), ``noise_multiplier``,
        ``steps``, ``sampling_rate``, ``batch_size``, ``epochs``, ``clipping_norm``,
        ``noise_std`` (on the averaged gradient), ``normalizer``, ``dataset_size``,
        ``sensitivity``, ``learning_rate``, ``method``, ``n_parameters``,
        ``accountant``, ``neighbouring``, ``epsilon``, ``delta``, ``epsilon_spent``, ….

    Raises
    ------
    ImportError
        PyTorch is not installed (``pip install "dperm[torch]"``).
    InvalidPrivacyParameter
        Bad ε, δ, C, q, b, T, η, z; no ``dataset_size`` under add/remove; a module
        with batch normalisation or no trainable parameter.
    InvalidDataError
        Bad X or y (shape, NaN/inf, non-integer classes); a loss that does not return
        one value per example.
    UnknownNameError
        Unknown ``loss``, ``sampling``, ``accountant``, ``averaging``, ``method``.

    Examples
    --------
    Needs torch (skipped by the doctests; the same example runs in
    docs/neural_networks.md and tests/test_networks.py):

    >>> import numpy as np, torch  # doctest: +SKIP
    >>> from dperm.networks import fit  # doctest: +SKIP
    >>> rng = np.random.default_rng(0)  # doctest: +SKIP
    >>> X = rng.normal(size=(2000, 5)).astype(np.float32)  # doctest: +SKIP
    >>> y = (X[:, 0] > 0).astype(int)  # doctest: +SKIP
    >>> nn = torch.nn  # doctest: +SKIP
    >>> net = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 2))  # doctest: +SKIP
    >>> r = fit(net, X, y, epsilon=2.0, delta=1e-5, random_state=0)  # doctest: +SKIP
    >>> r.event.neighbouring  # doctest: +SKIP
    'replace-one'
    """
    torch = require_torch()
    check_module(module)
    if sampling not in gl.SAMPLINGS:
        from ..exceptions import UnknownNameError

        raise UnknownNameError(f"unknown sampling {sampling!r}; choose one of {list(gl.SAMPLINGS)}")
    neighbouring = gl.check_neighbouring(neighbouring)
    if neighbouring == ADD_REMOVE and sampling != "poisson":
        raise InvalidPrivacyParameter(
            f"sampling={sampling!r} is accounted for replace-one neighbours only; use "
            "sampling='poisson' or neighbouring='replace-one', got neighbouring='add-remove'"
        )
    C = check_positive(clipping_norm, "clipping_norm")
    weight_decay = check_nonnegative(weight_decay, "weight_decay")
    opts = gl.check_options(weight_decay, momentum, averaging, None, C)
    if learning_rate is not None:
        learning_rate = check_positive(learning_rate, "learning_rate")
    if epsilon is not None:
        check_epsilon(epsilon)
    if accountant is not None:
        gl.check_accountant(accountant)
    resolve_loss(loss)  # unknown names fail before the data is read
    dev = resolve_device(device)
    rng = check_random_state(random_state)
    X, y = _check_data(X, y, loss)
    sampler, steps, defaults = make_plan(
        X.shape[0],
        epsilon=epsilon,
        neighbouring=neighbouring,
        dataset_size=dataset_size,
        sampling=sampling,
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        epochs=epochs,
        steps=steps,
    )
    accountant = gl.resolve_accountant(accountant, sampler)
    sched = get_schedule(schedule, 1.0 if learning_rate is None else learning_rate)
    z, event, spent = calibrate(
        sampler,
        steps,
        epsilon=epsilon,
        delta=delta,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
    )
    if learning_rate is None:
        learning_rate = defaults["learning_rate"] / C
        sched = get_schedule(schedule, learning_rate)
    noise_std_sum = z * sampler.sensitivity_factor * C
    module.to(dev)
    oracle = TorchOracle(module, loss, X, y, C, method=method, device=dev)
    _check_oracle(oracle, loss, X, y)  # torch's errors as dperm errors, before any step
    theta0 = flat_parameters(module)
    seed = _torch_seed(rng)
    devices = [dev.index or 0] if dev.type == "cuda" else []
    was_training = module.training
    module.train()
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            label = (progress if isinstance(progress, str) else "DP-SGD") if progress else None
            out = gl.run(
                oracle,
                sampler,
                theta0=theta0,
                steps=steps,
                schedule=sched,
                noise_std=noise_std_sum,
                rng=rng,
                alpha=opts.alpha,
                momentum=opts.momentum,
                averaging=opts.averaging,
                callback=callback,
                progress=label,
            )
    finally:
        module.train(was_training)
    load_flat_parameters(module, out.theta)
    diagnostics = {
        "mechanism": "dp-sgd-network",
        **gl.sampler_diagnostics(sampler, z, steps, accountant, C, noise_std_sum),
        "dataset_size": sampler.normalizer / sampler.sampling_rate,
        "learning_rate": learning_rate,
        "schedule": repr(sched),
        "momentum": opts.momentum,
        "averaging": opts.averaging,
        "weight_decay": opts.alpha,
        "method": "ghost" if method != "vmap" and ghost_eligible(module, X.ndim) else "vmap",
        "n_parameters": int(theta0.size),
        "device": str(dev),
        "neighbouring": sampler.neighbouring,
        "epsilon": epsilon,
        "delta": delta,
        "epsilon_spent": spent,
    }
    return Result(theta=np.asarray(out.theta), event=event, diagnostics=diagnostics)
