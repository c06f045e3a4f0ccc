"""The records of a budget, their hash chain, and the protocol every store implements.

A store keeps, for each named budget, an append-only sequence of records numbered
0, 1, 2, … (record 0 creates the budget).  Each record carries the hash of the
record before it and its own hash — SHA-256 of its canonical JSON (budget name,
number, kind, body, previous hash) — so an edited, reordered, inserted or deleted
record breaks the chain at that record.  Each budget also keeps a *head* (the
number and hash of its last record), written in the same transaction as the
record: a store truncated after its last record disagrees with its head.

This is tamper-*evident*, not tamper-proof: whoever can write the store can also
recompute every hash.  It catches accidental edits, partial restores, a row
deleted by hand and the naive "lower that ε" edit; a signed or off-site copy of
the head (``dperm budget verify`` prints it) catches the rest.

Nothing here knows about privacy: bodies are JSON objects that
:mod:`dperm.accounting.ledger` writes and reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..exceptions import LedgerIntegrityError, LedgerStoreError

__all__ = [
    "GENESIS",
    "BudgetChain",
    "Record",
    "Store",
    "Transaction",
    "canonical_json",
    "check_budget_name",
    "check_records",
    "copy_chain",
    "read_chain",
    "record_hash",
]

#: the "previous hash" of record 0
GENESIS = "0" * 64


def canonical_json(value: Any) -> str:
    """The one text of a JSON value that is hashed: sorted keys, no spaces, UTF-8,
    finite numbers only (``repr`` of a float round-trips exactly)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)  # fmt: skip
    except ValueError as exc:
        raise LedgerStoreError(f"a ledger record must be finite JSON: {exc}") from None


def record_hash(budget: str, seq: int, kind: str, body: dict[str, Any], prev_hash: str) -> str:
    """SHA-256 (hex) of a record's canonical JSON."""
    text = canonical_json(
        {"budget": budget, "seq": seq, "kind": kind, "body": body, "prev": prev_hash}
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_budget_name(name: Any) -> str:
    """A budget name: 1–100 printable characters, no leading or trailing space."""
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= 100
        or name != name.strip()
        or not name.isprintable()
    ):
        raise LedgerStoreError(f"a budget name must be 1 to 100 printable characters, got {name!r}")
    return name


@dataclass(frozen=True)
class Record:
    """One record of a budget's history.

    Attributes
    ----------
    budget : str
    seq : int
        Its number in the budget's history (0 creates the budget).
    kind : str
        ``"create"``, ``"reserve"``, ``"commit"``, ``"cancel"`` or ``"spend"``
        (:mod:`dperm.accounting.ledger`).
    body : dict
        JSON object.
    prev_hash, hash : str
        SHA-256 hex of the previous record and of this one.
    """

    budget: str
    seq: int
    kind: str
    body: dict[str, Any]
    prev_hash: str
    hash: str

    @classmethod
    def make(cls, budget: str, seq: int, kind: str, body: dict[str, Any], prev: str) -> Record:
        """A new record chained after ``prev``."""
        return cls(budget, seq, kind, body, prev, record_hash(budget, seq, kind, body, prev))

    def to_dict(self) -> dict[str, Any]:
        """The record as stored in a JSON store or an export."""
        return {
            "seq": self.seq,
            "kind": self.kind,
            "body": self.body,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }

    @classmethod
    def from_dict(cls, budget: str, data: Any) -> Record:
        """A record from :meth:`to_dict` (malformed → :class:`LedgerIntegrityError`)."""
        try:
            rec = cls(
                budget,
                data["seq"],
                data["kind"],
                data["body"],
                data["prev_hash"],
                data["hash"],
            )
        except (KeyError, TypeError):
            raise LedgerIntegrityError(
                f"budget {budget!r}: a record is malformed: {str(data)[:200]}", budget=budget
            ) from None
        if not (isinstance(rec.seq, int) and isinstance(rec.kind, str)):
            raise LedgerIntegrityError(
                f"budget {budget!r}: a record is malformed: {str(data)[:200]}", budget=budget
            )
        if not isinstance(rec.body, dict):
            raise LedgerIntegrityError(
                f"budget {budget!r}: entry #{rec.seq} has no JSON object body",
                budget=budget,
                entry=rec.seq,
            )
        return rec


class Transaction(Protocol):
    """One transaction on one budget of a store (the unit of atomicity).

    A write transaction holds the budget's lock from its start to its end (SQLite
    ``BEGIN IMMEDIATE``, a PostgreSQL row lock, an exclusive file lock): a check
    made inside it and the record appended after the check are atomic.
    """

    def head(self) -> tuple[int, str] | None:
        """(number, hash) of the budget's last record as the store's head records
        it, or None when the budget does not exist."""
        ...

    def records(self, after: int) -> list[Record]:
        """The records numbered above ``after``, in order (as stored, unchecked)."""
        ...

    def append(self, record: Record) -> None:
        """Append ``record`` and move the head to it (record 0 creates the budget)."""
        ...


class Store(Protocol):
    """Where budgets are kept: :class:`~dperm.stores.sqlite.SqliteStore`,
    :class:`~dperm.stores.postgres.PostgresStore`,
    :class:`~dperm.stores.jsonfile.JsonStore`,
    :class:`~dperm.stores.memory.MemoryStore`."""

    #: a description for messages (a path, or a URL without its password)
    location: str

    def transaction(self, budget: str, *, write: bool) -> contextlib.AbstractContextManager:
        """A :class:`Transaction` on ``budget`` (committed on a normal exit,
        rolled back on an exception)."""
        ...

    def budgets(self) -> list[str]:
        """The names of the budgets in the store, sorted."""
        ...

    def close(self) -> None:
        """Release the connection or file handles."""
        ...


