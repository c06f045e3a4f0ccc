"""``dperm fit --ledger LOCATION``: reserve the fit before its data is read, commit it
before its model is written.

1. :func:`open_ledger` opens (or creates, with ``--ledger-epsilon``) the budget in the
   store — a SQLite file, a JSON store or a ``postgresql://`` URL (:mod:`dperm.stores`);
2. :func:`reserve_fit` reserves the fit's (ε, δ) (a default δ: :func:`charged_delta`,
   computed inside the reservation's transaction) in one transaction: refused
   (``BudgetExceededError``, exit 2) when the budget cannot afford it, before the fit —
   or, with ``--wait SECONDS``, retried while other fits' open reservations settle;
3. the fit runs; :func:`commit_fit` turns the reservation into the entry (the event
   the fit reports, its label, the model file and its SHA-256) — the model file is
   moved into place only after this commit;
4. an exception before the commit cancels the reservation when its cause is public (a
   parameter, the budget, Ctrl-C: :data:`~dperm.accounting.active.PUBLIC_FAILURES`) and
   commits it otherwise — a refund that depends on the data would tell about it
   (:func:`settles_ledger`, issue #37); a killed process leaves it reserved: charged.
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
    "delta_source",
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
    """Settle, when ``run`` raises, every reservation it made and did not commit: cancel it
    for a public cause (:data:`~dperm.accounting.active.PUBLIC_FAILURES`), else commit it
    with its planned event (the cause may depend on the data)."""

    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _OPEN.set([])
        try:
            return run(*args, **kwargs)
        except BaseException as exc:
            for reservation in _OPEN.get():
                with contextlib.suppress(Exception):  # unreachable store: stays charged
                    # imported by a command when it runs (`dperm --help` stays light); a
                    # reservation means the ledger, hence dperm.accounting, is loaded
                    from ..accounting.active import PUBLIC_FAILURES

                    if isinstance(exc, PUBLIC_FAILURES):
                        reservation.cancel(f"dperm fit: {type(exc).__name__} before the release")
                    else:
                        reservation.commit()
            raise
        finally:
            _OPEN.reset(token)

    return wrapper  # type: ignore[return-value]


def open_ledger(
    location: str | Path,
    epsilon: float | None,
    delta: float | None,
    name: str | None = None,
    key: str | Path | None = None,
):
    """The budget ``name`` at ``location``, or a new one with budget (``epsilon``,
    ``delta``); ``key``: the key file of a signed budget (``--ledger-key``).

    Raises
    ------
    InvalidPrivacyParameter
        A bad ``--ledger-epsilon``/``--ledger-delta`` (named so); the budget does not
        exist and no ``--ledger-epsilon`` is given; it exists and
        ``--ledger-epsilon``/``--ledger-delta`` differ from its budget.
    LedgerStoreError, LedgerIntegrityError
        The store cannot be used, fails its hash-chain check, or was emptied (no budget
        is then created in it: ``dperm budget create``); a bad ``--ledger-budget`` name;
        a key that is not the budget's.
    """
    from .._validation import check_delta, check_epsilon
    from ..accounting import Ledger
    from ..exceptions import DataFileNotFoundError, LedgerStoreError
    from ..stores import as_key, check_budget_name

    if epsilon is not None:  # named as the user typed them, before any file is touched
        check_epsilon(epsilon, "--ledger-epsilon")
    if delta is not None:
        check_delta(delta, "--ledger-delta")
    if name is not None:
        check_budget_name(name, "--ledger-budget")
    signer = as_key(key)
    location = str(location)
    try:
        book = Ledger.open(location, name, key=signer)
    except (DataFileNotFoundError, LedgerStoreError) as exc:
        missing = isinstance(exc, DataFileNotFoundError) or str(exc).startswith("no budget")
        if not missing:
            raise
        if epsilon is None:
            raise InvalidPrivacyParameter(
                f"--ledger {location!r} holds no budget {name or 'default'!r}: pass "
                "--ledger-epsilon (and --ledger-delta) to create it"
            ) from None
        return Ledger.open(
            location, name, epsilon=epsilon, delta=1e-5 if delta is None else delta, key=signer
        )
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


def charged_delta(n: int, remaining: float) -> float:
    """The default δ of a fit charged to a ledger: min(1/n², 1e-5) (``n`` training rows;
    :func:`~dperm.accounting.active.default_delta`), capped at a half of the ledger's
    ``remaining`` δ (:data:`~dperm.accounting.active.DEFAULT_DELTA_SHARE`, the share
    ``dperm.budget`` gives a default-δ fit) — a public function of n and of what the
    ledger recorded.  The shares halve, so default-δ fits never exhaust the budget's δ."""
    from ..accounting.active import DEFAULT_DELTA_SHARE, default_delta

    rule = default_delta(n, budget_share=False)
    return min(rule, DEFAULT_DELTA_SHARE * remaining) or rule


