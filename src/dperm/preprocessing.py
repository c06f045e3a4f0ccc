"""Pipeline transformers that use only public information (and one private scaler).

scikit-learn's scalers learn their parameters from the data: ``StandardScaler``
releases the exact mean and standard deviation of every feature, and
``MinMaxScaler`` the exact minimum and maximum.  Put in a
:class:`~sklearn.pipeline.Pipeline` in front of a DP estimator, they make the
fitted pipeline depend on the private data through a channel no privacy proof
covers (see ``docs/pipelines.md``).  The transformers here avoid that:

* :class:`PublicMinMaxScaler` — maps public per-feature bounds [lo, hi] onto
  ``feature_range``; values outside are clipped.  Nothing is learned from X.
* :class:`RowNormalizer` — a per-record map onto the ℓ2 ball (or sphere) of a
  public radius; stateless.
* :class:`PublicOneHotEncoder` — one-hot encoding with a public category list.
* :class:`DPStandardScaler` — standardization by a *private* mean and standard
  deviation (Laplace or Gaussian mechanism, public bounds), with its
  ``dp_event_`` for the accountants and a :class:`~dperm.accounting.Ledger`.

:func:`pipeline_dp_event` composes what every step of a fitted pipeline spent,
so the Ledger sees the scaler's budget next to the estimator's.

The public transformers expose ``dp_event_ = NoOp()``: their fitted parameters
are the public inputs.  Their ``n_clipped_`` / ``n_unknown_`` counts are
diagnostics for the data owner, not privatized (like the estimators'
``n_clipped_``).  Neighbouring relation of :class:`DPStandardScaler`:
replace-one, with n public.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._docstrings import TRANSFORMER_FIT, compose_doc
from ._parameters import RANDOM_STATE, positive, store_params, unit_interval, validate_params
from ._rng import check_random_state
from ._validation import check_interval, check_positive, clip_rows, float_array, row_norms
from .accounting.active import accounted_fit, charge, releasing
from .accounting.events import (
    REPLACE_ONE,
    Composed,
    DpEvent,
    Gaussian,
    Laplace,
    NonPrivate,
    NoOp,
    SelfComposed,
)
from .accounting.gaussian import analytic_gaussian_noise_multiplier
from .backends.numpy_inputs import redact_message
from .exceptions import (
    ClippingWarning,
    InvalidDataError,
    InvalidPrivacyParameter,
    PrivacyLeakWarning,
    UnknownNameError,
)
from .mechanisms.gaussian import gaussian_noise
from .mechanisms.laplace import laplace_noise
from .networks.pca import DPPCA  # DP PCA (Analyze Gauss), with the network code

try:  # scikit-learn ≥ 1.6
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # pragma: no cover - older scikit-learn

    def _sk_validate_data(estimator, X, reset=True, **kw):
        return estimator._validate_data(X, reset=reset, **kw)


__all__ = [
    "DPPCA",
    "DPStandardScaler",
    "PublicMinMaxScaler",
    "PublicOneHotEncoder",
    "RowNormalizer",
    "pipeline_dp_event",
]


def _validate(estimator, X, *, reset: bool, **kw):
    """scikit-learn's validation (the messages its checks expect), with every
    ValueError re-raised as :class:`~dperm.exceptions.InvalidDataError`."""
    if sp.issparse(X) and not kw.get("accept_sparse"):
        raise InvalidDataError(
            f"{type(estimator).__name__} does not accept sparse input (it would densify X); "
            "pass a dense array"
        )
    try:
        return _sk_validate_data(estimator, X, reset=reset, **kw)
    except InvalidDataError:
        raise
    except ValueError as exc:
        raise InvalidDataError(redact_message(str(exc))) from None


def _check_bounds(bounds, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Public per-feature bounds as (lo, hi), each of shape (n_features,).

    ``bounds`` is a pair (lo, hi) shared by every feature or an array-like of
    shape (n_features, 2).  Raises InvalidPrivacyParameter naming ``bounds``.
    """
    if bounds is None:
        raise InvalidPrivacyParameter(
            "bounds must be given: public per-feature [lo, hi] (a pair for every feature or "
            "an array of shape (n_features, 2)); they are never read from the data, got None"
        )
    message = f"bounds must be numeric pairs [lo, hi], got {bounds!r}"
    b = float_array(bounds, "bounds", error=InvalidPrivacyParameter, message=message)
    if b.shape == (2,):
        b = np.broadcast_to(b, (n_features, 2))
    if b.ndim != 2 or b.shape[1] != 2:
        raise InvalidPrivacyParameter(
            f"bounds must be a pair (lo, hi) or of shape (n_features, 2), got shape {b.shape}"
        )
    if b.shape[0] != n_features:
        raise InvalidPrivacyParameter(
            f"bounds has {b.shape[0]} rows but X has {n_features} features"
        )
    if not np.all(np.isfinite(b)) or not np.all(b[:, 0] < b[:, 1]):
        raise InvalidPrivacyParameter(
            f"bounds must be finite with lo < hi for every feature, got {bounds!r}"
        )
    return b[:, 0].copy(), b[:, 1].copy()


