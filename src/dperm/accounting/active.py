"""Active budgets: every private fit of dperm charges the ledgers of the enclosing
``with ledger.active():`` / ``with dperm.budget(…):`` blocks, before it reads its data.

The protocol of one fit (``reserve → fit → commit``):

1. before the fit reads its data, :func:`charge` *reserves* the event it is
   calibrated to in every active ledger — all or nothing; a ledger that cannot
   afford it raises :class:`~dperm.exceptions.BudgetExceededError` and nothing runs;
2. the fit runs inside :func:`fit_scope` (the estimators' ``fit``, ``DPStandardScaler``,
   ``DPPCA``, ``DPMLPClassifier``, ``PrivateRandomSearch``; the algorithm functions and
   :func:`dperm.networks.fit` through :func:`accounted_call`);
3. on success the reservation is *committed* with the event the fit reports
   (``dp_event_``); on an exception it is *cancelled* (nothing was released); if the
   process dies in between, it stays charged (fail closed).

A ``charge`` outside any fit scope is committed at once (a plain spend).  A fit scope
covers everything that runs inside it: a function wrapped by :func:`accounted_call`
called inside another fit's scope (an estimator calling ``dp_sgd.fit``) charges
nothing — the enclosing fit has charged the whole release.  The active
ledgers live in a :class:`contextvars.ContextVar`, so they follow the code that runs
in this context and are invisible to other processes and to threads started without
a copy of the context.  Inside the block joblib's default backend is set to
``"sequential"`` (``joblib.parallel_config``): scikit-learn's ``n_jobs`` then runs
every fit in this process, where it is counted.  A fit that still runs in a worker
process started inside the block (an explicit ``backend=``) finds no active ledger
but the ``DPERM_ACTIVE_BUDGET`` mark in its environment and is refused — never
silently not counted.  (A ledger kept in a store — SQLite, PostgreSQL — can be opened
by each worker itself: ``dperm.budget("budget.db")`` there.)
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..exceptions import BudgetExceededError, InvalidPrivacyParameter
from .events import DpEvent

__all__ = [
    "DEFAULT_DELTA_SHARE",
    "accounted_call",
    "accounted_fit",
    "active_ledgers",
    "charge",
    "default_delta",
    "fit_scope",
    "planned",
    "suspended",
]

F = TypeVar("F", bound=Callable[..., Any])

#: the ledgers of the enclosing ``Ledger.active()`` blocks, innermost last
ACTIVE: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
    "dperm_active_ledgers", default=()
)
#: set (to the pid) while a budget is active, inherited by worker processes
ENV_MARK = "DPERM_ACTIVE_BUDGET"
#: the reservations of the innermost fit scope (None outside any)
_SCOPE: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "dperm_fit_scope", default=None
)
#: the deferred charge of the innermost :func:`accounted_call` whose event is known only
#: once the fit has planned it (None: no charge is waiting for :func:`planned`)
_DEFERRED: contextvars.ContextVar[_Deferred | None] = contextvars.ContextVar(
    "dperm_deferred_charge", default=None
)


def active_ledgers() -> tuple[Any, ...]:
    """The ledgers of the enclosing :meth:`Ledger.active` blocks, outermost first."""
    return ACTIVE.get()


def charge(event: DpEvent, label: str | None = None) -> None:
    """Reserve ``event`` in every active ledger, or in none (all or nothing).

    Called by every dperm private fit *before* it reads the data (with the event it
    is calibrated to).  Inside a :func:`fit_scope` the reservations are settled when
    the scope ends (committed, or cancelled on an exception); outside one they are
    committed at once.  Without an active ledger it does nothing — unless this
    process runs inside a worker of a process whose budget is active (the
    ``DPERM_ACTIVE_BUDGET`` mark), where the fit cannot be counted and is refused.

    Raises
    ------
    BudgetExceededError
        If the event does not fit in an active ledger (the message names its budget
        and what it has spent), or the fit runs in a worker process of an active budget.
    UnsupportedEventError
        If an active ledger's accountant cannot account the event.
    LedgerIntegrityError
        If an active ledger's store fails its hash-chain check.
    """
    ledgers = ACTIVE.get()
    if not ledgers:
        owner = os.environ.get(ENV_MARK)
        if owner is not None and owner != str(os.getpid()):
            raise BudgetExceededError(
                f"{label or 'a private fit'} runs in a worker process (pid {os.getpid()}) "
                f"while a dperm budget is active in process {owner}; its spend cannot be "
                "counted there, so it is refused. Run the fits in the budget's process "
                "(n_jobs=1, or joblib's default backend, which dperm.budget sets to "
                "'sequential')."
            )
        return
    done = []
    try:
        for ledger in ledgers:
            done.append(ledger._reserve(event, label, active=True))
    except BaseException:
        for reservation in reversed(done):  # nothing ran: free what was reserved
            reservation.cancel("refused by another active budget")
        raise
    scope = _SCOPE.get()
    if scope is None:  # no fit scope to settle it later: a plain spend
        for reservation in done:
            reservation.commit()
    else:
        scope.extend(done)


class FitOutcome:
    """What a :func:`fit_scope` commits: set :attr:`event` to the event the fit reports
    (None: the reserved event is committed)."""

    event: DpEvent | None = None


@contextlib.contextmanager
def fit_scope() -> Iterator[FitOutcome]:
    """Settle the reservations :func:`charge` makes inside the block.

    On a normal exit each is committed with ``outcome.event`` (the ledger keeps
    whichever of the reserved and the reported event gives the smaller total: both
    bound the fit); on an exception each is cancelled — the fit released nothing —
    and the exception propagates.  A process killed inside the block leaves them
    reserved: charged.

    Yields
    ------
    FitOutcome
    """
    pending: list = []
    outcome = FitOutcome()
    token = _SCOPE.set(pending)
    try:
        yield outcome
    except BaseException as exc:
        _SCOPE.reset(token)
        for reservation in reversed(pending):
            # a store that cannot be reached keeps the reservation: charged (fail closed)
            with contextlib.suppress(Exception):
                reservation.cancel(f"{type(exc).__name__} before the release")
        raise
    _SCOPE.reset(token)
    for reservation in pending:
        reservation.commit(outcome.event)


def _reported_event(out: Any) -> DpEvent | None:
    if isinstance(out, tuple):  # e.g. (index, Result) of a discrete selection
        found = [e for e in map(_reported_event, out) if e is not None]
        return found[0] if len(found) == 1 else None
    for name in ("dp_event_", "event"):
        event = getattr(out, name, None)
        if isinstance(event, DpEvent):
            return event
    return None


class _Deferred:
    """The charge of an :func:`accounted_call` waiting for the fit's planned event."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.charged = False


