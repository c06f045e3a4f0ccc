"""Whether a budget can afford one more charge, the charge itself, and what a refusal says.

Every charge (:meth:`Ledger.spend <dperm.accounting.Ledger.spend>`, ``reserve``) is
checked against *everything* the budget holds — committed entries and the open
reservations of every process — composed by the budget's one accountant: a reserved
event is composed exactly as a committed one (the PLD composes a reserved DP-SGD run as
tightly as a finished one).  The check and the record it allows are one transaction of
the store; the composition (a PLD can take a tenth of a second) is computed *before*
the store's write lock is taken, from the history as last read, and verified inside
the lock: the head unchanged, the record is appended at once; others appended
meanwhile, the check runs again (outside the lock up to :data:`OPTIMISTIC_ROUNDS`
times, then inside it, so that a writer always makes progress).  On PostgreSQL the write
transaction is READ COMMITTED under the budget's advisory lock, so the head it reads is
the last one committed by anyone: the verification needs no SERIALIZABLE isolation, and
never fails with a serialisation error to retry.

A refusal says what the budget holds: the committed spend, the share the open
reservations hold, and whether the charge would fit without them — then waiting for
them to settle (``wait=SECONDS``; ``dperm fit --wait``) can succeed: the reservations
commit the (often tighter) events their fits report, or are cancelled.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..exceptions import BudgetExceededError, InvalidPrivacyParameter, UnsupportedEventError
from .base import Accountant
from .events import DpEvent, EpsilonDelta
from .ledger_state import COMMITTED, RESERVED, now
from .ledger_sync import ROUNDING_SLACK, LedgerSync

__all__ = ["OPTIMISTIC_ROUNDS", "Held", "LedgerAdmission"]

#: checks computed outside the store's lock before one is computed inside it
OPTIMISTIC_ROUNDS = 3
_POLL_FIRST, _POLL_MAX = 0.05, 1.0


@dataclass(frozen=True)
class Held:
    """What a budget's open reservations hold (:meth:`Ledger.held`).

    Attributes
    ----------
    reservations : int
        Open reservations: fits running, or fits whose process died (those stay
        charged for good).
    epsilon : float
        ε at the budget's δ of everything charged, minus that of the committed
        entries alone (``inf`` when the reservations' δ uses up the budget's δ).
    delta : float
        Σδ of the reserved (ε, δ) events.
    committed_epsilon : float
        ε at the budget's δ of the committed entries alone.
    """

    reservations: int
    epsilon: float
    delta: float
    committed_epsilon: float


@dataclass
class _Plan:
    """A charge checked against the history up to ``head``."""

    head: tuple[int, str]
    event: DpEvent
    trial: Accountant
    eps: float
    conv: DpEvent | None


EventPlan = DpEvent | Callable[[float], DpEvent]


class LedgerAdmission(LedgerSync):
    """The budget check of :class:`~dperm.accounting.Ledger` (base class)."""

    # ---------------------------------------------------------------- checks
    def _resolve(self, event: EventPlan) -> DpEvent:
        """``event``, or ``event(remaining δ)`` for a function of the budget's state."""
        if callable(event) and not isinstance(event, DpEvent):
            event = event(self._remaining_delta_now())
        if not isinstance(event, DpEvent):
            raise UnsupportedEventError(f"a Ledger spends DpEvents, got {event!r}")
        return event

    def _would_spend(self, event: DpEvent) -> tuple[Accountant, float, DpEvent | None]:
        """(accountant with ``event`` composed, its ε, the conversion of ``event``)."""
        event = self._resolve(event)
        trial = self._accountant().copy()
        before = len(trial.conversions)
        trial.compose(event)  # UnsupportedEventError propagates, nothing changed
        conv = trial.conversions[-1].converted if len(trial.conversions) > before else None
        return trial, trial.get_epsilon(self.delta), conv

    def _plan(self, event: EventPlan) -> _Plan:
        resolved = self._resolve(event)
        trial, eps, conv = self._would_spend(resolved)
        return _Plan(self._chain.last, resolved, trial, eps, conv)

    def can_spend(self, event: DpEvent) -> bool:
        """Whether :meth:`spend` would accept ``event`` now.

        Raises
        ------
        UnsupportedEventError
            If the ledger's accountant cannot account ``event``.
        """
        self._refresh()
        return self._within_budget(self._would_spend(event)[1])

    def _committed_accountant(self) -> Accountant:
        acc = self._empty.copy()
        for slot in self._state.live():
            if slot.status == COMMITTED:
                self._compose(acc, slot)
        return acc

    def _fits_without_reservations(self, event: DpEvent) -> bool:
        trial = self._committed_accountant()
        try:
            trial.compose(event)
        except UnsupportedEventError:
            return False
        return self._within_budget(trial.get_epsilon(self.delta))

    def _held_now(self) -> Held:
        open_ = [s for s in self._state.live() if s.status == RESERVED]
        committed = self._committed_accountant()
        spent = committed.get_epsilon(self.delta) if len(open_) < len(self._state.live()) else 0.0
        if not open_:
            return Held(0, 0.0, 0.0, spent)
        total = self._spent_now()
        held_delta = sum(s.planned.delta for s in open_ if isinstance(s.planned, EpsilonDelta))
        return Held(len(open_), max(0.0, total - spent), float(held_delta), spent)

    def held(self) -> Held:
        """What the open reservations hold: their number, the ε they add at the
        budget's δ (everything charged minus the committed entries alone) and their
        Σδ."""
        self._refresh()
        self._accountant()
        return self._held_now()

    # ---------------------------------------------------------------- charge
    def _charge(
        self,
        kind: str,
        event: EventPlan,
        label: str | None,
        active: bool,
        wait: float | None = None,
    ) -> tuple[float, int, DpEvent]:
        """Check and record one charge; returns (total ε after it, its record's number,
        the event).  ``wait``: seconds to wait for open reservations to settle when the
        charge would fit without them."""
        if label is not None and not isinstance(label, str):
            raise InvalidPrivacyParameter(f"label must be a string or None, got {label!r}")
        if wait is not None and (
            isinstance(wait, bool)
            or not isinstance(wait, int | float)
            or not math.isfinite(wait)
            or wait < 0
        ):
            raise InvalidPrivacyParameter(f"wait must be seconds ≥ 0 (or None), got {wait!r}")
        started = time.monotonic()
        delay = _POLL_FIRST
        while True:
            plan = self._try_charge(kind, event, label)
            if isinstance(plan, tuple):
                return plan
            fits_alone = self._fits_without_reservations(plan.event)
            while True:  # poll the store's head (cheap) until something settles
                waited = time.monotonic() - started
                if wait is None or not fits_alone or waited >= wait:
                    raise self._refusal(plan, label, active, fits_alone, wait)
                time.sleep(min(delay, max(0.0, wait - waited)))
                delay = min(_POLL_MAX, delay * 1.5)
                self._refresh()
                if self._chain.last != plan.head:
                    break  # another record: check again (the accountant only now)

    def _try_charge(self, kind: str, event: EventPlan, label: str | None):
        """One attempt: the record (eps, seq, event) or the refused plan."""
        for rounds in range(OPTIMISTIC_ROUNDS + 1):
            self._refresh()
            plan = self._plan(event)  # outside the lock
            with self._write() as tx:
                self._sync(tx)
                if self._chain.last != plan.head:
                    if rounds < OPTIMISTIC_ROUNDS:
                        continue  # others appended: check again, outside the lock
                    plan = self._plan(event)  # inside the lock: this one succeeds
                if not self._within_budget(plan.eps):
                    return plan
                body = {"event": plan.event.to_dict(), "label": label, "time": now(),
                        "pid": os.getpid(), "host": socket.gethostname()}  # fmt: skip
                rec = self._chain.append(tx, kind, body)
                self._state.apply(rec.seq, kind, body)
                self._acc, self._conv[rec.seq] = plan.trial, plan.conv
                self._total = (rec.seq, plan.eps)  # the total after this record (commit reuses it)
            return plan.eps, rec.seq, plan.event
        raise AssertionError("unreachable")  # pragma: no cover

    def _refusal(
        self, plan: _Plan, label: str | None, active: bool, fits_alone: bool, wait: float | None
    ) -> BudgetExceededError:
        held = self._held_now()
        why = self._exhausted(plan.event, plan.eps, held)
        if held.reservations:
            share = f"{held.epsilon:.3g}" if math.isfinite(held.epsilon) else "all"
            if held.delta:
                share += f" (and delta {held.delta:.3g})"
            why += (
                f"; {share} of it is held by {held.reservations} running fit(s) (open "
                "reservations of any process; one whose process died stays charged)"
            )
            if fits_alone and wait is None:
                why += (
                    " — without them it fits: wait for them to settle (dperm fit --wait "
                    "SECONDS; Ledger.reserve(…, wait=SECONDS))"
                )
            elif fits_alone:
                why += f" — still held after waiting {wait:g} s (dperm budget show lists them)"
        if active:
            err = BudgetExceededError(
                f"{label or 'a private fit'} spending {plan.event!r} in the active budget "
                f"{self!r} {why}; nothing was fitted or recorded"
            )
        else:
            err = BudgetExceededError(f"spending {plan.event!r} {why}; nothing was recorded")
        err.reason = why  # "would exhaust …": for messages that name the charge their own way
        return err

    # ------------------------------------------------------------ spent so far
    def delta_spent(self) -> float:
        """Σδ of the (ε, δ) entries (:class:`~dperm.accounting.events.EpsilonDelta`,
        what every estimator charges): the part of the budget's δ they use up —
        basic composition adds their δ, and the ledger's ε at its δ is infinite once
        that sum exceeds it.  Other events have no separate δ (0 here)."""
        self._refresh()
        return self._delta_spent_now()

    def remaining_delta(self) -> float:
        """Budget δ minus :meth:`delta_spent` (≥ 0)."""
        self._refresh()
        return self._remaining_delta_now()

    def _exhausted(self, event: DpEvent, eps: float, held: Held | None = None) -> str:
        """Which of the budget's δ and ε the event would exhaust, in words."""
        need = event.delta if isinstance(event, EpsilonDelta) else 0.0
        n = len(self._state.live())
        if eps == float("inf") or need > self._remaining_delta_now() * (1.0 + ROUNDING_SLACK):
            return (
                f"would exhaust the budget's DELTA: it needs delta={need:.3g} but only "
                f"{self._remaining_delta_now():.3g} of delta={self.delta:g} remains "
                f"({self._delta_spent_now():.3g} already charged by {n} fit(s)); "
                "give the fit a smaller delta, or leave delta=None (the default then takes "
                "a share of the remaining delta)"
                + (
                    " — a budget with delta=0 holds only pure-epsilon fits"
                    if not self.delta
                    else ""
                )
            )
        spent = (
            f"charged so far {self._spent_now():.6g}"
            if held is None
            else f"committed fits spent {held.committed_epsilon:.6g}"
        )
        return (
            f"would exhaust the budget's EPSILON: the total would be epsilon={eps:.6g} at "
            f"delta={self.delta:g} ({self.neighbouring}), above the budget "
            f"epsilon={self.epsilon:g} ({spent})"
        )

    def spent(self, *, reserved: bool = True) -> tuple[float, float]:
        """(ε, δ) spent so far: the accountant's ε at the ledger's δ, and that δ.

        Parameters
        ----------
        reserved : bool, default True
            Count the open reservations (what the budget is checked against); False:
            the committed entries only (what has been released so far).
        """
        self._refresh()
        live = self._state.live()
        if not reserved:
            live = [s for s in live if s.status == COMMITTED]
            if not live:
                return 0.0, 0.0
            return self._committed_accountant().get_epsilon(self.delta), self.delta
        if not live:
            return 0.0, 0.0
        return self._spent_now(), self.delta

    def remaining_epsilon(self) -> float:
        """Budget ε minus the ε spent (≥ 0).

        Note that ε does not compose additively under every accountant, so the
        remaining ε is a summary, not what a next event may cost; use
        :meth:`can_spend`, or calibrate against :attr:`accountant`.
        """
        return max(0.0, self.epsilon - self.spent()[0])
