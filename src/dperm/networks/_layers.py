"""Per-example gradients layer by layer: the taps on a module's layers, and each layer's
per-example norms and clipped sums, on the layer's own device (imports torch).

Step P2 of DP-SGD (Abadi et al., CCS 2016, Algorithm 1) needs, for a lot of b records,
every per-example gradient norm ‖∇θ ℓᵢ‖ (all trainable parameters together) and the
clipped sum Σᵢ cᵢ ∇θ ℓᵢ with cᵢ = C / max(C, ‖∇θ ℓᵢ‖).  A *tap* replaces the forward of
each layer that owns trainable parameters by a :class:`torch.autograd.Function` that
computes the same output, keeps the layer's input A, and in the backward pass receives
the gradient G of the (summed or averaged) loss with respect to the layer's output —
row i of G is record i's own, since the rows of a batch do not interact — and returns
the gradient with respect to the input only.  The parameters get *no* gradient from
autograd: the summed, unclipped gradient is never formed (nor computed: no work is
spent on it).  From (A, G) each layer gives:

* **Linear** on (b, d) rows: ‖∇W ℓᵢ‖² = ‖Gᵢ‖²‖Aᵢ‖² and the bias ‖Gᵢ‖² — the "ghost
  norm" identity (Goodfellow 2015, "Efficient per-example gradient computations";
  Li, Tramèr, Liang, Hashimoto, "Large Language Models Can Be Strong Differentially
  Private Learners", ICLR 2022, §4) — and the clipped sum (c ⊙ G)ᵀA, one matrix
  product ("book-keeping", Bu, Wang, Zha, Karypis, "Differentially Private
  Optimization on Large Model at Small Cost", ICML 2023): no per-example gradient is
  formed.
* **Linear on sequences, Conv1d/Conv2d** (A unfolded to (b, T, d), G to (b, T, p), T
  positions): the per-example gradient is Σₜ Gᵢₜ Aᵢₜᵀ.  Either it is *materialised*
  (b·p·d numbers, 2bTpd flops, then the clipped sum is a weighted sum) or its norm
  comes from the Gram matrices, ‖Σₜ Gᵢₜ Aᵢₜᵀ‖² = ⟨AᵢAᵢᵀ, GᵢGᵢᵀ⟩ (2bT²(p+d) flops,
  b·T² numbers; the ghost norm of Li et al. 2022 for sequences, Bu et al. 2023 for
  convolutions) and the clipped sum is one product of (c ⊙ G) with A.  The "mixed
  ghost clipping" of Bu, Mao, Xu (AAAI 2023) takes, per layer, the cheaper in memory;
  in time the materialised path is never slower (its 2bTpd flops are the book-keeping
  product's), so it is taken whenever it fits :data:`MATERIALISE_BUDGET`.
* **Embedding**: ‖∇ℓᵢ‖² = Σₜ,ₛ [xᵢₜ = xᵢₛ] ⟨Gᵢₜ, Gᵢₛ⟩ (rows of the padding index
  excluded), and the clipped sum is an ``index_add`` of (c ⊙ G) — the (V × p) per-example
  gradient is never formed.
* **LayerNorm, GroupNorm**: the normalisation x̂ runs through autograd as usual; the
  tap is the affine map x̂ ⊙ w + β, whose per-example gradients (Σ G ⊙ x̂ and Σ G over
  the positions of one record) are as small as the parameters.
* **any other layer that owns trainable parameters** (the whole sub-module is then one
  unit): its per-example parameter gradients and input gradients come from one
  ``torch.func.vmap`` of ``torch.func.vjp`` over the records (exact; the layer must take
  tensors with the batch first and return one tensor).

A layer called twice in one forward pass, or parameters shared by two layers (tied
weights), sum two terms into one per-example gradient: the norms of the terms do not
give the norm of the sum, so every call that touches a shared parameter is
materialised and the terms are summed per parameter before the norm (exact).

Loss reduction: with ``loss_reduction="mean"`` the user's loss is the mean over the b
records of the batch, G = (1/b)·∂(Σᵢ ℓᵢ)/∂Z, and every per-example gradient is
rescaled by the batch's own b (as Opacus does): b·Gᵢ is record i's gradient, whatever
the other records.  Per-example norms are accumulated in float64; a record whose
gradient is not finite contributes zero (one bad record must not turn the release into
NaN, which would itself leak).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..exceptions import InvalidPrivacyParameter

__all__ = [
    "MATERIALISE_BUDGET",
    "Unit",
    "clip_factors",
    "find_units",
]

#: largest number of per-example gradient entries (b·p·d) a layer materialises at once
#: (2²⁶ float32 numbers = 256 MiB); above it the layer takes the Gram (ghost) path
MATERIALISE_BUDGET = 1 << 26


def clip_factors(sq_norms, clipping_norm: float):
    """cᵢ = C / max(‖gᵢ‖, C) from float64 squared norms, 0 for a non-finite gᵢ;
    returns (c, finite)."""
    norms = torch.sqrt(sq_norms)
    finite = torch.isfinite(norms)
    if bool(finite.all()):
        return clipping_norm / torch.clamp(norms, min=clipping_norm), finite
    c = clipping_norm / torch.clamp(torch.where(finite, norms, 0.0), min=clipping_norm)
    return torch.where(finite, c, 0.0), finite


def _sq(t, dims) -> Any:
    """Σ t² over ``dims`` as float64 (per record)."""
    return (t * t).sum(dim=dims).to(torch.float64)


class Record:
    """One call of a unit that went through a backward pass: its saved inputs, the
    gradient of the loss with respect to its output, and the batch it belongs to."""

    __slots__ = ("batch", "cache", "grad", "saved", "unit")

    def __init__(self, unit, saved, grad, batch):
        self.unit, self.saved, self.grad, self.batch = unit, saved, grad, batch
        self.cache = None  # what sq_norms computed and clipped reuses


class Unit:
    """A layer (or a sub-module) whose trainable parameters get per-example gradients.

    ``params``: its trainable parameters; ``records``: the calls since the last
    :meth:`~dperm.networks._clipper.GradSampler.take`.  Subclasses give the tap
    (:meth:`forward`) and, for one record, the per-example squared norms of each
    parameter's gradient (:meth:`sq_norms`), the clipped sums (:meth:`clipped`) and
    the materialised per-example gradients (:meth:`per_example`).
    """

    kind = "unit"

    def __init__(self, module, owner):
        self.module = module
        self.owner = owner  # the GradSampler: batch ids, the reduction, the method
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.records: list[Record] = []
        self.original = module.__dict__.get("forward")

    @property
    def slots(self) -> list:
        """The parameters the per-layer lists refer to, in order (None: frozen)."""
        return list(self.params)

    def install(self) -> None:
        self.module.forward = self.forward

    def remove(self) -> None:
        if self.original is None:
            self.module.__dict__.pop("forward", None)
        else:
            self.module.forward = self.original

    def record(self, saved, grad) -> None:
        """Keep one backward pass's (input, output gradient), detached from the graph."""
        if isinstance(saved, list):
            saved = [t.detach() for t in saved]
        elif saved is not None:
            saved = saved.detach()
        self.records.append(Record(self, saved, grad.detach(), self.owner.batch_id))

    def forward(self, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def sq_norms(self, rec: Record) -> Any:  # (b,) float64
        raise NotImplementedError  # pragma: no cover

    def clipped(self, rec: Record, c) -> list:  # one tensor per param (None: no term)
        raise NotImplementedError  # pragma: no cover

    def per_example(self, rec: Record) -> list:  # one (b, *shape) tensor per param
        raise NotImplementedError  # pragma: no cover

    def describe(self) -> str:
        return type(self.module).__name__


def _flags(module, names) -> list[bool]:
    return [getattr(module, n) is not None and getattr(module, n).requires_grad for n in names]


class _WeightBiasFn(torch.autograd.Function):
    """The tap of a (weight, bias) layer: ``unit.op(x, weight, bias)`` forward; backward
    records (x, G) for the unit's per-example gradients and returns the gradient with
    respect to x only (``unit.input_grad``), none to the parameters."""

    @staticmethod
    def forward(ctx, unit, x, weight, bias):
        ctx.unit = unit
        ctx.save_for_backward(x, weight)
        return unit.op(x, weight, bias)

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        ctx.unit.record(x, g)
        gx = ctx.unit.input_grad(x, weight, g) if ctx.needs_input_grad[1] else None
        return None, gx, None, None


class _WeightBias(Unit):
    """A layer whose per-layer lists are (weight, bias), either possibly frozen/absent,
    tapped by :class:`_WeightBiasFn` around its ``op`` and ``input_grad``."""

    def __init__(self, module, owner):
        super().__init__(module, owner)
        self.has = _flags(module, ("weight", "bias"))

    @property
    def slots(self) -> list:
        m = self.module
        return [m.weight if self.has[0] else None, m.bias if self.has[1] else None]

    def op(self, x, weight, bias):  # pragma: no cover - abstract
        raise NotImplementedError

    def input_grad(self, x, weight, g):  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x):
        m = self.module
        return _WeightBiasFn.apply(self, x, m.weight, m.bias)


