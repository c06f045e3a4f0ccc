"""Per-example gradients of a PyTorch module and their clipped sum (step P2 of DP-SGD),
the per-example losses, and the refusal of layers that mix the records of a batch.

DP-SGD needs Σ_{i∈batch} clip_C(∇_θ ℓ(θ; xᵢ, yᵢ)) with clip_C(g) = g·min(1, C/‖g‖₂)
(Abadi et al., CCS 2016, Algorithm 1, "clip gradient"): every term has norm ≤ C, so
one record moves the sum by at most C (add/remove) or 2C (replace-one) — the
sensitivity the Gaussian noise of the run is calibrated to.  Two exact ways to get it
from a module and a per-example loss, both from PyTorch's autodiff (never a
hand-written gradient):

* ``"auto"`` / ``"ghost"`` — the taps of :mod:`dperm.networks._clipper` on the module's
  layers (what :func:`~dperm.networks.make_private` and :func:`~dperm.networks.fit`
  run): one forward and one backward pass of the summed loss, then per layer the ghost
  norms (Linear, Conv, Embedding; Goodfellow 2015; Li et al. 2022; Bu et al. 2023) or
  the materialised per-example gradients, whichever is cheaper ("auto"), or the ghost
  norms wherever a layer has them ("ghost"); parameters shared by two calls are summed
  per example before the norm (exact);
* ``"vmap"`` — any module as a whole: ``torch.func.vmap(torch.func.grad(ℓ))`` over the
  batch (the per-example gradients are materialised, b × p numbers, in chunks of at
  most :data:`VMAP_CHUNK` numbers).  An independent computation: the tests check the
  taps against it.

Per-example norms are accumulated in float64.  A per-example gradient that is not
finite contributes zero (one bad record must not turn the release into NaN, which
would itself leak).  Modules whose outputs mix the rows of a batch (batch
normalisation) have no per-example gradient and are refused
(:func:`convert_batchnorm` replaces them by GroupNorm).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..exceptions import InvalidDataError, InvalidPrivacyParameter, UnknownNameError
from ._torch import require_torch

__all__ = [
    "LOSSES",
    "METHODS",
    "VMAP_CHUNK",
    "check_losses",
    "check_module",
    "clipped_gradient_sum",
    "convert_batchnorm",
    "per_example_gradients",
    "resolve_loss",
    "shares_parameters",
]

METHODS = ("auto", "ghost", "vmap")
LOSSES = ("cross_entropy", "mse")
#: largest number of per-example gradient entries (b·p) the vmap path holds at once
VMAP_CHUNK = 1 << 26


def resolve_loss(loss) -> Callable[[Any, Any], Any]:
    """The per-example loss ``loss(output, target) -> (b,)``.

    Parameters
    ----------
    loss : {"cross_entropy", "mse"} or callable
        "cross_entropy": softmax cross-entropy on logits of shape (b, k) with integer
        targets in 0..k−1; "mse": ½‖output − target‖² per example.  A callable must
        return one loss per example (``reduction="none"``), shape (b,).

    Raises
    ------
    UnknownNameError
        An unknown loss name.
    """
    torch = require_torch()
    F = torch.nn.functional
    if callable(loss):
        return loss
    if loss == "cross_entropy":
        return lambda out, target: F.cross_entropy(out, target, reduction="none")
    if loss == "mse":

        def mse(out, target):
            b = out.shape[0]
            diff = out.reshape(b, -1) - target.reshape(b, -1).to(out.dtype)
            return 0.5 * (diff * diff).sum(dim=1)

        return mse
    raise UnknownNameError(f"unknown loss {loss!r}; choose one of {list(LOSSES)} or a callable")


def check_module(module) -> None:
    """Refuse what has no per-example gradient.

    Raises
    ------
    InvalidPrivacyParameter
        ``module`` is not a ``torch.nn.Module``, has no trainable parameter, or holds
        a batch-normalisation layer (its output for one record depends on the other
        records of the batch, and its running statistics are released unprotected).
    """
    torch = require_torch()
    nn = torch.nn
    if not isinstance(module, nn.Module):
        raise InvalidPrivacyParameter(f"module must be a torch.nn.Module, got {module!r}")
    if not any(p.requires_grad for p in module.parameters()):
        raise InvalidPrivacyParameter(f"module {type(module).__name__} has no trainable parameter")
    for name, m in module.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm | nn.modules.instancenorm._InstanceNorm):
            if isinstance(m, nn.modules.batchnorm._BatchNorm) or m.track_running_stats:
                raise InvalidPrivacyParameter(
                    f"module layer {name or type(m).__name__!r} ({type(m).__name__}) mixes the "
                    "records of a batch, so DP-SGD has no per-example gradient for it; use "
                    "GroupNorm or LayerNorm (dperm.networks.convert_batchnorm(module) "
                    "replaces every batch normalisation by a GroupNorm)"
                )


def _groups(channels: int, most: int = 32) -> int:
    """The largest number of groups ≤ ``most`` that divides ``channels``."""
    return max(g for g in range(1, min(most, channels) + 1) if channels % g == 0)


def convert_batchnorm(module, num_groups: int | None = None):
    """Replace every batch normalisation layer of ``module`` by a GroupNorm (in place).

    BatchNorm normalises each record by statistics of the whole batch and keeps running
    statistics of the private data: DP-SGD has no per-example gradient for it and
    :func:`check_module` refuses it.  GroupNorm (Wu & He, ECCV 2018) normalises each
    record by its own channels, which is what DP training uses instead (De, Berrada,
    Hayes, Smith, Balle 2022; Opacus's ``ModuleValidator.fix`` does the same).  Each
    ``BatchNorm1d/2d/3d(C)`` becomes ``GroupNorm(g, C, affine=True)`` with g the largest
    divisor of C that is ≤ 32 (or ``num_groups``), freshly initialised (weight 1, bias
    0: a BatchNorm's running statistics and weights came from data and are dropped);
    ``InstanceNorm`` layers that track running statistics become GroupNorm(C, C).

    Parameters
    ----------
    module : torch.nn.Module
    num_groups : int, optional
        Groups of every GroupNorm (must divide each layer's channels).

    Returns
    -------
    torch.nn.Module
        ``module`` itself, changed in place (a new GroupNorm when ``module`` is a
        batch normalisation layer).

    Raises
    ------
    InvalidPrivacyParameter
        ``num_groups`` does not divide a layer's number of channels.

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> nn = torch.nn  # doctest: +SKIP
    >>> net = nn.Sequential(nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8))  # doctest: +SKIP
    >>> convert_batchnorm(net)[1]  # doctest: +SKIP
    GroupNorm(8, 8, eps=1e-05, affine=True)
    """
    nn = require_torch().nn

    def replace(m):
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            g = _groups(c) if num_groups is None else int(num_groups)
        elif isinstance(m, nn.modules.instancenorm._InstanceNorm) and m.track_running_stats:
            c = g = m.num_features
        else:
            return None
        if c % g:
            raise InvalidPrivacyParameter(
                f"num_groups={num_groups!r} does not divide the {c} channels of {m}"
            )
        new = nn.GroupNorm(g, c, eps=m.eps, affine=True)
        p = next(m.parameters(), None)
        return new if p is None else new.to(device=p.device, dtype=p.dtype)

    root = replace(module)
    if root is not None:
        return root
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            new = replace(child)
            if new is not None:
                setattr(parent, name, new)
    return module


def shares_parameters(module) -> bool:
    """Whether a parameter of ``module`` is used by more than one layer call: a layer
    that appears twice (``Sequential(l1, act, l1)``) or two layers holding the same
    tensor (tied weights, ``l2.weight = l1.weight``).  Each call then contributes its
    own term to the parameter's per-example gradient, and the ghost identity — which
    takes the norm of every call's term separately — under-estimates the norm of
    their sum (2–2.5 % on the modules of issue #32), so the clipping would not bound
    the sensitivity.  Read off the registered structure (a parameter registered under
    two names), which is the sequence of calls of a ``Sequential``, the only container
    the ghost path takes."""
    params = [id(p) for _, p in module.named_parameters(remove_duplicate=False)]
    return len(params) != len(set(params))


def check_losses(values, b: int):
    """``values`` (the per-example losses) checked to have shape (b,)."""
    if tuple(values.shape) != (b,):
        raise InvalidDataError(
            f"loss must return one value per example (shape ({b},), reduction='none'), got "
            f"shape {tuple(values.shape)}"
        )
    return values


def _vmap_grads(module, loss_fn, Xb, yb):
    """Per-example gradients, a dict name → (b, *shape), by torch.func."""
    torch = require_torch()
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in module.named_parameters() if v.requires_grad}
    frozen = {k: v.detach() for k, v in module.named_parameters() if not v.requires_grad}
    buffers = {k: v.detach() for k, v in module.named_buffers()}

    def loss_one(p, x, y):
        out = functional_call(module, ({**p, **frozen}, buffers), (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0)).sum()

    with torch.enable_grad():
        return vmap(grad(loss_one), in_dims=(None, 0, 0), randomness="different")(params, Xb, yb)


def _trainable_names(module) -> list[str]:
    return [k for k, v in module.named_parameters() if v.requires_grad]


def per_example_gradients(module, loss, X, y):
    """The per-example gradients ∇θ ℓ(θ; xᵢ, yᵢ), flattened in ``module.parameters()``
    order (trainable parameters only), by ``torch.func.vmap(torch.func.grad(...))``.

    Parameters
    ----------
    module : torch.nn.Module
    loss : str or callable
        See :func:`resolve_loss`.
    X : torch.Tensor of shape (b, ...)
    y : torch.Tensor of shape (b, ...)

    Returns
    -------
    torch.Tensor of shape (b, p)
        p = the number of trainable parameters.
    """
    check_module(module)
    loss_fn = resolve_loss(loss)
    g = _vmap_grads(module, loss_fn, X, y)
    b = X.shape[0]
    return require_torch().cat([g[k].reshape(b, -1) for k in _trainable_names(module)], dim=1)


def _vmap_clipped_sum(module, loss_fn, Xb, yb, clipping_norm: float):
    from ._layers import clip_factors  # imports torch

    torch = require_torch()
    b = Xb.shape[0]
    names = _trainable_names(module)
    p = sum(v.numel() for k, v in module.named_parameters() if v.requires_grad)
    step = max(1, VMAP_CHUNK // max(p, 1))
    total = None
    for start in range(0, b, step):
        g = _vmap_grads(module, loss_fn, Xb[start : start + step], yb[start : start + step])
        G = torch.cat([g[k].reshape(g[k].shape[0], -1) for k in names], dim=1)
        sq = torch.linalg.vector_norm(G, dim=1, dtype=torch.float64) ** 2
        c, finite = clip_factors(sq, clipping_norm)
        part = c.to(G.dtype) @ torch.where(finite[:, None], G, 0.0)
        total = part if total is None else total + part
    return total


def clipped_gradient_sum(module, loss, Xb, yb, clipping_norm: float, method: str = "auto"):
    """Σᵢ clip_C(∇θ ℓ(θ; xᵢ, yᵢ)) over the batch, flattened (trainable parameters in
    ``module.parameters()`` order).

    Parameters
    ----------
    module : torch.nn.Module
    loss : str or callable
        See :func:`resolve_loss` (per-example losses).
    Xb : torch.Tensor of shape (b, ...)
    yb : torch.Tensor of shape (b, ...)
    clipping_norm : float
        C > 0: every per-example gradient is scaled to ℓ2 norm ≤ C before the sum.
    method : {"auto", "ghost", "vmap", "materialise"}
        The taps, choosing per layer ("auto") or the ghost norms wherever a layer has
        them ("ghost"), or every per-example gradient formed ("materialise"); or
        ``torch.func`` over the whole module ("vmap").  All are exact.

    Returns
    -------
    torch.Tensor of shape (p,)

    Raises
    ------
    UnknownNameError
        Unknown ``method``.
    """
    torch = require_torch()
    if method not in (*METHODS, "materialise"):
        raise UnknownNameError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    loss_fn = resolve_loss(loss)
    params = [v for v in module.parameters() if v.requires_grad]
    if Xb.shape[0] == 0:
        p = sum(v.numel() for v in params)
        return torch.zeros(p, dtype=params[0].dtype, device=Xb.device)
    if method == "vmap":
        return _vmap_clipped_sum(module, loss_fn, Xb, yb, clipping_norm)
    from ._clipper import GradSampler  # imports torch

    sampler = GradSampler(module, loss_reduction="sum", method=method)
    before = [p.grad for p in params]
    try:
        sampler.new_batch(Xb.shape[0])
        with torch.enable_grad():
            check_losses(loss_fn(module(Xb), yb), Xb.shape[0]).sum().backward()
        if any(p.grad is not g for p, g in zip(params, before, strict=True)):
            raise InvalidPrivacyParameter(
                "a trainable parameter received a plain (summed, unclipped) gradient: it is "
                "used outside the layer that owns it; its per-example gradient is unknown"
            )
        sums = sampler.take(clipping_norm)
    finally:
        sampler.remove()
        for p, g in zip(params, before, strict=True):
            p.grad = g
    return torch.cat(
        [torch.zeros_like(p).reshape(-1) if t is None else t.reshape(-1)
         for p, t in zip(params, sums or [None] * len(params), strict=True)]
    )  # fmt: skip
