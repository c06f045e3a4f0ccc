"""A ledger as a JSON snapshot: :meth:`Ledger.to_dict <dperm.accounting.Ledger.to_dict>`,
``from_dict``, ``save`` and ``load`` (format ``dperm.Ledger``, versions 1 and 2).

A snapshot lists the charged events; it has no hash chain and is not a store.  To
keep a budget across processes use a store (``Ledger.open``); to move a store's
records elsewhere, ``dperm budget export`` / ``import`` (which also reads these
snapshots, into a new budget).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..exceptions import DataFileNotFoundError, InvalidPrivacyParameter
from ..stores.jsonfile import atomic_write_text
from .events import check_neighbouring, event_from_dict
from .registry import get_accountant

__all__ = [
    "FORMAT_VERSION",
    "LedgerSnapshots",
    "ledger_from_dict",
    "ledger_to_dict",
    "read_snapshot",
]

FORMAT_VERSION = 2  # 2: neighbouring relations; version-1 files still load


def ledger_to_dict(ledger: Any) -> dict[str, Any]:
    """The snapshot of ``ledger`` (a :class:`~dperm.accounting.Ledger`)."""
    acc = ledger.accountant
    return {
        "format": "dperm.Ledger",
        "version": FORMAT_VERSION,
        "epsilon": ledger.epsilon,
        "delta": ledger.delta,
        "neighbouring": ledger.neighbouring,
        "accountant": {"name": acc.name, "config": acc.get_config()},
        "entries": [
            {
                "event": e.event.to_dict(),
                "label": e.label,
                "neighbouring": e.neighbouring,
                "accounted": None if e.accounted is None else e.accounted.to_dict(),
            }
            for e in ledger.entries
        ],
    }


def read_snapshot(data: Any) -> tuple[dict[str, Any], Any, list]:
    """(budget {epsilon, delta}, empty accountant, [(event, label)]) of a snapshot.

    Raises
    ------
    InvalidPrivacyParameter
        Not a serialized ledger, an unsupported version, malformed entries.
    """
    if not isinstance(data, dict) or data.get("format") != "dperm.Ledger":
        raise InvalidPrivacyParameter("not a serialized dperm Ledger")
    if data.get("version") not in (1, FORMAT_VERSION):
        raise InvalidPrivacyParameter(f"unsupported Ledger format version {data.get('version')!r}")
    try:
        spec = data["accountant"]
        acc = get_accountant(spec["name"], **spec.get("config", {}))
        stated = data.get("neighbouring")
        if stated is not None and check_neighbouring(stated) != acc.neighbouring:
            raise InvalidPrivacyParameter(
                f"serialized Ledger states neighbouring={stated!r} but its accountant "
                f"accounts {acc.neighbouring!r}"
            )
        budget = {"epsilon": data["epsilon"], "delta": data["delta"]}
        entries = [(event_from_dict(e["event"]), e.get("label")) for e in data["entries"]]
    except (KeyError, TypeError) as exc:
        raise InvalidPrivacyParameter(f"malformed serialized Ledger: {exc!r}") from None
    return budget, acc, entries


def ledger_from_dict(cls: type, data: Any) -> Any:
    """An in-memory ``cls`` (a Ledger) replaying a snapshot's events without budget
    checks (they are history, already spent)."""
    budget, acc, entries = read_snapshot(data)
    ledger = cls(budget["epsilon"], budget["delta"], accountant=acc)
    for event, label in entries:
        ledger._append_history(event, label)
    return ledger


class LedgerSnapshots:
    """The snapshot methods of :class:`~dperm.accounting.Ledger` (a base class)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible snapshot (budget, relation, accountant, entries);
        reservations still open are saved as entries (they are charged)."""
        return ledger_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """An in-memory ledger from :meth:`to_dict` output, replaying its events.

        Version-1 files (written before relations were recorded) load with
        their events as replace-one events.

        Raises
        ------
        InvalidPrivacyParameter
            If ``data`` is not a serialized ledger, or its events cannot be
            replayed.
        """
        return ledger_from_dict(cls, data)

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_dict` as JSON to ``path``, atomically (temporary file,
        fsync, rename).  A snapshot: for a ledger shared across processes use
        :meth:`open` (``dperm budget export`` writes a store's hash-chained records)."""
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True)
        atomic_write_text(path, text + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Any:
        """Read a ledger written by :meth:`save` (into memory).

        Raises
        ------
        DataFileNotFoundError
            If ``path`` does not exist.
        InvalidPrivacyParameter
            If the file is not a saved ledger.
        """
        if not os.path.isfile(path):
            raise DataFileNotFoundError(f"no ledger file at {os.fspath(path)!r}")
        with open(path, encoding="utf-8") as fh:
            try:
                data = json.load(fh)
            except json.JSONDecodeError as exc:
                raise InvalidPrivacyParameter(
                    f"{os.fspath(path)} is not valid JSON: {exc}"
                ) from None
        return cls.from_dict(data)
