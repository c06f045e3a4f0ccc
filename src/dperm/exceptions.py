"""Exception and warning hierarchy of dperm.

Every error that dperm raises on bad input or on a privacy violation is a
subclass of :class:`DpermError`, so callers can catch the whole family, and
the more specific classes say *what* went wrong.  Messages always name the
offending parameter and the value received.

Classes that also derive from :class:`ValueError` / :class:`TypeError` keep
working with code (and scikit-learn's estimator checks) that expects those
built-in types.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "ClippingWarning",
    "ConvergenceError",
    "DataFileNotFoundError",
    "DpermError",
    "InvalidDataError",
    "InvalidPrivacyParameter",
    "LabelError",
    "LedgerIntegrityError",
    "LedgerStoreError",
    "MissingDependencyError",
    "ModelFileError",
    "PrivacyError",
    "PrivacyLeakWarning",
    "UnknownNameError",
    "UnsupportedEventError",
    "UnsupportedOperationError",
]


class DpermError(Exception):
    """Base class of every error raised by dperm."""


class PrivacyError(DpermError):
    """Base class of errors that concern a privacy guarantee."""


class InvalidPrivacyParameter(PrivacyError, ValueError):
    """A privacy parameter (``epsilon``, ``delta``, ``noise_multiplier``,
    ``sampling_rate``, ``clipping_norm``, ``data_norm``, a step count, …) is
    out of its valid range, NaN, infinite or of the wrong type."""


class BudgetExceededError(PrivacyError):
    """A spend would exceed the total privacy budget of a :class:`~dperm.accounting.Ledger`.

    Nothing is recorded when this is raised."""


class LedgerIntegrityError(PrivacyError):
    """A ledger store's records do not match their hash chain: an entry was edited,
    reordered, inserted or deleted, or the store was truncated.

    The store then refuses every further spend.  ``budget`` names the budget and
    ``entry`` the first record found wrong (its number in the budget's history).
    """

    def __init__(self, message: str, *, budget: str | None = None, entry: int | None = None):
        super().__init__(message)
        self.budget = budget
        self.entry = entry


class LedgerStoreError(DpermError):
    """A ledger store cannot be used: the location is not a store, cannot be reached
    or opened, or holds no budget of the requested name."""


class UnsupportedEventError(PrivacyError, TypeError):
    """An accountant was given a privacy event it cannot account for.

    Raised *before* the accountant's state changes."""


class InvalidDataError(DpermError, ValueError):
    """The data cannot be used: NaN/inf, wrong shape, empty, mismatched lengths."""


class LabelError(InvalidDataError):
    """Labels the loss cannot take (e.g. outside {-1, +1} or outside the label
    bound), or a single class where two or more are needed."""


class ModelFileError(InvalidDataError):
    """A model file (or a model to save) that dperm refuses: not a dperm model
    archive, a newer format, a class outside the allow-list, a parameter or an
    array that is not plain data (e.g. a pickled object).  Also raised by
    :mod:`dperm.statement` for a model whose ``privacy_caveats_`` are not text;
    re-exported by :mod:`dperm.io`."""


class ConvergenceError(DpermError, RuntimeError):
    """A solver did not reach the optimality tolerance that a privacy proof
    relies on (e.g. Approximate Minima Perturbation); failing closed."""


class DataFileNotFoundError(DpermError, FileNotFoundError):
    """A dataset file was not found; the message names the path expected."""


class UnknownNameError(DpermError, ValueError):
    """An unknown mechanism, dataset, loss, accountant or other named option."""


class MissingDependencyError(DpermError, ImportError):
    """An optional dependency is not installed; the message names the extra that
    installs it (e.g. ``pip install "dperm[dask]"``)."""


class UnsupportedOperationError(DpermError, NotImplementedError):
    """An operation the object does not offer, e.g. Euclidean projection onto a
    general polytope (use Frank-Wolfe, which needs only its linear oracle)."""


class PrivacyLeakWarning(UserWarning):
    """A setting would leak privacy (e.g. a bound read from the data)."""


class ClippingWarning(UserWarning):
    """Rows were above the assumed norm bound and were clipped."""
