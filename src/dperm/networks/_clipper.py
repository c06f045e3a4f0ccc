"""The per-example clipping of a whole module: its taps (:mod:`._layers`), and the clipped
sum Σᵢ clip_C(∇θ ℓᵢ) of each batch (imports torch).

:class:`GradSampler` installs a tap on every layer of a module that owns trainable
parameters (:func:`._layers.find_units`).  After the caller's ``loss.backward()`` each
tap holds its layer's (input, output-gradient) pairs; :meth:`GradSampler.take` adds
every layer's per-example squared norms (float64), clips every record to C over all
trainable parameters together, and returns the clipped sums, one tensor per trainable
parameter, on the parameters' device.  Nothing else of the batch is kept.

Privacy.  Each record's term in the returned sum has ℓ2 norm ≤ C whatever the module
and the loss, provided the loss is a sum (``loss_reduction="sum"``) or the mean over the
batch (``"mean"``) of per-record losses and the layers do not mix the records of a batch
(batch normalisation is refused by :func:`~dperm.networks.per_example.check_module`).
So one record moves the sum by ≤ C (add/remove) or 2C (replace-one): the sensitivity the
noise of :class:`~dperm.networks.optimizer.DPOptimizer` is calibrated to.
"""

from __future__ import annotations

import torch

from ..exceptions import InvalidPrivacyParameter
from ._layers import Record, Unit, check_batch, clip_factors, find_units
from ._torch import trainable

__all__ = ["LOSS_REDUCTIONS", "METHODS", "GradSampler"]

#: how the caller's loss combines the records of a batch
LOSS_REDUCTIONS = ("mean", "sum")
#: "auto": per layer the cheaper exact path; "ghost": Gram (ghost) norms wherever a layer
#: has them; "materialise": every per-example gradient formed
METHODS = ("auto", "ghost", "materialise")


def _rows_to_zero(t, finite):
    """``t`` with the rows of the records whose gradient is not finite set to 0."""
    if t is None or not torch.is_tensor(t) or not t.is_floating_point():
        return t
    mask = finite.reshape(-1, *([1] * (t.dim() - 1)))
    return torch.where(mask, t, torch.zeros((), dtype=t.dtype, device=t.device))


class GradSampler:
    """Per-example clipped gradient sums of ``module`` (taps installed in place).

    Parameters
    ----------
    module : torch.nn.Module
    loss_reduction : {"mean", "sum"}
        How the caller's loss combines the batch: per-example gradients are rescaled by
        the batch size for "mean".
    method : {"auto", "ghost", "materialise"}

    Attributes
    ----------
    params : list of torch.nn.Parameter
        The trainable parameters, in ``module.parameters()`` order: what :meth:`take`
        returns a sum for.
    units : list
        The tapped layers.
    """

    def __init__(self, module, *, loss_reduction: str = "mean", method: str = "auto"):
        if loss_reduction not in LOSS_REDUCTIONS:
            raise InvalidPrivacyParameter(
                f"loss_reduction must be one of {list(LOSS_REDUCTIONS)}, got {loss_reduction!r}"
            )
        if method not in METHODS:
            raise InvalidPrivacyParameter(f"method must be one of {list(METHODS)}, got {method!r}")
        self.module, self.loss_reduction, self.method = module, loss_reduction, method
        self.batch_id = 0
        self.batch_size: int | None = None
        self.params = trainable(module)
        self.index = {id(p): i for i, p in enumerate(self.params)}
        self.units: list[Unit] = find_units(module, self)
        for u in self.units:
            u.install()

    def remove(self) -> None:
        """Uninstall the taps (the module computes as before, with plain gradients)."""
        for u in self.units:
            u.remove()
            u.records.clear()

    def new_batch(self, batch_size: int | None) -> None:
        """Start a batch of ``batch_size`` records: the records of earlier batches are
        dropped (a forward pass that was never completed by :meth:`take`)."""
        self.batch_id += 1
        self.batch_size = batch_size
        for u in self.units:
            u.records.clear()

    def discard(self) -> None:
        """Drop every pending record."""
        for u in self.units:
            u.records.clear()

    def _records(self) -> list[Record]:
        records = [r for u in self.units for r in u.records]
        self.discard()
        for r in records:
            if r.batch != self.batch_id:
                raise InvalidPrivacyParameter(
                    "the gradients of an earlier batch are still pending: call "
                    "optimizer.step() after every batch of the private data loader (it "
                    "accumulates the batches of a lot itself)"
                )
        return records

    @torch.no_grad()
    def take(self, clipping_norm: float) -> list | None:
        """Σᵢ clip_C(∇θ ℓᵢ) over the current batch, one tensor per trainable parameter
        (None: no record touched it), or None when no backward pass ran.

        Raises
        ------
        InvalidPrivacyParameter
            A layer saw a first dimension other than the batch size, or records of an
            earlier batch are pending.
        """
        records = self._records()
        if not records:
            return None
        b = records[0].grad.shape[0] if self.batch_size is None else self.batch_size
        for r in records:
            check_batch(r.unit, r, b)
        sums: list = [None] * len(self.params)
        if b == 0:  # an empty lot: its clipped sum is 0
            return sums
        count: dict[int, int] = {}
        for r in records:
            for p in r.unit.params:
                count[id(p)] = count.get(id(p), 0) + 1
        shared = [r for r in records if any(count[id(p)] > 1 for p in r.unit.params)]
        plain = [r for r in records if not any(count[id(p)] > 1 for p in r.unit.params)]
        scale = float(b) if self.loss_reduction == "mean" else 1.0
        device = records[0].grad.device
        sq = torch.zeros(b, dtype=torch.float64, device=device)
        for r in plain:
            for t in r.unit.sq_norms(r):
                sq += t
        joint: dict[int, object] = {}  # summed per-example gradients of shared parameters
        for r in shared:
            for p, t in zip(r.unit.slots, r.unit.per_example(r), strict=True):
                if p is not None and t is not None:
                    joint[id(p)] = t if id(p) not in joint else joint[id(p)] + t
        for t in joint.values():
            sq += (t * t).sum(dim=tuple(range(1, t.dim()))).to(torch.float64)
        if scale != 1.0:
            sq *= scale * scale
        c, finite = clip_factors(sq, float(clipping_norm))
        if not bool(finite.all()):  # a non-finite record contributes 0, not NaN
            for r in records:
                r.cache = None
                r.grad = _rows_to_zero(r.grad, finite)
                if isinstance(r.saved, list):
                    r.saved = [_rows_to_zero(t, finite) for t in r.saved]
                else:
                    r.saved = _rows_to_zero(r.saved, finite)
            joint = {k: _rows_to_zero(t, finite) for k, t in joint.items()}
        c = c * scale
        for r in plain:
            for p, t in zip(r.unit.slots, r.unit.clipped(r, c), strict=True):
                if p is not None and t is not None:
                    self._add(sums, p, t)
        for p in self.params:
            t = joint.get(id(p))
            if t is not None:
                self._add(sums, p, torch.tensordot(c.to(t.dtype), t, dims=1))
        return sums

    def _add(self, sums: list, p, t) -> None:
        i = self.index[id(p)]
        t = t.reshape(p.shape).to(p.dtype)
        sums[i] = t if sums[i] is None else sums[i] + t
