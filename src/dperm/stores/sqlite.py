"""The embedded store: one SQLite file (Python's standard library ``sqlite3``).

* WAL journal (readers never block the writer) with ``synchronous=FULL``: a
  committed record survives a crash of the process and of the machine.
* A write transaction is ``BEGIN IMMEDIATE``: it takes the database's write lock
  before it reads, so the budget check and the record it allows are one atomic
  step — a second process waits (up to ``timeout`` seconds) and then sees the
  first one's record.
* Records are append-only: triggers refuse ``UPDATE`` and ``DELETE`` on them
  (a guard against mistakes; the hash chain is what detects a deliberate edit).

Tables: ``dperm_budgets(name, head_seq, head_hash)`` and
``dperm_records(budget, seq, kind, body, prev_hash, hash)`` (``body`` is the
canonical JSON text that was hashed).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from ..exceptions import DataFileNotFoundError, LedgerIntegrityError, LedgerStoreError
from .sql import ConnectionStore, SqlTransaction

__all__ = ["SqliteStore"]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS dperm_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dperm_budgets (
    name TEXT PRIMARY KEY,
    head_seq INTEGER NOT NULL,
    head_hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dperm_records (
    budget TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (budget, seq)
);
CREATE TRIGGER IF NOT EXISTS dperm_records_no_update BEFORE UPDATE ON dperm_records
BEGIN SELECT RAISE(ABORT, 'dperm ledger records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS dperm_records_no_delete BEFORE DELETE ON dperm_records
BEGIN SELECT RAISE(ABORT, 'dperm ledger records are append-only'); END;
INSERT OR IGNORE INTO dperm_meta (key, value) VALUES ('format', 'dperm.LedgerStore/1');
"""


class SqliteStore(ConnectionStore):
    """Budgets in one SQLite file (:class:`~dperm.stores.records.Store`).

    Parameters
    ----------
    path : str or PathLike
    create : bool, default False
        Create the file when it does not exist (otherwise
        :class:`~dperm.exceptions.DataFileNotFoundError`).
    timeout : float, default 120
        Seconds a transaction waits for another process's write lock.

    Raises
    ------
    LedgerStoreError
        The file exists and is not a SQLite database, or cannot be opened.
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = False, timeout: float = 120.0):
        self.path = Path(path)
        self.location = str(self.path)
        self._lock = threading.RLock()
        self._pid = os.getpid()
        if not self.path.exists():
            if not create:
                raise DataFileNotFoundError(f"no ledger store at {self.location!r}")
            if not self.path.parent.is_dir():
                raise LedgerStoreError(
                    f"cannot create the ledger store {self.location!r}: the folder "
                    f"{str(self.path.parent)!r} does not exist"
                )
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise LedgerStoreError(
                f"cannot open the ledger store {self.location!r}: {exc}"
            ) from None
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            # one transaction: processes opening a new file together create it once
            self._conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            if "malformed" in str(exc):  # a store that was truncated or overwritten
                raise LedgerIntegrityError(
                    f"ledger store {self.location!r} is damaged ({exc}); restore it from a "
                    "backup or an export"
                ) from None
            raise LedgerStoreError(
                f"{self.location!r} is not a dperm ledger store (SQLite says: {exc})"
            ) from None

    @contextlib.contextmanager
    def transaction(self, budget: str, *, write: bool) -> Iterator[SqlTransaction]:
        with self._lock, self._errors():
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield SqlTransaction(
                    lambda sql, params: conn.execute(sql, params).fetchall(), budget
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's errors as dperm's: a busy or unwritable store is a
        LedgerStoreError, a damaged file (truncated, overwritten) a LedgerIntegrityError."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise LedgerStoreError(f"ledger store {self.location!r}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise LedgerIntegrityError(
                f"ledger store {self.location!r} is damaged ({exc}); the ledger refuses every "
                "further spend (restore it from a backup or an export)"
            ) from None

    def budgets(self) -> list[str]:
        with self._lock, self._errors():
            rows = self._conn.execute("SELECT name FROM dperm_budgets ORDER BY name").fetchall()
        return [r[0] for r in rows]
