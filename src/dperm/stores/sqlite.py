"""The embedded store: one SQLite file (Python's standard library ``sqlite3``).

* WAL journal (readers never block the writer) with ``synchronous=FULL``: a
  committed record survives a crash of the process and of the machine.
* A write transaction is ``BEGIN IMMEDIATE``: it takes the database's write lock
  before it reads, so the budget check and the record it allows are one atomic
  step — a second process waits (up to ``timeout`` seconds) and then sees the
  first one's record.
* Records are append-only: triggers refuse ``UPDATE`` and ``DELETE`` on them
  (a guard against mistakes; the hash chain is what detects a deliberate edit).
* dperm's tables go only into a new (or empty) file or one that already holds them:
  another application's database is refused, never written.
* A file this process cannot write opens read-only (``show``, ``history``,
  ``verify``, ``export``): SQLite's ``mode=ro``, or, where a WAL database cannot be
  read that way (no ``-shm`` file and no right to create one), its ``immutable=1``
  snapshot of the file.

Tables: ``dperm_budgets(name, head_seq, head_hash)`` and
``dperm_records(budget, seq, kind, body, prev_hash, hash)`` (``body`` is the
canonical JSON text that was hashed).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from ..exceptions import DataFileNotFoundError, LedgerIntegrityError, LedgerStoreError
from .sql import ConnectionStore, SqlTransaction

__all__ = ["SqliteStore"]

#: the tables of a dperm store
_TABLES = ("dperm_meta", "dperm_budgets", "dperm_records")

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
INSERT OR IGNORE INTO dperm_meta (key, value) VALUES ('format', 'dperm.LedgerStore/1');
"""
#: recreated when missing at every write open (a guard, not the protection)
_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS dperm_records_no_update BEFORE UPDATE ON dperm_records
BEGIN SELECT RAISE(ABORT, 'dperm ledger records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS dperm_records_no_delete BEFORE DELETE ON dperm_records
BEGIN SELECT RAISE(ABORT, 'dperm ledger records are append-only'); END;
"""


def _readonly(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "readonly" in text or "unable to open" in text or "read-only" in text


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
        The file exists and is not a SQLite database, is another application's SQLite
        database, or cannot be opened.
    LedgerIntegrityError
        The file is a damaged dperm store.
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = False, timeout: float = 120.0):
        self.path = Path(path)
        self.location = str(self.path)
        self.identity = str(self.path.resolve())
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self.created = not self.path.exists()
        if self.created:
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
            self._prepare()
        except sqlite3.Error as exc:
            self._conn.close()
            if not (_readonly(exc) and not self.created):
                raise self._refusal(exc) from None
            self._open_readonly(timeout)
        except BaseException:  # another application's file, a damaged store
            self._conn.close()
            raise

    def _refusal(self, exc: sqlite3.Error) -> Exception:
        if "malformed" in str(exc):  # a store that was truncated or overwritten
            return LedgerIntegrityError(
                f"ledger store {self.location!r} is damaged ({exc}); restore it from a "
                "backup or an export"
            )
        return LedgerStoreError(
            f"{self.location!r} is not a dperm ledger store (SQLite says: {exc})"
        )

    def _tables(self, conn: sqlite3.Connection) -> set[str]:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
        ).fetchall()
        return {r[0] for r in rows}

    def _check_tables(self, tables: set[str]) -> bool:
        """Whether ``tables`` are a dperm store's (False: an empty database)."""
        ours = tables & set(_TABLES)
        if not ours:
            if tables:
                shown = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
                raise LedgerStoreError(
                    f"{self.location!r} is another application's SQLite database (tables: "
                    f"{shown}); dperm adds no tables to it — give the ledger its own file"
                )
            return False
        if not {"dperm_budgets", "dperm_records"} <= ours:
            raise LedgerIntegrityError(
                f"ledger store {self.location!r} is damaged (tables {sorted(ours)} only); "
                "restore it from a backup or an export"
            )
        return True

    def _prepare(self) -> None:
        """WAL and FULL sync; the tables in a new or empty file (one transaction:
        processes opening a new file together create it once); the triggers."""
        conn = self._conn
        self._check_tables(self._tables(conn))  # another application's file: untouched
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not self._check_tables(self._tables(conn)):
                self.created = True  # an empty database is a new store
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            for statement in _TRIGGERS.split("END;"):
                if statement.strip():
                    conn.execute(statement + "END;")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _open_readonly(self, timeout: float) -> None:
        """Open the file read-only: ``mode=ro``, else the ``immutable`` snapshot."""
        uri = "file:" + urllib.parse.quote(str(self.path.resolve())) + "?mode=ro"
        last: sqlite3.Error | None = None
        for suffix in ("", "&immutable=1"):
            try:
                conn = sqlite3.connect(
                    uri + suffix,
                    uri=True,
                    timeout=timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except sqlite3.Error as exc:
                last = exc
                continue
            try:
                tables = self._tables(conn)
            except sqlite3.Error as exc:
                conn.close()
                last = exc
                continue
            try:
                if not self._check_tables(tables):
                    raise LedgerStoreError(f"{self.location!r} is not a dperm ledger store")
            except BaseException:
                conn.close()
                raise
            self._conn, self.writable = conn, False
            return
        raise self._refusal(last) from None

    @contextlib.contextmanager
    def transaction(self, budget: str, *, write: bool) -> Iterator[SqlTransaction]:
        if write and not self.writable:
            raise LedgerStoreError(
                f"ledger store {self.location!r} is read-only for this process (show, "
                "history, verify and export work; a spend needs write access to the file "
                "and its folder)"
            )
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
            rows = self._conn.execute("SELECT name FROM dperm_budgets").fetchall()
        return self._names(rows)