# ================================================================ Linear


def _choose_materialise(owner, b: int, T: int, p: int, d: int) -> bool:
    """Materialise the per-example gradients iff 2T² ≥ p·d — the "mixed ghost clipping"
    rule of Bu, Mao, Xu (AAAI 2023): the Gram matrices then cost more than the gradients
    themselves — unless they exceed :data:`MATERIALISE_BUDGET` while the Gram matrices are
    smaller; ``method`` forces one or the other."""
    if owner.method == "ghost":
        return False
    if owner.method == "materialise":
        return True
    if 2 * T * T < p * d:
        return False
    return b * p * d <= MATERIALISE_BUDGET or T * T >= p * d


class LinearUnit(_WeightBias):
    """:class:`torch.nn.Linear` on inputs (b, …, d)."""

    kind = "linear"

    def op(self, x, weight, bias):
        return F.linear(x, weight, bias)

    def input_grad(self, x, weight, g):
        return g.matmul(weight)

    def _rows(self, rec):
        x, g = rec.saved, rec.grad
        b = x.shape[0]
        return x.reshape(b, -1, x.shape[-1]), g.reshape(b, -1, g.shape[-1])

    def _materialise(self, rec) -> bool:
        A, G = self._rows(rec)
        b, T, d = A.shape
        return T > 1 and _choose_materialise(self.owner, b, T, G.shape[2], d)

    def sq_norms(self, rec):
        A, G = self._rows(rec)
        out = []
        if A.shape[1] == 1:
            g2 = _sq(G[:, 0], 1)
            if self.has[0]:
                out.append(g2 * _sq(A[:, 0], 1))
            if self.has[1]:
                out.append(g2)
            return out
        if self._materialise(rec):
            pw, pb = rec.cache = self._per_example(A, G)
            return [_sq(t, (1, 2) if t.ndim == 3 else 1) for t in (pw, pb) if t is not None]
        if self.has[0]:
            out.append(
                (torch.bmm(A, A.transpose(1, 2)) * torch.bmm(G, G.transpose(1, 2))).sum(
                    dim=(1, 2), dtype=torch.float64
                )
            )
        if self.has[1]:
            out.append(_sq(G.sum(1), 1))
        return out

    def _per_example(self, A, G):
        pw = torch.bmm(G.transpose(1, 2), A) if self.has[0] else None
        pb = G.sum(1) if self.has[1] else None
        return pw, pb

    def clipped(self, rec, c):
        A, G = self._rows(rec)
        if A.shape[1] > 1 and self._materialise(rec):
            pw, pb = rec.cache if rec.cache is not None else self._per_example(A, G)
            cc = c.to(G.dtype)
            return [t if t is None else torch.tensordot(cc, t, dims=1) for t in (pw, pb)]
        Gc = G * c.to(G.dtype)[:, None, None]
        Gf, Af = Gc.reshape(-1, Gc.shape[2]), A.reshape(-1, A.shape[2])
        return [Gf.T @ Af if self.has[0] else None, Gf.sum(0) if self.has[1] else None]

    def per_example(self, rec):
        return list(self._per_example(*self._rows(rec)))


