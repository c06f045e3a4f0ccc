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
deleted by hand and the naive "lower that ε" edit; a budget signed with a key kept
apart from the store (:mod:`dperm.stores.signing`) catches the rest for whoever
holds the key.

Besides its budgets a store keeps one internal chain, :data:`STORE_CHAIN` (a name no
budget can have): its record 0 is the store's *genesis*, and each budget created or
imported is registered there with the hash of its record 0
(:mod:`dperm.stores.registry`), so a budget whose records were all deleted is missed.

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
    "STORE_CHAIN",
    "BudgetChain",
    "MapTransaction",
    "Record",
    "Store",
    "Transaction",
    "canonical_json",
    "check_budget_name",
    "check_records",
    "is_budget_name",
    "read_chain",
    "record_hash",
]

#: the "previous hash" of record 0
GENESIS = "0" * 64
#: the store's own chain (genesis, registered budgets): a name no budget can have
STORE_CHAIN = " store"


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


def check_budget_name(name: Any, what: str = "a budget name") -> str:
    """A budget name: 1–100 printable characters, no leading or trailing space
    (``what`` names it in the error: ``"--ledger-budget"``, ``"--name"``)."""
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= 100
        or name != name.strip()
        or not name.isprintable()
    ):
        raise LedgerStoreError(
            f"{what} must be 1 to 100 printable characters without leading or "
            f"trailing spaces, got {name!r}"
        )
    return name


def is_budget_name(name: Any) -> bool:
    """Whether ``name`` is a valid budget name (the store's own chain is not)."""
    try:
        check_budget_name(name)
    except LedgerStoreError:
        return False
    return True


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

    def other(self, budget: str) -> Transaction:
        """A transaction on another budget, inside this one (committed or rolled back
        with it; a write transaction locks that budget too).  Used for the store's
        own chain only (:data:`STORE_CHAIN`), always locked after the budget's."""
        ...


class MapTransaction:
    """A :class:`Transaction` over budgets held as one map, name → ((number, hash) of the
    head, records): the memory of :class:`~dperm.stores.memory.MemoryStore`, or the file
    of :class:`~dperm.stores.jsonfile.JsonStore` as read under its lock.  Reads see the
    map and what the transaction appended; the appended records (``added``, by budget,
    shared with :meth:`other`) reach the map only by :meth:`commit`, which the store
    calls at a normal exit — an exception appends nothing."""

    def __init__(
        self,
        budgets: dict[str, tuple[tuple[int, str], list[Record]]],
        budget: str,
        added: dict[str, list[Record]] | None = None,
    ) -> None:
        self._budgets, self._budget = budgets, budget
        self.added: dict[str, list[Record]] = {} if added is None else added

    def head(self) -> tuple[int, str] | None:
        mine = self.added.get(self._budget)
        if mine:
            return mine[-1].seq, mine[-1].hash
        entry = self._budgets.get(self._budget)
        return None if entry is None else entry[0]

    def records(self, after: int) -> list[Record]:
        entry = self._budgets.get(self._budget)
        stored = () if entry is None else entry[1]
        return [r for r in (*stored, *self.added.get(self._budget, ())) if r.seq > after]

    def append(self, record: Record) -> None:
        self.added.setdefault(self._budget, []).append(record)

    def other(self, budget: str) -> MapTransaction:
        return MapTransaction(self._budgets, budget, self.added)

    def commit(self) -> None:
        """The appended records into the map (each budget's head moves to its last)."""
        for name, new in self.added.items():
            if new:
                entry = self._budgets.get(name)
                recs = [] if entry is None else entry[1]
                recs.extend(new)
                self._budgets[name] = ((new[-1].seq, new[-1].hash), recs)


