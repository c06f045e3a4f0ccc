"""The part of a :class:`~dperm.accounting.Ledger` that keeps its history in step with
its store: transactions, the replay of records (verified against their hash chain)
into the accountant, and the budget's fixed header.

Every read of a stored ledger first reads what other processes appended since
(:meth:`LedgerSync._refresh`); every write (a spend, a reservation, a commit or a
cancel) does the same inside its write transaction, checks, and appends — one atomic
step in the store (:mod:`dperm.stores`).  The accountant composes the charged events
incrementally and is rebuilt from the live slots when one leaves the history
(cancelled) or changes its event (committed with the event the fit reported).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from ..exceptions import InvalidPrivacyParameter, LedgerStoreError, UnsupportedEventError
from ..stores import (
    BudgetChain,
    LedgerKey,
    Record,
    SqliteStore,
    Store,
    check_budget_name,
    open_store,
)
from ..stores.sql import ConnectionStore
from .auto import AutoAccountant
from .base import Accountant
from .events import DpEvent, EpsilonDelta
from .ledger_state import RESERVED, LedgerState, Slot, now
from .registry import get_accountant

__all__ = ["ROUNDING_SLACK", "LedgerSync"]

ROUNDING_SLACK = 1e-12


def _reopen(location: Any, store: Store) -> Store:
    """The store of a ledger in a process forked from the one that opened it: its own
    connection (a SQLite or PostgreSQL connection must not cross a fork:
    https://sqlite.org/howtocorrupt.html, 2.6).

    Raises
    ------
    LedgerStoreError
        A ledger opened on a store object that holds a connection this process cannot
        open again (a PostgreSQL store: its URL's password is not kept).
    """
    if isinstance(location, str | os.PathLike):
        return open_store(location)
    if isinstance(store, SqliteStore):
        return SqliteStore(store.path)
    if isinstance(store, ConnectionStore):
        raise LedgerStoreError(
            f"the ledger on {store!r} was opened by process {store._pid} on a store object: "
            f"process {os.getpid()}, forked from it, cannot share its connection — open the "
            "ledger by its location (Ledger.open(URL), dperm.budget(URL))"
        )
    return store  # a JSON store keeps no handle open; a memory store is this process's copy


class LedgerSync:
    """Base of :class:`~dperm.accounting.Ledger`: its store and its replayed state."""

    _store: Store
    _chain: BudgetChain
    _state: LedgerState

    def _attach(self, store: Store, name: str, location: Any, key: LedgerKey | None = None):
        self._store, self._location, self._pid = store, location, os.getpid()
        self._chain = BudgetChain(store, check_budget_name(name), key)
        self._state = LedgerState(name)
        self._empty: Accountant | None = None  # a pristine accountant of the budget
        self._acc: Accountant | None = None  # the live slots composed (None: rebuild)
        self._conv: dict[int, DpEvent | None] = {}
        #: seconds the last write transaction held the store's lock (benchmarks)
        self._lock_seconds = 0.0

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[Any]:
        if os.getpid() != self._pid and self._location is not None:  # forked: own connection
            self._store, self._pid = _reopen(self._location, self._store), os.getpid()
            self._chain.store = self._store
        appended = self._chain.appended
        started = time.perf_counter()
        try:
            with self._store.transaction(self._chain.budget, write=write) as tx:
                started = time.perf_counter()
                yield tx
        except BaseException:
            if self._chain.appended > appended:  # our record was rolled back: replay anew
                empty, key = self._empty, self._chain.key
                self._attach(self._store, self._chain.budget, self._location, key)
                self._empty = empty
                if self._location is not None:
                    with contextlib.suppress(Exception):
                        self._refresh()
            raise
        if write:
            self._lock_seconds = time.perf_counter() - started
        if self._chain.appended > appended and self._chain.key is not None:
            self._witness()

    def _witness(self) -> bool:
        """Record the head in the key's witness (a signed budget written or verified)."""
        return self._chain.key.witness(self._store.identity, self.name, self._chain.last, now())

    def _write(self) -> contextlib.AbstractContextManager:
        return self._transaction(write=True)

    def _read(self) -> contextlib.AbstractContextManager:
        return self._transaction(write=False)

    def _sync(self, tx) -> None:
        for rec in self._chain.sync(tx):
            self._apply(rec)

    def _refresh(self) -> None:
        """Read what other processes appended (a no-op for an in-memory ledger)."""
        if self._location is not None:
            with self._read() as tx:
                self._sync(tx)

    def _apply(self, rec: Record) -> None:
        slot = self._state.apply(rec.seq, rec.kind, rec.body)
        if rec.kind == "create":
            if self._empty is None:
                spec = rec.body["accountant"]
                self._empty = get_accountant(spec["name"], **spec.get("config", {}))
            self._acc = self._empty.copy()
        elif rec.kind in ("reserve", "spend"):
            if self._acc is not None:
                self._compose(self._acc, slot)
        elif rec.kind == "cancel" or slot.use_actual:
            self._acc = None  # a slot left the history or changed its event: rebuild

    def _compose(self, acc: Accountant, slot: Slot) -> None:
        before = len(acc.conversions)
        try:
            acc.compose(slot.effective)
        except UnsupportedEventError as exc:
            raise InvalidPrivacyParameter(
                f"cannot replay the ledger's event {slot.effective!r}: {exc}"
            ) from None
        self._conv[slot.id] = (
            acc.conversions[-1].converted if len(acc.conversions) > before else None
        )

    def _accountant(self) -> Accountant:
        if self._acc is None:
            acc = self._empty.copy()
            for slot in self._state.live():
                self._compose(acc, slot)
            self._acc = acc
        return self._acc

    @property
    def _header(self) -> dict[str, Any]:
        return self._state.header

    # ------------------------------------------------------------------ API
    @property
    def epsilon(self) -> float:
        """The budget's total ε."""
        return float(self._header["epsilon"])

    @property
    def delta(self) -> float:
        """The budget's total δ."""
        return float(self._header["delta"])

    @property
    def name(self) -> str:
        """The budget's name in its store ("default" for an in-memory ledger)."""
        return self._chain.budget

    @property
    def location(self) -> str:
        """Where the ledger is kept: a path, a URL without password, or "memory"."""
        return self._store.location

    @property
    def neighbouring(self) -> str:
        """The relation the budget and every reported ε are for."""
        return str(self._header["neighbouring"])

    def _open_slot(self, reservation: Any) -> Slot:
        slot = self._state.slots.get(getattr(reservation, "id", None))
        if getattr(reservation, "ledger", None) is not self or slot is None:
            raise InvalidPrivacyParameter(f"{reservation!r} is not a reservation of {self!r}")
        if slot.status != RESERVED:
            raise InvalidPrivacyParameter(
                f"reservation #{slot.id} of {self!r} is already {slot.status}"
            )
        return slot

    def verify(self) -> tuple[int, str]:
        """Read the whole history again and check every hash and the head.

        With the budget's key (a signed budget opened with ``key=``) every record's
        MAC is checked too, the head must extend the key's witness, and the witness
        then records this head.

        Returns
        -------
        (int, str)
            The number and hash of the last record (write it down elsewhere: a
            later ``verify`` that still finds it proves nothing before it changed).

        Raises
        ------
        LedgerIntegrityError
            Naming the first record that does not chain (or is not signed by the key,
            or a head behind the key's witness).
        """
        fresh = type(self).__new__(type(self))
        fresh._attach(self._store, self.name, self._location, self._chain.key)
        with fresh._read() as tx:
            fresh._sync(tx)
        fresh._accountant()
        if fresh._chain.key is not None:
            fresh._witness()
        return fresh._chain.last

    def close(self) -> None:
        """Close the store's connection (a stored ledger; nothing for one in memory)."""
        self._store.close()

    def _delta_spent_now(self) -> float:
        live = (s.effective for s in self._state.live())
        return float(sum(e.delta for e in live if isinstance(e, EpsilonDelta)))

    def _remaining_delta_now(self) -> float:
        return max(0.0, self.delta - self._delta_spent_now())

    def _within_budget(self, eps: float) -> bool:
        # Budgets summed in floating point (0.1 + 0.1 + 0.8) exceed the exact sum by a few ulps;
        # a relative slack of 1e-12 accepts them.  It is far below any accountant's own numerical
        # error (PLD discretisation, RDP order grid), so no claim above the budget is certified.
        return eps <= self.epsilon * (1.0 + ROUNDING_SLACK)

    def _spent_now(self) -> float:
        return self._accountant().get_epsilon(self.delta) if self._state.live() else 0.0

    def _certified_now(self) -> str:
        acc = self._accountant()
        return acc.best_method(self.delta)[0] if isinstance(acc, AutoAccountant) else acc.name
