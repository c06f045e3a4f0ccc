"""A store in this process's memory: the store of ``Ledger(epsilon, delta)``.

Same records, chain and protocol as the stores on disk, no I/O; gone with the
process.  A lock makes its transactions atomic between threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from .records import Record, is_budget_name

__all__ = ["MemoryStore"]


class _MemoryTransaction:
    def __init__(self, store: MemoryStore, budget: str, added: dict[str, list[Record]]) -> None:
        self._store, self._budget, self._added = store, budget, added

    def head(self) -> tuple[int, str] | None:
        mine = self._added.get(self._budget)
        if mine:
            return mine[-1].seq, mine[-1].hash
        return self._store._heads.get(self._budget)

    def records(self, after: int) -> list[Record]:
        stored = self._store._records.get(self._budget, ())
        return [r for r in (*stored, *self._added.get(self._budget, ())) if r.seq > after]

    def append(self, record: Record) -> None:
        self._added.setdefault(self._budget, []).append(record)

    def other(self, budget: str) -> _MemoryTransaction:
        return _MemoryTransaction(self._store, budget, self._added)


class MemoryStore:
    """Budgets kept in memory (:class:`~dperm.stores.records.Store`)."""

    writable = True
    created = True

    def __init__(self) -> None:
        self.location = "memory"
        self.identity = f"memory:{id(self):x}"
        self._records: dict[str, list[Record]] = {}
        self._heads: dict[str, tuple[int, str]] = {}
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def transaction(self, budget: str, *, write: bool) -> Iterator[_MemoryTransaction]:
        with self._lock:
            added: dict[str, list[Record]] = {}
            yield _MemoryTransaction(self, budget, added)
            for name, new in added.items():  # only after a normal exit: an exception
                if new:  # appends nothing
                    self._records.setdefault(name, []).extend(new)
                    self._heads[name] = (new[-1].seq, new[-1].hash)

    def __deepcopy__(self, memo: dict) -> MemoryStore:  # a copied Ledger: its own history
        new = MemoryStore()
        with self._lock:
            new._records = {k: list(v) for k, v in self._records.items()}
            new._heads = dict(self._heads)
        return new

    def budgets(self) -> list[str]:
        return sorted(n for n in self._heads if is_budget_name(n))

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._heads)} budget(s))"
