"""Where privacy budgets are kept: append-only, hash-chained record stores.

The accounting (what a history of events has spent) is math and lives in
:mod:`dperm.accounting`; this floor only keeps records — it knows nothing about
privacy — behind one small protocol (:class:`~dperm.stores.records.Store`: a
transaction on a budget reads its records and appends new ones, atomically):

* :class:`~dperm.stores.sqlite.SqliteStore` — a file (``budget.db``), the default;
* :class:`~dperm.stores.postgres.PostgresStore` — ``postgresql://…``, a budget
  shared by a team across machines (psycopg 3, ``pip install 'dperm[postgres]'``);
* :class:`~dperm.stores.jsonfile.JsonStore` — ``*.json``, the export/import
  format, usable as a store (file lock + atomic replace);
* :class:`~dperm.stores.memory.MemoryStore` — the store of ``Ledger(epsilon, delta)``.

:func:`open_store` picks one from a location.  Records and their hash chain:
:mod:`dperm.stores.records`; the store's own chain (genesis, the budgets it held):
:mod:`dperm.stores.registry`; signed budgets (a key kept apart from the store):
:mod:`dperm.stores.signing`.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path

from ..exceptions import LedgerStoreError
from .jsonfile import JsonStore
from .memory import MemoryStore
from .postgres import PostgresStore, redact_url
from .records import BudgetChain, Record, Store, Transaction, check_budget_name
from .signing import LedgerKey, as_key
from .sqlite import SqliteStore

__all__ = [
    "BudgetChain",
    "JsonStore",
    "LedgerKey",
    "MemoryStore",
    "Record",
    "SqliteStore",
    "Store",
    "Transaction",
    "as_key",
    "check_budget_name",
    "is_url",
    "open_store",
]

_URL_SCHEMES = ("postgresql://", "postgres://")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def is_url(location: object) -> bool:
    """Whether ``location`` is a PostgreSQL URL."""
    return isinstance(location, str) and location.startswith(_URL_SCHEMES)


def _file_url_path(url: str) -> Path:
    """The path of a ``file://`` URL (RFC 8089: ``file:///abs/path`` or
    ``file://localhost/abs/path``)."""
    parts = urllib.parse.urlsplit(url)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise LedgerStoreError(
            f"{url!r}: a file:// ledger location is file:///absolute/path on this machine "
            "(no host, query or fragment); for a budget shared across machines use "
            "postgresql://"
        )
    return Path(urllib.parse.unquote(parts.path))


def open_store(location: str | os.PathLike | Store, *, create: bool = False) -> Store:
    """The store at ``location``.

    Parameters
    ----------
    location : str, PathLike or Store
        ``postgresql://…`` (or ``postgres://…``): a PostgreSQL database; a path
        ending in ``.json``: a JSON store; any other path: a SQLite database (or,
        when the file exists and is JSON, a JSON store); ``file:///path``: that path;
        a store object is returned as is.  Any other ``scheme://`` is refused.
    create : bool, default False
        Create a missing file (a new SQLite database or JSON store).

    Raises
    ------
    DataFileNotFoundError
        A missing file and ``create=False``.
    LedgerStoreError
        A file that is neither kind of store (or another application's SQLite
        database), a server that cannot be reached, a missing driver, a URL scheme dperm
        has no store for (``mysql://``, ``s3://``, …).
    """
    if not isinstance(location, str | os.PathLike):
        if all(hasattr(location, a) for a in ("transaction", "budgets", "location")):
            return location  # already a store
        raise LedgerStoreError(
            f"a ledger location is a path or a postgresql:// URL, got {location!r}"
        )
    if is_url(location):
        return PostgresStore(str(location))
    text = os.fspath(location)
    scheme = _SCHEME.match(text) if isinstance(text, str) else None
    if scheme is not None:
        if scheme.group(1).lower() != "file":
            raise LedgerStoreError(
                f"unsupported ledger location scheme '{scheme.group(1)}://' in "
                f"{redact_url(text)!r}: dperm keeps budgets in a SQLite file (a path), a JSON "
                "file (*.json) or PostgreSQL (postgresql://user@host/db)"
            )
        path = _file_url_path(text)
    else:
        path = Path(location)
    if path.suffix.lower() == ".json":
        return JsonStore(path, create=create)
    # never open() a file SQLite may hold: closing any descriptor of it drops this
    # process's POSIX locks on it, and another process could then checkpoint and delete
    # the WAL under a live connection (https://sqlite.org/howtocorrupt.html, 2.2)
    try:
        return SqliteStore(path, create=create)
    except LedgerStoreError:
        if path.is_file():  # not SQLite: a JSON store under another name?
            with open(path, "rb") as fh:
                start = fh.read(64).lstrip()
            if start[:1] == b"{":
                return JsonStore(path)
        raise