def planned(event: DpEvent) -> None:
    """Announce the event a running fit has just fixed, before its first noisy step.

    Called by the shared calibration of the gradient methods
    (:func:`dperm.algorithms._gradient_calibration.resolve_noise`) once the noise
    multiplier and the number of steps are known.  It reserves ``event`` (as
    :func:`charge`) only for an :func:`accounted_call` whose reservation could not be
    computed from its arguments (a given ``noise_multiplier`` and no ``epsilon``), and
    at most once per call; everywhere else it does nothing.

    Raises
    ------
    BudgetExceededError, UnsupportedEventError, LedgerIntegrityError
        As :func:`charge`.
    """
    slot = _DEFERRED.get()
    if slot is None or slot.charged:
        return
    slot.charged = True
    charge(event, slot.label)


def _must_charge() -> bool:
    """A budget is active here (or in the process that started this worker)."""
    if ACTIVE.get():
        return True
    owner = os.environ.get(ENV_MARK)
    return owner is not None and owner != str(os.getpid())


def accounted_call(
    plan: Callable[[inspect.Signature, tuple, dict], DpEvent | None],
) -> Callable[[F], F]:
    """Decorate a private function so that a direct call charges the active budgets.

    ``plan(signature, args, kwargs)`` returns the event to reserve *before* the
    function runs — an upper bound of what it will release, computed from the call's
    public arguments only, never from the data — or None when the event is known only
    once the function has planned its run (it then calls :func:`planned`).  The call:

    * outside every active budget, or inside another fit's scope (an estimator, a
      search, an enclosing accounted call: they charge the whole release), runs as is;
    * otherwise runs inside a :func:`fit_scope`: the planned event is reserved before
      the function starts (refused: :class:`~dperm.exceptions.BudgetExceededError`,
      nothing runs); with no planned event, the event the function announces through
      :func:`planned` is reserved then — and if it announces none, the event it returns
      is charged before it is released (refused: the result is not returned).  On
      success the reservation is committed with the event the result reports (its
      ``event``/``dp_event_``); on an exception it is cancelled.

    Used by :func:`dperm.algorithms.base.private_fit` (every public ``fit`` of
    :mod:`dperm.algorithms` and :func:`dperm.networks.fit`).
    """

    def decorate(fit: F) -> F:
        signature = inspect.signature(fit)
        label = f"{fit.__module__.removeprefix('dperm.')}.{fit.__qualname__}"

        @functools.wraps(fit)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _SCOPE.get() is not None or not _must_charge():
                return fit(*args, **kwargs)
            event = plan(signature, args, kwargs)
            slot = _Deferred(label) if event is None else None
            with fit_scope() as outcome:
                if event is not None:
                    charge(event, label)  # before the function reads anything
                token = _DEFERRED.set(slot)
                try:
                    out = fit(*args, **kwargs)
                finally:
                    _DEFERRED.reset(token)
                outcome.event = _reported_event(out)
                if slot is not None and not slot.charged:
                    if outcome.event is None:
                        raise BudgetExceededError(
                            f"{label} returned no privacy event to charge to the active "
                            "budget; its result is not released"
                        )
                    charge(outcome.event, label)  # before the result is released
            return out

        return wrapper  # type: ignore[return-value]

    return decorate