class BudgetChain:
    """What a reader has verified of one budget's chain: the records so far and the
    (number, hash) of the last one.  :meth:`sync` reads and checks what others
    appended since; :meth:`append` chains a new record after the last one.

    Parameters
    ----------
    store : Store
    budget : str
    """

    def __init__(self, store: Store, budget: str) -> None:
        self.store = store
        self.budget = check_budget_name(budget)
        self.records: list[Record] = []
        self.broken: LedgerIntegrityError | None = None
        #: how many records this reader appended (a rolled-back one included)
        self.appended = 0

    @property
    def last(self) -> tuple[int, str]:
        """(number, hash) of the last verified record ((-1, GENESIS) before any)."""
        if not self.records:
            return -1, GENESIS
        return self.records[-1].seq, self.records[-1].hash

    def _fail(self, entry: int | None, what: str) -> LedgerIntegrityError:
        where = "" if entry is None else f"entry #{entry} "
        err = LedgerIntegrityError(
            f"budget {self.budget!r} in {self.store.location}: {where}{what}; the ledger "
            "refuses every further spend (dperm budget verify; restore the store from a "
            "backup or an export)",
            budget=self.budget,
            entry=entry,
        )
        self.broken = err
        return err

    def sync(self, tx: Transaction) -> list[Record]:
        """Read the records appended since the last verified one, check them against
        the chain and the head, keep them and return them.

        Raises
        ------
        LedgerIntegrityError
            The first record that does not chain (edited, reordered, inserted,
            deleted) or a head that disagrees with the records (truncation); it is
            raised again by every later call.
        LedgerStoreError
            The budget does not exist.
        """
        if self.broken is not None:
            raise self.broken
        head = tx.head()
        if head is None:
            if self.records:
                raise self._fail(None, "the budget's head is gone (its records were deleted)")
            raise LedgerStoreError(f"no budget named {self.budget!r} in {self.store.location}")
        seq, prev = self.last
        new = tx.records(seq)
        for rec in new:
            if rec.seq != seq + 1:
                missing = seq + 1 if rec.seq > seq + 1 else rec.seq
                raise self._fail(missing, "is missing or out of order (a record was deleted)")
            if rec.prev_hash != prev:
                raise self._fail(
                    rec.seq, "does not chain to the entry before it (reordered or replaced)"
                )
            if record_hash(self.budget, rec.seq, rec.kind, rec.body, rec.prev_hash) != rec.hash:
                raise self._fail(rec.seq, "was edited (its content does not match its hash)")
            if (rec.seq == 0) != (rec.kind == "create"):
                raise self._fail(rec.seq, f"has kind {rec.kind!r} at this position")
            seq, prev = rec.seq, rec.hash
        if head != (seq, prev):
            if head[0] > seq:
                raise self._fail(
                    seq + 1,
                    f"is missing: the head says the history has {head[0] + 1} entries"
                    f" but {seq + 1} remain (the store was truncated)",
                )
            raise self._fail(
                head[0] + 1 if head[0] < seq else seq,
                f"disagrees with the head (number {head[0]}, hash {head[1][:12]}…)",
            )
        self.records.extend(new)
        return new

    def append(self, tx: Transaction, kind: str, body: dict[str, Any]) -> Record:
        """Chain a new record after the last verified one (call :meth:`sync` first,
        in the same write transaction)."""
        seq, prev = self.last
        rec = Record.make(self.budget, seq + 1, kind, body, prev)
        tx.append(rec)
        self.records.append(rec)
        self.appended += 1
        return rec


def check_records(budget: str, records: Sequence[Record]) -> None:
    """Check a whole chain (an import): numbers 0..n-1, links and hashes.

    Raises
    ------
    LedgerIntegrityError
        Naming the first record that does not chain.
    """
    prev = GENESIS
    for i, rec in enumerate(records):
        bad = None
        if rec.seq != i:
            bad = "is missing or out of order"
        elif rec.prev_hash != prev:
            bad = "does not chain to the entry before it"
        elif record_hash(budget, rec.seq, rec.kind, rec.body, rec.prev_hash) != rec.hash:
            bad = "was edited (its content does not match its hash)"
        elif (i == 0) != (rec.kind == "create"):
            bad = f"has kind {rec.kind!r} at this position"
        if bad is not None:
            raise LedgerIntegrityError(
                f"budget {budget!r}: entry #{i} {bad}", budget=budget, entry=i
            )
        prev = rec.hash


def read_chain(store: Store, budget: str) -> list[Record]:
    """The verified records of ``budget`` (one read transaction).

    Raises
    ------
    LedgerIntegrityError, LedgerStoreError
        As :meth:`BudgetChain.sync`.
    """
    chain = BudgetChain(store, budget)
    with store.transaction(budget, write=False) as tx:
        chain.sync(tx)
    return chain.records


def copy_chain(store: Store, budget: str, records: Sequence[Record]) -> int:
    """Append to ``store`` the records of ``budget`` it does not hold yet — an import.

    ``records`` is a whole chain (checked here); the store's own records of that budget
    must be a prefix of it (the same hashes), so an import never rewrites history.

    Returns
    -------
    int
        The number of records appended.

    Raises
    ------
    LedgerIntegrityError
        ``records`` does not chain, or the store's history of the budget differs.
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
    return len(records) - len(mine)
