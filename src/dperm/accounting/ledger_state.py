"""A budget's history read back from its records: reservations, spends, entries.

Pure (no I/O): :class:`LedgerState` replays the records of
:mod:`dperm.stores.records` one by one and knows, for each reservation, whether it
is still reserved, committed (and with which event) or cancelled.  The record
kinds and their bodies:

``create``   ``epsilon``, ``delta``, ``neighbouring``, ``accountant`` {name, config}
``reserve``  ``event`` (the planned event, a valid bound of the fit, computed before
             the data is read), ``label``, ``time``, ``pid``, ``host``
``commit``   ``reservation`` (its number), ``event`` (what the fit reports, or
             null), ``accounted`` ("actual" or "reserved": which of the two events
             the budget composes), ``label``, ``time``, ``model``, ``model_sha256``
``cancel``   ``reservation``, ``reason``, ``time``
``spend``    ``event``, ``label``, ``time`` (reserve and commit in one record:
             :meth:`Ledger.spend <dperm.accounting.Ledger.spend>`, imports)

A reservation is charged from its ``reserve`` record on; a ``cancel`` frees it.  A
reservation whose process died (kill -9, power loss) is never freed: it stays
charged — "reserved, outcome unknown".
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, fields
from typing import Any

from ..exceptions import InvalidPrivacyParameter, LedgerIntegrityError, UnsupportedEventError
from .events import DpEvent, event_from_dict

__all__ = ["RESERVED", "LedgerEntry", "LedgerState", "Slot", "now"]

RESERVED, COMMITTED, CANCELLED = "reserved", "committed", "cancelled"


def now() -> str:
    """The time of a record: UTC, ISO 8601, to the millisecond."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class LedgerEntry:
    """One charge of a budget: a spend, a committed reservation or one still reserved.

    Attributes
    ----------
    event : DpEvent
        The event the budget composes for it (as spent, before any conversion).
    label : str or None
        A note (e.g. the estimator and dataset).
    accounted : DpEvent or None
        The replace-one event actually accounted when ``event`` was an
        add/remove event converted by
        :func:`~dperm.accounting.events.to_replace_one`; ``None`` otherwise.
    id : int or None
        The number of its ``reserve`` (or ``spend``) record in the budget's history.
    status : {"committed", "reserved"}
        "reserved": the fit has not reported back — still running, or it died
        (outcome unknown); either way it is charged.
    reserved : DpEvent or None
        The event reserved before the fit read its data.
    actual : DpEvent or None
        The event the fit reported when it committed (``event`` is the one of the
        two that gave the smaller total, both being valid bounds of the fit).
    time, committed_time : str or None
        UTC times of the reservation and of the commit.
    model, model_sha256 : str or None
        The model file saved with the fit, and its SHA-256.
    pid, host : int or str or None
        The process that reserved it.

    Two entries are equal when they charge the same (events, label, status, model):
    ``id``, the times, ``pid`` and ``host`` are provenance and not compared.
    """

    event: DpEvent
    label: str | None = None
    accounted: DpEvent | None = None
    # provenance: where and when; not part of what two entries charge (==)
    id: int | None = field(default=None, compare=False)
    status: str = COMMITTED
    reserved: DpEvent | None = None
    actual: DpEvent | None = None
    time: str | None = field(default=None, compare=False)
    committed_time: str | None = field(default=None, compare=False)
    model: str | None = None
    model_sha256: str | None = None
    pid: int | None = field(default=None, compare=False)
    host: str | None = field(default=None, compare=False)

    @property
    def neighbouring(self) -> str:
        """The relation the event was stated for (before any conversion)."""
        return self.event.neighbouring

    @property
    def converted(self) -> bool:
        """Whether the event was converted to replace-one to be accounted."""
        return self.accounted is not None


