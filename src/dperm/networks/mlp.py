"""Multi-layer perceptrons for DP-SGD: the torch module, its initialisation from
dperm's generator, and a numpy forward pass (prediction needs no torch).

Activations: ReLU, tanh, sigmoid and the **tempered sigmoid** of Papernot, Thakurta,
Song, Chien, Erlingsson ("Tempered Sigmoid Activations for Deep Learning with
Differential Privacy", AAAI 2021, Eq. 1): φ(x) = s·σ(T x) − o, with scale s, inverse
temperature T and offset o; (s, T, o) = (2, 2, 1) is tanh.  Bounded activations keep
the per-example gradients from exploding, so clipping discards less signal — the
paper's argument, and Lecture 15 (§15.5)'s remark that tanh beats ReLU under DP-SGD.

Layout (the one of scikit-learn's ``MLPClassifier``): ``coefs[l]`` has shape
(n_in, n_out) and ``intercepts[l]`` shape (n_out,); the torch module is
``Linear, act, Linear, act, …, Linear`` (logits out), optionally preceded by the fixed
**quadratic feature map** z ↦ [z, (zᵢzⱼ)_{i≤j<m}] (:func:`quadratic_features`): no
parameters, public, row by row — a degree-2 polynomial classifier when there is no
hidden layer (LeCun, Bottou, Bengio, Haffner, "Gradient-based learning applied to
document recognition", Proc. IEEE 1998, §III.C: "40 PCA + quadratic classifier" on
MNIST).  Under DP-SGD, fixed good features and a convex model beat features learned
through the noise (Tramèr & Boneh, "Differentially Private Learning Needs Better
Features (or Much More Data)", ICLR 2021).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .._validation import check_count, check_positive
from ..exceptions import InvalidPrivacyParameter, UnknownNameError
from ._torch import require_torch

__all__ = [
    "ACTIVATIONS",
    "build_module",
    "check_architecture",
    "forward_numpy",
    "init_parameters",
    "module_parameters",
    "quadratic_features",
    "quadratic_width",
]

ACTIVATIONS = ("relu", "tanh", "sigmoid", "tempered_sigmoid")


def check_architecture(hidden_layer_sizes, activation, tempered_sigmoid) -> tuple:
    """(hidden sizes as a tuple of ints, activation name, (s, T, o)) checked.

    Raises
    ------
    InvalidPrivacyParameter
        A hidden size that is not an integer ≥ 1, or (s, T, o) not three finite
        numbers with s, T > 0.
    UnknownNameError
        An unknown ``activation``.
    """
    if isinstance(hidden_layer_sizes, int | np.integer):
        hidden_layer_sizes = (hidden_layer_sizes,)
    try:
        sizes = tuple(check_count(h, "hidden_layer_sizes") for h in hidden_layer_sizes)
    except TypeError:
        raise InvalidPrivacyParameter(
            f"hidden_layer_sizes must be a sequence of integers ≥ 1, got {hidden_layer_sizes!r}"
        ) from None
    if activation not in ACTIVATIONS:
        raise UnknownNameError(
            f"unknown activation {activation!r}; choose one of {list(ACTIVATIONS)}"
        )
    try:
        s, t, o = (float(v) for v in tempered_sigmoid)
    except (TypeError, ValueError):
        raise InvalidPrivacyParameter(
            f"tempered_sigmoid must be (scale, inverse_temperature, offset), got "
            f"{tempered_sigmoid!r}"
        ) from None
    check_positive(s, "tempered_sigmoid scale")
    check_positive(t, "tempered_sigmoid inverse temperature")
    if not math.isfinite(o):
        raise InvalidPrivacyParameter(f"tempered_sigmoid offset must be finite, got {o!r}")
    return sizes, activation, (s, t, o)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free logistic


def _activation_numpy(name: str, params: tuple[float, float, float]):
    if name == "relu":
        return lambda z: np.maximum(z, 0.0)
    if name == "tanh":
        return np.tanh
    if name == "sigmoid":
        return _sigmoid
    s, t, o = params
    return lambda z: s * _sigmoid(t * z) - o


def quadratic_width(n_inputs: int, quadratic: int) -> int:
    """Number of features after :func:`quadratic_features`: n + m(m+1)/2.

    Examples
    --------
    >>> quadratic_width(60, 60)
    1890
    """
    return int(n_inputs) + int(quadratic) * (int(quadratic) + 1) // 2


def quadratic_features(Z: np.ndarray, quadratic: int) -> np.ndarray:
    """The fixed degree-2 feature map [z, (zᵢzⱼ)_{0≤i≤j<m}] of every row z of Z.

    Parameters
    ----------
    Z : ndarray of shape (n, n_inputs)
    quadratic : int
        m ≤ n_inputs, the number of leading inputs whose pairwise products (squares
        included, in ``numpy.triu_indices(m)`` order) are appended; 0 returns Z.

    Returns
    -------
    ndarray of shape (n, :func:`quadratic_width` (n_inputs, m)), Z's dtype.

    Examples
    --------
    >>> quadratic_features(np.array([[1.0, 2.0, 3.0]]), 2)
    array([[1., 2., 3., 1., 2., 4.]])
    """
    if not quadratic:
        return Z
    i, j = np.triu_indices(int(quadratic))
    head = Z[:, : int(quadratic)]
    return np.hstack([Z, head[:, i] * head[:, j]])


def forward_numpy(
    X: np.ndarray,
    coefs: Sequence[np.ndarray],
    intercepts: Sequence[np.ndarray],
    activation: str,
    tempered_sigmoid=(2.0, 2.0, 1.0),
    quadratic: int = 0,
) -> np.ndarray:
    """Logits of the MLP (``coefs``/``intercepts``) on X, shape (n, n_outputs), float64;
    ``quadratic`` = m > 0 applies :func:`quadratic_features` first.

    Computed in blocks of rows (memory bounded by the widest layer × 4096 rows)."""
    act = _activation_numpy(activation, tuple(tempered_sigmoid))
    out = np.empty((X.shape[0], coefs[-1].shape[1]))
    block = 4096
    for start in range(0, X.shape[0], block):
        h = quadratic_features(np.asarray(X[start : start + block], dtype=np.float64), quadratic)
        for i, (W, b) in enumerate(zip(coefs, intercepts, strict=True)):
            h = h @ W + b
            if i < len(coefs) - 1:
                h = act(h)
        out[start : start + block] = h
    return out


def init_parameters(
    layer_sizes: Sequence[int], rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """PyTorch's default initialisation of ``Linear`` layers (weights and biases
    U(−1/√n_in, 1/√n_in)), drawn from dperm's ``rng`` so that ``random_state`` fixes it.
    Data-independent (public).  Returns (coefs, intercepts) in the layout above."""
    coefs, intercepts = [], []
    for n_in, n_out in itertools.pairwise(layer_sizes):
        bound = 1.0 / math.sqrt(n_in)
        coefs.append(rng.uniform(-bound, bound, size=(n_in, n_out)))
        intercepts.append(rng.uniform(-bound, bound, size=n_out))
    return coefs, intercepts


def build_module(
    coefs: Sequence[np.ndarray],
    intercepts: Sequence[np.ndarray],
    activation: str,
    tempered_sigmoid=(2.0, 2.0, 1.0),
    *,
    dtype=None,
    device=None,
    quadratic: int = 0,
):
    """The ``torch.nn.Sequential`` MLP holding ``coefs``/``intercepts``, preceded by the
    parameter-free quadratic feature map when ``quadratic`` = m > 0."""
    torch = require_torch()
    nn = torch.nn
    dtype = dtype or torch.float32
    layers: list = [_quadratic_module(int(quadratic))] if quadratic else []
    for i, (W, b) in enumerate(zip(coefs, intercepts, strict=True)):
        lin = nn.Linear(W.shape[0], W.shape[1], dtype=dtype, device=device)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(W.T)))
            lin.bias.copy_(torch.from_numpy(np.asarray(b)))
        layers.append(lin)
        if i < len(coefs) - 1:
            layers.append(_activation_module(activation, tempered_sigmoid))
    return nn.Sequential(*layers)


def module_parameters(module) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(coefs, intercepts) of a module built by :func:`build_module`, float64."""
    nn = require_torch().nn
    coefs, intercepts = [], []
    for m in module:
        if isinstance(m, nn.Linear):
            coefs.append(m.weight.detach().to("cpu").double().numpy().T.copy())
            intercepts.append(m.bias.detach().to("cpu").double().numpy().copy())
    return coefs, intercepts


