"""What the SQL stores share: the statements of a transaction on one budget, the body
check, and closing a connection.  :mod:`dperm.stores.sqlite` runs them with ``?``
placeholders, :mod:`dperm.stores.postgres` with ``%s`` and a row lock."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

from ..exceptions import LedgerIntegrityError
from .records import Record, canonical_json, is_budget_name

__all__ = ["ConnectionStore", "SqlTransaction", "parse_body"]


def parse_body(budget: str, seq: int, text: str) -> dict:
    """A stored body (JSON text) as a dict; anything else is a damaged record."""
    try:
        body = json.loads(text)
    except (TypeError, ValueError):
        body = None
    if not isinstance(body, dict):
        raise LedgerIntegrityError(
            f"budget {budget!r}: entry #{seq} has a body that is not a JSON object",
            budget=budget,
            entry=seq,
        )
    return body


class SqlTransaction:
    """A :class:`~dperm.stores.records.Transaction` over the tables ``dperm_budgets`` and
    ``dperm_records``.

    Parameters
    ----------
    run : callable
        ``run(sql, params) -> rows`` in the open transaction.
    budget : str
    mark : str
        The driver's placeholder (``"?"`` or ``"%s"``).
    lock : str
        Appended to the head query (``" FOR UPDATE"``: a row lock).
    prelock : callable, optional
        ``prelock(budget)`` locks another budget before :meth:`other` reads it (a
        PostgreSQL writer's advisory lock).
    """

    def __init__(
        self,
        run: Callable[[str, tuple], list],
        budget: str,
        mark: str = "?",
        lock: str = "",
        prelock: Callable[[str], None] | None = None,
    ) -> None:
        self._run, self._budget, self._m, self._lock = run, budget, mark, lock
        self._prelock = prelock

    def other(self, budget: str) -> SqlTransaction:
        if self._prelock is not None:
            self._prelock(budget)
        return SqlTransaction(self._run, budget, self._m, self._lock, self._prelock)

    def head(self) -> tuple[int, str] | None:
        rows = self._run(
            f"SELECT head_seq, head_hash FROM dperm_budgets WHERE name = {self._m}{self._lock}",
            (self._budget,),
        )
        return None if not rows else (int(rows[0][0]), str(rows[0][1]))

    def records(self, after: int) -> list[Record]:
        m = self._m
        rows = self._run(
            "SELECT seq, kind, body, prev_hash, hash FROM dperm_records "
            f"WHERE budget = {m} AND seq > {m} ORDER BY seq",
            (self._budget, after),
        )
        return [
            Record(self._budget, int(s), k, parse_body(self._budget, s, b), p, h)
            for s, k, b, p, h in rows
        ]

    def append(self, record: Record) -> None:
        m = self._m
        if record.seq == 0:  # the budget's row first (PostgreSQL's foreign key)
            self._run(
                f"INSERT INTO dperm_budgets (name, head_seq, head_hash) VALUES ({m}, {m}, {m})",
                (record.budget, record.seq, record.hash),
            )
        else:
            self._run(
                f"UPDATE dperm_budgets SET head_seq = {m}, head_hash = {m} WHERE name = {m}",
                (record.seq, record.hash, record.budget),
            )
        self._run(
            "INSERT INTO dperm_records (budget, seq, kind, body, prev_hash, hash) "
            f"VALUES ({m}, {m}, {m}, {m}, {m}, {m})",
            (
                record.budget,
                record.seq,
                record.kind,
                canonical_json(record.body),
                record.prev_hash,
                record.hash,
            ),
        )


class ConnectionStore:
    """A store holding one database connection (``_conn``) opened by process ``_pid``."""

    _conn: Any
    _pid: int
    location: str
    identity: str
    writable: bool = True
    created: bool = False

    def _names(self, rows: list) -> list[str]:
        """The budget names among ``rows`` of ``dperm_budgets`` (not the store's chain)."""
        return sorted(r[0] for r in rows if is_budget_name(r[0]))

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __del__(self) -> None:  # a store dropped without close(): no ResourceWarning
        conn = getattr(self, "_conn", None)
        # never from a forked child: closing the parent's connection there would drop
        # the child's own locks on the file (POSIX locks are per process)
        if conn is not None and getattr(self, "_pid", None) == os.getpid():
            with contextlib.suppress(Exception):
                conn.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"
