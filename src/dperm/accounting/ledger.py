"""A privacy budget ledger: record what every fit spent and refuse overspending."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._validation import check_delta, check_epsilon
from ..exceptions import BudgetExceededError, DataFileNotFoundError, InvalidPrivacyParameter
from .base import Accountant, accountant_factory, get_accountant
from .events import DpEvent, event_from_dict

__all__ = ["Ledger", "LedgerEntry"]

_FORMAT_VERSION = 1


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded spend: the event and an optional label."""

    event: DpEvent
    label: str | None = None


class Ledger:
    """A total (ε, δ) budget and the events spent against it.

    Every :meth:`spend` composes the event into the ledger's accountant and is
    refused — with :class:`~dperm.exceptions.BudgetExceededError`, recording
    nothing — if the accountant would then certify an ε above the budget at
    the budget's δ.

    Parameters
    ----------
    epsilon : float
        Total ε budget, > 0 and finite.
    delta : float
        Total δ budget in [0, 1) (0 for pure-DP budgets with the ``"basic"``,
        ``"advanced"``, ``"optimal"`` or ``"rdp"`` accountants).
    accountant : str or Accountant, default "rdp"
        An accountant name (see :func:`~dperm.accounting.get_accountant`) or an
        *empty* accountant instance (its configuration is saved by
        :meth:`save`).

    Raises
    ------
    InvalidPrivacyParameter
        For an invalid budget, or an accountant instance that already holds
        events.
    UnknownNameError
        For an unknown accountant name.

    Examples
    --------
    >>> from dperm.accounting import Ledger, PoissonSampled, Gaussian, SelfComposed
    >>> ledger = Ledger(epsilon=3.0, delta=1e-5)
    >>> eps = ledger.spend(SelfComposed(PoissonSampled(0.01, Gaussian(1.0)), 1000), "dp-sgd")
    >>> round(ledger.remaining_epsilon(), 3) == round(3.0 - eps, 3)
    True
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        accountant: str | Accountant | Callable[[], Accountant] = "rdp",
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta, allow_zero=True)
        acc = accountant_factory(accountant)()
        if acc.events:
            raise InvalidPrivacyParameter(
                f"the ledger's accountant must be empty, got one holding {len(acc.events)} event(s)"
            )
        self._acc = acc
        self._entries: list[LedgerEntry] = []

    # ------------------------------------------------------------------ API
    @property
    def accountant(self) -> Accountant:
        """A copy of the ledger's accountant with everything spent so far."""
        return self._acc.copy()

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """The recorded spends, in order."""
        return tuple(self._entries)

    @property
    def events(self) -> tuple[DpEvent, ...]:
        """The recorded events, in order."""
        return tuple(e.event for e in self._entries)

    def _would_spend(self, event: DpEvent) -> tuple[Accountant, float]:
        trial = self._acc.copy()
        trial.compose(event)  # UnsupportedEventError propagates, nothing changed
        return trial, trial.get_epsilon(self.delta)

    def can_spend(self, event: DpEvent) -> bool:
        """Whether :meth:`spend` would accept ``event``.

        Raises
        ------
        UnsupportedEventError
            If the ledger's accountant cannot account ``event``.
        """
        return self._would_spend(event)[1] <= self.epsilon

    def spend(self, event: DpEvent, label: str | None = None) -> float:
        """Record ``event`` if the total stays within budget.

        Parameters
        ----------
        event : DpEvent
        label : str, optional
            A note (e.g. the estimator and dataset) stored with the event.

        Returns
        -------
        float
            The total ε spent after this event, at the ledger's δ.

        Raises
        ------
        BudgetExceededError
            If the total ε would exceed the budget; the message gives the
            would-be ε and nothing is recorded.
        UnsupportedEventError
            If the accountant cannot account ``event``; nothing is recorded.
        """
        if label is not None and not isinstance(label, str):
            raise InvalidPrivacyParameter(f"label must be a string or None, got {label!r}")
        trial, eps = self._would_spend(event)
        if not eps <= self.epsilon:
            raise BudgetExceededError(
                f"spending {event!r} would bring the total to epsilon={eps:.6g} at "
                f"delta={self.delta:g}, above the budget epsilon={self.epsilon:g} "
                f"(already spent {self.spent()[0]:.6g}); nothing was recorded"
            )
        self._acc = trial
        self._entries.append(LedgerEntry(event, label))
        return eps

    def spent(self) -> tuple[float, float]:
        """(ε, δ) spent so far: the accountant's ε at the ledger's δ, and that δ."""
        if not self._entries:
            return 0.0, 0.0
        return self._acc.get_epsilon(self.delta), self.delta

    def remaining_epsilon(self) -> float:
        """Budget ε minus the ε spent (≥ 0).

        Note that ε does not compose additively under every accountant, so the
        remaining ε is a summary, not what a next event may cost; use
        :meth:`can_spend`, or calibrate against :attr:`accountant`.
        """
        return max(0.0, self.epsilon - self.spent()[0])

    # ------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible description (budget, accountant, entries)."""
        return {
            "format": "dperm.Ledger",
            "version": _FORMAT_VERSION,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "accountant": {"name": self._acc.name, "config": self._acc.get_config()},
            "entries": [{"event": e.event.to_dict(), "label": e.label} for e in self._entries],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ledger:
        """Rebuild a ledger from :meth:`to_dict` output, replaying its events.

        Raises
        ------
        InvalidPrivacyParameter
            If ``data`` is not a serialized ledger.
        """
        if not isinstance(data, dict) or data.get("format") != "dperm.Ledger":
            raise InvalidPrivacyParameter("not a serialized dperm Ledger")
        if data.get("version") != _FORMAT_VERSION:
            raise InvalidPrivacyParameter(
                f"unsupported Ledger format version {data.get('version')!r}"
            )
        try:
            spec = data["accountant"]
            acc = get_accountant(spec["name"], **spec.get("config", {}))
            ledger = cls(data["epsilon"], data["delta"], accountant=acc)
            entries = [(event_from_dict(e["event"]), e.get("label")) for e in data["entries"]]
        except (KeyError, TypeError) as exc:
            raise InvalidPrivacyParameter(f"malformed serialized Ledger: {exc!r}") from None
        for event, label in entries:
            # replay without budget checks: this is history, already spent
            ledger._acc.compose(event)
            ledger._entries.append(LedgerEntry(event, label))
        return ledger

    def save(self, path: str | os.PathLike) -> None:
        """Write the ledger as JSON to ``path``."""
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, indent=2, sort_keys=True)
            fh.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Ledger:
        """Read a ledger written by :meth:`save`.

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

    def __repr__(self) -> str:
        eps, _ = self.spent()
        return (
            f"Ledger(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"accountant={self._acc.name!r}): {len(self._entries)} spend(s), "
            f"epsilon spent {eps:.4g}"
        )
