"""DP-SGD for any PyTorch module in dperm's own loop: :func:`fit`.

Algorithm: Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep Learning
with Differential Privacy" (CCS 2016), Algorithm 1 — Lecture 15, Algorithm 4 (§15.4):
each step draws a lot by Poisson sampling with rate q, clips every per-example
gradient to ℓ2 norm C, adds N(0, (z·Δ)² I) to the sum and divides by the public
expected lot size; θ moves by the noisy average (momentum, weight decay, learning-rate
schedule and iterate averaging are post-processing).

:func:`fit` is a thin loop over the pieces of :func:`dperm.networks.make_private` — the
plan and calibration (:mod:`.plan`: the samplers of :mod:`dperm.sampling`, the public-size
rule under add/remove, :func:`dperm.algorithms.dp_sgd.run_plan`, the accountants), the
per-example clipping taps (:mod:`._clipper`), the lots (:mod:`.loader`) and the noisy
step (:mod:`.optimizer`, around ``torch.optim.SGD``) — so a network fit and a user's
loop run the same code, and produce the same kind of :class:`~dperm.accounting.DpEvent`
as the convex fits (one :class:`~dperm.accounting.Ledger` covers all).

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

import contextlib
from collections.abc import Callable

import numpy as np

from .._rng import check_random_state
from .._validation import check_epsilon, check_nonnegative, check_positive
from ..algorithms import _gradient_loop as gl
from ..algorithms.base import Result, private_fit
from ..algorithms.dp_sgd import check_sampling
from ..exceptions import DpermError, InvalidDataError, UnknownNameError
from ..schedules import get_schedule
from ._torch import flat_parameters, require_torch, resolve_device, trainable
from ._torch import torch_rng_seed as _torch_seed
from .per_example import METHODS, check_losses, check_module, clipped_gradient_sum, resolve_loss
from .plan import calibrate, default_hyperparameters, make_plan, plan_run

__all__ = ["calibrate", "default_hyperparameters", "fit", "make_plan"]


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


def _tensors(module, loss, X, y, idx, device):
    """(X rows, y rows) of ``idx`` as tensors on ``device`` in the module's dtype (y: int64
    for cross-entropy, the module's dtype for float targets)."""
    torch = require_torch()
    dtype = next(p for p in module.parameters()).dtype
    Xt = torch.as_tensor(np.asarray(X[idx]), device=device).to(dtype)
    yt = torch.as_tensor(np.asarray(y[idx]), device=device)
    if loss == "cross_entropy":
        yt = yt.to(torch.int64)
    elif yt.is_floating_point():
        yt = yt.to(dtype)
    return Xt, yt


def _check_first_rows(module, loss, X, y, C, method, device) -> None:
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
    torch = require_torch()
    devices = [device.index or 0] if device.type == "cuda" else []
    rows = np.arange(min(2, X.shape[0]))
    with torch.random.fork_rng(devices=devices):  # the caller's torch RNG is untouched
        try:
            Xt, yt = _tensors(module, loss, X, y, rows, device)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise InvalidDataError(
                f"y of dtype {y.dtype} cannot be read as targets of loss={loss!r}: "
                f"{_torch_message(exc)}"
            ) from None
        try:
            with torch.no_grad():
                out = module(Xt)
        except DpermError:
            raise
        except (RuntimeError, TypeError, ValueError, IndexError) as exc:
            raise InvalidDataError(
                f"module {type(module).__name__} cannot take rows of X of shape "
                f"{tuple(X.shape[1:])}: {_torch_message(exc)}"
            ) from None
        if loss == "cross_entropy":
            _check_classes(out, y)
        try:
            clipped_gradient_sum(module, loss, Xt, yt, C, method)
        except DpermError:
            raise
        except (RuntimeError, TypeError, ValueError, IndexError) as exc:
            what = f"loss={loss!r}" if isinstance(loss, str) else "the loss callable"
            raise InvalidDataError(
                f"{what} cannot be evaluated on the outputs of module "
                f"{type(module).__name__} and y: {_torch_message(exc)}"
            ) from None


