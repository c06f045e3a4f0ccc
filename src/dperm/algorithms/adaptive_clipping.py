"""Adaptive clipping: the clipping norm follows a private quantile of the gradient norms.

Andrew, Thakkar, McMahan, Ramaswamy, "Differentially Private Learning with Adaptive
Clipping", NeurIPS 2021 (Algorithm 1, Theorem 1).  At every step of DP-SGD the batch
releases, besides the noisy sum of the clipped gradients, a noisy count of the
examples whose gradient was *not* clipped, bᵢ = 1[‖gᵢ‖ ≤ Cₜ]; the clipping norm then
moves geometrically towards the target quantile γ of the gradient norms:

    b̃ₜ = clip((Σ_{i∈Bₜ} (bᵢ − ½) + N(0, σ_b²)) / m + ½, 0, 1)
    Cₜ₊₁ = Cₜ · exp(−η_C (b̃ₜ − γ))

(m the public normaliser of the sum, the expected batch size).  Cₜ₊₁ is computed
from released values only (post-processing), so every step is the same mechanism
whatever Cₜ is: the noise on the sum is proportional to Cₜ.

Privacy: one step is one Gaussian mechanism (proof in ``docs/gradient_perturbation.md``,
"Adaptive clipping").  Divide the two releases by their noise: record i contributes
wᵢ = (clip_{Cₜ}(gᵢ)/σ_v, (bᵢ − ½)/σ_b) to a sum with unit Gaussian noise, where
σ_v = σ_Δ·k·Cₜ is the noise on the gradient sum (k = 1 under add/remove-one, 2 under
replace-one: dperm's ``sensitivity_factor``) and σ_b the noise on the centred count.
Every wᵢ lies in the ball of radius ρ, ρ² = 1/(σ_Δ k)² + 1/(2σ_b)², *centred at 0*
(the count enters as bᵢ − ½ = ±½: Andrew et al.'s centring), so the pair of releases is
exactly one DP-SGD step with clipping norm ρ and noise 1 — under any sampling, since the
sampler sees only which records are in the batch — whose multiplier in dperm's
convention (noise / (k·clipping norm)) is z = 1/(kρ):

    z⁻² = σ_Δ⁻² + (2σ_b / k)⁻².

Under add/remove-one (k = 1) this is Theorem 1 of the paper, z⁻² = σ_Δ⁻² + (2σ_b)⁻²;
under replace-one (k = 2) the count's term is σ_b⁻²: a replaced record moves the count by
bᵢ − bᵢ′ ∈ {−1, 0, 1}, twice the ±½ of an added or removed one, while the gradient sum's
sensitivity doubles too (2Cₜ) — the paper's formula applied to replace-one with the same
σ_b would under-count the count's cost by a factor 4 in variance.  The two releases must
also share the batch: composing them as two *independently* sampled Gaussians would
assume two independent Poisson coins for the same record.

So the run's event is exactly the fixed-clipping event with the multiplier z, and its
calibration is unchanged: the accountant certifies z for (ε, δ) as before and the budget
is split after the fact, a public fraction f of z⁻² for the count:

    σ_Δ = z / √(1 − f),    σ_b = k·z / (2√f).

:func:`noise_split` computes it; the auto rule's f (:func:`count_share`) keeps the noise
on the released fraction b̃ near 0.05 (the paper's σ_b = m/20).

Fast paths.  For a GLM loss ‖gᵢ‖ = |φ'ᵢ|·‖x̃ᵢ‖ and for the softmax loss ‖rᵢ‖·‖x̃ᵢ‖: the
count comes from the same n scalars as the clip factors (:class:`BatchOracle`), for the
batch rows only; the batch is gathered once (as the fixed-clipping kernel does).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._validation import check_positive, check_probability
from ..backends._products import clipped_sum_count
from ..design import as_design
from ..exceptions import InvalidPrivacyParameter

__all__ = [
    "COUNT_NOISE_TARGET",
    "MAX_COUNT_SHARE",
    "MAX_FRACTION_NOISE",
    "MIN_COUNT_SHARE",
    "SCALE_STEPS",
    "AdaptiveClipping",
    "BatchOracle",
    "check",
    "count_share",
    "diagnostics",
    "informative",
    "noise_split",
    "start",
]

#: the auto rule's target standard deviation of the noise on the released fraction b̃ₜ
#: (Andrew et al. use σ_b = m/20, i.e. 0.05)
COUNT_NOISE_TARGET = 0.05
#: bounds of the count's share f of the noise budget z⁻² (:func:`count_share`)
MIN_COUNT_SHARE = 0.01
MAX_COUNT_SHARE = 0.1
#: the largest noise on the released fraction b̃ₜ with which the default runs adaptive
#: clipping (:func:`informative`): beyond it the count is noise, and the clipping stays
#: fixed at no cost
MAX_FRACTION_NOISE = 0.15
#: whether the default scales each step by C₀/Cₜ (:class:`AdaptiveClipping`
#: ``scale_steps``): no — with the clipping norm below C₀, a smaller Cₜ then shrinks the
#: steps with the noise (KDD Cup 99, ε = 0.1: 98.76 % without, 98.70 % with, on
#: validation splits of the training rows)
SCALE_STEPS = False


def count_share(noise_multiplier: float, normalizer: float, sensitivity_factor: float) -> float:
    """The count's share f of z⁻²: the f that gives the released fraction b̃ a noise
    standard deviation :data:`COUNT_NOISE_TARGET` (σ_b/m = k·z/(2√f·m)), clipped to
    [:data:`MIN_COUNT_SHARE`, :data:`MAX_COUNT_SHARE`].  Public inputs only (z, m, k).

    Examples
    --------
    >>> round(count_share(1.0, 160.0, 2.0), 4), count_share(5.0, 20.0, 2.0)
    (0.0156, 0.1)
    """
    z = check_positive(noise_multiplier, "noise_multiplier")
    m = check_positive(normalizer, "normalizer")
    f = (sensitivity_factor * z / (2.0 * COUNT_NOISE_TARGET * m)) ** 2
    return float(min(MAX_COUNT_SHARE, max(MIN_COUNT_SHARE, f)))


def informative(noise_multiplier: float, normalizer: float, sensitivity_factor: float) -> bool:
    """Whether the count of unclipped examples can see the quantile: with the largest
    share :data:`MAX_COUNT_SHARE` the noise on the released fraction, k·z/(2√f·m), is at
    most :data:`MAX_FRACTION_NOISE`.  Public inputs only (z, m, k).

    Examples
    --------
    >>> informative(0.9, 160.0, 2.0), informative(27.8, 506.0, 2.0)
    (True, False)
    """
    f = MAX_COUNT_SHARE
    return sensitivity_factor * noise_multiplier / (2.0 * math.sqrt(f) * normalizer) <= (
        MAX_FRACTION_NOISE
    )


def noise_split(
    noise_multiplier: float, share: float, sensitivity_factor: float
) -> tuple[float, float]:
    """(σ_Δ, σ_b): the multiplier of the noise on the gradient sum (std σ_Δ·k·Cₜ) and the
    standard deviation of the noise on the centred count, such that the pair is one
    Gaussian mechanism of multiplier z (module docstring):
    σ_Δ⁻² + (2σ_b/k)⁻² = z⁻², with the count taking the share ``share`` = f of z⁻².

    Examples
    --------
    >>> s, b = noise_split(2.0, 0.2, 2.0)
    >>> round(s**-2 + (2 * b / 2.0) ** -2, 12) == round(2.0**-2, 12)
    True
    """
    z = check_positive(noise_multiplier, "noise_multiplier")
    f = check_probability(share, "count_noise_share")
    if not 0.0 < f < 1.0:
        raise InvalidPrivacyParameter(f"count_noise_share must be in (0, 1), got {share!r}")
    return z / math.sqrt(1.0 - f), sensitivity_factor * z / (2.0 * math.sqrt(f))


@dataclasses.dataclass
class AdaptiveClipping:
    """The state of one run's adaptive clipping (Andrew et al. 2021, Algorithm 1).

    Parameters
    ----------
    clipping_norm : float
        C₀, the initial clipping norm (public).
    quantile : float in (0, 1)
        γ, the target fraction of unclipped examples.
    learning_rate : float > 0
        η_C of the geometric update.
    vector_noise : float
        σ_Δ·k: the noise on the gradient sum is this times Cₜ.
    count_noise : float
        σ_b, the noise on the centred count Σ(bᵢ − ½).
    normalizer : float
        m, the public normaliser of the batch (the expected batch size).
    share : float
        f, the count's share of z⁻² (reported).
    max_clipping_norm : float, default inf
        A public ceiling of Cₜ (post-processing: Cₜ₊₁ = min(ceiling, update)).
    scale_steps : bool
        Scale each step by C₀/Cₜ (the learning rate η·C₀/Cₜ: the longest step of one
        clipped gradient stays η·C₀ whatever Cₜ is, so the run is invariant to the units
        of the features).  Post-processing of the release.

    Attributes
    ----------
    norms : list of float
        C₁, …, C_T: the clipping norm each step used (released values: every Cₜ is a
        function of the releases before step t).
    counts : list of float
        The released noisy centred counts Σ(bᵢ − ½) + N(0, σ_b²) of every step.
    step_scale : float
        C₀/Cₜ of the last step released (1 without ``scale_steps``).
    """

    clipping_norm: float
    quantile: float
    learning_rate: float
    vector_noise: float
    count_noise: float
    normalizer: float
    share: float = 0.0
    scale_steps: bool = False
    max_clipping_norm: float = math.inf
    norms: list = dataclasses.field(default_factory=list)
    counts: list = dataclasses.field(default_factory=list)
    step_scale: float = 1.0

    def __post_init__(self):
        self.initial = float(self.clipping_norm)

    def release(self, oracle, theta, idx, noise_rng) -> np.ndarray:
        """One step: the noisy clipped sum at the current Cₜ; then Cₜ₊₁ from the noisy
        count of unclipped examples (the same batch)."""
        C = self.clipping_norm
        g, centred = oracle.clipped_sum_count(theta, idx, C)
        g = g + noise_rng.standard_normal(g.shape) * (self.vector_noise * C)
        noisy = centred + self.count_noise * float(noise_rng.standard_normal())
        fraction = min(1.0, max(0.0, noisy / self.normalizer + 0.5))
        self.norms.append(C)
        self.counts.append(noisy)
        self.step_scale = self.initial / C if self.scale_steps else 1.0
        C = C * math.exp(-self.learning_rate * (fraction - self.quantile))
        self.clipping_norm = min(C, self.max_clipping_norm)
        return g


def _take_rows(a, idx):
    if idx is None:
        return np.asarray(a)
    return np.asarray(a[idx])


class BatchOracle:
    """Clipped gradient sums of a GLM or softmax loss on gathered batches, with the
    count of unclipped examples (adaptive clipping) and an optional per-batch affine map
    of the features (private feature scaling, :mod:`dperm.algorithms.private_scaling`).

    For each batch the effective rows are gathered once (``X.take(idx)``), the per-example
    gradient norms are the n scalars |φ'ᵢ|·‖x̃ᵢ‖ (GLM) or ‖rᵢ‖·‖x̃ᵢ‖ (softmax), and the
    clipped sum is one transposed product; with ``transform`` the gathered rows are
    materialized and mapped (x̃ ↦ transform(x̃), a copy of the batch only).  A design
    whose rows live on a cluster serves the pair itself (``X.clipped_sum_count``:
    :meth:`dperm.backends.dask.DaskDesign.clipped_sum_count`, the same function on the
    same rows).

    Parameters
    ----------
    loss : GLMLoss or Softmax (or a weighted loss with ``_design_terms``)
    X : Design
    y : ndarray of shape (n,)
    clipping_norm : float
        C of :meth:`clipped_sum` (the fixed-clipping call).
    transform : callable, optional
        ``transform(rows) -> rows`` on a materialized (b, d_eff) float64 batch (in place
        allowed).
    """

    def __init__(self, loss, X, y, clipping_norm: float, transform=None):
        self.X, self.y, self.C = as_design(X), y, clipping_norm
        self.loss = loss
        terms = getattr(loss, "_design_terms", None)
        self._base, self._weights = terms() if terms is not None else (loss, None)
        self.multiclass = bool(getattr(self._base, "multiclass", False))
        self.kind = "softmax" if self.multiclass else "glm"
        self.transform = transform
        # the design's own count (rows on a cluster), unless the rows are mapped here
        self._own = None if transform is not None else getattr(self.X, "clipped_sum_count", None)

    def batches(self, sampler, rng, steps):
        """The batches of ``sampler`` (drawn by the data's backend, same law)."""
        return self.X.batches(sampler, rng, steps)

    def _rows(self, idx):
        """(rows, their norms, y, weights): a Design of the batch, or its mapped rows."""
        view = self.X.take(idx)
        yb = _take_rows(self.y, idx)
        wb = None if self._weights is None else _take_rows(self._weights, idx)
        if self.transform is None:
            return view, view.row_norms(), yb, wb
        rows = self.transform(np.asarray(_dense(view.materialize()), dtype=np.float64))
        return rows, np.sqrt(np.einsum("ij,ij->i", rows, rows)), yb, wb

    def clipped_sum_count(self, theta, idx, clipping_norm):
        """(Σᵢ clip_C(gᵢ), Σᵢ (1[‖gᵢ‖ ≤ C] − ½)) over the batch ``idx``
        (:func:`dperm.backends._products.clipped_sum_count` on its gathered rows).  A
        design that serves the pair itself (``X.clipped_sum_count``: the Dask backend,
        from the lot's rows fetched ahead or by sums on its workers) does so, with
        the same function on the same rows."""
        if self._own is not None:
            return self._own(
                self._base, theta, self.y, clipping_norm, weights=self._weights, rows=idx
            )
        rows, norms, yb, wb = self._rows(idx)
        return clipped_sum_count(self._base, rows, norms, yb, wb, theta, clipping_norm)

    def clipped_sum(self, theta, idx):
        """Σᵢ clip_C(gᵢ) over the batch at the oracle's fixed C."""
        return self.clipped_sum_count(theta, idx, self.C)[0]


def _dense(rows):
    return rows.toarray() if hasattr(rows, "toarray") else rows


def check(quantile, learning_rate, share, max_clipping_norm):
    """The settings of adaptive clipping, validated: (γ, η_C, f, ceiling), or None when
    ``quantile`` is None (fixed clipping).

    Raises
    ------
    InvalidPrivacyParameter
        γ or f outside (0, 1), η_C or the ceiling not positive.
    """
    if quantile is None:
        return None
    q = check_probability(quantile, "target_unclipped_quantile")
    if q >= 1.0:
        raise InvalidPrivacyParameter(
            f"target_unclipped_quantile must be in (0, 1), got {quantile!r}"
        )
    lr = check_positive(learning_rate, "clipping_learning_rate")
    if share is not None:
        share = check_probability(share, "count_noise_share")
        if share >= 1.0:
            raise InvalidPrivacyParameter(f"count_noise_share must be in (0, 1), got {share!r}")
    ceiling = math.inf
    if max_clipping_norm is not None:
        ceiling = check_positive(max_clipping_norm, "max_clipping_norm")
    return q, lr, share, ceiling


def start(settings, z: float, sampler, clipping_norm: float) -> AdaptiveClipping | None:
    """The :class:`AdaptiveClipping` of a run with multiplier z, or None (fixed clipping):
    no ``settings``, or the default share and a count that would be noise
    (:func:`informative`).  The split of the one Gaussian event; public numbers only."""
    if settings is None:
        return None
    quantile, lr, share, ceiling = settings
    k, m = sampler.sensitivity_factor, sampler.normalizer
    if z == 0:  # non-private: no noise on either release
        vector, count, share = 0.0, 0.0, share or 0.0
    else:
        if share is None:
            if not informative(z, m, k):
                return None
            share = count_share(z, m, k)
        sigma, count = noise_split(z, share, k)
        vector = sigma * k
    C0 = min(float(clipping_norm), ceiling)
    return AdaptiveClipping(C0, quantile, lr, vector, count, m, share, SCALE_STEPS, ceiling)


def diagnostics(settings, clipping: AdaptiveClipping | None) -> dict:
    """Adaptive clipping's public facts for a run's diagnostics: γ, η_C, the split, the
    norms Cₜ used (released values), or why the clipping stayed fixed."""
    if clipping is None:
        if settings is None:
            return {"clipping": "fixed"}
        why = (
            f"the count of unclipped examples would have noise above "
            f"{MAX_FRACTION_NOISE:g} on the released fraction (informative())"
        )
        return {"clipping": "fixed", "adaptive_clipping": f"off: {why}"}
    norms = np.asarray(clipping.norms, dtype=np.float64)
    return {
        "clipping": "adaptive",
        "target_unclipped_quantile": clipping.quantile,
        "clipping_learning_rate": clipping.learning_rate,
        "count_noise_share": clipping.share,
        "count_noise_std": clipping.count_noise,
        "vector_noise_per_clip": clipping.vector_noise,
        "max_clipping_norm": clipping.max_clipping_norm,
        "clipping_norms": norms,
        "clipping_counts": np.asarray(clipping.counts, dtype=np.float64),
        "final_clipping_norm": float(norms[-1]) if norms.size else clipping.clipping_norm,
    }
