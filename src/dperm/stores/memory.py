"""A store in this process's memory: the store of ``Ledger(epsilon, delta)``.

Same records, chain and protocol as the stores on disk, no I/O; gone with the
process.  A lock makes its transactions atomic between threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from .records import Record

__all__ = ["MemoryStore"]


class _MemoryTransaction:
    def __init__(self, store: MemoryStore, budget: str) -> None:
        self._store, self._budget = store, budget
        self._added: list[Record] = []

    def head(self) -> tuple[int, str] | None:
        return self._store._heads.get(self._budget)

    def records(self, after: int) -> list[Record]:
        return [r for r in self._store._records.get(self._budget, ()) if r.seq > after]

    def append(self, record: Record) -> None:
        self._added.append(record)


class MemoryStore:
    """Budgets kept in memory (:class:`~dperm.stores.records.Store`)."""

    def __init__(self) -> None:
        self.location = "memory"
        self._records: dict[str, list[Record]] = {}
        self._heads: dict[str, tuple[int, str]] = {}
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def transaction(self, budget: str, *, write: bool) -> Iterator[_MemoryTransaction]:
        with self._lock:
            tx = _MemoryTransaction(self, budget)
            yield tx
            if tx._added:  # only after a normal exit: an exception appends nothing
                self._records.setdefault(budget, []).extend(tx._added)
                last = tx._added[-1]
                self._heads[budget] = (last.seq, last.hash)

    def __deepcopy__(self, memo: dict) -> MemoryStore:  # a copied Ledger: its own history
        new = MemoryStore()
        with self._lock:
            new._records = {k: list(v) for k, v in self._records.items()}
            new._heads = dict(self._heads)
        return new

    def budgets(self) -> list[str]:
        return sorted(self._heads)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._heads)} budget(s))"