# ================================================================ Conv1d / Conv2d
def _unfold(x, kernel, dilation, padding, stride):
    """The patches of a 1d or 2d zero-padded convolution, (b, C·∏kernel, positions) in
    ``F.unfold``'s order, by a strided view of the padded input (one copy; faster than
    ``F.unfold``'s per-record loop on the CPU)."""
    pads = [p for q in reversed(padding) for p in (q, q)]
    xp = F.pad(x, pads) if any(pads) else x
    sizes, steps, strides = [], [], []
    for i, (k, d, s) in enumerate(zip(kernel, dilation, stride, strict=True)):
        dim = 2 + i
        sizes.append((xp.shape[dim] - d * (k - 1) - 1) // s + 1)
        steps.append(xp.stride(dim) * d)
        strides.append(xp.stride(dim) * s)
    b, c = xp.shape[0], xp.shape[1]
    view = xp.as_strided(
        (b, c, *kernel, *sizes),
        (xp.stride(0), xp.stride(1), *steps, *strides),
        xp.storage_offset(),
    )
    return view.reshape(b, c * math.prod(kernel), math.prod(sizes))


class ConvUnit(_WeightBias):
    """:class:`torch.nn.Conv1d` / :class:`torch.nn.Conv2d` with zero (or no) padding."""

    kind = "conv"

    def __init__(self, module, owner):
        super().__init__(module, owner)
        self.two_d = isinstance(module, nn.Conv2d)
        self.conv = F.conv2d if self.two_d else F.conv1d
        self.conv_input = torch.nn.grad.conv2d_input if self.two_d else torch.nn.grad.conv1d_input

    @staticmethod
    def supports(module) -> bool:
        return module.padding_mode == "zeros" and not isinstance(module.padding, str)

    def op(self, x, weight, bias):
        m = self.module
        return self.conv(x, weight, bias, m.stride, m.padding, m.dilation, m.groups)

    def input_grad(self, x, weight, g):
        m = self.module
        return self.conv_input(x.shape, weight, g, m.stride, m.padding, m.dilation, m.groups)

    def _unfold(self, rec):
        """A of shape (b, groups, d_g, T) and G of shape (b, groups, p_g, T)."""
        m, x, g = self.module, rec.saved, rec.grad
        A = _unfold(x, m.kernel_size, m.dilation, m.padding, m.stride)
        b, k = x.shape[0], m.groups
        return A.reshape(b, k, -1, A.shape[-1]), g.reshape(b, k, -1, A.shape[-1])

    def _grouped(self) -> bool:
        """Materialise by one grouped convolution (Rochette, Manoel, Tramel, "Efficient
        Per-Example Gradient Computations in Convolutional Neural Networks", 2019): a
        layer with one input channel (a first layer on grey images), where it beats
        the unfolded batched product."""
        m = self.module
        return self.two_d and m.groups == 1 and m.in_channels == 1 and self.has[0]

    def _grouped_weight(self, rec):
        """Per-example weight gradients (b, out, 1, kh, kw) by a grouped convolution of
        each record's input with its own output gradient."""
        m, x, g = self.module, rec.saved, rec.grad
        b = x.shape[0]
        Ho, Wo = g.shape[2], g.shape[3]
        out = F.conv2d(
            x.reshape(1, b, x.shape[2], x.shape[3]),
            g.reshape(b * g.shape[1], 1, Ho, Wo),
            None,
            m.dilation,
            m.padding,
            m.stride,
            b,
        )
        kh, kw = m.kernel_size
        return out[..., :kh, :kw].reshape(b, g.shape[1], kh * kw)

    def _materialise(self, A, G) -> bool:
        b, k, d, T = A.shape
        return k > 1 or _choose_materialise(self.owner, b, T, G.shape[2], d)

    def _materialise_shape(self, rec) -> bool:
        """:meth:`_materialise` from the shapes alone (no unfolding)."""
        m, g = self.module, rec.grad
        T = math.prod(g.shape[2:])
        d = (m.in_channels // m.groups) * math.prod(m.kernel_size)
        return m.groups > 1 or _choose_materialise(self.owner, g.shape[0], T, g.shape[1], d)

    def _per_example(self, A, G):
        if self.has[0]:
            if A.shape[1] == 1:
                pw = torch.bmm(G[:, 0], A[:, 0].transpose(1, 2))
            else:
                pw = torch.einsum("bkpt,bkdt->bkpd", G, A).flatten(1, 2)
        else:
            pw = None
        pb = G.sum(3).flatten(1) if self.has[1] else None
        return pw, pb

    def sq_norms(self, rec):
        if self._grouped() and self._materialise_shape(rec):
            g = rec.grad
            pw, pb = self._grouped_weight(rec), (g.sum(dim=(2, 3)) if self.has[1] else None)
            rec.cache = (None, None, pw, pb)
            return [_sq(t, tuple(range(1, t.ndim))) for t in (pw, pb) if t is not None]
        A, G = self._unfold(rec)
        if self._materialise(A, G):
            pw, pb = self._per_example(A, G)
            rec.cache = (None, None, pw, pb)
            return [_sq(t, tuple(range(1, t.ndim))) for t in (pw, pb) if t is not None]
        rec.cache = (A, G, None, None)
        a, g = A[:, 0], G[:, 0]
        out = []
        if self.has[0]:
            gram = torch.bmm(a.transpose(1, 2), a) * torch.bmm(g.transpose(1, 2), g)
            out.append(gram.sum(dim=(1, 2), dtype=torch.float64))
        if self.has[1]:
            out.append(_sq(g.sum(2), 1))
        return out

    def clipped(self, rec, c):
        A, G, pw, pb = rec.cache if rec.cache is not None else (*self._unfold(rec), None, None)
        shape = self.module.weight.shape
        cc = c.to(rec.grad.dtype)
        if A is None or self._materialise(A, G):
            if pw is None and pb is None:
                pw, pb = self._per_example(A, G)
            return [
                None if pw is None else torch.tensordot(cc, pw, dims=1).reshape(shape),
                None if pb is None else cc @ pb,
            ]
        m = self.module
        gc = rec.grad * cc.reshape(-1, *([1] * (rec.grad.dim() - 1)))
        gw = None
        if self.has[0]:
            weight = torch.nn.grad.conv2d_weight if self.two_d else torch.nn.grad.conv1d_weight
            gw = weight(rec.saved, shape, gc, m.stride, m.padding, m.dilation, m.groups)
        return [
            gw,
            gc.sum(dim=tuple(i for i in range(gc.dim()) if i != 1)) if self.has[1] else None,
        ]

    def per_example(self, rec):
        if self._grouped() and self._materialise_shape(rec):
            g = rec.grad
            pw, pb = self._grouped_weight(rec), (g.sum(dim=(2, 3)) if self.has[1] else None)
        else:
            pw, pb = self._per_example(*self._unfold(rec))
        b = pw.shape[0] if pw is not None else pb.shape[0]
        return [None if pw is None else pw.reshape(b, *self.module.weight.shape), pb]


# ================================================================ Embedding
class _EmbeddingFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, unit, idx, weight):
        ctx.unit = unit
        ctx.save_for_backward(idx)
        return F.embedding(idx, weight, unit.module.padding_idx)

    @staticmethod
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        ctx.unit.record(idx, g)
        return None, None, None


class EmbeddingUnit(Unit):
    """:class:`torch.nn.Embedding` without ``max_norm`` (a data-dependent, unnoised
    rewrite of the weights) or ``scale_grad_by_freq`` (mixes the records of a batch)."""

    kind = "embedding"

    @staticmethod
    def supports(module) -> bool:
        return module.max_norm is None and not module.scale_grad_by_freq

    def forward(self, idx):
        return _EmbeddingFn.apply(self, idx, self.module.weight)

    def _rows(self, rec):
        idx, g = rec.saved, rec.grad
        b = idx.shape[0]
        idx, G = idx.reshape(b, -1), g.reshape(b, -1, g.shape[-1])
        pad = self.module.padding_idx
        if pad is not None:
            G = G * (idx != pad).unsqueeze(2).to(G.dtype)
        return idx, G

    def sq_norms(self, rec):
        idx, G = self._rows(rec)
        if idx.shape[1] == 1:
            return [_sq(G[:, 0], 1)]
        same = (idx.unsqueeze(2) == idx.unsqueeze(1)).to(G.dtype)
        return [(same * torch.bmm(G, G.transpose(1, 2))).sum(dim=(1, 2), dtype=torch.float64)]

    def clipped(self, rec, c):
        idx, G = self._rows(rec)
        Gc = (G * c.to(G.dtype)[:, None, None]).reshape(-1, G.shape[2])
        w = self.module.weight
        return [torch.zeros_like(w).index_add_(0, idx.reshape(-1), Gc)]

    def per_example(self, rec):
        idx, G = self._rows(rec)
        w = self.module.weight
        out = torch.zeros(idx.shape[0], *w.shape, dtype=G.dtype, device=G.device)
        rows = idx.unsqueeze(2).expand(-1, -1, G.shape[2])
        return [out.scatter_add_(1, rows, G)]


# ================================================================ LayerNorm / GroupNorm
class NormUnit(_WeightBias):
    """The affine part of :class:`torch.nn.LayerNorm` / :class:`torch.nn.GroupNorm`."""

    kind = "norm"

    def __init__(self, module, owner):
        super().__init__(module, owner)
        self.layer = isinstance(module, nn.LayerNorm)

    @staticmethod
    def supports(module) -> bool:
        return getattr(module, "elementwise_affine", getattr(module, "affine", False))

    def view(self, t, ndim: int):
        """w or β broadcast against an input of ``ndim`` dimensions."""
        if self.layer:
            return t
        return t.reshape(1, -1, *([1] * (ndim - 2)))

    def forward(self, x):
        m = self.module
        if self.layer:
            xhat = F.layer_norm(x, m.normalized_shape, None, None, m.eps)
        else:
            xhat = F.group_norm(x, m.num_groups, None, None, m.eps)
        return super().forward(xhat)  # the tap is the affine map of x̂

    def op(self, xhat, weight, bias):
        """y = x̂ ⊙ w + β, w and β broadcast by :meth:`view`."""
        out = xhat if weight is None else xhat * self.view(weight, xhat.dim())
        return out if bias is None else out + self.view(bias, xhat.dim())

    def input_grad(self, xhat, weight, g):
        return g if weight is None else g * self.view(weight, g.dim())

    def per_example(self, rec):
        xhat, g = rec.saved, rec.grad
        b = g.shape[0]
        if self.layer:
            k = len(self.module.normalized_shape)
            shape = (b, -1, *g.shape[g.dim() - k :])
            pw, pb = (g * xhat).reshape(shape).sum(1), g.reshape(shape).sum(1)
        else:
            pw = (g * xhat).reshape(b, g.shape[1], -1).sum(2)
            pb = g.reshape(b, g.shape[1], -1).sum(2)
        return [pw if self.has[0] else None, pb if self.has[1] else None]

    def sq_norms(self, rec):
        return [_sq(t, tuple(range(1, t.ndim))) for t in self.per_example(rec) if t is not None]

    def clipped(self, rec, c):
        cc = None
        out = []
        for t in self.per_example(rec):
            if t is None:
                out.append(None)
                continue
            cc = c.to(t.dtype) if cc is None else cc
            out.append(torch.tensordot(cc, t, dims=1))
        return out


# ================================================================ any other layer
class _GenericFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, unit, n_args, *inputs):
        args = inputs[:n_args]
        ctx.unit, ctx.n_args = unit, n_args
        ctx.save_for_backward(*[a for a in args if torch.is_tensor(a)])
        ctx.is_tensor = [torch.is_tensor(a) for a in args]
        ctx.rest = [None if torch.is_tensor(a) else a for a in args]
        out = unit.original_forward(*args)
        if not torch.is_tensor(out):
            raise InvalidPrivacyParameter(
                f"layer {unit.describe()} returns {type(out).__name__}, not one tensor: dperm "
                "computes the per-example gradients of a layer with trainable parameters "
                "that takes tensors (batch first) and returns one tensor"
            )
        return out

    @staticmethod
    def backward(ctx, g):
        saved = iter(ctx.saved_tensors)
        args = [next(saved) if t else r for t, r in zip(ctx.is_tensor, ctx.rest, strict=True)]
        needs = ctx.needs_input_grad[2 : 2 + ctx.n_args]
        grads, inputs = ctx.unit.vjp(args, g, needs)
        ctx.unit.record(grads, g)
        return (None, None, *inputs, *([None] * len(ctx.unit.params)))


