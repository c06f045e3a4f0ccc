"""DP-SGD in the caller's own PyTorch loop: :func:`make_private` (imports torch).

    module, optimizer, data_loader = make_private(
        module, optimizer, data_loader, epsilon=2.0, delta=1e-5, epochs=10)
    for epoch in range(10):
        for xb, yb in data_loader:
            optimizer.zero_grad()
            loss_fn(module(xb), yb).backward()
            optimizer.step()

The three pieces — the taps that clip every per-example gradient on the module's device
(:mod:`._clipper`), the Poisson loader (:mod:`.loader`), the optimizer that adds the
calibrated noise and normalises by the public expected lot size (:mod:`.optimizer`) —
are also what :func:`dperm.networks.fit` runs (:func:`build_run`): one implementation.

Privacy: Abadi et al., CCS 2016, Algorithm 1 (Lecture 15, Algorithm 4).  The noise
multiplier is the smallest the accountant (PLD by default) certifies for the whole run
at (ε, δ) under ``neighbouring`` (:mod:`.plan`); the event is charged to the active
budgets before the first lot is drawn.
"""

from __future__ import annotations

import numpy as np
import torch

from .._rng import check_random_state
from .._validation import check_positive
from ..accounting.active import charge
from ..exceptions import InvalidPrivacyParameter
from ._clipper import GradSampler
from ._torch import torch_rng_seed
from .loader import _KEPT, DPDataLoader, RunState
from .optimizer import DPOptimizer
from .per_example import check_module
from .plan import RunPlan, plan_run

__all__ = ["build_run", "make_private"]


def build_run(
    module,
    optimizer,
    dataset,
    plan: RunPlan,
    *,
    rng: np.random.Generator,
    loss_reduction: str = "mean",
    method: str = "auto",
    collate_fn=None,
    loader_kwargs: dict | None = None,
    max_physical_batch_size: int | None = None,
):
    """(grad sampler, loader, DP optimizer) of a planned run: taps on ``module``, the
    plan's lots drawn from ``dataset`` with ``rng``'s first stream, the noise seeded from
    its second."""
    lots_rng, noise_rng = rng.spawn(2)
    sampler = GradSampler(module, loss_reduction=loss_reduction, method=method)
    try:  # a refused argument must not leave the caller's module tapped (no gradients)
        state = RunState(plan.steps, sampler)
        loader = DPDataLoader(
            dataset,
            plan.sampler,
            plan.steps,
            plan.epochs if plan.epochs is not None else 1,
            rng=lots_rng,
            state=state,
            collate_fn=collate_fn,
            loader_kwargs=loader_kwargs,
            max_physical_batch_size=max_physical_batch_size,
        )
        dp_opt = DPOptimizer(
            optimizer,
            grad_sampler=sampler,
            state=state,
            plan=plan,
            generator_seed=torch_rng_seed(noise_rng),
        )
    except BaseException:
        sampler.remove()
        raise
    return sampler, loader, dp_opt


