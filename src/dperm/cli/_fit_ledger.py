"""``dperm fit --ledger LOCATION``: reserve the fit before its data is read, commit it
before its model is written.

1. :func:`open_ledger` opens (or creates, with ``--ledger-epsilon``) the budget in the
   store — a SQLite file, a JSON store or a ``postgresql://`` URL (:mod:`dperm.stores`);
2. :func:`reserve_fit` reserves the fit's (ε, δ) (a default δ: :func:`charged_delta`)
   in one transaction: refused
   (``BudgetExceededError``, exit 2) when the budget cannot afford it, before the fit;
3. the fit runs; :func:`commit_fit` turns the reservation into the entry (the event
   the fit reports, its label, the model file and its SHA-256) — the model file is
   moved into place only after this commit;
4. an exception before the commit cancels the reservation (:func:`settles_ledger`);
   a killed process leaves it reserved: charged (fail closed).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..exceptions import BudgetExceededError, InvalidPrivacyParameter

__all__ = [
    "charged_delta",
    "commit_fit",
    "ledger_keys",
    "open_ledger",
    "reserve_fit",
    "settles_ledger",
]

F = TypeVar("F", bound=Callable[..., Any])
#: the reservations of the running ``run_fit`` not yet committed
_OPEN: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "dperm_cli_reservations", default=None
)


def settles_ledger(run: F) -> F:
    """Cancel, when ``run`` raises, every reservation it made and did not commit."""

    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _OPEN.set([])
        try:
            return run(*args, **kwargs)
        except BaseException as exc:
            for reservation in _OPEN.get():
                with contextlib.suppress(Exception):  # unreachable store: stays charged
                    reservation.cancel(f"dperm fit: {type(exc).__name__} before the release")
            raise
        finally:
            _OPEN.reset(token)

    return wrapper  # type: ignore[return-value]


def open_ledger(location: str | Path, epsilon: float | None, delta: float | None, name=None):
    """The budget ``name`` at ``location``, or a new one with budget (``epsilon``, ``delta``).

    Raises
    ------
    InvalidPrivacyParameter
        When the budget does not exist and no ``--ledger-epsilon`` is given, or when it
        exists and ``--ledger-epsilon``/``--ledger-delta`` differ from its budget.
    LedgerStoreError, LedgerIntegrityError
        The store cannot be used, or fails its hash-chain check.
    """
    from ..accounting import Ledger
    from ..exceptions import DataFileNotFoundError, LedgerStoreError

    location = str(location)
    try:
        book = Ledger.open(location, name)
    except (DataFileNotFoundError, LedgerStoreError) as exc:
        missing = isinstance(exc, DataFileNotFoundError) or str(exc).startswith("no budget")
        if not missing:
            raise
        if epsilon is None:
            raise InvalidPrivacyParameter(
                f"--ledger {location!r} holds no budget {name or 'default'!r}: pass "
                "--ledger-epsilon (and --ledger-delta) to create it"
            ) from None
        return Ledger.open(location, name, epsilon=epsilon, delta=1e-5 if delta is None else delta)
    # an option that would do nothing is an error: the budget of a saved ledger is fixed
    for flag, given, kept in (
        ("--ledger-epsilon", epsilon, book.epsilon),
        ("--ledger-delta", delta, book.delta),
    ):
        if given is not None and not math.isclose(float(given), float(kept), rel_tol=1e-12):
            raise InvalidPrivacyParameter(
                f"{flag} {given:g} differs from the budget {kept:g} of the existing ledger "
                f"{location!r}; a ledger's budget is fixed when it is created (drop {flag}, "
                "or use another --ledger-budget or store)"
            )
    return book


def charged_delta(book, delta: float | None, n: int) -> float:
    """The δ of a fit charged to ``book``: ``delta``, or when it is None the default
    1/n² (``n`` training rows), capped at a half of the ledger's remaining δ."""
    if delta is not None:
        return delta
    return min(1.0 / n**2, 0.5 * book.remaining_delta()) or 1.0 / n**2


def reserve_fit(book, epsilon: float, delta: float, label: str):
    """Reserve a fit of (ε, δ) before it reads its data; settled by :func:`commit_fit`
    or, on an exception, by :func:`settles_ledger`.

    Raises
    ------
    BudgetExceededError
        The budget cannot afford it (nothing is recorded).
    """
    from ..accounting.events import EpsilonDelta

    try:
        reservation = book.reserve(EpsilonDelta(epsilon, delta), label)
    except BudgetExceededError:
        raise BudgetExceededError(
            f"--ledger: a fit at epsilon={epsilon:g}, delta={delta:g} would exceed the budget "
            f"(epsilon={book.epsilon:g}, delta={book.delta:g}; "
            f"remaining epsilon {book.remaining_epsilon():.6g})"
        ) from None
    pending = _OPEN.get()
    if pending is not None:
        pending.append(reservation)
    return reservation


def commit_fit(reservation, est, label: str, model: tuple[Path, Path] | None = None) -> Any:
    """Commit ``reservation`` with the fit's event, and the model file about to be
    moved into place: ``model`` = (its final path, the staged file whose SHA-256 is
    recorded)."""
    sha = None
    final = None
    if model is not None:
        final, staged = model
        sha = hashlib.sha256(Path(staged).read_bytes()).hexdigest()
    entry = reservation.commit(
        getattr(est, "dp_event_", None),
        label=label,
        model=None if final is None else str(Path(final).resolve()),
        model_sha256=sha,
    )
    pending = _OPEN.get()
    if pending is not None and reservation in pending:
        pending.remove(reservation)
    return entry


def ledger_keys(book, entry) -> dict[str, Any]:
    """The ``ledger_*`` keys of ``dperm fit --json``."""
    spent_eps, spent_delta = book.spent()
    return {
        "ledger": book.location,
        "ledger_budget": book.name,
        "ledger_entry": entry.id,
        "ledger_spent_epsilon": float(spent_eps),
        "ledger_spent_delta": float(spent_delta),
        "ledger_epsilon": float(book.epsilon),
        "ledger_delta": float(book.delta),
        "ledger_fits": len(book.entries),
        "ledger_reserved": len(book.reservations),
        "ledger_accountant": book.certified_by,
    }