class GenericUnit(Unit):
    """Any module that owns trainable parameters and is not one of the layers above
    (its whole sub-module): per-example gradients by ``torch.func``."""

    kind = "generic"

    def __init__(self, module, owner):
        super().__init__(module, owner)
        self.names = [k for k, v in module.named_parameters() if v.requires_grad]
        self.original_forward = module.forward

    def forward(self, *args):
        return _GenericFn.apply(self, len(args), *args, *self.params)

    def vjp(self, args, g, needs):
        """(per-example parameter gradients, input gradients) from one vmap of vjp
        (every tensor argument has the batch first)."""
        from torch.func import functional_call, vjp, vmap

        m = self.module
        tensor_pos = [i for i, a in enumerate(args) if torch.is_tensor(a)]
        inputs: list = [None] * len(args)
        if g.shape[0] == 0:  # an empty lot: nothing to differentiate
            for i in tensor_pos:
                if needs[i]:
                    inputs[i] = torch.zeros_like(args[i])
            return [g.new_zeros((0, *p.shape), dtype=p.dtype) for p in self.params], inputs
        frozen = {k: v.detach() for k, v in m.named_parameters() if not v.requires_grad}
        buffers = {k: v.detach() for k, v in m.named_buffers()}
        params = {k: p.detach() for k, p in zip(self.names, self.params, strict=True)}

        def one(p, xs, gi):
            def f(p_, *xs_):
                call = list(args)
                for i, x in zip(tensor_pos, xs_, strict=True):
                    call[i] = x.unsqueeze(0)
                return functional_call(m, ({**p_, **frozen}, buffers), tuple(call))

            _, pull = vjp(f, p, *xs)
            return pull(gi.unsqueeze(0))

        xs = tuple(args[i].detach() for i in tensor_pos)
        tap = m.__dict__.get("forward")
        m.forward = self.original_forward  # functional_call runs the layer itself
        try:
            with torch.enable_grad():
                out = vmap(one, in_dims=(None, 0, 0), randomness="different")(params, xs, g)
        finally:
            m.forward = tap
        grads = [out[0][k] for k in self.names]
        for i, gx in zip(tensor_pos, out[1:], strict=True):
            if needs[i]:
                inputs[i] = gx
        return grads, inputs

    def per_example(self, rec):
        return list(rec.saved)

    def sq_norms(self, rec):
        return [_sq(t, tuple(range(1, t.ndim))) for t in rec.saved]

    def clipped(self, rec, c):
        return [torch.tensordot(c.to(t.dtype), t, dims=1) for t in rec.saved]

    def describe(self) -> str:
        return f"{type(self.module).__name__} (per-example gradients by torch.func)"


