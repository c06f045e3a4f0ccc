"""Active budgets: every private fit of dperm charges the ledgers of the enclosing
``with ledger.active():`` / ``with dperm.budget(…):`` blocks, before it reads its data —
and the guarantee *released ⇒ charged* holds around the user's own code.

The protocol of one fit (``reserve → fit → commit``):

1. before the fit reads its data, :func:`charge` *reserves* the event it is
   calibrated to in every active ledger — all or nothing; a ledger that cannot
   afford it raises :class:`~dperm.exceptions.BudgetExceededError` and nothing runs;
2. the fit runs inside :func:`fit_scope` (the estimators' ``fit``, ``DPStandardScaler``,
   ``DPPCA``, ``DPMLPClassifier``, ``PrivateRandomSearch``; the algorithm functions and
   :func:`dperm.networks.fit` through :func:`accounted_call`);
3. on success the reservation is *committed* with the event the fit reports
   (``dp_event_``).  On an exception it is *cancelled* only when nothing can have been
   released and the cause is public (:data:`PUBLIC_FAILURES`: a parameter, a name, a
   missing extra, the budget, Ctrl-C, memory); otherwise it is committed with the planned
   event: once an iterate, a partial result or a fitted attribute has reached user code
   (:func:`user_hook`, :func:`releasing`), or the failure may depend on the data (a data
   refusal found after the reservation, a solver failure, a bug), a refund would release
   uncharged what the fit showed.  If the process dies in between, it stays charged.

A ``charge`` outside any fit scope is committed at once (a plain spend).

**Nested calls.**  Only the library's own calls skip a nested charge: an accounted
function called by dperm code (its caller's frame is in ``dperm``) while the library's
token is set — the token an enclosing fit sets around its own code (an estimator calling
``dp_sgd.fit``, ``fit_single_sample`` calling ``fit``) and clears around every call into
user code it makes (:func:`user_hook`: a callback, a per-example gradient, a scorer).
The methods of objects of the user's that a fit is handed (a loss class, a torch
module, a schedule) are called by dperm's code without a hook: a fit they call is the
user's by its caller's frame.  A private fit called from user code inside a fit is
charged like any other.

**Threads and processes.**  The active ledgers live in a :class:`contextvars.ContextVar`:
they follow the code of this context (asyncio tasks copy it), not new threads or other
processes.  Every block is also recorded (:mod:`dperm.accounting._activation`), so that a
fit that cannot charge an open budget is refused, never silently not counted: a fit in a
thread or task that does not see the budget of another thread of its process; in a process
forked while an in-memory budget was open (its copy cannot be charged); in a worker of a
process whose budget is open (the ``DPERM_ACTIVE_BUDGET`` environment mark, or a marker
file found among its ancestors: pools started before the block).  A stored budget seen by
a forked process is charged through that process's own connection; a worker can also open
a stored budget itself (``dperm.budget("budget.db")``).  Inside the block joblib's default
backend is ``"sequential"`` (``joblib.parallel_config``): scikit-learn's ``n_jobs`` then
runs every fit in this process, where it is counted.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import numbers
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import joblib

from ..exceptions import (
    BudgetExceededError,
    InvalidPrivacyParameter,
    LedgerIntegrityError,
    LedgerStoreError,
    MissingDependencyError,
    PrivacyLeakWarning,
    UnknownNameError,
    UnsupportedEventError,
)
from ._activation import ENV_MARK, ancestor_mark, close_block, open_block, open_blocks, still_open
from .events import DpEvent

__all__ = [
    "DEFAULT_DELTA_SHARE",
    "ENV_MARK",
    "PUBLIC_FAILURES",
    "FitScope",
    "accounted_call",
    "accounted_fit",
    "activated",
    "active_ledgers",
    "charge",
    "default_delta",
    "fit_scope",
    "planned",
    "releasing",
    "suspended",
    "user_hook",
]

F = TypeVar("F", bound=Callable[..., Any])

#: the ledgers of the enclosing ``Ledger.active()`` blocks, innermost last
ACTIVE: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
    "dperm_active_ledgers", default=()
)
#: the ledgers a composite suspended (:func:`suspended`), given back to user code
_SUSPENDED: contextvars.ContextVar[tuple[Any, ...] | None] = contextvars.ContextVar(
    "dperm_suspended_ledgers", default=None
)
#: the innermost fit scope (None outside any)
_SCOPE: contextvars.ContextVar[FitScope | None] = contextvars.ContextVar(
    "dperm_fit_scope", default=None
)
#: the library's token: the scope whose fit has charged the whole release, set while
#: dperm's own code runs inside it (None around user code)
_INTERNAL: contextvars.ContextVar[FitScope | None] = contextvars.ContextVar(
    "dperm_internal_call", default=None
)
#: the deferred charge of the innermost :func:`accounted_call` whose event is known only
#: once the fit has planned it (None: no charge is waiting for :func:`planned`)
_DEFERRED: contextvars.ContextVar[_Deferred | None] = contextvars.ContextVar(
    "dperm_deferred_charge", default=None
)

#: exceptions whose cause is public: raised after a reservation before anything reached
#: user code, they cancel it (a parameter, a name, a missing extra, the budget or its
#: store, a warning about a parameter turned into an error, Ctrl-C, exit, memory).  Every
#: other exception after a reservation commits it: its cause may depend on the data.
PUBLIC_FAILURES: tuple[type[BaseException], ...] = (
    InvalidPrivacyParameter,
    UnknownNameError,
    MissingDependencyError,
    BudgetExceededError,
    UnsupportedEventError,
    LedgerIntegrityError,
    LedgerStoreError,
    PrivacyLeakWarning,
    KeyboardInterrupt,
    SystemExit,
    MemoryError,
)


def active_ledgers() -> tuple[Any, ...]:
    """The ledgers of the enclosing :meth:`Ledger.active` blocks, outermost first."""
    return ACTIVE.get()


# ------------------------------------------------------------------ which budgets a fit charges
def _refused(label: str | None, why: str) -> BudgetExceededError:
    return BudgetExceededError(f"{label or 'a private fit'} {why}, so it is refused")


def _budgets(label: str | None) -> tuple[Any, ...]:
    """The ledgers a fit here charges — or BudgetExceededError when an open budget cannot
    be charged from here (another thread, a forked copy, a worker process)."""
    ledgers, pid = ACTIVE.get(), os.getpid()
    blocks = open_blocks() if (ledgers or _SUSPENDED.get() is None) else ()
    if any(b.pid != pid for b in blocks):  # forked: the parent's blocks, open or closed since
        closed = [b for b in blocks if b.pid != pid and not still_open(b)]
        if closed:
            mine = {id(b.ledger) for b in blocks if b.pid == pid}
            gone = {id(b.ledger) for b in closed} - mine
            blocks = tuple(b for b in blocks if b not in closed)
            ledgers = tuple(ledger for ledger in ledgers if id(ledger) not in gone)
    for block in blocks:
        if block.in_memory and block.pid != pid:
            raise _refused(
                label,
                f"runs in process {pid}, forked from process {block.pid} while its in-memory "
                "budget was active: a copy of that budget cannot be charged. Fit in the "
                "budget's process, or keep the budget in a store (dperm.budget('budget.db')): "
                "a forked process charges a stored budget through its own connection",
            )
    if ledgers:
        mark = ancestor_mark()
        if mark is not None and mark[1]:
            raise _refused(
                label,
                f"runs in process {pid}, a worker of process {mark[0]} whose in-memory "
                "budget is active and cannot be charged here",
            )
        return ledgers
    if _SUSPENDED.get() is not None:  # inside a composite that charged its whole cost
        return ()
    if any(block.pid == pid for block in blocks):
        raise _refused(
            label,
            f"runs in a thread (or task) of process {pid} that does not see the dperm budget "
            "active in another thread: it cannot be counted. Fit in the budget's thread, or "
            "run the thread in the budget's context (contextvars.copy_context().run, "
            "asyncio.to_thread), where it is charged",
        )
    if blocks:
        raise _refused(
            label,
            f"runs in process {pid}, forked from process {blocks[0].pid} while a stored budget "
            "was active, in a thread that did not see it: open the budget in this process "
            "(dperm.budget(LOCATION)) to be charged",
        )
    mark = ancestor_mark()
    if mark is not None:
        raise _refused(
            label,
            f"runs in a worker process (pid {pid}) while a dperm budget is active in process "
            f"{mark[0]}: its spend cannot be counted there. Run the fits in the budget's "
            "process (n_jobs=1, or joblib's default backend, which dperm.budget sets to "
            "'sequential'), or open a stored budget in the worker (dperm.budget(LOCATION))",
        )
    return ()


def charge(event: DpEvent, label: str | None = None) -> tuple[Any, ...]:
    """Reserve ``event`` in every active ledger, or in none (all or nothing); returns
    the reservations (empty without an active ledger) — what :func:`suspended` needs.

    Called by every dperm private fit *before* it reads the data (with the event it
    is calibrated to).  Inside a :func:`fit_scope` the reservations are settled when
    the scope ends (committed, or cancelled on an exception that released nothing);
    outside one they are committed at once.  Without an active ledger it does nothing —
    unless a budget is open that this fit cannot charge: in another thread of this
    process, in the process this one was forked from (an in-memory budget), or in a
    process this one is a worker of; the fit is then refused.

    Raises
    ------
    BudgetExceededError
        If the event does not fit in an active ledger (the message names its budget
        and what it has spent), or an open budget cannot be charged from here.
    UnsupportedEventError
        If an active ledger's accountant cannot account the event.
    LedgerIntegrityError
        If an active ledger's store fails its hash-chain check.
    """
    ledgers = _budgets(label)
    if not ledgers:
        return ()
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
        scope.reservations.extend(done)
    return tuple(done)


# ------------------------------------------------------------------ fit scopes
class FitScope:
    """What a :func:`fit_scope` settles.

    Attributes
    ----------
    event : DpEvent or None
        The event the fit reports; set it before the scope ends (None: the reserved
        event is committed).
    reservations : list of Reservation
        What :func:`charge` reserved inside the scope.
    shown : bool
        Something of the fit reached user code (a call-out, a fitted attribute).
    hands_out : bool
        The fit was handed objects of the user's (a loss class, a torch module, a
        callable) that see its iterates once its private steps have started.
    started : bool
        The private computation has started (the plan announced, or at once for a fit
        that announces none).
    """

    def __init__(self) -> None:
        self.event: DpEvent | None = None
        self.reservations: list = []
        self.shown = False
        self.hands_out = False
        self.started = False

    @property
    def released(self) -> bool:
        """Whether an exception now may follow a release (and must not refund it)."""
        return self.shown or (self.hands_out and self.started)


class fit_scope(contextlib.AbstractContextManager):
    """Settle the reservations :func:`charge` makes inside the block.

    On a normal exit each is committed with ``scope.event`` (the ledger keeps whichever
    of the reserved and the reported event gives the smaller total: both bound the
    fit).  On an exception each is cancelled if nothing can have been released
    (``not scope.released``) and the cause is public (:data:`PUBLIC_FAILURES`);
    otherwise it is committed with the reserved event — what the fit may have shown is
    charged — and the exception propagates.  A process killed inside the block leaves
    them reserved: charged.

    Yields
    ------
    FitScope
    """

    def __enter__(self) -> FitScope:
        self._scope = FitScope()
        self._token = _SCOPE.set(self._scope)
        return self._scope

    def __exit__(self, typ, exc, tb) -> bool:
        _SCOPE.reset(self._token)
        scope = self._scope
        if typ is None:
            for reservation in scope.reservations:
                reservation.commit(scope.event)
            return False
        keep = scope.released or not isinstance(exc, PUBLIC_FAILURES)
        for reservation in reversed(scope.reservations):
            # a store that cannot be reached keeps the reservation: charged (fail closed)
            with contextlib.suppress(Exception):
                if keep:
                    reservation.commit()
                else:
                    reservation.cancel(f"{typ.__name__} before the release")
        return False


def releasing() -> None:
    """Mark the innermost fit scope as released: an exception from now on commits.

    Called by an estimator just before it assigns its fitted attributes (``coef_``,
    ``dp_event_``, …), after every check and warning."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.shown = True


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
    multiplier and the number of steps are known.  It marks the private steps as
    started (objects of the user's the fit was handed see its iterates from now on),
    and reserves ``event`` (as :func:`charge`) only for an :func:`accounted_call` whose
    reservation could not be computed from its arguments (a given ``noise_multiplier``
    and no ``epsilon``), at most once per call.

    Raises
    ------
    BudgetExceededError, UnsupportedEventError, LedgerIntegrityError
        As :func:`charge`.
    """
    scope = _SCOPE.get()
    if scope is not None:
        scope.started = True
    slot = _DEFERRED.get()
    if slot is None or slot.charged:
        return
    slot.charged = True
    charge(event, slot.label)


# ------------------------------------------------------------------ user code
#: the top-level packages whose objects run no code of the user's (data, numerics, dperm)
_LIBRARY = frozenset(
    {
        "dperm", "builtins", "numpy", "scipy", "pandas", "dask", "distributed", "torch",
        "sklearn", "pyarrow", "polars", "xarray", "zarr", "sparse",
    }
)  # fmt: skip
#: arguments a fit wraps where it calls them (:func:`user_hook`)
_HOOKED = frozenset({"callback", "per_example_grad", "progress"})


def _package(obj: Any) -> str:
    return (getattr(obj, "__module__", None) or "").partition(".")[0]


def _user_code(value: Any) -> bool:
    """Whether calling ``value`` (or its methods) may run code of the user's."""
    if value is None or isinstance(value, str | bytes | numbers.Number):
        return False
    if isinstance(value, functools.partial):
        return _user_code(value.func)
    if isinstance(value, types.FunctionType | types.MethodType | types.BuiltinFunctionType):
        return _package(value) not in _LIBRARY
    cls = type(value)
    if _package(cls) not in _LIBRARY:
        return True
    modules = getattr(value, "modules", None)
    if _package(cls) == "torch" and callable(modules):  # a torch module of the user's layers
        return any(_package(type(m)) not in _LIBRARY for m in modules())
    return False


def _trained_in_place(value: Any) -> bool:
    """A torch module: the fit writes its iterates into the caller's object."""
    return callable(getattr(value, "named_parameters", None)) and callable(
        getattr(value, "modules", None)
    )


def _hands_out(args: tuple, kwargs: dict, direct: bool) -> bool:
    values = [*args, *(v for k, v in kwargs.items() if k not in _HOOKED)]
    return any(_user_code(v) or (direct and _trained_in_place(v)) for v in values)


def user_hook(fn: F | None) -> F | None:
    """``fn`` — user code a fit calls: a callback, a per-example gradient, a scorer —
    wrapped so that each call runs as the user's.

    Each call marks the innermost fit scope as shown (what the call receives has reached
    user code: an exception from now on commits), clears the library's token (a private
    fit called inside is charged) and gives back the budgets a composite suspended
    (:func:`suspended`).  dperm's own functions (a progress bar) and None are returned
    as they are.
    """
    if fn is None or not _user_code(fn):
        return fn

    @functools.wraps(fn)
    def hook(*args: Any, **kwargs: Any) -> Any:
        scope = _SCOPE.get()
        if scope is not None:
            scope.shown = True
        tokens: list = [(_INTERNAL, _INTERNAL.set(None)), (_DEFERRED, _DEFERRED.set(None))]
        held = _SUSPENDED.get()
        if held is not None:
            tokens += [(ACTIVE, ACTIVE.set(held)), (_SUSPENDED, _SUSPENDED.set(None))]
        try:
            return fn(*args, **kwargs)
        finally:
            for var, token in reversed(tokens):
                var.reset(token)

    return hook  # type: ignore[return-value]


def _from_dperm(frame: types.FrameType | None) -> bool:
    return frame is not None and _package_name(frame) == "dperm"


def _package_name(frame: types.FrameType) -> str:
    return str(frame.f_globals.get("__name__", "")).partition(".")[0]


# ------------------------------------------------------------------ the decorators
def _run_internal(scope: FitScope, fit: Callable, announces: bool, args, kwargs) -> Any:
    """A call made by dperm inside a fit that charged the whole release."""
    if not announces:
        scope.started = True
    if _hands_out(args, kwargs, direct=False):
        scope.hands_out = True
    return fit(*args, **kwargs)


def accounted_call(
    plan: Callable[[inspect.Signature, tuple, dict], DpEvent | None],
) -> Callable[[F], F]:
    """Decorate a private function so that a direct call charges the active budgets.

    ``plan(signature, args, kwargs)`` returns the event to reserve *before* the
    function runs — an upper bound of what it will release, computed from the call's
    public arguments only, never from the data — or None when the event is known only
    once the function has planned its run (it then calls :func:`planned`; a function
    with a ``noise_multiplier`` parameter announces its plan so).  The call:

    * made by dperm code while the library's token is set (an estimator calling it,
      another accounted function: they charge the whole release) runs as is;
    * outside every active budget runs as is (refused when an open budget cannot be
      charged from here: :func:`charge`);
    * otherwise runs inside a :func:`fit_scope`: the planned event is reserved before
      the function starts (refused: :class:`~dperm.exceptions.BudgetExceededError`,
      nothing runs); with no planned event, the event the function announces through
      :func:`planned` is reserved then — and if it announces none, the event it returns
      is charged before it is released (refused: the result is not returned).  On
      success the reservation is committed with the event the result reports (its
      ``event``/``dp_event_``); an exception settles it as :func:`fit_scope` says.

    Used by :func:`dperm.algorithms.base.private_fit` (every public ``fit`` of
    :mod:`dperm.algorithms` and :func:`dperm.networks.fit`).
    """

    def decorate(fit: F) -> F:
        signature = inspect.signature(fit)
        label = f"{fit.__module__.removeprefix('dperm.')}.{fit.__qualname__}"
        announces = "noise_multiplier" in signature.parameters

        @functools.wraps(fit)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            owner = _INTERNAL.get()
            if owner is not None and _from_dperm(sys._getframe(1)):
                return _run_internal(owner, fit, announces, args, kwargs)
            if not _budgets(label):  # refused here when an open budget cannot be charged
                return fit(*args, **kwargs)
            event = plan(signature, args, kwargs)
            slot = _Deferred(label) if event is None else None
            handed = _hands_out(args, kwargs, direct=True)
            with fit_scope() as scope:
                scope.hands_out, scope.started = handed, not announces
                if event is not None:
                    charge(event, label)  # before the function reads anything
                deferred = _DEFERRED.set(slot)
                token = _INTERNAL.set(scope)
                try:
                    out = fit(*args, **kwargs)
                finally:
                    _INTERNAL.reset(token)
                    _DEFERRED.reset(deferred)
                scope.event = _reported_event(out)
                if slot is not None and not slot.charged:
                    if scope.event is None:
                        raise BudgetExceededError(
                            f"{label} returned no privacy event to charge to the active "
                            "budget; its result is not released"
                        )
                    charge(scope.event, label)  # before the result is released
            return out

        return wrapper  # type: ignore[return-value]

    return decorate


def accounted_fit(fit: F) -> F:
    """Run ``fit`` inside a :func:`fit_scope` that commits the event it reports (the
    ``dp_event_`` of the estimator it returns, or the ``event`` of a ``Result``), with
    the library's token set: the algorithm functions it calls charge nothing more."""

    @functools.wraps(fit)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with fit_scope() as scope:
            scope.started = True
            token = _INTERNAL.set(scope)
            try:
                out = fit(*args, **kwargs)
            finally:
                _INTERNAL.reset(token)
            scope.event = _reported_event(out)
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
def suspended(covering: tuple[Any, ...]) -> Iterator[None]:
    """Inside the block no ledger is active: for a composite mechanism (e.g.
    :class:`~dperm.model_selection.PrivateRandomSearch`) that has already charged
    its own event — which covers every inner fit — so that the inner fits are not
    charged a second time (and their number, which the composite's guarantee may keep
    secret, is not recorded).  User code called inside (:func:`user_hook`) sees the
    suspended budgets again.

    Parameters
    ----------
    covering : tuple of Reservation
        What :func:`charge` returned for the composite's whole event: every active
        ledger must hold one of them — a budget is suspended only by the code that
        charged it for everything the block runs.

    Raises
    ------
    BudgetExceededError
        An active ledger has no reservation in ``covering`` (nothing is suspended).
    """
    charged = {id(r.ledger) for r in covering}
    uncovered = [ledger for ledger in ACTIVE.get() if id(ledger) not in charged]
    if uncovered:
        raise BudgetExceededError(
            f"suspended(): the active budget {getattr(uncovered[0], 'name', '?')!r} was not "
            "charged by the code that suspends it (pass what charge() returned for the "
            "whole cost of the block); nothing was suspended"
        )
    held = _SUSPENDED.get()
    saved = _SUSPENDED.set(ACTIVE.get() if held is None else held)
    token = ACTIVE.set(())
    try:
        yield
    finally:
        ACTIVE.reset(token)
        _SUSPENDED.reset(saved)


@contextlib.contextmanager
def activated(ledger: Any) -> Iterator[Any]:
    """The body of :meth:`Ledger.active`: ``ledger`` is charged by every fit in this
    context, recorded in the registry of open blocks (threads, forked processes) and
    marked for worker processes (:mod:`dperm.accounting._activation`); joblib's default
    backend is ``"sequential"`` inside."""
    block = open_block(ledger)
    try:
        token = ACTIVE.set((*ACTIVE.get(), ledger))
        try:
            with joblib.parallel_config(backend="sequential"):
                yield ledger
        finally:
            ACTIVE.reset(token)
    finally:
        close_block(block)
