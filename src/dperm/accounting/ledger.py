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
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .._validation import check_delta, check_epsilon
from ..exceptions import (
    InvalidPrivacyParameter,
    LedgerStoreError,
    UnsupportedEventError,
)
from ..stores import LedgerKey, MemoryStore, Record, Store, as_key, check_budget_name, open_store
from ..stores.registry import has_genesis, register_budget
from .active import activated, active_ledgers, charge, default_delta, suspended
from .auto import AutoAccountant
from .base import Accountant
from .events import DpEvent, check_neighbouring
from .ledger_admission import Held, LedgerAdmission
from .ledger_persist import LedgerSnapshots
from .ledger_state import RESERVED, LedgerEntry, Slot, now
from .registry import accountant_factory

__all__ = [
    "DEFAULT_BUDGET",
    "Held",
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


class Ledger(LedgerAdmission, LedgerSnapshots):
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
        acc, body = self._new_budget(epsilon, delta, accountant, neighbouring)
        self._attach(MemoryStore(), DEFAULT_BUDGET, location=None)
        with self._write() as tx:
            self._create(tx, acc, body)

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
        key: LedgerKey | str | os.PathLike | None = None,
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
            The budget's name (one store holds several, e.g. one per dataset): 1 to
            100 printable characters, no leading or trailing space.
        epsilon, delta : float, optional
            The budget of a new one (δ default 1e-5).  For an existing budget they
            must equal what it was created with (a budget is fixed at creation).  A
            budget is created this way only in a new store or in one that records
            the budgets it has held (:mod:`dperm.stores.registry`) — never in a store
            that was emptied, never under the name of a budget that was deleted; use
            :meth:`create` to create one explicitly.
        accountant : str, optional
            An accountant *name* for a new budget (default "auto").
        neighbouring : {"replace-one", "add-remove"}, optional
            The relation of a new budget (default replace-one).
        key : LedgerKey or path, optional
            The key of a signed budget (:mod:`dperm.stores.signing`): every record is
            checked against it and every record written is signed.  A new budget
            created with a key is signed; a signed budget opened without its key can
            be read, not written.

        Returns
        -------
        Ledger

        Raises
        ------
        LedgerStoreError
            No such budget and no ``epsilon``; the location is not a store, or
            cannot be reached; a key that is not the budget's.
        DataFileNotFoundError
            No file at ``location`` and no ``epsilon``.
        LedgerIntegrityError
            The budget's records fail their hash-chain check (the entry is named), or
            their key's; the budget was deleted from the store.
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
        return cls._open(location, name, epsilon, delta, accountant, neighbouring, key, False)

    @classmethod
    def create(
        cls,
        location: str | os.PathLike | Store,
        name: str | None = None,
        *,
        epsilon: float,
        delta: float = 1e-5,
        accountant: str | None = None,
        neighbouring: str | None = None,
        key: LedgerKey | str | os.PathLike | None = None,
    ) -> Ledger:
        """Create the budget ``name`` in the store at ``location`` (the file is created
        if needed) — refused when the store holds one of that name, or held one whose
        records were deleted.  Parameters as :meth:`open`; with ``key`` the budget is
        signed.

        Raises
        ------
        LedgerStoreError
            The budget exists.
        LedgerIntegrityError
            The store registered a budget of that name whose records are gone.
        """
        if epsilon is None:
            raise InvalidPrivacyParameter("Ledger.create needs the budget's epsilon")
        return cls._open(location, name, epsilon, delta, accountant, neighbouring, key, True)

    @classmethod
    def _open(cls, location, name, epsilon, delta, accountant, neighbouring, key, explicit):
        name = DEFAULT_BUDGET if name is None else check_budget_name(name)
        key = as_key(key)
        if epsilon is not None:  # every parameter checked before a file is created
            acc, body = cls._new_budget(
                epsilon, 1e-5 if delta is None else delta, accountant or "auto", neighbouring
            )
        store = open_store(location, create=epsilon is not None)
        ledger = cls.__new__(cls)
        ledger._attach(store, name, location, key)
        with ledger._write() if epsilon is not None else ledger._read() as tx:
            if tx.head() is not None:
                if explicit:
                    raise LedgerStoreError(
                        f"{store.location} already holds a budget named {name!r}; a budget "
                        "is fixed when it is created (choose another name)"
                    )
                ledger._sync(tx)
            elif epsilon is None:
                try:
                    ledger._sync(tx)  # raises; a budget its key has seen: "emptied"
                except LedgerStoreError:
                    raise LedgerStoreError(
                        f"no budget named {name!r} in {store.location}; create it with "
                        "`dperm budget create` or give epsilon (and delta)"
                    ) from None
            else:
                if not (explicit or store.created or has_genesis(tx)):
                    raise LedgerStoreError(
                        f"{store.location} holds no budget named {name!r} and no record of the "
                        "budgets it held (a store emptied, or written by an earlier dperm): "
                        "no budget is created in it implicitly — create it explicitly "
                        "(`dperm budget create`; Ledger.create)"
                    )
                ledger._create(tx, acc, body)
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

    @staticmethod
    def _new_budget(epsilon, delta, accountant, neighbouring) -> tuple[Accountant, dict]:
        """(empty accountant, record-0 body) of a new budget, every parameter checked."""
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
        }
        return acc, body

    def _create(self, tx, acc: Accountant, body: dict) -> None:
        """Append record 0 (signed with the ledger's key, if any) and register the
        budget in the store's chain, in the transaction ``tx``."""
        body = {**body, "time": now()}
        if self._chain.key is not None:
            body["signed"] = self._chain.key.spec()
        self._empty = acc
        rec = self._chain.append(tx, "create", body)
        register_budget(self._store, tx, rec)
        self._apply(rec)

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

    def reserve(
        self,
        event: DpEvent | Callable[[float], DpEvent],
        label: str | None = None,
        *,
        wait: float | None = None,
    ) -> Reservation:
        """Charge ``event`` *before* a fit reads its data; settle it after.

        One transaction checks the budget (with every charge so far, other
        processes' reservations included, composed by the budget's accountant exactly
        as committed entries) and records the reservation.  Then either
        :meth:`Reservation.commit` (the fit succeeded: with the event it reports, a
        label, the model file and its hash) or :meth:`Reservation.cancel` (it failed
        before releasing anything).  A reservation never settled — the process was
        killed — stays charged: "reserved, outcome unknown".

        Parameters
        ----------
        event : DpEvent or callable
            A valid bound of the fit, computed from public values only (its
            calibrated (ε, δ), or its exact event when that is a function of public
            constants, as for DP-SGD: exact events compose tighter).  Or a function of
            the budget's remaining δ returning one, called inside the reservation's
            transaction — e.g. a default δ that takes a share of what remains, which
            two processes reserving at once then never both take.
        label : str, optional
        wait : float, optional
            Seconds to wait when the budget refuses ``event`` only because of other
            fits' open reservations (it would fit without them): the reservation is
            tried again as they settle — committed with the events their fits report,
            often tighter than the reserved ones, or cancelled — until it fits or the
            time is up.  None (default): refuse at once.

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetExceededError
            As :meth:`spend`; the message says how much the open reservations hold and
            whether the event would fit without them.  Nothing is recorded.
        UnsupportedEventError, LedgerIntegrityError
            As :meth:`spend`; nothing is recorded.
        InvalidPrivacyParameter
            ``wait`` is not a number of seconds ≥ 0.
        """
        return self._reserve(event, label, active=False, wait=wait)

    def _reserve(
        self, event: DpEvent, label: str | None, active: bool, wait: float | None = None
    ) -> Reservation:
        _, seq, resolved = self._charge("reserve", event, label, active, wait)
        return Reservation(self, seq, resolved, label)

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
    key: LedgerKey | str | os.PathLike | None = None,
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
    key : LedgerKey or path, optional
        The key of a signed budget in the store (:meth:`Ledger.open`).

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
            location,
            name,
            epsilon=epsilon,
            delta=delta,
            accountant=None if acc == "auto" else acc,
            key=key,
        )
    else:
        if key is not None:
            raise InvalidPrivacyParameter("a key signs a budget kept in a store: give location")
        if epsilon is None or delta is None:
            raise InvalidPrivacyParameter(
                "dperm.budget needs epsilon and delta (an in-memory budget) or a location "
                "(a budget kept in a store)"
            )
        ledger = Ledger(epsilon, delta, accountant)
    with ledger.active():
        yield ledger
