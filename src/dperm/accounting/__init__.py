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
* ``"pld"`` — :class:`PldAccountant` (privacy loss distributions, via
  dp-accounting);
* ``"auto"`` — :class:`AutoAccountant` (the above in parallel; the smallest
  valid ε of those that accepted the whole history; the Ledger's default).

Every accountant accounts one neighbouring relation (``neighbouring=``,
default ``"replace-one"``); see :mod:`dperm.accounting.events` and
:mod:`dperm.accounting.base`.

See ``docs/accounting.md`` for the events each one supports.
"""

from .auto import AUTO_METHODS, AutoAccountant
from .base import Accountant, Conversion
from .calibrate import SAMPLING_SCHEMES, calibrate_gaussian, calibrate_noise
from .composition import (
    AdvancedCompositionAccountant,
    BasicCompositionAccountant,
    OptimalCompositionAccountant,
    kov_optimal_delta,
)
from .events import (
    ADD_REMOVE,
    NEIGHBOURING_RELATIONS,
    REPLACE_ONE,
    Composed,
    DpEvent,
    EpsilonDelta,
    Gaussian,
    Laplace,
    NonPrivate,
    NoOp,
    PoissonSampled,
    PureEpsilon,
    SampledWithoutReplacement,
    SelfComposed,
    check_neighbouring,
    event_from_dict,
    event_from_json,
    to_replace_one,
)
from .gaussian import (
    analytic_gaussian_noise_multiplier,
    classical_gaussian_noise_multiplier,
    gaussian_delta,
    gaussian_epsilon,
)
from .ledger import Ledger, LedgerEntry
from .pld import PldAccountant
from .rdp import (
    DEFAULT_ORDERS,
    RdpAccountant,
    compute_rdp,
    rdp_to_delta,
    rdp_to_epsilon,
)
from .registry import (
    ACCOUNTANT_NAMES,
    accountant_factory,
    delta_spent,
    epsilon_spent,
    get_accountant,
)

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
    "SampledWithoutReplacement",
    "SelfComposed",
    "accountant_factory",
    "analytic_gaussian_noise_multiplier",
    "calibrate_gaussian",
    "calibrate_noise",
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
