"""The ``"auto"`` accountant: the tightest valid bound of several accountants.

Every accountant of dperm reports a valid upper bound on the privacy loss of
what it accepted, so the *minimum* of the bounds of several accountants that
accepted the same whole history is a valid bound too.  :class:`AutoAccountant`
keeps one accountant per method in parallel (by default ``"pld"``, ``"rdp"``,
``"optimal"``, ``"advanced"`` and ``"basic"``, all for the same neighbouring
relation), drops a method the first time it refuses an event, and reports
the minimum over the methods still alive.

When no single method accepts the whole history (e.g. with
``methods=("rdp", "optimal", "split")``, a Gaussian mechanism, which the composition
theorems refuse, and an (ε, δ) event, which RDP refuses),
the ``"split"`` fallback applies: the history is cut into its k parts (the
events, with ``Composed`` events cut into their children), each part is
accounted alone by the best method that accepts it, at δ/k, and the results
are added up — basic composition (Dwork & Roth 2014, Theorem 3.16) of k
adaptively composed mechanisms that are (εᵢ, δ/k)-DP is (Σεᵢ, δ)-DP.  It is
evaluated only when no single method accepts the whole history.  An event
with a part that no method accepts alone is refused, before any state change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .._validation import check_delta
from ..exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
from .base import Accountant
from .composition import (
    AdvancedCompositionAccountant,
    BasicCompositionAccountant,
    OptimalCompositionAccountant,
)
from .events import REPLACE_ONE, Composed, DpEvent, SelfComposed, is_neutral
from .pld import PldAccountant
from .rdp import RdpAccountant

__all__ = ["AUTO_METHODS", "AutoAccountant"]

_MEMBERS: dict[str, type[Accountant]] = {
    "pld": PldAccountant,
    "rdp": RdpAccountant,
    "optimal": OptimalCompositionAccountant,
    "advanced": AdvancedCompositionAccountant,
    "basic": BasicCompositionAccountant,
}

#: Methods an :class:`AutoAccountant` may run (``"split"`` is the fallback).
AUTO_METHODS = (*_MEMBERS, "split")


def _parts(event: DpEvent) -> list[DpEvent]:
    """``event`` cut into the parts it composes (Composed children, repeated
    ``count`` times for a SelfComposed of a Composed), dropping NoOps."""
    if isinstance(event, Composed):
        return [p for e in event.events for p in _parts(e)]
    if isinstance(event, SelfComposed) and isinstance(event.event, Composed):
        return [SelfComposed(p, event.count) for p in _parts(event.event)]
    return [] if is_neutral(event) else [event]


class AutoAccountant(Accountant):
    """Several accountants in parallel; reports the smallest valid ε.

    Parameters
    ----------
    methods : sequence of str, optional
        Subset of :data:`AUTO_METHODS`, default all of them.
    value_discretization_interval : float, default 1e-4
        Passed to the PLD member.
    neighbouring : {"replace-one", "add-remove"}, default "replace-one"
        The relation of every member (see :mod:`dperm.accounting.base`).

    Notes
    -----
    The minimum of valid upper bounds is a valid upper bound: each member
    that is still alive has accepted every event composed so far, so its
    (ε, δ) holds for the whole history.  :meth:`best_method` names the member
    that certified the figure; :meth:`epsilons` lists all of them.

    Raises
    ------
    UnknownNameError
        For an unknown method.
    InvalidPrivacyParameter
        For an empty ``methods``.
    """

    name = "auto"

    def __init__(
        self,
        methods: Sequence[str] | None = None,
        value_discretization_interval: float = 1e-4,
        *,
        neighbouring: str = REPLACE_ONE,
    ) -> None:
        super().__init__(neighbouring)
        names = list(AUTO_METHODS if methods is None else methods)
        if isinstance(methods, str) or not names:
            raise InvalidPrivacyParameter(
                f"methods must be a non-empty sequence of {list(AUTO_METHODS)}, got {methods!r}"
            )
        for m in names:
            if m not in AUTO_METHODS:
                raise UnknownNameError(f"unknown method {m!r}; expected one of {AUTO_METHODS}")
        self.methods = tuple(dict.fromkeys(names))
        self.value_discretization_interval = value_discretization_interval
        self._alive: dict[str, Accountant] = {
            m: self._new_member(m) for m in self.methods if m != "split"
        }
        self._split = "split" in self.methods
        self._spent: list[DpEvent] = []  # non-neutral events, for the split fallback
        self._split_cache: dict[int, list[Accountant]] = {}

    def _new_member(self, method: str) -> Accountant:
        if method == "pld":
            return PldAccountant(self.value_discretization_interval, neighbouring=self.neighbouring)
        return _MEMBERS[method](neighbouring=self.neighbouring)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "methods": list(self.methods),
            "value_discretization_interval": self.value_discretization_interval,
        }

    @property
    def alive(self) -> tuple[str, ...]:
        """The methods that accepted every event so far (plus ``"split"``
        when it applies)."""
        names = tuple(self._alive)
        return (*names, "split") if self._split else names

    # ---------------------------------------------------------------- hooks
    def _prepare(self, event: DpEvent, count: int) -> tuple[DpEvent, dict[str, Any], bool]:
        prepared: dict[str, Any] = {}
        reasons: list[str] = []
        for m, acc in self._alive.items():
            try:
                prepared[m] = acc._prepare(event, count)
            except UnsupportedEventError as exc:
                reasons.append(f"{m}: {exc}")
        split_ok = self._split and (
            is_neutral(event)
            or count == 0
            or all(self._single_event_members(p) for p in _parts(event))
        )
        if not prepared and not split_ok:
            raise UnsupportedEventError(
                f"no accountant accepts {event!r} together with the {len(self._spent)} "
                f"event(s) already composed ({'; '.join(reasons) or 'no method left'})"
            )
        return event, prepared, split_ok

    def _commit(self, prepared: tuple[DpEvent, dict[str, Any], bool], count: int) -> None:
        event, per_member, split_ok = prepared
        repeated = event if count == 1 else SelfComposed(event, count)
        for m in list(self._alive):
            if m in per_member:
                acc = self._alive[m]
                acc._commit(per_member[m], count)
                acc._history.append(repeated)
            else:
                del self._alive[m]  # it refused part of the history: no longer valid
        self._split = split_ok
        if count and not is_neutral(event):
            self._spent.extend(_parts(repeated))

    # -------------------------------------------------------------- results
    def _single_event_members(self, event: DpEvent) -> list[Accountant]:
        """Fresh members that accept ``event`` alone (not composed yet)."""
        out = []
        for m in self.methods:
            if m == "split":
                continue
            acc = self._new_member(m)
            if acc.supports(event):
                out.append(acc)
        return out

    def _split_epsilon(self, delta: float) -> float:
        k = len(self._spent)
        if k == 0:
            return 0.0
        share = delta / k
        total = 0.0
        for i, event in enumerate(self._spent):
            if i not in self._split_cache:
                members = self._single_event_members(event)
                for acc in members:
                    acc.compose(event)
                self._split_cache[i] = members
            total += min(acc.get_epsilon(share) for acc in self._split_cache[i])
        return total

    def epsilons(self, delta: float) -> dict[str, float]:
        """ε certified at ``delta`` by each live method (``"split"`` is only
        evaluated when no other method accepted the whole history).

        Raises
        ------
        InvalidPrivacyParameter
            For an invalid ``delta``.
        """
        delta = check_delta(delta, "delta", allow_zero=True)
        out = {m: acc.get_epsilon(delta) for m, acc in self._alive.items()}
        if self._split and not out:
            out["split"] = max(0.0, self._split_epsilon(delta))
        return out

    def best_method(self, delta: float) -> tuple[str, float]:
        """(method, ε): the live method that certifies the smallest ε at ``delta``.

        Raises
        ------
        InvalidPrivacyParameter
            For an invalid ``delta``.
        """
        eps = self.epsilons(delta)
        if not eps:  # pragma: no cover - compose refuses before this can happen
            return "none", math.inf
        eps = {m: (math.inf if math.isnan(e) else max(0.0, e)) for m, e in eps.items()}
        name = min(eps, key=lambda m: (eps[m], self.methods.index(m)))
        return name, eps[name]

    def _epsilon(self, delta: float) -> float:
        return self.best_method(delta)[1]

    def _delta(self, epsilon: float) -> float:
        if self._alive:
            return min(acc.get_delta(epsilon) for acc in self._alive.values())
        if not self._split or not self._spent:
            return 0.0
        # smallest δ whose split ε is ≤ epsilon: bisection on log δ (ε decreases in δ)
        if self._split_epsilon(1.0 - 1e-12) > epsilon:
            return 1.0
        lo, hi = -745.0, math.log1p(-1e-12)
        if self._split_epsilon(math.exp(lo)) <= epsilon:
            return math.exp(lo)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self._split_epsilon(math.exp(mid)) <= epsilon:
                hi = mid
            else:
                lo = mid
        return min(1.0, math.exp(hi))
