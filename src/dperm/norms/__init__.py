"""Norms for structured sparsity: value, dual norm, proximal operator, linear
minimization oracle over the unit ball, and Gaussian width.

Every norm is a :class:`~dperm.regularizers.Regularizer` (``penalty=`` /
``regularizer=`` of the estimators) and, through :class:`NormBall`, a
:class:`~dperm.constraints.Constraint`.  The modules, each with its proofs and
sources:

* :mod:`dperm.norms.base` — :class:`Norm`, the interface;
* :mod:`dperm.norms.submodular` — Ω(θ) = f(|θ|) for a non-decreasing
  submodular F (Bach 2013; Kumar & Deisenroth 2019, §2): the Lovász extension,
  Wolfe's minimum-norm-point algorithm, :class:`SubmodularNorm`;
* :mod:`dperm.norms.lp` — its named cases with closed forms: :class:`L1Norm`,
  :class:`LinfNorm`, :class:`GroupLinfNorm` (overlapping groups allowed);
* :mod:`dperm.norms.graph` — graph total variation plus ℓ1,
  μ‖θ‖₁ + Σ_{(i,j)∈E} w_ij|θ_i − θ_j| (:class:`GraphTVNorm`), not Ω∞ of a
  submodular F but the Lovász extension of μ|A| + Cut(A) on θ⁺ and θ⁻;
* :mod:`dperm.norms.structured` — beyond Ω∞ of a submodular F: chain total
  variation (:class:`ChainTVNorm`, the path-graph case of :class:`GraphTVNorm`)
  and the latent group ℓ1/ℓ2 norm (:class:`LatentGroupL2Norm`);
* :mod:`dperm.norms.ball` — :class:`NormBall`, :func:`gaussian_width` and
  :func:`norm_from_regularizer`.

Every name is importable from :mod:`dperm.norms`.
"""

from __future__ import annotations

from .ball import GaussianWidth, NormBall, gaussian_width, norm_from_regularizer
from .base import Norm
from .graph import GraphTVNorm
from .lp import GroupLinfNorm, L1Norm, LinfNorm
from .structured import ChainTVNorm, LatentGroupL2Norm
from .submodular import SubmodularNorm, is_submodular, lovasz_extension, min_norm_point

__all__ = [
    "ChainTVNorm",
    "GaussianWidth",
    "GraphTVNorm",
    "GroupLinfNorm",
    "L1Norm",
    "LatentGroupL2Norm",
    "LinfNorm",
    "Norm",
    "NormBall",
    "SubmodularNorm",
    "gaussian_width",
    "is_submodular",
    "lovasz_extension",
    "min_norm_point",
    "norm_from_regularizer",
]
