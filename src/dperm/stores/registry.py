"""The store's own chain: its genesis and every budget it has held.

Deleting every record of a budget leaves no broken chain behind — nothing of it is
left to check.  So each store keeps one more hash chain, :data:`STORE_CHAIN` (a name no
budget can have): record 0 is the store's *genesis* (a random store id and the time),
and each budget created or imported is registered there (kind ``"budget"``: its name
and the hash of its record 0) in the same transaction that writes the budget's record
0.  Then

* ``dperm budget verify`` (:func:`check_store`) fails on a store whose registered
  budget is missing or was recreated (another record 0), and on a store with no budget
  at all;
* creating a budget under a registered name is refused (:func:`register_budget`): a
  deleted budget is never silently recreated with a fresh ε.

Someone who can write the store can delete this chain too; a store that has budgets and
no genesis is one written by a dperm before it (it gets one at its next budget), and a
store with neither is indistinguishable from a new one.  A signed budget's key keeps
its own witness of what it has seen (:mod:`dperm.stores.signing`).
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import LedgerIntegrityError, LedgerStoreError
from .records import STORE_CHAIN, BudgetChain, Record, Store, Transaction, check_records

__all__ = [
    "StoreCheck",
    "append_genesis",
    "check_store",
    "copy_chain",
    "has_genesis",
    "register_budget",
    "registered_budgets",
]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def has_genesis(tx: Transaction) -> bool:
    """Whether the store of ``tx`` has its genesis record (inside ``tx``)."""
    return tx.other(STORE_CHAIN).head() is not None


def append_genesis(chain: BudgetChain, tx: Transaction) -> None:
    """Append the store's genesis (record 0 of :data:`STORE_CHAIN`: a random store id
    and the time) with ``chain``, a reader of that chain, in the write transaction ``tx``
    of a store that has none."""
    chain.append(tx, "create", {"store": "dperm.LedgerStore", "id": uuid.uuid4().hex,
                                "time": _now()})  # fmt: skip


def register_budget(store: Store, tx: Transaction, record0: Record, *, imported: bool = False):
    """Register the budget whose record 0 is ``record0`` in the store's chain, inside
    the write transaction ``tx`` that appends ``record0`` (the genesis first, for a
    store that has none).  A budget registered with the same record 0 (an import
    repeated) is left as is.

    Raises
    ------
    LedgerIntegrityError
        A budget of that name was registered with another record 0: its records were
        deleted (and nothing is created in its place).
    """
    stx = tx.other(STORE_CHAIN)
    chain = BudgetChain(store, STORE_CHAIN)
    if stx.head() is None:
        append_genesis(chain, stx)
    else:
        chain.sync(stx)
    for rec in chain.records:
        if rec.kind == "budget" and rec.body.get("name") == record0.budget:
            if rec.body.get("record0") == record0.hash:
                return
            raise LedgerIntegrityError(
                f"budget {record0.budget!r} was created in {store.location} at "
                f"{rec.body.get('time')} (entry #0 {str(rec.body.get('record0'))[:16]}…) and "
                "its records are gone: the store was emptied or partly restored. dperm does "
                "not create a budget of that name again — restore the store from a backup or "
                "an export (or choose another name)",
                budget=record0.budget,
            )
    body = {"name": record0.budget, "record0": record0.hash, "time": _now()}
    if imported:
        body["imported"] = True
    chain.append(stx, "budget", body)


def registered_budgets(store: Store) -> dict[str, dict[str, Any]] | None:
    """The budgets the store's chain registers (name → the registration's body), or
    None for a store without a genesis record.

    Raises
    ------
    LedgerIntegrityError
        The store's chain does not check.
    """
    chain = BudgetChain(store, STORE_CHAIN)
    with store.transaction(STORE_CHAIN, write=False) as tx:
        if tx.head() is None:
            return None
        chain.sync(tx)
    return {r.body["name"]: r.body for r in chain.records if r.kind == "budget"}


@dataclass
class StoreCheck:
    """What :func:`check_store` found: the budgets, and whether the store has a genesis."""

    budgets: list[str]
    genesis: bool
    registered: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_store(store: Store, key: Any = None) -> StoreCheck:
    """The store-level part of ``dperm budget verify``: the store's own chain, every
    budget it registered still there with the same record 0, every budget the key has
    seen still there — and at least one budget.

    Raises
    ------
    LedgerIntegrityError
        A registered (or, with ``key``, witnessed) budget is missing or was recreated;
        the store holds no budget although it registered some.
    LedgerStoreError
        The store holds no budget and has no genesis (nothing to verify).
    """
    names = store.budgets()
    registry = registered_budgets(store)
    missing = []
    for name, body in (registry or {}).items():
        if name not in names:
            missing.append(f"{name!r} (created {body.get('time')})")
            continue
        with store.transaction(name, write=False) as tx:
            first = tx.records(-1)[:1]
        if not first or first[0].hash != body.get("record0"):
            raise LedgerIntegrityError(
                f"budget {name!r} in {store.location} is not the budget registered under that "
                f"name at {body.get('time')} (its entry #0 differs): it was deleted and "
                "created again",
                budget=name,
            )
    if key is not None:
        for name, (seq, _) in key.witnessed(store.identity).items():
            if name not in names and all(not m.startswith(repr(name)) for m in missing):
                missing.append(f"{name!r} (the key saw its entry #{seq})")
    if missing:
        raise LedgerIntegrityError(
            f"{store.location}: the budget(s) {', '.join(missing)} are gone — the store was "
            "emptied or partly restored; restore it from a backup or an export"
        )
    if not names:
        raise LedgerStoreError(
            f"{store.location} holds no budget and no record that it held one: nothing to "
            "verify (create one with `dperm budget create`)"
        )
    check = StoreCheck(names, registry is not None, sorted(registry or {}))
    if registry is None:
        check.notes.append(
            "no genesis record (a store written by an earlier dperm): a budget deleted "
            "whole would not be noticed; the next budget created adds one"
        )
    return check


def copy_chain(store: Store, budget: str, records: Sequence[Record]) -> int:
    """Append to ``store`` the records of ``budget`` it does not hold yet — an import —
    and register the budget in the store's chain.

    ``records`` is a whole chain (checked here); the store's own records of that budget
    must be a prefix of it (the same hashes), so an import never rewrites history.

    Returns
    -------
    int
        The number of records appended.

    Raises
    ------
    LedgerIntegrityError
        ``records`` does not chain, the store's history of the budget differs, or the
        store registered another budget of that name.
    """
    check_records(budget, records)
    chain = BudgetChain(store, budget)
    with store.transaction(budget, write=True) as tx:
        if tx.head() is not None:
            chain.sync(tx)
        mine = chain.records
        if len(mine) > len(records) or any(
            a.hash != b.hash for a, b in zip(mine, records, strict=False)
        ):
            raise LedgerIntegrityError(
                f"budget {budget!r} in {store.location} has a history that differs from the "
                "imported one (they split at some entry): nothing imported",
                budget=budget,
            )
        for rec in records[len(mine) :]:
            tx.append(rec)
        if records:
            register_budget(store, tx, records[0], imported=not mine)
    return len(records) - len(mine)