def _quadratic_module(m: int):
    """:func:`quadratic_features` as a parameter-free torch module (row by row, so the
    ghost-norm path of :mod:`dperm.networks.per_example` applies: ``rowwise``).  The
    products are built from contiguous slices, zᵢ·(zᵢ, …, z_{m−1}) for each i — the
    ``triu_indices`` order, without a gather."""
    torch = require_torch()

    class QuadraticFeatures(torch.nn.Module):
        """z ↦ [z, (zᵢzⱼ)_{i≤j<m}] (numpy: :func:`quadratic_features`)."""

        rowwise = True

        def forward(self, x):
            head = x[..., :m]
            parts = [x] + [head[..., i : i + 1] * head[..., i:] for i in range(m)]
            return torch.cat(parts, dim=-1)

        def extra_repr(self) -> str:
            return f"quadratic={m}"

    return QuadraticFeatures()


def _activation_module(name: str, params):
    torch = require_torch()
    nn = torch.nn
    if name == "relu":
        return nn.ReLU()
    if name == "tanh":
        return nn.Tanh()
    if name == "sigmoid":
        return nn.Sigmoid()
    s, t, o = (float(v) for v in params)

    class TemperedSigmoid(nn.Module):
        """φ(x) = s·σ(T x) − o (Papernot et al., AAAI 2021, Eq. 1); element-wise."""

        elementwise = True

        def forward(self, x):
            return s * torch.sigmoid(t * x) - o

        def extra_repr(self) -> str:
            return f"scale={s:g}, inverse_temperature={t:g}, offset={o:g}"

    return TemperedSigmoid()
