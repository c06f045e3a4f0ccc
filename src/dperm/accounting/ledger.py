"""A privacy budget ledger: record what every fit spent and refuse overspending.

The default ledger uses the ``"auto"`` accountant
(:class:`~dperm.accounting.auto.AutoAccountant`): the PLD, RDP and composition
accountants run in parallel, each dropping out the first time it cannot
account an event, and the ledger reports the smallest ε among those that
accepted the whole history — each is a valid upper bound, so their minimum
is too — and which one certified it (:attr:`Ledger.certified_by`).  It
accepts every event dperm emits, so one ledger can hold, e.g., an
objective-perturbation fit and a DP-SGD fit.

A ledger accounts one neighbouring relation (``neighbouring=``, default
replace-one).  Add/remove events spent into a replace-one ledger are
converted soundly (:func:`~dperm.accounting.events.to_replace_one`) and the
entry records it; replace-one events are refused by an add/remove ledger.

**Where it is kept.**  ``Ledger(epsilon, delta)`` lives in this process's memory.
``Ledger.open("budget.db")`` (SQLite), ``Ledger.open("postgresql://…")`` or
``Ledger.open("spent.json")`` keep it in a store (:mod:`dperm.stores`) shared by
every process, machine and person that opens it: each spend is a transaction whose
budget check and record are atomic, records are append-only and hash-chained
(tampering raises :class:`~dperm.exceptions.LedgerIntegrityError`), and several
named budgets share one store (docs/budgets.md).  Either way a fit is
*reserved* before it reads its data and *committed* or *cancelled* after
(:meth:`Ledger.reserve`); a reservation whose process died stays charged.

**Active budgets.**  ``with ledger.active():`` (or ``with dperm.budget(3, 1e-5) as
ledger:``, ``with dperm.budget("budget.db"):``) makes every private fit of dperm inside
the block charge the ledger before it touches the data (:mod:`dperm.accounting.active`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .._validation import check_delta, check_epsilon
from ..exceptions import (
    BudgetExceededError,
    DataFileNotFoundError,
    InvalidPrivacyParameter,
    LedgerStoreError,
    UnsupportedEventError,
)
from ..stores import MemoryStore, Record, Store, open_store
from ..stores.jsonfile import atomic_write_text
from .active import activated, active_ledgers, charge, default_delta, suspended
from .auto import AutoAccountant
from .base import Accountant
from .events import DpEvent, EpsilonDelta, check_neighbouring
from .ledger_persist import ledger_from_dict, ledger_to_dict
from .ledger_state import RESERVED, LedgerEntry, Slot, now
from .ledger_sync import ROUNDING_SLACK, LedgerSync
from .registry import accountant_factory

__all__ = [
    "DEFAULT_BUDGET",
    "Ledger",
    "LedgerEntry",
    "Reservation",
    "active_ledgers",
    "budget",
    "charge",
    "default_delta",
    "suspended",
]

#: the budget of a store that ``Ledger.open(location)`` uses when no name is given
DEFAULT_BUDGET = "default"


@dataclass(frozen=True)
class Reservation:
    """A charge made before a fit reads its data (:meth:`Ledger.reserve`).

    Settle it once: :meth:`commit` after the fit succeeded, :meth:`cancel` if it
    failed before releasing anything.  Left unsettled (the process died) it stays
    charged.
    """

    ledger: Ledger
    id: int
    event: DpEvent
    label: str | None = None

    def commit(
        self,
        event: DpEvent | None = None,
        *,
        label: str | None = None,
        model: str | os.PathLike | None = None,
        model_sha256: str | None = None,
    ) -> LedgerEntry:
        """Turn the reservation into an entry (see :meth:`Ledger.commit`)."""
        return self.ledger.commit(self, event, label=label, model=model, model_sha256=model_sha256)

    def cancel(self, reason: str = "cancelled") -> None:
        """Free the reservation: the fit released nothing (see :meth:`Ledger.cancel`)."""
        self.ledger.cancel(self, reason)


class Ledger(LedgerSync):
    """A total (ε, δ) budget and the events spent against it.

    Every :meth:`spend` (and :meth:`reserve`) composes the event into the ledger's
    accountant and is refused — with :class:`~dperm.exceptions.BudgetExceededError`,
    recording nothing — if the accountant would then certify an ε above the budget at
    the budget's δ.  ``Ledger(…)`` keeps the history in memory; :meth:`open` keeps it
    in a store shared across processes and machines.

    Parameters
    ----------
    epsilon : float
        Total ε budget, > 0 and finite.
    delta : float
        Total δ budget in [0, 1) (0 for pure-DP budgets).
    accountant : str, Accountant or callable, default "auto"
        An accountant name (see :func:`~dperm.accounting.get_accountant`;
        ``"auto"`` keeps all of them in parallel and reports the smallest valid
        ε), an *empty* accountant instance (its configuration is saved by
        :meth:`save`) or a factory.
    neighbouring : {"replace-one", "add-remove"}, optional
        The relation the budget is for.  Default: replace-one for an
        accountant name; an instance keeps its own relation (a different
        ``neighbouring`` is refused).

    Raises
    ------
    InvalidPrivacyParameter
        For an invalid budget or relation, or an accountant instance that
        already holds events or accounts another relation.
    UnknownNameError
        For an unknown accountant name.

    Examples
    --------
    >>> from dperm.accounting import EpsilonDelta, Gaussian, Ledger, PoissonSampled, SelfComposed
    >>> ledger = Ledger(epsilon=3.0, delta=1e-5)
    >>> sgd = SelfComposed(PoissonSampled(0.01, Gaussian(0.6)), 1000)  # replace-one DP-SGD
    >>> eps = ledger.spend(sgd, "dp-sgd")
    >>> ledger.certified_by
    'pld'
    >>> total = ledger.spend(EpsilonDelta(0.5, 1e-6), "objective perturbation")
    >>> total <= 3.0 and ledger.neighbouring == "replace-one"
    True
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        accountant: str | Accountant | Callable[[], Accountant] = "auto",
        *,
        neighbouring: str | None = None,
    ) -> None:
        self._attach(MemoryStore(), DEFAULT_BUDGET, location=None)
        with self._write() as tx:
            self._create(tx, epsilon, delta, accountant, neighbouring)

    # ------------------------------------------------------------- the store
    @classmethod
    def open(
        cls,
        location: str | os.PathLike | Store,
        name: str | None = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        accountant: str | None = None,
        neighbouring: str | None = None,
    ) -> Ledger:
        """The budget ``name`` of the store at ``location``; created when missing and
        ``epsilon`` is given.

        Parameters
        ----------
        location : str, PathLike or Store
            A SQLite file (``budget.db``, created if needed), a JSON store
            (``*.json``) or a ``postgresql://user@host/db`` URL (needs
            ``pip install 'dperm[postgres]'``).  See :func:`dperm.stores.open_store`.
        name : str, default "default"
            The budget's name (one store holds several, e.g. one per dataset).
        epsilon, delta : float, optional
            The budget of a new one (δ default 1e-5).  For an existing budget they
            must equal what it was created with (a budget is fixed at creation).
        accountant : str, optional
            An accountant *name* for a new budget (default "auto").
        neighbouring : {"replace-one", "add-remove"}, optional
            The relation of a new budget (default replace-one).

        Returns
        -------
        Ledger

        Raises
        ------
        LedgerStoreError
            No such budget and no ``epsilon``; the location is not a store, or
            cannot be reached.
        DataFileNotFoundError
            No file at ``location`` and no ``epsilon``.
        LedgerIntegrityError
            The budget's records fail their hash-chain check (the entry is named).
        InvalidPrivacyParameter
            ``epsilon``/``delta``/``neighbouring``/``accountant`` differ from the
            existing budget's, or are invalid.

        Examples
        --------
        >>> import os, tempfile
        >>> from dperm.accounting import EpsilonDelta, Ledger
        >>> path = os.path.join(tempfile.mkdtemp(), "budget.db")
        >>> ledger = Ledger.open(path, epsilon=1.0, delta=1e-5)   # creates it
        >>> _ = ledger.spend(EpsilonDelta(0.3, 1e-7), "first fit")
        >>> again = Ledger.open(path)                             # another process, later
        >>> len(again.entries), round(again.spent()[0], 2)
        (1, 0.3)
        """
        name = DEFAULT_BUDGET if name is None else name
        store = open_store(location, create=epsilon is not None)
        ledger = cls.__new__(cls)
        ledger._attach(store, name, location)
        with ledger._write() if epsilon is not None else ledger._read() as tx:
            if tx.head() is None:
                if epsilon is None:
                    raise LedgerStoreError(
                        f"no budget named {name!r} in {store.location}; create it with "
                        "`dperm budget create` or give epsilon (and delta)"
                    )
                acc = "auto" if accountant is None else accountant
                ledger._create(tx, epsilon, 1e-5 if delta is None else delta, acc, neighbouring)
            else:
                ledger._sync(tx)
        ledger._check_same(epsilon, delta, accountant, neighbouring)
        return ledger

    def _check_same(self, epsilon, delta, accountant, neighbouring) -> None:
        for key, given, kept in (
            ("epsilon", epsilon, self.epsilon),
            ("delta", delta, self.delta),
        ):
            if given is not None and not math.isclose(float(given), kept, rel_tol=1e-12):
                raise InvalidPrivacyParameter(
                    f"{key}={given:g} differs from the budget {key}={kept:g} of {self!r}; a "
                    "budget is fixed when it is created (leave it out, or create another)"
                )
        for key, given, kept in (
            ("neighbouring", neighbouring, self.neighbouring),
            ("accountant", accountant, self._header["accountant"]["name"]),
        ):
            if given is not None and given != kept:
                raise InvalidPrivacyParameter(
                    f"{key}={given!r} differs from the budget's {key}={kept!r} ({self!r})"
                )

    def _create(self, tx, epsilon, delta, accountant, neighbouring) -> None:
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta, allow_zero=True)
        if neighbouring is not None:
            neighbouring = check_neighbouring(neighbouring)
        acc = accountant_factory(accountant, neighbouring=neighbouring)()
        if acc.events:
            raise InvalidPrivacyParameter(
                f"the ledger's accountant must be empty, got one holding {len(acc.events)} event(s)"
            )
        body = {
            "epsilon": epsilon,
            "delta": delta,
            "neighbouring": acc.neighbouring,
            "accountant": {"name": acc.name, "config": acc.get_config()},
            "time": now(),
        }
        self._empty = acc
        self._apply(self._chain.append(tx, "create", body))

    @property
    def accountant(self) -> Accountant:
        """A copy of the ledger's accountant with everything charged so far."""
        self._refresh()
        return self._accountant().copy()

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """The charges, in order: spends, committed fits and reservations still open."""
        self._refresh()
        self._accountant()
        return tuple(s.entry(self._conv.get(s.id)) for s in self._state.live())

    @property
    def reservations(self) -> tuple[LedgerEntry, ...]:
        """The entries still reserved (a fit running, or one whose process died)."""
        return tuple(e for e in self.entries if e.status == RESERVED)

    @property
    def records(self) -> tuple[Record, ...]:
        """The budget's whole history as stored (hash-chained records)."""
        self._refresh()
        return tuple(self._chain.records)

    @property
    def events(self) -> tuple[DpEvent, ...]:
        """The charged events, in order (as spent, before any conversion)."""
        return tuple(e.event for e in self.entries)

    @property
    def certified_by(self) -> str:
        """The accountant (method) that certifies the ε reported by :meth:`spent`.

        For the ``"auto"`` accountant, the method with the smallest ε at the
        ledger's δ (``"pld"``, ``"rdp"``, ``"optimal"``, ``"advanced"``,
        ``"basic"`` or ``"split"``); otherwise the accountant's name.
        """
        self._refresh()
        acc = self._accountant()
        if isinstance(acc, AutoAccountant):
            return acc.best_method(self.delta)[0]
        return acc.name

    def epsilons(self) -> dict[str, float]:
        """The ε spent at the budget's δ under each accountant that accepts the whole
        history (the ``"auto"`` accountant's methods), or under the one accountant."""
        self._refresh()
        acc = self._accountant()
        if not self._state.live():
            return {}
        if isinstance(acc, AutoAccountant):
            return acc.epsilons(self.delta)
        return {acc.name: acc.get_epsilon(self.delta)}

    def _would_spend(self, event: DpEvent) -> tuple[Accountant, float, DpEvent | None]:
        """(accountant with ``event`` composed, its ε, the conversion of ``event``)."""
        if not isinstance(event, DpEvent):
            raise UnsupportedEventError(f"a Ledger spends DpEvents, got {event!r}")
        trial = self._accountant().copy()
        before = len(trial.conversions)
        trial.compose(event)  # UnsupportedEventError propagates, nothing changed
        conv = trial.conversions[-1].converted if len(trial.conversions) > before else None
        return trial, trial.get_epsilon(self.delta), conv

    def can_spend(self, event: DpEvent) -> bool:
        """Whether :meth:`spend` would accept ``event`` now.

        Raises
        ------
        UnsupportedEventError
            If the ledger's accountant cannot account ``event``.
        """
        self._refresh()
        return self._within_budget(self._would_spend(event)[1])

    def _charge(self, kind: str, event: DpEvent, label: str | None, active: bool):
        if label is not None and not isinstance(label, str):
            raise InvalidPrivacyParameter(f"label must be a string or None, got {label!r}")
        with self._write() as tx:
            self._sync(tx)
            trial, eps, conv = self._would_spend(event)
            if not self._within_budget(eps):
                if active:
                    raise BudgetExceededError(
                        f"{label or 'a private fit'} spending {event!r} in the active budget "
                        f"{self!r} {self._exhausted(event, eps)}; nothing was fitted or recorded"
                    )
                raise BudgetExceededError(
                    f"spending {event!r} {self._exhausted(event, eps)}; nothing was recorded"
                )
            body = {"event": event.to_dict(), "label": label, "time": now(), "pid": os.getpid(),
                    "host": socket.gethostname()}  # fmt: skip
            rec = self._chain.append(tx, kind, body)
            self._state.apply(rec.seq, kind, body)
            self._acc, self._conv[rec.seq] = trial, conv
            self._total = (rec.seq, eps)  # the total after this record (commit reuses it)
        return eps, rec.seq

    def _append_history(self, event: DpEvent, label: str | None, **extra: Any) -> None:
        """Record an event already spent elsewhere, without a budget check (the replay
        of a saved ledger or an imported one: history, not a new spend)."""
        with self._write() as tx:
            self._sync(tx)
            try:
                self._would_spend(event)
            except UnsupportedEventError as exc:
                raise InvalidPrivacyParameter(
                    f"cannot replay the serialized Ledger's event {event!r}: {exc}"
                ) from None
            body = {"event": event.to_dict(), "label": label, "time": now(), **extra}
            self._apply(self._chain.append(tx, "spend", body))

    def spend(self, event: DpEvent, label: str | None = None) -> float:
        """Record ``event`` if the total stays within budget (a reservation committed
        at once: for an event whose release has already happened or is certain).

        Parameters
        ----------
        event : DpEvent
        label : str, optional
            A note (e.g. the estimator and dataset) stored with the event.

        Returns
        -------
        float
            The total ε spent after this event, at the ledger's δ, for the
            ledger's relation.

        Raises
        ------
        BudgetExceededError
            If the total ε would exceed the budget; the message gives the
            would-be ε and nothing is recorded.
        UnsupportedEventError
            If the accountant cannot account ``event`` (or it is a replace-one
            event in an add/remove ledger); nothing is recorded.
        LedgerIntegrityError
            If the store's records fail their hash-chain check.
        """
        return self._charge("spend", event, label, active=False)[0]

    def reserve(self, event: DpEvent, label: str | None = None) -> Reservation:
        """Charge ``event`` *before* a fit reads its data; settle it after.

        One transaction checks the budget (with every charge so far, other
        processes' reservations included) and records the reservation.  Then either
        :meth:`Reservation.commit` (the fit succeeded: with the event it reports, a
        label, the model file and its hash) or :meth:`Reservation.cancel` (it failed
        before releasing anything).  A reservation never settled — the process was
        killed — stays charged: "reserved, outcome unknown".

        Parameters
        ----------
        event : DpEvent
            A valid bound of the fit, computed from public values only (its
            calibrated (ε, δ), or its event when that is a function of public
            constants, as for DP-SGD).
        label : str, optional

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetExceededError, UnsupportedEventError, LedgerIntegrityError
            As :meth:`spend`; nothing is recorded.
        """
        return self._reserve(event, label, active=False)

    def _reserve(self, event: DpEvent, label: str | None, active: bool) -> Reservation:
        return Reservation(self, self._charge("reserve", event, label, active)[1], event, label)

    def commit(
        self,
        reservation: Reservation,
        event: DpEvent | None = None,
        *,
        label: str | None = None,
        model: str | os.PathLike | None = None,
        model_sha256: str | None = None,
    ) -> LedgerEntry:
        """Settle ``reservation`` after a successful fit.

        ``event`` (optional) is the event the fit reports; the budget keeps whichever
        of it and the reserved event gives the smaller total — both bound the same
        fit, so the smaller total is still valid — and records which.  ``model`` and
        ``model_sha256`` name the model file to be written after this commit.

        Raises
        ------
        InvalidPrivacyParameter
            The reservation is not this ledger's, or is already settled.
        """
        slot = self._open_slot(reservation)
        with self._write() as tx:
            self._sync(tx)
            slot = self._open_slot(reservation)
            use_actual = False
            if event is not None and event != slot.planned:
                use_actual = self._actual_is_tighter(slot, event)
            body = {
                "reservation": slot.id,
                "event": None if event is None else event.to_dict(),
                "accounted": "actual" if use_actual else "reserved",
                "label": label,
                "time": now(),
                "model": None if model is None else os.fspath(model),
                "model_sha256": model_sha256,
            }
            self._apply(self._chain.append(tx, "commit", body))
        return slot.entry(self._conv.get(slot.id))

    def _actual_is_tighter(self, slot: Slot, event: DpEvent) -> bool:
        last, cached = getattr(self, "_total", (None, None))
        same = last == self._chain.last[0] and self._acc is not None
        current = cached if same else self._accountant().get_epsilon(self.delta)
        trial = self._empty.copy()
        try:
            for other in self._state.live():
                trial.compose(event if other is slot else other.effective)
        except UnsupportedEventError:
            return False
        return trial.get_epsilon(self.delta) <= current

    def cancel(self, reservation: Reservation, reason: str = "cancelled") -> None:
        """Free ``reservation``: the fit failed before releasing anything.

        Raises
        ------
        InvalidPrivacyParameter
            The reservation is not this ledger's, or is already settled.
        """
        with self._write() as tx:
            self._sync(tx)
            slot = self._open_slot(reservation)
            body = {"reservation": slot.id, "reason": str(reason), "time": now()}
            self._apply(self._chain.append(tx, "cancel", body))

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

    def _exhausted(self, event: DpEvent, eps: float) -> str:
        """Which of the budget's δ and ε the event would exhaust, in words."""
        need = event.delta if isinstance(event, EpsilonDelta) else 0.0
        n = len(self._state.live())
        if eps == float("inf") or need > self._remaining_delta_now() * (1.0 + ROUNDING_SLACK):
            return (
                f"would exhaust the budget's DELTA: it needs delta={need:.3g} but only "
                f"{self._remaining_delta_now():.3g} of delta={self.delta:g} remains "
                f"({self._delta_spent_now():.3g} already spent by {n} fit(s)); "
                "give the fit a smaller delta, or leave delta=None (the default then takes "
                "a share of the remaining delta)"
                + (
                    " — a budget with delta=0 holds only pure-epsilon fits"
                    if not self.delta
                    else ""
                )
            )
        return (
            f"would exhaust the budget's EPSILON: the total would be epsilon={eps:.6g} at "
            f"delta={self.delta:g} ({self.neighbouring}), above the budget "
            f"epsilon={self.epsilon:g} (already spent {self._spent_now():.6g})"
        )

    def spent(self) -> tuple[float, float]:
        """(ε, δ) spent so far (reservations included): the accountant's ε at the
        ledger's δ, and that δ."""
        self._refresh()
        if not self._state.live():
            return 0.0, 0.0
        return self._spent_now(), self.delta

    def remaining_epsilon(self) -> float:
        """Budget ε minus the ε spent (≥ 0).

        Note that ε does not compose additively under every accountant, so the
        remaining ε is a summary, not what a next event may cost; use
        :meth:`can_spend`, or calibrate against :attr:`accountant`.
        """
        return max(0.0, self.epsilon - self.spent()[0])

    # ------------------------------------------------------------ active budget
    @contextlib.contextmanager
    def active(self) -> Iterator[Ledger]:
        """Make this ledger the budget of every dperm private fit inside the block.

        Each fit reserves the event it is calibrated to before it reads its data
        (:func:`~dperm.accounting.active.charge`) and commits it after; a fit that
        would exceed the budget raises :class:`~dperm.exceptions.BudgetExceededError`
        and runs nothing.  Blocks nest: a fit charges every active ledger (and is
        refused if any is full).  joblib's default backend is "sequential" inside the
        block (:mod:`dperm.accounting.active`).

        Yields
        ------
        Ledger
            ``self``.

        Examples
        --------
        >>> import numpy as np
        >>> from dperm import DPLogisticRegression, Ledger
        >>> X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(200, 2))
        >>> y = np.where(X[:, 0] > 0, 1, -1)
        >>> ledger = Ledger(epsilon=1.5, delta=1e-3)
        >>> with ledger.active():
        ...     _ = DPLogisticRegression(epsilon=1.0, classes=[-1, 1], random_state=0).fit(X, y)
        >>> [e.label for e in ledger.entries], ledger.spent()[0] <= 1.0
        (['DPLogisticRegression'], True)
        """
        with activated(self):
            yield self

    # ------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible snapshot (budget, relation, accountant, entries);
        reservations still open are saved as entries (they are charged)."""
        return ledger_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ledger:
        """An in-memory ledger from :meth:`to_dict` output, replaying its events.

        Version-1 files (written before relations were recorded) load with
        their events as replace-one events.

        Raises
        ------
        InvalidPrivacyParameter
            If ``data`` is not a serialized ledger, or its events cannot be
            replayed.
        """
        return ledger_from_dict(cls, data)

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_dict` as JSON to ``path``, atomically (temporary file,
        fsync, rename).  A snapshot: for a ledger shared across processes use
        :meth:`open` (``dperm budget export`` writes a store's hash-chained records)."""
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True)
        atomic_write_text(path, text + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Ledger:
        """Read a ledger written by :meth:`save` (into memory).

        Raises
        ------
        DataFileNotFoundError
            If ``path`` does not exist.
        InvalidPrivacyParameter
            If the file is not a saved ledger.
        """
        if not os.path.isfile(path):
            raise DataFileNotFoundError(f"no ledger file at {os.fspath(path)!r}")
        with open(path, encoding="utf-8") as fh:
            try:
                data = json.load(fh)
            except json.JSONDecodeError as exc:
                raise InvalidPrivacyParameter(
                    f"{os.fspath(path)} is not valid JSON: {exc}"
                ) from None
        return cls.from_dict(data)

    def __repr__(self) -> str:
        live = self._state.live()
        eps = self._spent_now()
        how = f", certified by {self._certified_now()!r}" if live else ""
        where = "" if self._location is None else f" [{self.name!r} in {self.location}]"
        return (
            f"Ledger(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"accountant={self._accountant().name!r}, neighbouring={self.neighbouring!r}){where}: "
            f"{len(live)} spend(s), epsilon spent {eps:.4g}{how}"
        )