def _check_classes(out, y) -> None:
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
    neighbouring = check_sampling(sampling, neighbouring)
    if method not in METHODS:
        raise UnknownNameError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    C = check_positive(clipping_norm, "clipping_norm")
    weight_decay = check_nonnegative(weight_decay, "weight_decay")
    opts = gl.check_options(weight_decay, momentum, averaging, None, C)
    if learning_rate is not None:
        learning_rate = check_positive(learning_rate, "learning_rate")
    if epsilon is not None:
        check_epsilon(epsilon)
    if accountant is not None:
        gl.check_accountant(accountant)
    loss_fn = resolve_loss(loss)  # unknown names fail before the data is read
    dev = resolve_device(device)
    rng = check_random_state(random_state)
    X, y = _check_data(X, y, loss)
    plan, defaults = plan_run(
        X.shape[0],
        epsilon=epsilon,
        delta=delta,
        neighbouring=neighbouring,
        dataset_size=dataset_size,
        clipping_norm=C,
        sampling=sampling,
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        epochs=epochs,
        steps=steps,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
    )
    if learning_rate is None:
        learning_rate = defaults["learning_rate"] / C
    sched = get_schedule(schedule, learning_rate)
    module.to(dev)
    taps = {"auto": "auto", "ghost": "ghost", "vmap": "materialise"}[method]
    _check_first_rows(module, loss, X, y, C, taps, dev)  # torch's errors as dperm errors
    theta0 = flat_parameters(module)
    seed = _torch_seed(rng)
    devices = [dev.index or 0] if dev.type == "cuda" else []
    was_training = module.training
    module.train()
    params = trainable(module)
    inner = torch.optim.SGD(params, lr=sched(1), momentum=opts.momentum, weight_decay=opts.alpha)
    from .private import build_run  # the pieces of make_private (they import torch)

    taps_, loader, optimizer = build_run(
        module, inner, _FitData(module, loss, X, y, dev), plan, rng=rng,
        loss_reduction="sum", method=taps,
    )  # fmt: skip
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            label = (progress if isinstance(progress, str) else "DP-SGD") if progress else None
            averaged = _descend(
                module, loss_fn, loader, optimizer, sched, opts.averaging, callback, label
            )
    finally:
        taps_.remove()
        module.train(was_training)
    if averaged is not None:
        with torch.no_grad():
            for p, a in zip(params, averaged, strict=True):
                p.copy_(a.to(p.dtype))
    diagnostics = {
        "mechanism": "dp-sgd-network",
        **gl.sampler_diagnostics(
            plan.sampler, plan.noise_multiplier, plan.steps, plan.accountant, C, plan.noise_std
        ),
        "dataset_size": plan.sampler.normalizer / plan.sampler.sampling_rate,
        "learning_rate": learning_rate,
        "schedule": repr(sched),
        "momentum": opts.momentum,
        "averaging": opts.averaging,
        "weight_decay": opts.alpha,
        "method": method,
        "layers": tuple(u.kind for u in taps_.units),
        "n_parameters": int(theta0.size),
        "device": str(dev),
        "neighbouring": plan.neighbouring,
        "epsilon": epsilon,
        "delta": delta,
        "epsilon_spent": plan.epsilon_spent,
    }
    return Result(theta=flat_parameters(module), event=plan.event, diagnostics=diagnostics)


class _FitData:
    """The rows of (X, y) a lot gathers, as tensors on the device (only the lot's rows
    are copied): the dataset of :func:`fit`'s loader."""

    def __init__(self, module, loss, X, y, device):
        self.args = (module, loss, X, y)
        self.device = device

    def __len__(self) -> int:
        return self.args[2].shape[0]

    def __getitem__(self, i):
        return self.gather(np.asarray([i]))

    def gather(self, idx):
        module, loss, X, y = self.args
        return _tensors(module, loss, X, y, idx, self.device)


def _descend(module, loss_fn, loader, optimizer, schedule, averaging, callback, progress):
    """The loop: one noisy SGD step per lot (η_t of ``schedule``), the running mean of
    the iterates from ``averaging``'s first step on (None for "last")."""
    torch = require_torch()
    steps = loader.steps
    start = {"last": steps + 1, "uniform": 1, "tail": steps // 2 + 1}[averaging]
    params = optimizer.params
    avg = None
    group = optimizer.param_groups[0]
    with contextlib.ExitStack() as stack:
        bar = None
        if progress is not None and callback is None:
            bar = stack.enter_context(gl.rich_progress(progress, steps))
        for t, (xb, yb) in enumerate(loader.iterate(steps), start=1):
            group["lr"] = schedule(t)
            optimizer.zero_grad()
            out = module(xb)
            check_losses(loss_fn(out, yb), xb.shape[0]).sum().backward()
            optimizer.step()
            if t >= start:
                with torch.no_grad():
                    if avg is None:
                        avg = [p.detach().to(torch.float64).clone() for p in params]
                    else:
                        k = t - start + 1
                        for a, p in zip(avg, params, strict=True):
                            a.add_(p.detach().to(torch.float64) - a, alpha=1.0 / k)
            if callback is not None:
                callback(t, steps, flat_parameters(module))
            elif bar is not None:
                bar(t, steps, None)
    return avg