def accounted_fit(fit: F) -> F:
    """Run ``fit`` inside a :func:`fit_scope` that commits the event it reports (the
    ``dp_event_`` of the estimator it returns, or the ``event`` of a ``Result``)."""

    @functools.wraps(fit)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with fit_scope() as outcome:
            out = fit(*args, **kwargs)
            outcome.event = _reported_event(out)
        return out

    return wrapper  # type: ignore[return-value]


#: the share of an active budget's remaining δ that a fit with the default δ takes
DEFAULT_DELTA_SHARE = 0.5


def default_delta(n: int, *, budget_share: bool = True) -> float:
    """The δ of a fit whose ``delta=None``: min(1/n², 10⁻⁵), or less inside an active budget.

    Outside a budget: δ = min(1/n², 10⁻⁵), n the public size of the run — the number of
    training rows under the estimators' replace-one relation (the same for D and D′),
    the caller's public ``dataset_size`` under add/remove (the row count is private
    there).  1/n² keeps δ ≪ 1/n (publishing one random record in the clear is
    (0, 1/n)-DP); the cap 10⁻⁵ keeps a small file from a meaningless default (issue #36:
    a 2-row CSV was saved "ε = 1, δ = 0.25").  Inside ``dperm.budget`` /
    ``Ledger.active()`` (``budget_share=True``): δ = min(that, ½·remaining δ of every
    active ledger) — a public function of n and of what the budget has recorded
    (itself the output of earlier private fits), so a sequence of default-δ fits never
    exhausts the budget's δ (the shares halve: their sum stays below the budget's δ),
    and only ε can run out.  A budget with δ = 0 leaves the default as it is (the fit
    is then refused with a message naming δ).  This is the one place of the rule: the
    estimators, the function API (``delta=None``), the networks, the private search and
    ``dperm fit`` call it.

    Parameters
    ----------
    n : int ≥ 2
    budget_share : bool, default True
        Take the share of the active budgets into account (False: the rule of n alone,
        e.g. for a public tuning rule evaluated at the default δ).

    Returns
    -------
    float in (0, 10⁻⁵]

    Raises
    ------
    InvalidPrivacyParameter
        n < 2 (pass delta explicitly).

    Examples
    --------
    >>> import dperm
    >>> default_delta(1000)
    1e-06
    >>> default_delta(20)
    1e-05
    >>> with dperm.budget(3.0, 1e-7):
    ...     default_delta(1000)
    5e-08
    """
    if isinstance(n, bool) or not isinstance(n, int | float) or n < 2:
        raise InvalidPrivacyParameter(
            f"the default delta = min(1/n², 1e-5) needs n_samples ≥ 2, got n_samples = {n!r}; "
            "pass delta explicitly"
        )
    delta = min(1.0 / float(n) ** 2, 1e-5)
    if not budget_share:
        return delta
    for ledger in ACTIVE.get():
        share = DEFAULT_DELTA_SHARE * ledger.remaining_delta()
        if share > 0:
            delta = min(delta, share)
    return delta


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Inside the block no ledger is active: for a composite mechanism (e.g.
    :class:`~dperm.model_selection.PrivateRandomSearch`) that has already charged
    its own event — which covers every inner fit — so that the inner fits are not
    charged a second time (and their number, which the composite's guarantee may keep
    secret, is not recorded).  Only for code that charged the whole cost first."""
    token = ACTIVE.set(())
    try:
        yield
    finally:
        ACTIVE.reset(token)