def _check_optimizer(optimizer, module) -> None:
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InvalidPrivacyParameter(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    if isinstance(optimizer, DPOptimizer):
        raise InvalidPrivacyParameter("optimizer is already a DPOptimizer (make_private twice)")
    own = {id(p) for p in module.parameters()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if id(p) not in own:
                raise InvalidPrivacyParameter(
                    f"optimizer holds a parameter of shape {tuple(p.shape)} that is not one "
                    "of module's: the DP optimizer only updates the module it clips"
                )


def _batch_size(data_loader, batch_size) -> int:
    if batch_size is not None:
        return batch_size
    b = getattr(data_loader, "batch_size", None)
    if b is None:
        raise InvalidPrivacyParameter(
            "data_loader has no batch_size (a batch_sampler was given): pass the expected "
            "lot size as make_private(..., batch_size=b)"
        )
    return b


def make_private(
    module,
    optimizer,
    data_loader,
    *,
    epsilon: float,
    delta: float,
    epochs: float,
    clipping_norm: float = 1.0,
    neighbouring: str = "replace-one",
    dataset_size: int | None = None,
    accountant: str | None = None,
    noise_multiplier: float | None = None,
    batch_size: int | None = None,
    max_physical_batch_size: int | None = None,
    loss_reduction: str = "mean",
    random_state=None,
):
    """Make a PyTorch training loop differentially private: DP-SGD with dperm's
    sampling, clipping, calibrated noise and accounting.

    The caller keeps the loop (``for xb, yb in data_loader: optimizer.zero_grad();
    loss_fn(module(xb), yb).backward(); optimizer.step()``) with their own optimizer,
    schedule, device and dataset.  Abadi et al., CCS 2016, Algorithm 1: Poisson lots of
    expected size b (the loader's ``batch_size``), every per-example gradient clipped to
    ℓ2 norm C, Gaussian noise z·Δ on the lot's sum (Δ = C under add/remove, 2C under
    replace-one), divided by the public b; z is the smallest noise multiplier the
    accountant certifies for the whole run at (ε, δ) — the run spends 99.5–100 % of ε.
    No assumption on the module or the loss for privacy beyond: the loss is a sum or mean
    of per-record losses, and no layer mixes the records of a batch.

    Parameters
    ----------
    module : torch.nn.Module
        Trained in place (its layers with trainable parameters get taps: the module
        object returned is the same).  Batch normalisation is refused
        (:func:`~dperm.networks.per_example.convert_batchnorm` replaces it by GroupNorm).
    optimizer : torch.optim.Optimizer
        Any optimizer over ``module``'s parameters (SGD, Adam, AdamW, …); wrapped.
    data_loader : torch.utils.data.DataLoader
        Over a map-style dataset (tensors, images on disk, …); its dataset, collate
        function, workers and pinned memory are kept, its sampler is replaced by Poisson
        sampling with q = b/N.
    epsilon, delta : float
        The target (ε, δ) of the whole run under ``neighbouring``; δ < 1/N.
    epochs : float
        Passes over the data: T = ⌈epochs/q⌉ lots, spread over ⌈epochs⌉ iterations of
        the returned loader.
    clipping_norm : float, default 1.0
        C > 0.
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
        Replace-one: N = ``len(dataset)`` is public.  Add/remove: N is the public
        ``dataset_size`` (required); ``len(dataset)`` is only iterated over.
    dataset_size : int, optional
        The public record count N (add/remove).
    accountant : {"pld", "rdp"}, optional
        Default "pld" (the tight accountant; the only one for replace-one Poisson).
    noise_multiplier : float, optional
        A given z instead of the calibrated one; checked against (ε, δ) (refused when
        it spends more).
    batch_size : int, optional
        The expected lot size b; default the data loader's ``batch_size``.
    max_physical_batch_size : int, optional
        Yield each lot as batches of at most this many records; the optimizer sums
        their clipped gradients and takes one noisy step per lot (virtual steps).
    loss_reduction : {"mean", "sum"}, default "mean"
        How the caller's loss combines a batch (``CrossEntropyLoss()`` is "mean").
    random_state : None, int, SeedSequence or Generator
        Lots and noise; None = fresh OS entropy.

    Returns
    -------
    module : torch.nn.Module
        The same module, with its taps.
    optimizer : DPOptimizer
        ``dp_event`` (the event charged), ``noise_multiplier``, ``epsilon_spent``,
        ``privacy_statement()``; ``dperm.privacy_statement(optimizer)`` prints it.
    data_loader : DPDataLoader

    Raises
    ------
    ImportError
        PyTorch is not installed.
    InvalidPrivacyParameter
        Bad ε, δ, epochs, C, b, z; no ``dataset_size`` under add/remove; a module with
        batch normalisation or no trainable parameter; an optimizer over other
        parameters; a dataset that is not map-style.
    BudgetExceededError
        The run does not fit in an active dperm budget (nothing is drawn).

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> from torch.utils.data import DataLoader, TensorDataset  # doctest: +SKIP
    >>> from dperm.networks import make_private  # doctest: +SKIP
    >>> X, y = torch.randn(1000, 5), torch.randint(0, 2, (1000,))  # doctest: +SKIP
    >>> net = torch.nn.Sequential(torch.nn.Linear(5, 2))  # doctest: +SKIP
    >>> opt = torch.optim.Adam(net.parameters(), lr=0.01)  # doctest: +SKIP
    >>> dl = DataLoader(TensorDataset(X, y), batch_size=100)  # doctest: +SKIP
    >>> net, opt, dl = make_private(net, opt, dl, epsilon=1.0, delta=1e-5,
    ...                             epochs=2, random_state=0)  # doctest: +SKIP
    """
    check_module(module)
    _check_optimizer(optimizer, module)
    dataset = getattr(data_loader, "dataset", None)
    if dataset is None:
        raise InvalidPrivacyParameter(
            f"data_loader must be a torch DataLoader, got {type(data_loader).__name__}"
        )
    if isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
        raise InvalidPrivacyParameter(
            "the private data loader draws Poisson lots from a map-style Dataset "
            f"(__getitem__ and __len__), got {type(dataset).__name__}"
        )
    epochs = check_positive(epochs, "epochs")
    if delta is None:
        raise InvalidPrivacyParameter("delta is required (δ < 1/N), got None")
    rng = check_random_state(random_state)
    plan, _ = plan_run(
        len(dataset),
        epsilon=epsilon,
        delta=delta,
        neighbouring=neighbouring,
        dataset_size=dataset_size,
        clipping_norm=clipping_norm,
        batch_size=_batch_size(data_loader, batch_size),
        epochs=epochs,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
    )
    kwargs = {k: getattr(data_loader, k) for k in _KEPT if hasattr(data_loader, k)}
    grad_sampler, loader, dp_opt = build_run(
        module,
        optimizer,
        dataset,
        plan,
        rng=rng,
        loss_reduction=loss_reduction,
        collate_fn=getattr(data_loader, "collate_fn", None),
        loader_kwargs=kwargs,
        max_physical_batch_size=max_physical_batch_size,
    )
    try:
        charge(plan.event, "networks.make_private")  # the whole run, before any lot
    except BaseException:
        grad_sampler.remove()
        raise
    return module, dp_opt, loader
