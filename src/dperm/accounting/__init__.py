"""Privacy accounting: events, composition theorems, RDP and PLD accountants,
noise calibration and a budget ledger.

Accountants (all share :class:`Accountant`; build them by name with
:func:`get_accountant`):

* ``"basic"`` — :class:`BasicCompositionAccountant` (ε and δ add up);
* ``"advanced"`` — :class:`AdvancedCompositionAccountant` (KOV 2015 Thm 3.4/3.5
  or Dwork–Roth Thm 3.20);
* ``"optimal"`` — :class:`OptimalCompositionAccountant` (KOV 2015 Thm 3.3,
  exact for identical (ε, δ) mechanisms);
* ``"rdp"`` — :class:`RdpAccountant` (Rényi DP / moments accountant);
* ``"pld"`` — :class:`PldAccountant` (privacy loss distributions,
  connect-the-dots discretisation, vectorised in :mod:`.pld_dense`);
* ``"auto"`` — :class:`AutoAccountant` (the above in parallel; the smallest
  valid ε of those that accepted the whole history; the Ledger's default).

Every accountant accounts one neighbouring relation (``neighbouring=``,
default ``"replace-one"``); see :mod:`dperm.accounting.events` and
:mod:`dperm.accounting.base`.

See ``docs/accounting.md`` for the events each one supports.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name → the submodule that defines it (imported on first use, PEP 562:
#: ``import dperm.accounting`` stays light — ``dperm account`` imports only what it uses)
_LAZY = {
    "AUTO_METHODS": "auto",
    "AutoAccountant": "auto",
    "Accountant": "base",
    "Conversion": "base",
    "SAMPLING_SCHEMES": "calibrate",
    "calibrate_gaussian": "calibrate",
    "calibrate_noise": "calibrate",
    "calibrate_noise_certified": "calibrate",
    "AdvancedCompositionAccountant": "composition",
    "BasicCompositionAccountant": "composition",
    "OptimalCompositionAccountant": "composition",
    "kov_optimal_delta": "composition",
    "ADD_REMOVE": "events",
    "Composed": "events",
    "DpEvent": "events",
    "EpsilonDelta": "events",
    "Gaussian": "events",
    "Laplace": "events",
    "NEIGHBOURING_RELATIONS": "events",
    "NoOp": "events",
    "NonPrivate": "events",
    "PoissonSampled": "events",
    "PureEpsilon": "events",
    "REPLACE_ONE": "events",
    "SampledWithoutReplacement": "events",
    "SelfComposed": "events",
    "check_neighbouring": "events",
    "event_from_dict": "events",
    "event_from_json": "events",
    "to_replace_one": "events",
    "analytic_gaussian_noise_multiplier": "gaussian",
    "classical_gaussian_noise_multiplier": "gaussian",
    "gaussian_delta": "gaussian",
    "gaussian_epsilon": "gaussian",
    "Ledger": "ledger",
    "LedgerEntry": "ledger",
    "Reservation": "ledger",
    "PldAccountant": "pld",
    "DEFAULT_ORDERS": "rdp",
    "RdpAccountant": "rdp",
    "compute_rdp": "rdp",
    "rdp_to_delta": "rdp",
    "rdp_to_epsilon": "rdp",
    "ACCOUNTANT_NAMES": "registry",
    "accountant_factory": "registry",
    "delta_spent": "registry",
    "epsilon_spent": "registry",
    "get_accountant": "registry",
    "lecture15_single_sample_sigma": "textbook",
    "single_sample_sigma": "textbook",
}

__all__ = [
    "ACCOUNTANT_NAMES",
    "ADD_REMOVE",
    "AUTO_METHODS",
    "DEFAULT_ORDERS",
    "NEIGHBOURING_RELATIONS",
    "REPLACE_ONE",
    "SAMPLING_SCHEMES",
    "Accountant",
    "AdvancedCompositionAccountant",
    "AutoAccountant",
    "BasicCompositionAccountant",
    "Composed",
    "Conversion",
    "DpEvent",
    "EpsilonDelta",
    "Gaussian",
    "Laplace",
    "Ledger",
    "LedgerEntry",
    "NoOp",
    "NonPrivate",
    "OptimalCompositionAccountant",
    "PldAccountant",
    "PoissonSampled",
    "PureEpsilon",
    "RdpAccountant",
    "Reservation",
    "SampledWithoutReplacement",
    "SelfComposed",
    "accountant_factory",
    "analytic_gaussian_noise_multiplier",
    "calibrate_gaussian",
    "calibrate_noise",
    "calibrate_noise_certified",
    "check_neighbouring",
    "classical_gaussian_noise_multiplier",
    "compute_rdp",
    "delta_spent",
    "epsilon_spent",
    "event_from_dict",
    "event_from_json",
    "gaussian_delta",
    "gaussian_epsilon",
    "get_accountant",
    "kov_optimal_delta",
    "rdp_to_delta",
    "rdp_to_epsilon",
    "to_replace_one",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:  # a submodule, e.g. ``dperm.accounting.rdp``
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
