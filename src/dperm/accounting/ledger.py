"""A privacy budget ledger: record what every fit spent and refuse overspending.

The default ledger uses the ``"auto"`` accountant
(:class:`~dperm.accounting.auto.AutoAccountant`): the PLD, RDP and composition
accountants run in parallel, each dropping out the first time it cannot
account an event, and the ledger reports the smallest ε among those that
accepted the whole history — each is a valid upper bound, so their minimum
is too — and which one certified it (:attr:`Ledger.certified_by`).  It
accepts every event dperm emits (``PureEpsilon``, ``EpsilonDelta``,
``Gaussian``, ``Laplace``, Poisson-subsampled Gaussians of either relation,
``SampledWithoutReplacement``, and compositions of these), so one ledger can
hold, e.g., an objective-perturbation fit and a DP-SGD fit.

A ledger accounts one neighbouring relation (``neighbouring=``, default
replace-one).  Add/remove events spent into a replace-one ledger are
converted soundly (:func:`~dperm.accounting.events.to_replace_one`) and the
entry records it; replace-one events are refused by an add/remove ledger.

**Active budgets.**  ``with ledger.active():`` (or ``with dperm.budget(3, 1e-5) as
ledger:``) makes every private fit of dperm inside the block — estimators,
``DPStandardScaler``, the fits of a ``Pipeline``, a ``GridSearchCV`` or
``cross_val_score`` — spend the (ε, δ) it is calibrated to into the ledger *before* it
touches the data (:func:`charge`), and raise
:class:`~dperm.exceptions.BudgetExceededError` naming the budget when it would not fit.
Nothing is held by the estimators (they stay clone-safe: design principle 3); the
active ledgers live in a :class:`contextvars.ContextVar`, so they follow the code that
runs in this context and are invisible to other processes and to threads started
without a copy of the context.  Inside the block joblib's default backend is therefore
set to ``"sequential"`` (``joblib.parallel_config``): scikit-learn's ``n_jobs`` then
runs every fit in this process, where it is counted.  A fit that still runs in a worker
process started inside the block (an explicit ``backend=`` that overrides the default)
finds no active ledger but the ``DPERM_ACTIVE_BUDGET`` mark in its environment and is
refused — never silently not counted.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .._validation import check_delta, check_epsilon
from ..exceptions import (
    BudgetExceededError,
    DataFileNotFoundError,
    InvalidPrivacyParameter,
    UnsupportedEventError,
)
from .auto import AutoAccountant
from .base import Accountant
from .events import DpEvent, EpsilonDelta, check_neighbouring, event_from_dict
from .registry import accountant_factory, get_accountant

__all__ = [
    "Ledger",
    "LedgerEntry",
    "active_ledgers",
    "budget",
    "charge",
    "default_delta",
    "suspended",
]

_FORMAT_VERSION = 2  # 2: neighbouring relations; version-1 files still load


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded spend.

    Attributes
    ----------
    event : DpEvent
        The event as spent.
    label : str or None
        A note (e.g. the estimator and dataset).
    accounted : DpEvent or None
        The replace-one event actually accounted when ``event`` was an
        add/remove event converted by
        :func:`~dperm.accounting.events.to_replace_one`; ``None`` otherwise.
    """

    event: DpEvent
    label: str | None = None
    accounted: DpEvent | None = None

    @property
    def neighbouring(self) -> str:
        """The relation the event was stated for (before any conversion)."""
        return self.event.neighbouring

    @property
    def converted(self) -> bool:
        """Whether the event was converted to replace-one to be accounted."""
        return self.accounted is not None