@contextlib.contextmanager
def budget(
    epsilon: float | str | os.PathLike | None = None,
    delta: float | None = None,
    accountant: str | Accountant | Callable[[], Accountant] = "auto",
    *,
    location: str | os.PathLike | None = None,
    name: str | None = None,
) -> Iterator[Ledger]:
    """``with dperm.budget(epsilon, delta) as ledger:`` — a new in-memory
    :class:`Ledger` made active for the block (:meth:`Ledger.active`);
    ``with dperm.budget("budget.db"):`` — the budget kept in a store.

    Parameters
    ----------
    epsilon : float > 0, or a location
        Total ε of every dperm private fit inside the block; or (a path or a
        ``postgresql://`` URL) the store of a budget shared by every process that
        opens it (:meth:`Ledger.open`); ``budget(location="budget.db", epsilon=1,
        delta=1e-5)`` creates it when it is missing.
    delta : float in [0, 1)
        Total δ; the ledger's accountant reports ε at this δ.  Fits with δ > 0 (the
        estimators' default δ = 1/n², for instance) need a budget δ > 0: with δ = 0
        their ε is infinite.
    accountant : str, Accountant or callable, default "auto"
    location : str or PathLike, optional
        The store (instead of giving it as the first argument).
    name : str, optional
        The budget's name in the store (default "default").

    Yields
    ------
    Ledger

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``epsilon`` or ``delta``.
    BudgetExceededError
        (From a fit inside the block) when its (ε, δ) would exceed the budget.

    Examples
    --------
    >>> import numpy as np
    >>> import dperm
    >>> from sklearn.model_selection import GridSearchCV
    >>> X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(300, 2))
    >>> y = np.where(X[:, 0] > 0, 1, -1)
    >>> grid = GridSearchCV(dperm.DPLogisticRegression(epsilon=1.0, classes=[-1, 1]),
    ...                     {"alpha": [0.01, 0.1, 1.0]}, cv=3, error_score="raise")
    >>> with dperm.budget(epsilon=3.0, delta=1e-3) as ledger:
    ...     grid.fit(X, y)
    Traceback (most recent call last):
    ...
    dperm.exceptions.BudgetExceededError: ...
    >>> len(ledger.entries)  # the three fits that fitted in the budget
    3
    """
    if isinstance(epsilon, str | os.PathLike):
        location, epsilon = epsilon, None
    if location is not None:
        acc = accountant if isinstance(accountant, str) else None
        ledger = Ledger.open(
            location, name, epsilon=epsilon, delta=delta, accountant=None if acc == "auto" else acc
        )
    else:
        if epsilon is None or delta is None:
            raise InvalidPrivacyParameter(
                "dperm.budget needs epsilon and delta (an in-memory budget) or a location "
                "(a budget kept in a store)"
            )
        ledger = Ledger(epsilon, delta, accountant)
    with ledger.active():
        yield ledger
