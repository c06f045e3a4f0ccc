"""The one place where :mod:`dperm.networks` imports PyTorch (an optional extra).

``pip install "dperm[torch]"`` installs it; a CPU build is enough (a GPU is used when
``device="auto"`` finds one).  Everything else in dperm runs without torch: the
network estimators predict with numpy, and :func:`require_torch` raises an
:class:`ImportError` naming the extra the first time a network is *trained*.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..exceptions import InvalidPrivacyParameter

__all__ = [
    "flat_parameters",
    "load_flat_parameters",
    "require_torch",
    "resolve_device",
    "torch_rng_seed",
    "trainable",
]


def require_torch():
    """The ``torch`` module, or ImportError telling how to install it."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(
            'dperm.networks needs PyTorch: pip install "dperm[torch]" (a CPU build of torch '
            "is enough)"
        ) from exc
    return torch


def resolve_device(device: Any):
    """``torch.device`` of ``device``: "cpu" (default), "cuda", "cuda:1", "auto" (a GPU
    when one is present, else the CPU) or a ``torch.device``.

    Raises
    ------
    InvalidPrivacyParameter
        Naming ``device`` when it is not a device name, or names a CUDA (MPS) device
        this machine does not have.
    """
    torch = require_torch()
    if device is None or device == "cpu":
        return torch.device("cpu")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidPrivacyParameter(
            f"device must be 'cpu', 'auto', 'cuda[:k]' or a torch.device, got {device!r}"
        ) from None
    if dev.type == "cuda":  # torch's own message is an AssertionError deep in a call
        if not torch.cuda.is_available():
            raise InvalidPrivacyParameter(
                f"device={device!r}: this PyTorch sees no CUDA device "
                "(torch.cuda.is_available() is False); use device='cpu' or 'auto'"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InvalidPrivacyParameter(
                f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) are present"
            )
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise InvalidPrivacyParameter(
                f"device={device!r}: the MPS backend is not available; use device='cpu'"
            )
    return dev


def trainable(module) -> list:
    """The trainable parameters of ``module`` (``requires_grad``), in
    ``module.parameters()`` order: what DP-SGD trains and releases (frozen parameters,
    e.g. layers pre-trained on public data, are public inputs)."""
    return [p for p in module.parameters() if p.requires_grad]


def flat_parameters(module) -> np.ndarray:
    """The trainable parameters of ``module`` (:func:`trainable`) as one float64
    vector of shape (p,)."""
    torch = require_torch()
    with torch.no_grad():
        parts = [p.detach().reshape(-1).to("cpu", torch.float64) for p in trainable(module)]
    if not parts:
        return np.zeros(0)
    return torch.cat(parts).numpy()


def load_flat_parameters(module, theta: np.ndarray) -> None:
    """Write the vector ``theta`` (shape (p,), :func:`trainable` order) into
    ``module``'s trainable parameters, in their dtype and on their device."""
    torch = require_torch()
    flat = torch.from_numpy(np.ascontiguousarray(theta, dtype=np.float64))
    start = 0
    with torch.no_grad():
        for p in trainable(module):
            k = p.numel()
            p.copy_(flat[start : start + k].view_as(p).to(p.device, p.dtype))
            start += k


def torch_rng_seed(rng: np.random.Generator) -> int:
    """A 63-bit seed for torch's generator drawn from dperm's ``rng`` (so that a
    ``random_state`` also fixes torch-side randomness such as dropout masks)."""
    return int(rng.integers(0, 2**63 - 1))