_ROUNDING_SLACK = 1e-12


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
        Total δ budget in [0, 1) (0 for pure-DP budgets).
    accountant : str, Accountant or callable, default "auto"
        An accountant name (see :func:`~dperm.accounting.get_accountant`;
        ``"auto"`` keeps all of them in parallel and reports the smallest valid
        ε), an *empty* accountant instance (its configuration is saved by
        :meth:`save`) or a factory.
    neighbouring : {"replace-one", "add-remove"}, optional
        The relation the budget is for.  Default: replace-one for an
        accountant name; an instance keeps its own relation (a different
        ``neighbouring`` is refused).

    Raises
    ------
    InvalidPrivacyParameter
        For an invalid budget or relation, or an accountant instance that
        already holds events or accounts another relation.
    UnknownNameError
        For an unknown accountant name.

    Examples
    --------
    >>> from dperm.accounting import EpsilonDelta, Gaussian, Ledger, PoissonSampled, SelfComposed
    >>> ledger = Ledger(epsilon=3.0, delta=1e-5)
    >>> sgd = SelfComposed(PoissonSampled(0.01, Gaussian(0.6)), 1000)  # replace-one DP-SGD
    >>> eps = ledger.spend(sgd, "dp-sgd")
    >>> ledger.certified_by
    'pld'
    >>> total = ledger.spend(EpsilonDelta(0.5, 1e-6), "objective perturbation")
    >>> total <= 3.0 and ledger.neighbouring == "replace-one"
    True
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        accountant: str | Accountant | Callable[[], Accountant] = "auto",
        *,
        neighbouring: str | None = None,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta, allow_zero=True)
        if neighbouring is not None:
            neighbouring = check_neighbouring(neighbouring)
        acc = accountant_factory(accountant, neighbouring=neighbouring)()
        if acc.events:
            raise InvalidPrivacyParameter(
                f"the ledger's accountant must be empty, got one holding {len(acc.events)} event(s)"
            )
        self._acc = acc
        self._entries: list[LedgerEntry] = []

    # ------------------------------------------------------------------ API
    @property
    def neighbouring(self) -> str:
        """The relation the budget and every reported ε are for."""
        return self._acc.neighbouring

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
        """The recorded events, in order (as spent, before any conversion)."""
        return tuple(e.event for e in self._entries)

    @property
    def certified_by(self) -> str:
        """The accountant (method) that certifies the ε reported by :meth:`spent`.

        For the ``"auto"`` accountant, the method with the smallest ε at the
        ledger's δ (``"pld"``, ``"rdp"``, ``"optimal"``, ``"advanced"``,
        ``"basic"`` or ``"split"``); otherwise the accountant's name.
        """
        if isinstance(self._acc, AutoAccountant):
            return self._acc.best_method(self.delta)[0]
        return self._acc.name

    def _would_spend(self, event: DpEvent) -> tuple[Accountant, float]:
        if not isinstance(event, DpEvent):
            raise UnsupportedEventError(f"a Ledger spends DpEvents, got {event!r}")
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
        return self._within_budget(self._would_spend(event)[1])

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
            The total ε spent after this event, at the ledger's δ, for the
            ledger's relation.

        Raises
        ------
        BudgetExceededError
            If the total ε would exceed the budget; the message gives the
            would-be ε and nothing is recorded.
        UnsupportedEventError
            If the accountant cannot account ``event`` (or it is a replace-one
            event in an add/remove ledger); nothing is recorded.
        """
        if label is not None and not isinstance(label, str):
            raise InvalidPrivacyParameter(f"label must be a string or None, got {label!r}")
        trial, eps = self._would_spend(event)
        if not self._within_budget(eps):
            raise BudgetExceededError(
                f"spending {event!r} {self._exhausted(event, eps)}; nothing was recorded"
            )
        self._record(trial, event, label)
        return eps

    def delta_spent(self) -> float:
        """Σδ of the (ε, δ) entries (:class:`~dperm.accounting.events.EpsilonDelta`,
        what every estimator charges): the part of the budget's δ they use up —
        basic composition adds their δ, and the ledger's ε at its δ is infinite once
        that sum exceeds it.  Other events have no separate δ (0 here)."""
        return float(sum(e.event.delta for e in self._entries if isinstance(e.event, EpsilonDelta)))

    def remaining_delta(self) -> float:
        """Budget δ minus :meth:`delta_spent` (≥ 0)."""
        return max(0.0, self.delta - self.delta_spent())

    def _exhausted(self, event: DpEvent, eps: float) -> str:
        """Which of the budget's δ and ε the event would exhaust, in words."""
        need = event.delta if isinstance(event, EpsilonDelta) else 0.0
        if eps == float("inf") or need > self.remaining_delta() * (1.0 + _ROUNDING_SLACK):
            return (
                f"would exhaust the budget's DELTA: it needs delta={need:.3g} but only "
                f"{self.remaining_delta():.3g} of delta={self.delta:g} remains "
                f"({self.delta_spent():.3g} already spent by {len(self._entries)} fit(s)); "
                "give the fit a smaller delta, or leave delta=None (the default then takes "
                "a share of the remaining delta)"
                + (
                    " — a budget with delta=0 holds only pure-epsilon fits"
                    if not self.delta
                    else ""
                )
            )
        return (
            f"would exhaust the budget's EPSILON: the total would be epsilon={eps:.6g} at "
            f"delta={self.delta:g} ({self.neighbouring}), above the budget "
            f"epsilon={self.epsilon:g} (already spent {self.spent()[0]:.6g})"
        )

    def _within_budget(self, eps: float) -> bool:
        # Budgets summed in floating point (0.1 + 0.1 + 0.8) exceed the exact sum by a few ulps;
        # a relative slack of 1e-12 accepts them.  It is far below any accountant's own numerical
        # error (PLD discretisation, RDP order grid), so no claim above the budget is certified.
        return eps <= self.epsilon * (1.0 + _ROUNDING_SLACK)

    def _record(self, trial: Accountant, event: DpEvent, label: str | None) -> None:
        converted = len(trial.conversions) > len(self._acc.conversions)
        self._acc = trial
        accounted = trial.conversions[-1].converted if converted else None
        self._entries.append(LedgerEntry(event, label, accounted))

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

    # ------------------------------------------------------------ active budget
    @contextlib.contextmanager
    def active(self) -> Iterator[Ledger]:
        """Make this ledger the budget of every dperm private fit inside the block.

        Each fit spends the (ε, δ) it is calibrated to, as
        ``EpsilonDelta(ε, δ, neighbouring="replace-one")``, before it runs
        (:func:`charge`); a fit that would exceed the budget raises
        :class:`~dperm.exceptions.BudgetExceededError` and runs nothing.  Blocks nest:
        a fit spends into every active ledger (and is refused if any is full).
        joblib's default backend is "sequential" inside the block (module docstring).

        Yields
        ------
        Ledger
            ``self``.

        Examples
        --------
        >>> import numpy as np
        >>> from dperm import DPLogisticRegression, Ledger
        >>> X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(200, 2))
        >>> y = np.where(X[:, 0] > 0, 1, -1)
        >>> ledger = Ledger(epsilon=1.5, delta=1e-3)
        >>> with ledger.active():
        ...     _ = DPLogisticRegression(epsilon=1.0, classes=[-1, 1], random_state=0).fit(X, y)
        >>> [e.label for e in ledger.entries], ledger.spent()[0] <= 1.0
        (['DPLogisticRegression'], True)
        """
        import joblib

        stack = _ACTIVE.get()
        token = _ACTIVE.set((*stack, self))
        mark = os.environ.get(_ENV_MARK)
        os.environ[_ENV_MARK] = str(os.getpid())
        try:
            with joblib.parallel_config(backend="sequential"):
                yield self
        finally:
            _ACTIVE.reset(token)
            if mark is None:
                os.environ.pop(_ENV_MARK, None)
            else:
                os.environ[_ENV_MARK] = mark

    # ------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible description (budget, relation, accountant, entries)."""
        return {
            "format": "dperm.Ledger",
            "version": _FORMAT_VERSION,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbouring": self.neighbouring,
            "accountant": {"name": self._acc.name, "config": self._acc.get_config()},
            "entries": [
                {
                    "event": e.event.to_dict(),
                    "label": e.label,
                    "neighbouring": e.neighbouring,
                    "accounted": None if e.accounted is None else e.accounted.to_dict(),
                }
                for e in self._entries
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ledger:
        """Rebuild a ledger from :meth:`to_dict` output, replaying its events.

        Version-1 files (written before relations were recorded) load with
        their events as replace-one events.

        Raises
        ------
        InvalidPrivacyParameter
            If ``data`` is not a serialized ledger, or its events cannot be
            replayed.
        """
        if not isinstance(data, dict) or data.get("format") != "dperm.Ledger":
            raise InvalidPrivacyParameter("not a serialized dperm Ledger")
        if data.get("version") not in (1, _FORMAT_VERSION):
            raise InvalidPrivacyParameter(
                f"unsupported Ledger format version {data.get('version')!r}"
            )
        try:
            spec = data["accountant"]
            acc = get_accountant(spec["name"], **spec.get("config", {}))
            stated = data.get("neighbouring")
            if stated is not None and check_neighbouring(stated) != acc.neighbouring:
                raise InvalidPrivacyParameter(
                    f"serialized Ledger states neighbouring={stated!r} but its accountant "
                    f"accounts {acc.neighbouring!r}"
                )
            ledger = cls(data["epsilon"], data["delta"], accountant=acc)
            entries = [(event_from_dict(e["event"]), e.get("label")) for e in data["entries"]]
        except (KeyError, TypeError) as exc:
            raise InvalidPrivacyParameter(f"malformed serialized Ledger: {exc!r}") from None
        for event, label in entries:
            # replay without budget checks: this is history, already spent
            trial = ledger._acc.copy()
            try:
                trial.compose(event)
            except UnsupportedEventError as exc:
                raise InvalidPrivacyParameter(
                    f"cannot replay the serialized Ledger's event {event!r}: {exc}"
                ) from None
            ledger._record(trial, event, label)
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
        how = f", certified by {self.certified_by!r}" if self._entries else ""
        return (
            f"Ledger(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"accountant={self._acc.name!r}, neighbouring={self.neighbouring!r}): "
            f"{len(self._entries)} spend(s), epsilon spent {eps:.4g}{how}"
        )


# ------------------------------------------------------------------ active budgets
#: the ledgers of the enclosing ``Ledger.active()`` blocks, innermost last
_ACTIVE: contextvars.ContextVar[tuple[Ledger, ...]] = contextvars.ContextVar(
    "dperm_active_ledgers", default=()
)
#: set (to the pid) while a budget is active, inherited by worker processes
_ENV_MARK = "DPERM_ACTIVE_BUDGET"


def active_ledgers() -> tuple[Ledger, ...]:
    """The ledgers of the enclosing :meth:`Ledger.active` blocks, outermost first."""
    return _ACTIVE.get()


@contextlib.contextmanager
def budget(
    epsilon: float,
    delta: float,
    accountant: str | Accountant | Callable[[], Accountant] = "auto",
) -> Iterator[Ledger]:
    """``with dperm.budget(epsilon, delta) as ledger:`` — a new :class:`Ledger` made
    active for the block (:meth:`Ledger.active`).

    Parameters
    ----------
    epsilon : float > 0
        Total ε of every dperm private fit inside the block.
    delta : float in [0, 1)
        Total δ; the ledger's accountant reports ε at this δ.  Fits with δ > 0 (the
        estimators' default δ = 1/n², for instance) need a budget δ > 0: with δ = 0
        their ε is infinite.
    accountant : str, Accountant or callable, default "auto"

    Yields
    ------
    Ledger

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``epsilon`` or ``delta``.
    BudgetExceededError
        (From a fit inside the block) when its (ε, δ) would exceed the budget.

    Examples
    --------
    >>> import numpy as np
    >>> import dperm
    >>> from sklearn.model_selection import GridSearchCV
    >>> X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(300, 2))
    >>> y = np.where(X[:, 0] > 0, 1, -1)
    >>> grid = GridSearchCV(dperm.DPLogisticRegression(epsilon=1.0, classes=[-1, 1]),
    ...                     {"alpha": [0.01, 0.1, 1.0]}, cv=3, error_score="raise")
    >>> with dperm.budget(epsilon=3.0, delta=1e-3) as ledger:
    ...     grid.fit(X, y)
    Traceback (most recent call last):
    ...
    dperm.exceptions.BudgetExceededError: ...
    >>> len(ledger.entries)  # the three fits that fitted in the budget
    3
    """
    ledger = Ledger(epsilon, delta, accountant)
    with ledger.active():
        yield ledger


def charge(event: DpEvent, label: str | None = None) -> None:
    """Spend ``event`` into every active ledger, or into none (all or nothing).

    Called by every dperm private fit *before* it reads the data (with the
    ``EpsilonDelta(ε, δ)`` it is calibrated to).  Without an active ledger it does
    nothing — unless this process runs inside a worker of a process whose budget is
    active (the ``DPERM_ACTIVE_BUDGET`` mark), where the fit cannot be counted and is
    refused.

    Raises
    ------
    BudgetExceededError
        If the event does not fit in an active ledger (the message names its budget
        and what it has spent), or the fit runs in a worker process of an active budget.
    UnsupportedEventError
        If an active ledger's accountant cannot account the event.
    """
    ledgers = _ACTIVE.get()
    if not ledgers:
        owner = os.environ.get(_ENV_MARK)
        if owner is not None and owner != str(os.getpid()):
            raise BudgetExceededError(
                f"{label or 'a private fit'} runs in a worker process (pid {os.getpid()}) "
                f"while a dperm budget is active in process {owner}; its spend cannot be "
                "counted there, so it is refused. Run the fits in the budget's process "
                "(n_jobs=1, or joblib's default backend, which dperm.budget sets to "
                "'sequential')."
            )
        return
    trials = []
    for ledger in ledgers:
        trial, eps = ledger._would_spend(event)
        if not ledger._within_budget(eps):
            raise BudgetExceededError(
                f"{label or 'a private fit'} spending {event!r} in the active budget "
                f"{ledger!r} {ledger._exhausted(event, eps)}; nothing was fitted or recorded"
            )
        trials.append(trial)
    for ledger, trial in zip(ledgers, trials, strict=True):
        ledger._record(trial, event, label)


#: the share of an active budget's remaining δ that a fit with the default δ takes
DEFAULT_DELTA_SHARE = 0.5


def default_delta(n: int) -> float:
    """The δ of a fit whose ``delta=None``: 1/n², or less inside an active budget.

    Outside a budget: δ = 1/n² (n = the number of training rows, public under the
    estimators' replace-one relation).  Inside ``dperm.budget`` / ``Ledger.active()``:
    δ = min(1/n², ½·remaining δ of every active ledger) — a public function of n and
    of what the budget has recorded (itself the output of earlier private fits), so
    a sequence of default-δ fits never exhausts the budget's δ (the shares halve: their
    sum stays below the budget's δ), and only ε can run out.  A budget with δ = 0 leaves
    the default at 1/n² (the fit is then refused with a message naming δ).

    Parameters
    ----------
    n : int ≥ 2

    Returns
    -------
    float in (0, 1)

    Raises
    ------
    InvalidPrivacyParameter
        n < 2 (1/n² would be ≥ ¼: pass delta explicitly).

    Examples
    --------
    >>> default_delta(1000)
    1e-06
    >>> with budget(3.0, 1e-7):
    ...     default_delta(1000)
    5e-08
    """
    if isinstance(n, bool) or not isinstance(n, int | float) or n < 2:
        raise InvalidPrivacyParameter(
            f"the default delta = 1/n² needs n_samples ≥ 2, got n_samples = {n!r}; "
            "pass delta explicitly"
        )
    delta = 1.0 / float(n) ** 2
    for ledger in _ACTIVE.get():
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
    token = _ACTIVE.set(())
    try:
        yield
    finally:
        _ACTIVE.reset(token)