# ================================================================ discovery
def _own_parameters(module) -> bool:
    return any(p.requires_grad for p in module.parameters(recurse=False))


def _unit_class(module) -> type[Unit] | None:
    if isinstance(module, nn.Linear):
        return LinearUnit
    if isinstance(module, nn.Conv1d | nn.Conv2d) and ConvUnit.supports(module):
        return ConvUnit
    if isinstance(module, nn.Embedding):
        if not EmbeddingUnit.supports(module):
            raise InvalidPrivacyParameter(
                f"Embedding layer {module} has max_norm (it rewrites the looked-up rows of "
                "the weights from the private batch, without noise) or scale_grad_by_freq "
                "(it mixes the records of a batch): refused; use a plain nn.Embedding"
            )
        return EmbeddingUnit
    if isinstance(module, nn.LayerNorm | nn.GroupNorm) and NormUnit.supports(module):
        return NormUnit
    return None


def find_units(module, owner, generic: Callable[[Any], bool] | None = None) -> list[Unit]:
    """The units of ``module``, top-down: a supported layer with a trainable parameter
    is a unit; any other module that owns a trainable parameter is one generic unit
    with its whole sub-module; a module without its own parameters is looked into."""
    units: list[Unit] = []

    def visit(m) -> None:
        if not any(p.requires_grad for p in m.parameters()):
            return
        cls = _unit_class(m)
        if cls is not None:
            units.append(cls(m, owner))
            return
        if _own_parameters(m):
            units.append(GenericUnit(m, owner))
            return
        for child in m.children():
            visit(child)

    visit(module)
    return units


def check_batch(unit: Unit, rec: Record, b: int) -> None:
    """The record's first dimension is the batch of b records.

    Raises
    ------
    InvalidPrivacyParameter
        Naming the layer: its input does not have the batch as its first dimension.
    """
    first = rec.grad.shape[0] if rec.grad is not None else None
    if first != b:
        raise InvalidPrivacyParameter(
            f"layer {unit.describe()} was called on a tensor whose first dimension is "
            f"{first}, not the batch of {b} records: dperm needs the batch first in every "
            "layer with trainable parameters (e.g. batch_first=True)"
        )