def delta_source(delta: float, n: int) -> str:
    """Where the default δ of a ``--ledger`` fit came from, in words (the δ label)."""
    from ..accounting.active import default_delta

    if delta < default_delta(n, budget_share=False):
        return "default: ½ of the ledger's remaining δ"
    return "default min(1/n², 1e-5), within ½ of the ledger's remaining δ"


def reserve_fit(book, epsilon: float, delta: float | None, n: int, label: str, wait=None):
    """Reserve a fit of (ε, δ) before it reads its data; settled by :func:`commit_fit`
    or, on an exception, by :func:`settles_ledger`.  ``delta=None``: the default δ
    (:func:`charged_delta`), computed from the ledger's remaining δ *inside* the
    reservation's transaction — two fits reserving at once never take the same share.
    ``wait`` (``--wait``): seconds to wait for other fits' open reservations to settle
    when the fit would fit without them (:meth:`~dperm.accounting.Ledger.reserve`).

    Returns
    -------
    Reservation
        Its ``event`` is the reserved ``EpsilonDelta(epsilon, δ)``: δ is the fit's δ.

    Raises
    ------
    BudgetExceededError
        The budget cannot afford it (nothing is recorded): the message says what the
        committed fits spent and what the running fits' reservations hold.
    """
    from ..accounting.events import EpsilonDelta

    if delta is None:
        planned = lambda remaining: EpsilonDelta(epsilon, charged_delta(n, remaining))  # noqa: E731
    else:
        planned = EpsilonDelta(epsilon, delta)
    try:
        reservation = book.reserve(planned, label, wait=wait)
    except BudgetExceededError as exc:
        shown = "the default delta" if delta is None else f"delta={delta:g}"
        reason = getattr(exc, "reason", str(exc))
        raise BudgetExceededError(
            f"--ledger: a fit at epsilon={epsilon:g}, {shown} {reason} (budget "
            f"{book.name!r}: epsilon={book.epsilon:g}, delta={book.delta:g}); nothing was "
            "fitted or recorded"
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
    """The ``ledger_*`` keys of ``dperm fit --json``: the spend committed so far (this fit
    included; what has been released) and, apart, what other fits' open reservations
    hold (``ledger_held_epsilon``: the ε they add at the budget's δ)."""
    spent_eps, spent_delta = book.spent(reserved=False)
    held = book.held()
    return {
        "ledger": book.location,
        "ledger_budget": book.name,
        "ledger_entry": entry.id,
        "ledger_spent_epsilon": float(spent_eps),
        "ledger_spent_delta": float(spent_delta),
        "ledger_held_epsilon": float(held.epsilon),
        "ledger_epsilon": float(book.epsilon),
        "ledger_delta": float(book.delta),
        "ledger_fits": sum(e.status == "committed" for e in book.entries),
        "ledger_reserved": held.reservations,
        "ledger_accountant": book.certified_by,
    }
