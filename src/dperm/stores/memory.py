"""A store in this process's memory: the store of ``Ledger(epsilon, delta)``.

Same records, chain and protocol as the stores on disk, no I/O; gone with the
process.  A lock makes its transactions atomic between threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from .records import MapTransaction, Record, is_budget_name

__all__ = ["MemoryStore"]


class MemoryStore:
    """Budgets kept in memory (:class:`~dperm.stores.records.Store`)."""

    writable = True
    created = True

    def __init__(self) -> None:
        self.location = "memory"
        self.identity = f"memory:{id(self):x}"
        self._budgets: dict[str, tuple[tuple[int, str], list[Record]]] = {}
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def transaction(self, budget: str, *, write: bool) -> Iterator[MapTransaction]:
        with self._lock:
            tx = MapTransaction(self._budgets, budget)
            yield tx
            tx.commit()  # only after a normal exit: an exception appends nothing

    def __deepcopy__(self, memo: dict) -> MemoryStore:  # a copied Ledger: its own history
        new = MemoryStore()
        with self._lock:
            new._budgets = {k: (head, list(recs)) for k, (head, recs) in self._budgets.items()}
        return new

    def budgets(self) -> list[str]:
        return sorted(n for n in self._budgets if is_budget_name(n))

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._budgets)} budget(s))"
