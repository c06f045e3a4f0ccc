"""A ledger as a JSON snapshot: :meth:`Ledger.to_dict <dperm.accounting.Ledger.to_dict>`,
``from_dict``, ``save`` and ``load`` (format ``dperm.Ledger``, versions 1 and 2).

A snapshot lists the charged events; it has no hash chain and is not a store.  To
keep a budget across processes use a store (``Ledger.open``); to move a store's
records elsewhere, ``dperm budget export`` / ``import`` (which also reads these
snapshots, into a new budget).
"""

from __future__ import annotations

from typing import Any

from ..exceptions import InvalidPrivacyParameter
from .events import check_neighbouring, event_from_dict
from .registry import get_accountant

__all__ = ["FORMAT_VERSION", "ledger_from_dict", "ledger_to_dict", "read_snapshot"]

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
