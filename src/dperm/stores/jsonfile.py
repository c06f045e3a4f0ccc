"""Budgets in one JSON file: the export/import format, and a store of its own.

The file is the whole store::

    {"format": "dperm.LedgerStore", "version": 1,
     "budgets": {"default": {"head": [n, "hash"], "records": [{"seq": 0, …}, …]}}}

Used as a store (``--ledger spent.json``) it keeps the stores' guarantees: a
transaction holds an ``flock`` on ``<file>.lock`` (exclusive to write, shared to
read) from before it reads the file until after it has replaced it, and the new
text is written to a temporary file in the same folder, flushed to disk
(``fsync``) and renamed over the old one (atomic on POSIX), then the folder is
flushed — a crash leaves the old file or the new one, never half of either.
Every transaction reads and rewrites the whole file: fine for a person's
budget, use SQLite or PostgreSQL for thousands of fits.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..exceptions import DataFileNotFoundError, LedgerIntegrityError, LedgerStoreError
from .records import MapTransaction, Record, is_budget_name

__all__ = ["FORMAT", "JsonStore", "atomic_write_text", "read_store_json", "store_json"]

#: the ``format`` key of a JSON store / export
FORMAT = "dperm.LedgerStore"
_VERSION = 1

try:  # POSIX; the JSON store needs file locks
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` by ``text`` atomically: temporary file in the same folder,
    fsync, rename, fsync of the folder."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # not every file system can fsync a folder
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def store_json(budgets: dict[str, tuple[tuple[int, str], list[Record]]]) -> dict[str, Any]:
    """The JSON object of a store holding ``budgets`` (name → (head, records))."""
    return {
        "format": FORMAT,
        "version": _VERSION,
        "budgets": {
            name: {"head": list(head), "records": [r.to_dict() for r in recs]}
            for name, (head, recs) in sorted(budgets.items())
        },
    }


def read_store_json(data: Any, location: str) -> dict[str, tuple[tuple[int, str], list[Record]]]:
    """Parse a JSON store / export (the records unchecked: the chain checks them).

    Raises
    ------
    LedgerStoreError
        Not a dperm ledger store (for instance a ledger written by ``Ledger.save``).
    LedgerIntegrityError
        A malformed budget or record.
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        hint = (
            " (a ledger written by Ledger.save: import it with `dperm budget import`)"
            if isinstance(data, dict) and data.get("format") == "dperm.Ledger"
            else ""
        )
        raise LedgerStoreError(f"{location} is not a dperm ledger store{hint}")
    if data.get("version") != _VERSION:
        raise LedgerStoreError(
            f"{location}: unsupported ledger store version {data.get('version')!r}"
        )
    out = {}
    budgets = data.get("budgets")
    if not isinstance(budgets, dict):
        raise LedgerIntegrityError(f"{location}: no budgets table")
    for name, entry in budgets.items():
        try:
            head = (int(entry["head"][0]), str(entry["head"][1]))
            recs = [Record.from_dict(name, r) for r in entry["records"]]
        except (KeyError, TypeError, ValueError, IndexError):
            raise LedgerIntegrityError(
                f"{location}: budget {name!r} is malformed", budget=name
            ) from None
        out[name] = (head, recs)
    return out


class JsonStore:
    """Budgets in one JSON file (:class:`~dperm.stores.records.Store`).

    Parameters
    ----------
    path : str or PathLike
    create : bool, default False
        Create the file at the first write when it does not exist (otherwise
        :class:`~dperm.exceptions.DataFileNotFoundError`).
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = False) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            raise LedgerStoreError("a JSON ledger store needs POSIX file locks; use SQLite")
        self.path = Path(path)
        self.location = str(self.path)
        self.identity = str(self.path.resolve())
        self.created = not self.path.exists()
        if self.created and not create:
            raise DataFileNotFoundError(f"no ledger store at {self.location!r}")
        if not self.path.parent.is_dir():
            raise LedgerStoreError(
                f"cannot create the ledger store {self.location!r}: the folder "
                f"{str(self.path.parent)!r} does not exist"
            )
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self.writable = os.access(self.path.parent, os.W_OK) and (
            self.created or os.access(self.path, os.W_OK)
        )
        if not self.created:
            with self._locked(write=False):
                self._read()  # fail now on a file that is not a store

    @contextlib.contextmanager
    def _locked(self, write: bool) -> Iterator[None]:
        if not write and not self.writable:
            # no lock file to create: a reader sees the old file or the new one whole
            # (writers replace it by a rename), never half of either
            yield
            return
        if write and not self.writable:
            raise LedgerStoreError(
                f"ledger store {self.location!r} is read-only for this process (show, "
                "history, verify and export work; a spend needs write access to the file "
                "and its folder)"
            )
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self) -> dict[str, tuple[tuple[int, str], list[Record]]]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise LedgerIntegrityError(
                f"ledger store {self.location!r} is not valid JSON (truncated or edited: {exc})"
            ) from None
        return read_store_json(data, repr(self.location))

    @contextlib.contextmanager
    def transaction(self, budget: str, *, write: bool) -> Iterator[MapTransaction]:
        with self._locked(write):
            budgets = self._read()
            tx = MapTransaction(budgets, budget)
            yield tx
            if any(tx.added.values()):
                if not write:  # pragma: no cover - the ledger appends in write transactions
                    raise LedgerStoreError("append in a read transaction")
                tx.commit()
                text = json.dumps(store_json(budgets), indent=1, sort_keys=True, allow_nan=False)
                atomic_write_text(self.path, text + "\n")

    def budgets(self) -> list[str]:
        with self._locked(write=False):
            return sorted(n for n in self._read() if is_budget_name(n))

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"JsonStore({self.location!r})"
