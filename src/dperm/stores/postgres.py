"""A budget shared by a team: a PostgreSQL database (psycopg 3, the ``postgres`` extra).

* A write transaction locks the budget's row (``SELECT … FOR UPDATE`` on
  ``dperm_budgets``) before it reads the history: every other writer of that
  budget, on any machine, waits until it commits, then reads the new record (each
  statement of a READ COMMITTED transaction sees what was committed before it
  started).  The check and the record it allows are therefore atomic.
* A read transaction is ``REPEATABLE READ, READ ONLY``: one consistent snapshot.
* Records are append-only: a trigger refuses ``UPDATE`` and ``DELETE`` (a guard
  against mistakes; the hash chain detects deliberate edits).
* The tables (and the trigger) are created once, under an advisory lock, by the first
  connection that finds them missing.

The URL is a libpq connection URI (``postgresql://user:password@host:5432/db``);
messages name it without its password.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

from ..exceptions import LedgerStoreError
from .records import STORE_CHAIN, BudgetChain
from .registry import append_genesis
from .sql import ConnectionStore, SqlTransaction

__all__ = ["PostgresStore", "redact_url"]

_SCHEMA = [
    "SELECT pg_advisory_xact_lock(727274001)",  # one creator at a time
    """CREATE TABLE IF NOT EXISTS dperm_budgets (
        name TEXT PRIMARY KEY, head_seq BIGINT NOT NULL, head_hash TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS dperm_records (
        budget TEXT NOT NULL REFERENCES dperm_budgets (name),
        seq BIGINT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL,
        prev_hash TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (budget, seq))""",
    """CREATE OR REPLACE FUNCTION dperm_records_append_only() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'dperm ledger records are append-only'; END $$""",
    """CREATE OR REPLACE TRIGGER dperm_records_append_only
        BEFORE UPDATE OR DELETE ON dperm_records
        FOR EACH ROW EXECUTE FUNCTION dperm_records_append_only()""",
]


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


class PostgresStore(ConnectionStore):
    """Budgets in a PostgreSQL database (:class:`~dperm.stores.records.Store`).

    Parameters
    ----------
    url : str
        ``postgresql://…`` (or ``postgres://…``) connection URI.
    timeout : float, default 30
        Seconds to wait for the connection.

    Raises
    ------
    LedgerStoreError
        psycopg is not installed (``pip install 'dperm[postgres]'``), or the server
        cannot be reached or refuses the connection.
    """

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self.location = redact_url(url)
        self.identity = self.location
        self._pid = os.getpid()
        try:
            import psycopg
        except ImportError:
            raise LedgerStoreError(
                f"{self.location}: a PostgreSQL ledger needs psycopg 3 "
                "(pip install 'dperm[postgres]')"
            ) from None
        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(url, connect_timeout=max(1, int(timeout)), autocommit=True)
            with self._conn.transaction(), self._conn.cursor() as cur:
                # only where the tables are missing: a role that may only read and
                # append (docs/budgets.md) never needs to own them
                cur.execute(
                    "SELECT to_regclass('dperm_budgets') IS NOT NULL "
                    "AND to_regclass('dperm_records') IS NOT NULL"
                )
                if not cur.fetchone()[0]:
                    for statement in _SCHEMA:
                        cur.execute(statement)
                    self.created = True
                    # the genesis with the tables: a store dperm created is told from one
                    # emptied even before its first budget (another connection may create
                    # that budget: this one's ``created`` is not seen there)
                    stx = SqlTransaction(lambda sql, p: _run(cur, sql, p), STORE_CHAIN, "%s")
                    if stx.head() is None:  # another creator's, once its lock was ours
                        append_genesis(BudgetChain(self, STORE_CHAIN), stx)
            info = self._conn.info  # the server and database, whoever connects
            self.identity = f"postgresql://{info.host}:{info.port}/{info.dbname}"
        except psycopg.Error as exc:
            raise LedgerStoreError(f"ledger store {self.location}: {_first_line(exc)}") from None

    @contextlib.contextmanager
    def transaction(self, budget: str, *, write: bool) -> Iterator[SqlTransaction]:
        conn, pg = self._conn, self._psycopg
        try:
            # a writer: READ COMMITTED + the budget's locks (each statement sees what
            # was committed before it) — set explicitly: on a server whose default is
            # REPEATABLE READ or SERIALIZABLE the snapshot would be taken before the lock is
            # granted, and a writer could read a stale head; a reader: one REPEATABLE READ
            # snapshot
            iso = pg.IsolationLevel
            conn.isolation_level = iso.READ_COMMITTED if write else iso.REPEATABLE_READ
            conn.read_only = not write
            with conn.transaction(), conn.cursor() as cur:

                def lock(name: str) -> None:  # serializes the writers of a budget, its
                    # creation included; the store's chain is locked after the budget's
                    cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))

                def run(sql: str, params: tuple) -> list:
                    return _run(cur, sql, params)

                if write:
                    lock(budget)
                yield SqlTransaction(
                    run, budget, "%s", " FOR UPDATE" if write else "", lock if write else None
                )
        except pg.Error as exc:
            raise LedgerStoreError(f"ledger store {self.location}: {_first_line(exc)}") from None

    def budgets(self) -> list[str]:
        with self.transaction("", write=False) as tx:
            return self._names(tx._run("SELECT name FROM dperm_budgets", ()))


def _run(cur, sql: str, params: tuple) -> list:
    """Execute ``sql`` with ``params`` on the cursor ``cur``; the rows (none for DDL/DML)."""
    cur.execute(sql, params)
    return cur.fetchall() if cur.description is not None else []


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