class Store(Protocol):
    """Where budgets are kept: :class:`~dperm.stores.sqlite.SqliteStore`,
    :class:`~dperm.stores.postgres.PostgresStore`,
    :class:`~dperm.stores.jsonfile.JsonStore`,
    :class:`~dperm.stores.memory.MemoryStore`."""

    #: a description for messages (a path, or a URL without its password)
    location: str
    #: where the store is, the same for every process that opens it (an absolute path,
    #: or ``postgresql://host:port/db``): names it in a key's witness
    identity: str
    #: whether this process can write it (False: read-only — show, verify, export)
    writable: bool
    #: whether opening it created it (a new file, new tables)
    created: bool

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
        A budget name, or :data:`STORE_CHAIN`.
    key : LedgerKey, optional
        The key of a signed budget (:mod:`dperm.stores.signing`): :meth:`sync` then
        checks every record's MAC and the key's witness of the head, and
        :meth:`append` signs.  A signed budget read without its key is checked as an
        unsigned one and refuses :meth:`append`.
    """

    def __init__(self, store: Store, budget: str, key: Any = None) -> None:
        self.store = store
        self.budget = budget if budget == STORE_CHAIN else check_budget_name(budget)
        self.key = key
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

    @property
    def signed(self) -> dict[str, Any] | None:
        """What record 0 says of the budget's key (None: an unsigned budget)."""
        spec = self.records[0].body.get("signed") if self.records else None
        return spec if isinstance(spec, dict) else None

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
        the chain and the head (and, with a key, their MACs and the key's witness),
        keep them and return them.

        Raises
        ------
        LedgerIntegrityError
            The first record that does not chain (edited, reordered, inserted,
            deleted) or a head that disagrees with the records (truncation), a record
            the key did not sign, a head behind the key's witness; it is raised again
            by every later call.
        LedgerStoreError
            The budget does not exist (and the key has not seen it), or the key is
            not the budget's.
        """
        if self.broken is not None:
            raise self.broken
        head = tx.head()
        if head is None:
            if self.records:
                raise self._fail(None, "the budget's head is gone (its records were deleted)")
            seen = self._witnessed()
            if seen is not None:
                raise self._fail(
                    None,
                    f"is gone, but its key signed or verified its entry #{seen[0]}: the "
                    "store was emptied",
                )
            raise LedgerStoreError(f"no budget named {self.budget!r} in {self.store.location}")
        seq, prev = self.last
        new = tx.records(seq)
        signed = self.signed
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
            if rec.seq == 0:
                signed = rec.body.get("signed")
            if self.key is not None:
                self._check_mac(rec, signed)
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
        if self.key is not None:
            self._check_witness()
        return new

    def _check_mac(self, rec: Record, spec: Any) -> None:
        if not isinstance(spec, dict):
            raise LedgerStoreError(
                f"budget {self.budget!r} in {self.store.location} was created without a key: "
                "it is not signed (verify it without --key; a key signs only the budgets "
                "created with it)"
            )
        if spec.get("key_id") != self.key.key_id:
            raise LedgerStoreError(
                f"budget {self.budget!r} in {self.store.location} is signed with the key "
                f"{spec.get('key_id')!r}, not with {self.key.key_id!r} ({self.key!r})"
            )
        if not self.key.signs(self.budget, rec.seq, rec.kind, rec.body, rec.prev_hash):
            raise self._fail(
                rec.seq,
                "does not carry the budget key's MAC (written or rewritten without the key)",
            )

    def _witnessed(self) -> tuple[int, str] | None:
        if self.key is None:
            return None
        return self.key.witnessed(self.store.identity).get(self.budget)

    def _check_witness(self) -> None:
        seen = self._witnessed()
        if seen is None:
            return
        seq, digest = seen
        last = self.records[-1].seq
        if seq > last:
            raise self._fail(
                last + 1,
                f"is missing: the key signed or verified the history up to entry #{seq} "
                f"but it ends at #{last} (the store was truncated)",
            )
        if self.records[seq].hash != digest:
            raise self._fail(
                seq,
                f"differs from the one the key signed or verified (hash {digest[:16]}…): "
                "the history was rewritten",
            )

    def append(self, tx: Transaction, kind: str, body: dict[str, Any]) -> Record:
        """Chain a new record after the last verified one (call :meth:`sync` first,
        in the same write transaction); signed with the key of a signed budget.

        Raises
        ------
        LedgerStoreError
            A signed budget and no key (or a key for an unsigned one).
        """
        seq, prev = self.last
        signed = body.get("signed") if seq < 0 else self.signed
        if signed is not None or self.key is not None:
            if self.key is None:
                raise LedgerStoreError(
                    f"budget {self.budget!r} in {self.store.location} is signed (key "
                    f"{signed.get('key_id')!r}): writing to it needs its key "
                    "(dperm fit --ledger-key FILE; Ledger.open(…, key=FILE))"
                )
            if not isinstance(signed, dict) or signed.get("key_id") != self.key.key_id:
                self._check_mac(Record(self.budget, seq + 1, kind, body, prev, ""), signed)
            body = {**body, "mac": self.key.mac(self.budget, seq + 1, kind, body, prev)}
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