def _count_outside(X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int:
    return int(np.count_nonzero((X < lo) | (X > hi)))


# ----------------------------------------------------------------------------- min-max
class PublicMinMaxScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Scale features from public bounds [lo, hi] onto ``feature_range``.

    x ↦ a + (b − a)·(clip(x, lo, hi) − lo)/(hi − lo) for ``feature_range`` =
    (a, b).  The bounds are inputs (a public schema), never read from the
    data, so the fitted scaler releases nothing about X (``dp_event_`` is
    :class:`~dperm.accounting.events.NoOp`) and the transform is a fixed
    per-record map: a pipeline with a DP estimator after it keeps the
    estimator's guarantee.

    Parameters
    ----------
    bounds : pair (lo, hi) or array-like of shape (n_features, 2)
        Public bounds of every feature (a pair applies to all features).
        Required; must be finite with lo < hi.
    feature_range : pair (a, b), default=(0.0, 1.0)
        Target interval, e.g. (0, 1) or (−1, 1).  With (−1, 1) every row of
        the output has ‖x‖₂ ≤ √d: a public ``data_norm``.
    clip : bool, default=True
        Clip values outside [lo, hi] to the bounds (in fit's count and in
        transform).  Keep it True when a DP estimator follows: its row bound
        relies on it.

    Attributes
    ----------
    lower_, upper_ : ndarray of shape (n_features,)
        The public bounds (exactly ``bounds``, broadcast).
    scale_, min_ : ndarray of shape (n_features,)
        transform(x) = clip(x)·scale_ + min_.
    n_clipped_ : int
        Number of *entries* of the fit data outside the bounds (a diagnostic
        for the data owner, not privatized; a :class:`ClippingWarning` says so).
    dp_event_ : NoOp
    n_features_in_ : int

    Raises
    ------
    InvalidPrivacyParameter
        ``bounds`` absent or invalid, ``feature_range`` invalid.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.preprocessing import PublicMinMaxScaler
    >>> s = PublicMinMaxScaler(bounds=[[0, 10], [-1, 1]], feature_range=(-1, 1))
    >>> s.fit_transform(np.array([[5.0, 0.0], [10.0, -1.0]]))
    array([[ 0.,  0.],
           [ 1., -1.]])
    >>> s.transform(np.array([[20.0, 0.5]]))  # outside the bounds: clipped
    array([[1. , 0.5]])
    """

    def __init__(self, bounds=None, *, feature_range=(0.0, 1.0), clip=True):
        store_params(self, locals())

    def _range(self) -> tuple[float, float]:
        return check_interval(self.feature_range, "feature_range")

    @compose_doc(fit=TRANSFORMER_FIT)
    def fit(self, X, y=None):
        """Set the public map; count the entries of X outside the bounds.

        {fit}
        """
        X = _validate(self, X, reset=True, dtype=np.float64)
        lo, hi = _check_bounds(self.bounds, X.shape[1])
        a, b = self._range()
        self.lower_, self.upper_ = lo, hi
        self.scale_ = (b - a) / (hi - lo)
        self.min_ = a - lo * self.scale_
        self.n_clipped_ = _count_outside(X, lo, hi)
        if self.n_clipped_ and self.clip:
            warnings.warn(
                f"{self.n_clipped_} entries of X lie outside the public bounds and are clipped",
                ClippingWarning,
                stacklevel=2,
            )
        self.dp_event_ = NoOp()
        return self

    def transform(self, X):
        """Clip to the bounds and map onto ``feature_range``; shape (n_samples, n_features)."""
        check_is_fitted(self, "scale_")
        X = _validate(self, X, reset=False, dtype=np.float64)
        if self.clip:
            X = np.clip(X, self.lower_, self.upper_)
        return X * self.scale_ + self.min_

    def inverse_transform(self, X):
        """Map back to the original units (clipped values stay at the bounds)."""
        check_is_fitted(self, "scale_")
        X = _validate(self, X, reset=False, dtype=np.float64)
        return (X - self.min_) / self.scale_


# ----------------------------------------------------------------------------- rows
class RowNormalizer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Map every record onto the ℓ2 ball (or sphere) of a public radius.

    ``mode="ball"``: rows with ‖x‖₂ > ``norm`` are scaled down to ``norm``
    (the projection dperm's estimators apply for ``data_norm``); ``"sphere"``:
    every non-zero row is scaled to ‖x‖₂ = ``norm`` (zero rows stay zero).
    Each output row depends on its own input row only, so it is a public
    per-record map; the transformer is stateless and learns nothing.  Follow
    it by an estimator with ``data_norm=norm``.

    Parameters
    ----------
    norm : float > 0, default=1.0
        Public radius.
    mode : {"ball", "sphere"}, default="ball"

    Attributes
    ----------
    dp_event_ : NoOp
    n_features_in_ : int

    Raises
    ------
    InvalidPrivacyParameter
        ``norm`` not a positive finite number.
    UnknownNameError
        Unknown ``mode``.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.preprocessing import RowNormalizer
    >>> RowNormalizer(norm=1.0).fit_transform(np.array([[3.0, 4.0], [0.3, 0.4]]))
    array([[0.6, 0.8],
           [0.3, 0.4]])
    """

    def __init__(self, norm=1.0, *, mode="ball"):
        store_params(self, locals())

    def _check(self) -> float:
        radius = check_positive(self.norm, "norm")
        if self.mode not in ("ball", "sphere"):
            raise UnknownNameError(f"unknown mode {self.mode!r}; choose one of ['ball', 'sphere']")
        return radius

    def fit(self, X, y=None):
        """Validate the parameters and record ``n_features_in_`` (nothing is learned)."""
        self._check()
        _validate(self, X, reset=True, accept_sparse="csr", dtype=np.float64)
        self.dp_event_ = NoOp()
        return self

    def transform(self, X):
        """The per-row map; dense or CSR, shape (n_samples, n_features) (no fit needed)."""
        radius = self._check()
        X = _validate(self, X, reset=False, accept_sparse="csr", dtype=np.float64)
        if self.mode == "ball":
            return clip_rows(X, radius, warn=False)[0]
        norms = row_norms(X)
        scale = np.divide(radius, norms, out=np.zeros_like(norms), where=norms > 0)
        if sp.issparse(X):
            return sp.csr_matrix(sp.diags(scale) @ X)
        return X * scale[:, None]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.requires_fit = False
        return tags


# ----------------------------------------------------------------------------- one-hot
class PublicOneHotEncoder(TransformerMixin, BaseEstimator):
    """One-hot encoding with public categories.

    Column j becomes ``len(categories_[j])`` indicator columns, in the order
    the categories are given (not sorted: the public schema decides).  The
    category list is an input, never read from the data, so the fitted
    encoder releases nothing about X (``dp_event_`` = NoOp) and every output
    row has exactly one 1 per input column, or none: ‖x‖₂ ≤ √(n_features) —
    a public ``data_norm`` for the estimator after it.

    Unknown values.  ``handle_unknown="error"`` (default) raises
    :class:`~dperm.exceptions.InvalidDataError` naming the column and value —
    the safe choice while the schema is being written; ``"ignore"`` encodes an
    unknown value as an all-zero block (a public per-record rule, so privacy
    is unaffected) and counts the entries in ``n_unknown_`` at fit.

    Parameters
    ----------
    categories : list of array-like, or one array-like
        ``categories[j]`` lists the values of column j; a flat list (no nested
        lists) is the category set of every column.  Required.  Values in one
        list must be distinct and of one kind (all numbers or all strings).
    handle_unknown : {"error", "ignore"}, default="error"
    sparse_output : bool, default=False
        Return a CSR matrix (dperm's estimators accept it).

    Attributes
    ----------
    categories_ : list of ndarray
    n_unknown_ : int
        Entries of the fit data outside the categories (0 with "error";
        a diagnostic, not privatized).
    dp_event_ : NoOp
    n_features_in_ : int

    Raises
    ------
    InvalidPrivacyParameter
        ``categories`` absent, empty, duplicated or of the wrong length.
    UnknownNameError
        Unknown ``handle_unknown``.
    InvalidDataError
        An unknown value with ``handle_unknown="error"``.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.preprocessing import PublicOneHotEncoder
    >>> enc = PublicOneHotEncoder(categories=[["a", "b"], [1, 2, 3]])
    >>> enc.fit_transform(np.array([["b", 3], ["a", 1]], dtype=object))
    array([[0., 1., 0., 0., 1.],
           [1., 0., 1., 0., 0.]])
    """

    def __init__(self, categories=None, *, handle_unknown="error", sparse_output=False):
        store_params(self, locals())

    def _check_categories(self, n_features: int) -> list[np.ndarray]:
        cats = self.categories
        if cats is None or isinstance(cats, str):
            raise InvalidPrivacyParameter(
                "categories must be given: the public category list of every column "
                f"(never read from the data), got {cats!r}"
            )
        try:
            items = list(cats)
        except TypeError:
            raise InvalidPrivacyParameter(
                f"categories must be a list of lists (or one list), got {cats!r}"
            ) from None
        nested = len(items) > 0 and all(not isinstance(c, str) and np.ndim(c) == 1 for c in items)
        per_column = items if nested else [items] * n_features
        if len(per_column) != n_features:
            raise InvalidPrivacyParameter(
                f"categories lists {len(per_column)} columns but X has {n_features} features"
            )
        out = []
        for j, c in enumerate(per_column):
            values = list(c)
            kinds = {isinstance(v, str | np.str_) for v in values}
            if len(kinds) > 1:
                raise InvalidPrivacyParameter(f"categories[{j}] mixes strings and numbers: {c!r}")
            arr = np.asarray(values)
            if arr.ndim != 1 or arr.size == 0:
                raise InvalidPrivacyParameter(
                    f"categories[{j}] must be a non-empty flat list, got {c!r}"
                )
            if arr.dtype.kind not in "biufUS":
                raise InvalidPrivacyParameter(
                    f"categories[{j}] must hold numbers or strings of one kind, got {c!r}"
                )
            if np.unique(arr).size != arr.size:
                raise InvalidPrivacyParameter(f"categories[{j}] has duplicates: {c!r}")
            out.append(arr)
        return out

    def _codes(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(codes, known): codes[i, j] = index of X[i, j] in categories_[j]."""
        n, d = X.shape
        codes = np.zeros((n, d), dtype=np.intp)
        known = np.zeros((n, d), dtype=bool)
        for j, cats in enumerate(self.categories_):  # a loop over columns, not rows
            col = X[:, j]
            if cats.dtype.kind in "US":
                col = col.astype(str) if col.dtype.kind in "OUS" else None
            else:
                try:
                    col = col.astype(np.float64)
                except (TypeError, ValueError):
                    col = None
            if col is None:  # kinds differ (e.g. numbers vs strings): nothing matches
                continue
            order = np.argsort(cats, kind="stable")
            sorted_cats = cats[order]
            pos = np.clip(np.searchsorted(sorted_cats, col), 0, cats.size - 1)
            hit = sorted_cats[pos] == col
            codes[:, j] = order[pos]
            known[:, j] = hit
        return codes, known

    def fit(self, X, y=None):
        """Check the categories against X (unknown values: error or count).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numbers or strings (object arrays and DataFrames are accepted).
        y : ignored

        Returns
        -------
        self
        """
        if self.handle_unknown not in ("error", "ignore"):
            raise UnknownNameError(
                f"unknown handle_unknown {self.handle_unknown!r}; choose one of ['error', 'ignore']"
            )
        X = _validate(self, X, reset=True, dtype=None)
        self.categories_ = self._check_categories(X.shape[1])
        _, known = self._codes(X)
        self._raise_unknown(X, known)
        self.n_unknown_ = int(known.size - np.count_nonzero(known))
        self.dp_event_ = NoOp()
        return self

    def _raise_unknown(self, X, known) -> None:
        if self.handle_unknown == "error" and not known.all():
            j = int(np.argwhere(~known)[0][1])
            # the value itself is a record's (private): name the column, not the value
            raise InvalidDataError(
                f"column {j} has a value outside categories[{j}]="
                f"{self.categories_[j].tolist()} (pass handle_unknown='ignore' to encode "
                "unknown values as all-zero)"
            )

    def transform(self, X):
        """Indicator columns; shape (n_samples, Σ_j len(categories_[j]))."""
        check_is_fitted(self, "categories_")
        X = _validate(self, X, reset=False, dtype=None)
        codes, known = self._codes(X)
        self._raise_unknown(X, known)
        sizes = np.array([c.size for c in self.categories_])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        cols = (codes + offsets)[known]
        rows = np.nonzero(known)[0]
        shape = (X.shape[0], int(sizes.sum()))
        out = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=shape)
        return out if self.sparse_output else out.toarray()

    def get_feature_names_out(self, input_features=None):
        """Names ``f"{feature}_{category}"``, one per output column."""
        check_is_fitted(self, "categories_")
        if input_features is None:
            input_features = getattr(
                self, "feature_names_in_", [f"x{j}" for j in range(self.n_features_in_)]
            )
        elif len(input_features) != self.n_features_in_:
            raise InvalidDataError(
                f"input_features has {len(input_features)} names, expected {self.n_features_in_}"
            )
        pairs = zip(input_features, self.categories_, strict=True)
        return np.asarray([f"{f}_{c}" for f, cats in pairs for c in cats], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags


# ----------------------------------------------------------------------------- private scaler
class DPStandardScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Standardize by a differentially private mean and standard deviation.

    Every feature is clipped to its public bounds [lo_j, hi_j] (width
    w_j = hi_j − lo_j, centre c_j = (lo_j + hi_j)/2); two statistics per
    feature are released with noise:

    * the mean μ_j = (1/n) Σᵢ x_ij,
    * the second moment about the public centre m_j = (1/n) Σᵢ (x_ij − c_j)².

    Sensitivities (replace-one neighbours, n public).  Replacing one record
    changes μ_j by at most w_j/n and m_j by at most (w_j/2)²/n, since
    (x − c_j)² ∈ [0, w_j²/4].  Divide statistic j by its sensitivity: each
    normalized coordinate then moves by ≤ 1, so the d normalized means have
    ℓ1 sensitivity d and ℓ2 sensitivity √d (likewise the second moments).

    * ``delta = 0`` — Laplace mechanism (Dwork & Roth 2014, Thm 3.6): each
      block gets ε/2 (basic composition, Thm 3.16), i.e. Laplace noise of
      scale b = (sensitivity_j)·d/(ε/2) on statistic j.  Event:
      ``SelfComposed(Laplace(2/ε), 2)`` — each block is a Laplace(1/(ε/2))
      event per unit ℓ1 sensitivity; total ε.
    * ``delta > 0`` — Gaussian mechanism: two releases with noise multiplier
      s each compose to one Gaussian of multiplier s/√2 (Dong, Roth, Su 2022,
      Cor. 3.3: μ-GDP composes as √(Σμ²)), so s = √2·σ* with σ* the
      analytic-Gaussian multiplier of (ε, δ) (Balle & Wang 2018, Thm 8); the
      noise on statistic j is N(0, (s·√d·sensitivity_j)²).  Event:
      ``SelfComposed(Gaussian(s), 2)``, (ε, δ)-DP exactly.

    The variance estimate v_j = m̂_j − (μ̂_j − c_j)² and everything after it is
    post-processing (Dwork & Roth, Prop. 2.1): μ̂ is projected onto [lo, hi],
    v onto [0, w²/4], and ``scale_`` = √v, with v = 0 replaced by the largest
    possible standard deviation w/2 (a public constant: a noise-dominated
    feature is shrunk, never blown up).  ``transform`` clips to the bounds
    and returns (x − mean_)/scale_, so its rows satisfy
    ‖z‖₂ ≤ ``row_norm_bound_`` — a bound computed from public inputs and the
    private release only, usable as the next estimator's ``data_norm``.

    Floating point.  The noise comes from numpy's floating-point samplers;
    the guarantee is that of the ideal real-valued mechanism (Mironov 2012);
    see :func:`dperm.mechanisms.snapping_mechanism` for a floating-point-safe
    Laplace.

    Parameters
    ----------
    epsilon : float > 0, default=1.0
        Total ε of the fit (both statistics, every feature).
    delta : float in [0, 1), default=0.0
        0 → Laplace (pure ε-DP); > 0 → Gaussian.
    bounds : pair (lo, hi) or array-like of shape (n_features, 2)
        Public bounds of every feature.  Required; never read from the data.
    random_state : None, int, SeedSequence or Generator, default=None
        Source of the privacy noise (None = fresh OS entropy).

    Attributes
    ----------
    mean_, var_, scale_ : ndarray of shape (n_features,)
        Private (post-processed) mean, variance and scale.
    lower_, upper_ : ndarray of shape (n_features,)
        The public bounds.
    noise_scale_ : ndarray of shape (2, n_features)
        Noise on (μ_j, m_j) in data units: the Laplace scale b or the Gaussian
        standard deviation.
    sensitivity_ : ndarray of shape (2, n_features)
        (w_j/n, w_j²/(4n)).
    row_norm_bound_ : float
        max ‖transform(x)‖₂ over all x (public given the release).
    dp_event_ : DpEvent
        What the fit spent (replace-one).
    epsilon_, delta_ : float
        (ε, δ) certified for the fit (δ_ = 0 for Laplace).
    n_clipped_ : int
        Entries of X outside the bounds (diagnostic, not privatized).
    n_features_in_ : int

    Raises
    ------
    InvalidPrivacyParameter
        Bad ``epsilon``, ``delta``, ``bounds`` or ``random_state``.
    InvalidDataError
        Bad X (NaN/inf, empty, sparse).

    Examples
    --------
    >>> import numpy as np
    >>> from dperm.preprocessing import DPStandardScaler
    >>> X = np.random.default_rng(0).uniform(0, 10, size=(5000, 2))
    >>> sc = DPStandardScaler(epsilon=1.0, bounds=(0, 10), random_state=0).fit(X)
    >>> sc.dp_event_
    SelfComposed(event=Laplace(noise_multiplier=2.0, neighbouring='replace-one'), count=2)
    >>> bool(np.all(np.abs(sc.mean_ - 5) < 0.2))
    True
    """

    _parameter_constraints: ClassVar[dict] = {  # checked first in fit (dperm._parameters)
        "epsilon": [positive()],
        "delta": [unit_interval("left")],
        "bounds": [None, "array-like"],  # None is refused by fit, naming the fix
        "random_state": RANDOM_STATE,
    }

    def __init__(self, epsilon=1.0, delta=0.0, *, bounds=None, random_state=None):
        store_params(self, locals())

    @accounted_fit  # reserve before the data is read, commit dp_event_ (or cancel)
    def fit(self, X, y=None):
        """Release the private mean and variance of every feature.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense only.  Entries outside the bounds are clipped (counted in
            ``n_clipped_``, with a ClippingWarning).
        y : ignored

        Returns
        -------
        self
        """
        validate_params(self)  # every parameter, before the data and any reservation
        epsilon, delta = float(self.epsilon), float(self.delta)  # checked by the table
        X = _validate(self, X, reset=True, dtype=np.float64)
        n, d = X.shape
        lo, hi = _check_bounds(self.bounds, d)
        rng = check_random_state(self.random_state)
        if delta == 0.0:
            event = SelfComposed(
                Laplace(noise_multiplier=2.0 / epsilon, neighbouring=REPLACE_ONE), 2
            )
        else:  # two Gaussian releases of multiplier s ≡ one of s/√2
            s = math.sqrt(2.0) * analytic_gaussian_noise_multiplier(epsilon, delta)
            event = SelfComposed(Gaussian(noise_multiplier=s, neighbouring=REPLACE_ONE), 2)
        charge(event, type(self).__name__)  # an active dperm.budget, before the data is read

        self.n_clipped_ = _count_outside(X, lo, hi)
        if self.n_clipped_:
            warnings.warn(
                f"{self.n_clipped_} entries of X lie outside the public bounds and are clipped",
                ClippingWarning,
                stacklevel=3,  # +1: fit runs inside accounted_fit
            )
        Xc = np.clip(X, lo, hi)  # a clipped copy; the caller's X is untouched
        width, centre = hi - lo, (lo + hi) / 2.0
        mean = Xc.mean(axis=0)
        second = np.mean((Xc - centre) ** 2, axis=0)
        sens = np.vstack([width / n, width**2 / (4.0 * n)])  # replace-one, n public

        if delta == 0.0:  # Laplace, ε/2 per block, ℓ1 sensitivity d per normalized block
            noise_scale = sens * d / (epsilon / 2.0)
            noise = laplace_noise((2, d), 1.0, rng) * noise_scale
        else:  # Gaussian, multiplier s per block, ℓ2 sensitivity √d per normalized block
            noise_scale = sens * math.sqrt(d) * s
            noise = gaussian_noise((2, d), 1.0, rng) * noise_scale
        mean_hat, second_hat = mean + noise[0], second + noise[1]
        releasing()  # from here an exception keeps the fit charged (dperm.accounting.active)
        self.dp_event_ = event
        # post-processing of the private release (Dwork & Roth, Prop. 2.1)
        self.mean_ = np.clip(mean_hat, lo, hi)
        self.var_ = np.clip(second_hat - (self.mean_ - centre) ** 2, 0.0, width**2 / 4.0)
        self.scale_ = np.where(self.var_ > 0, np.sqrt(self.var_), width / 2.0)
        self.lower_, self.upper_ = lo, hi
        self.noise_scale_ = noise_scale
        self.sensitivity_ = sens
        reach = np.maximum(self.mean_ - lo, hi - self.mean_) / self.scale_
        self.row_norm_bound_ = float(np.sqrt(np.sum(reach**2)) * (1.0 + 1e-12))
        self.epsilon_ = epsilon
        self.delta_ = delta
        return self

    def transform(self, X):
        """(clip(x, lo, hi) − mean_)/scale_; shape (n_samples, n_features)."""
        check_is_fitted(self, "scale_")
        X = _validate(self, X, reset=False, dtype=np.float64)
        return (np.clip(X, self.lower_, self.upper_) - self.mean_) / self.scale_

    def inverse_transform(self, X):
        """x = z·scale_ + mean_."""
        check_is_fitted(self, "scale_")
        X = _validate(self, X, reset=False, dtype=np.float64)
        return X * self.scale_ + self.mean_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


# ----------------------------------------------------------------------------- pipelines
def pipeline_dp_event(pipeline: Any) -> DpEvent:
    """The composition of what every step of a fitted pipeline spent.

    Steps with a ``dp_event_`` contribute it (dperm estimators, the private
    scaler, ``NoOp`` for the public transformers); ``"passthrough"`` / None
    contribute nothing; a stateless step (scikit-learn tag
    ``requires_fit=False``, e.g. ``FunctionTransformer``) is a per-record
    public map — provided its parameters are public — and contributes
    nothing; any other fitted step (``StandardScaler``, ``MinMaxScaler``, …)
    learned from the data without noise and contributes
    :class:`~dperm.accounting.events.NonPrivate` (ε = ∞), with a
    :class:`~dperm.exceptions.PrivacyLeakWarning` naming it.

    Hand the result to :meth:`dperm.accounting.Ledger.spend`.

    Parameters
    ----------
    pipeline : sklearn.pipeline.Pipeline (fitted) or a single fitted estimator

    Returns
    -------
    DpEvent
        A single event, or ``Composed`` of the steps' events in order
        (``NoOp`` when nothing was spent).

    Raises
    ------
    InvalidDataError
        If a step is not a scikit-learn estimator.
    sklearn.exceptions.NotFittedError
        If a step that learns from data is not fitted.
    """
    from sklearn.utils import get_tags

    steps = getattr(pipeline, "steps", None)
    estimators = [s[1] for s in steps] if steps is not None else [pipeline]
    events: list[DpEvent] = []
    for est in estimators:
        if est is None or (isinstance(est, str) and est == "passthrough"):
            continue
        if hasattr(est, "steps"):  # a nested pipeline
            events.append(pipeline_dp_event(est))
            continue
        parts = _fitted_parts(est)
        if parts is not None:  # ColumnTransformer / FeatureUnion: every part reads the data
            events.extend(pipeline_dp_event(p) for p in parts)
            continue
        event = getattr(est, "dp_event_", None)
        if isinstance(event, DpEvent):
            events.append(event)
            continue
        try:
            stateless = not get_tags(est).requires_fit
        except Exception:  # not a scikit-learn estimator
            raise InvalidDataError(
                f"pipeline_dp_event needs scikit-learn estimators, got {est!r}"
            ) from None
        if stateless:
            continue
        check_is_fitted(est)  # NotFittedError: an unfitted step spent nothing yet
        warnings.warn(
            f"step {type(est).__name__} has no dp_event_: it read the data without "
            "privacy (ε = ∞); use dperm.preprocessing instead",
            PrivacyLeakWarning,
            stacklevel=2,
        )
        events.append(NonPrivate())
    events = [e for e in events if not isinstance(e, NoOp)]
    flat: list[DpEvent] = []
    for e in events:  # nested compositions are flattened (composition is associative)
        flat.extend(e.events if isinstance(e, Composed) else [e])
    events = flat
    if not events:
        return NoOp()
    if len(events) == 1:
        return events[0]
    return Composed(tuple(events))


def _fitted_parts(est: Any) -> list[Any] | None:
    """The fitted sub-transformers of a ColumnTransformer (``transformers_``) or a
    FeatureUnion (``transformer_list``), without "drop" / "passthrough"; else None."""
    if hasattr(est, "transformers_"):
        items = [t for _, t, _ in est.transformers_]
    elif hasattr(est, "transformer_list"):
        items = [t for _, t in est.transformer_list]
    else:
        return None
    return [t for t in items if not (isinstance(t, str) or t is None)]