@dataclass
class Slot:
    """One reservation (or spend) while the history is replayed."""

    id: int
    planned: DpEvent
    label: str | None
    time: str | None
    pid: int | None
    host: str | None
    status: str = RESERVED
    actual: DpEvent | None = None
    use_actual: bool = False
    committed_time: str | None = None
    model: str | None = None
    model_sha256: str | None = None
    reason: str | None = None

    @property
    def effective(self) -> DpEvent | None:
        """The event the budget composes for this slot (None once cancelled)."""
        if self.status == CANCELLED:
            return None
        return self.actual if self.use_actual and self.actual is not None else self.planned

    def entry(self, accounted: DpEvent | None) -> LedgerEntry:
        """The slot as an entry: every field the two share, the event it charges, the
        reserved event and its accounted (replace-one) form."""
        event = self.effective
        assert event is not None
        shared = {name: getattr(self, name) for name in _SHARED}
        return LedgerEntry(event=event, accounted=accounted, reserved=self.planned, **shared)


#: the fields a :class:`Slot` hands to its :class:`LedgerEntry` as they are (label,
#: status, the actual event, provenance)
_SHARED = tuple(f.name for f in fields(LedgerEntry) if f.name in Slot.__dataclass_fields__)


class LedgerState:
    """The budget (from record 0) and its slots, replayed record by record."""

    def __init__(self, budget: str) -> None:
        self.budget = budget
        self.header: dict[str, Any] | None = None
        self.slots: dict[int, Slot] = {}

    def _bad(self, seq: int, what: str) -> LedgerIntegrityError:
        return LedgerIntegrityError(
            f"budget {self.budget!r}: entry #{seq} {what}; the ledger refuses every further spend",
            budget=self.budget,
            entry=seq,
        )

    def _event(self, seq: int, data: Any) -> DpEvent:
        try:
            return event_from_dict(data)
        except (InvalidPrivacyParameter, UnsupportedEventError, KeyError, TypeError, ValueError):
            raise self._bad(seq, f"holds an event that cannot be read: {str(data)[:120]}") from None

    def apply(self, seq: int, kind: str, body: dict[str, Any]) -> Slot | None:
        """Replay one record; returns the slot it created or changed.

        Raises
        ------
        LedgerIntegrityError
            A record that does not fit the history (a commit of an unknown or
            settled reservation, an unknown kind, an unreadable event).
        """
        if kind == "create":
            self.header = body
            return None
        if self.header is None:  # pragma: no cover - the chain puts create first
            raise self._bad(seq, "comes before the budget was created")
        if kind in ("reserve", "spend"):
            slot = Slot(
                seq,
                self._event(seq, body.get("event")),
                body.get("label"),
                body.get("time"),
                body.get("pid"),
                body.get("host"),
            )
            if kind == "spend":
                slot.status, slot.committed_time = COMMITTED, body.get("time")
            self.slots[seq] = slot
            return slot
        if kind in ("commit", "cancel"):
            ref = body.get("reservation")
            slot = self.slots.get(ref) if isinstance(ref, int) else None
            if slot is None or slot.status != RESERVED:
                state = "unknown" if slot is None else slot.status
                raise self._bad(seq, f"settles reservation {ref!r}, which is {state}")
            if kind == "cancel":
                slot.status, slot.reason = CANCELLED, body.get("reason")
                return slot
            slot.status = COMMITTED
            actual = body.get("event")
            slot.actual = None if actual is None else self._event(seq, actual)
            slot.use_actual = body.get("accounted") == "actual" and slot.actual is not None
            if body.get("label") is not None:
                slot.label = body["label"]
            slot.committed_time = body.get("time")
            slot.model, slot.model_sha256 = body.get("model"), body.get("model_sha256")
            return slot
        raise self._bad(seq, f"has an unknown kind {kind!r}")

    def live(self) -> list[Slot]:
        """The slots that are charged (committed or reserved), in order."""
        return [s for s in self.slots.values() if s.status != CANCELLED]
