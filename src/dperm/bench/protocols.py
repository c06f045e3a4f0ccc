"""The two protocols of ``dperm bench``: ``honest`` and ``paper``.

``honest`` (what dperm recommends)
    Each algorithm runs with its documented defaults; nothing looks at the
    test set.  Data: the loader's split and public schema
    (:func:`dperm.datasets.load`, rows normalized to ‖x‖₂ ≤ 1 by a public
    constant), ``data_norm = 1``, δ = 1/n_train².

``paper`` (reproduction of Iyengar et al., IEEE S&P 2019, Section VI)
    The published grid search with **selection on test accuracy** — a
    non-private choice, labelled "non-private tuning" in every output: for each
    algorithm and ε every grid point is run ``repeats`` times and the grid point
    with the best mean test accuracy is reported.  Data as in the authors'
    public code (``sunblaze-ucb/dpml-benchmark``): the official train and test
    parts are pooled, shuffled with their seed 10000019 and split 80/20 (first
    80 % train); KDD Cup 99 is a 70,000-row sample; the synthetic sets are
    ``make_classification`` with the published parameters and seeds (first
    80 % train, no shuffle); features use dperm's public schema without row
    normalization; rows are clipped to the grid's L (ℓ2; ℓ∞ entrywise for
    Frank-Wolfe, as the authors do); δ = 1/n_train².
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import lookup
from ..accounting.active import default_delta
from ..datasets.dataset import TrainTestSizes
from ..exceptions import UnknownNameError

__all__ = [
    "HONEST_PARAMS",
    "PAPER_SEED",
    "PROTOCOLS",
    "Protocol",
    "Split",
    "get_protocol",
    "honest_split",
    "paper_grid",
    "paper_split",
]

#: Seed of ``np.random.seed`` in the authors' preprocessing scripts.
PAPER_SEED = 10000019


@dataclasses.dataclass
class Split(TrainTestSizes):
    """A train/test split ready for the bench.

    ``data_norm`` is the public row bound of ``X_train``/``X_test`` (``inf`` when
    the features are raw and every configuration clips to its own L).
    """

    name: str
    X_train: Any
    y_train: np.ndarray
    X_test: Any
    y_test: np.ndarray
    task: str
    data_norm: float
    description: str
    #: the public label set passed to the estimators as ``classes=`` (never read
    #: off the training labels): (−1, +1) for binary data, 0..9 for MNIST
    classes: tuple | None = None

    @property
    def delta(self) -> float:
        """δ = the estimators' default min(1/n_train², 10⁻⁵) (both protocols)."""
        return default_delta(self.n_train, budget_share=False)


@dataclasses.dataclass(frozen=True)
class Protocol:
    """A benchmark protocol: ``name`` ("honest" or "paper"), how hyperparameters
    are tuned, and the label printed in every output."""

    name: str
    tuning: str
    description: str


PROTOCOLS = {
    "honest": Protocol(
        "honest",
        "none: each algorithm's documented defaults, no look at the test set",
        "documented defaults; loader split and public schema; rows ‖x‖₂ ≤ 1; δ = 1/n²",
    ),
    "paper": Protocol(
        "paper",
        "NON-PRIVATE TUNING: grid search with selection on test accuracy "
        "(Iyengar et al. 2019 protocol; the selection itself is not private)",
        "published grids selected on test accuracy; pooled data shuffled with seed "
        "10000019 and split 80/20; rows clipped to L; δ = 1/n²",
    ),
}


def get_protocol(name: str) -> Protocol:
    """The protocol called ``name`` ("honest" or "paper").

    Raises
    ------
    UnknownNameError
    """
    return lookup(PROTOCOLS, name, "protocol")


# ----------------------------------------------------------------------------- data
def honest_split(name: str, data_home=None) -> Split:
    """The loader's own split and public schema, rows normalized (‖x‖₂ ≤ 1).

    Raises
    ------
    DataFileNotFoundError
        When the dataset's files are absent (the bench skips it with a note).
    """
    from ..datasets import load

    ds = load(name, data_home)
    if ds.X_test is None:  # pragma: no cover - every bench dataset has a test part
        raise UnknownNameError(f"dataset {name!r} has no test part")
    return Split(
        name=ds.name,
        X_train=ds.X_train,
        y_train=np.asarray(ds.y_train),
        X_test=ds.X_test,
        y_test=np.asarray(ds.y_test),
        task=ds.task,
        data_norm=float(ds.row_norm_bound),
        description=ds.description,
        classes=ds.classes,
    )


def _pool_shuffle_split(X_parts, y_parts, seed: int, train_fraction: float = 0.8):
    if any(sp.issparse(x) for x in X_parts):
        X = sp.vstack([sp.csr_matrix(x) for x in X_parts]).tocsr()
    else:
        X = np.vstack(X_parts)
    y = np.concatenate(y_parts)
    # the authors' np.random.seed(seed); np.random.shuffle(rows): a public permutation
    perm = np.random.RandomState(seed).permutation(X.shape[0])
    X, y = X[perm], y[perm]
    n_tr = int(X.shape[0] * train_fraction)
    return X[:n_tr], y[:n_tr], X[n_tr:], y[n_tr:]


def paper_split(name: str, data_home=None) -> Split:
    """The data preparation of Iyengar et al. (2019) (module docstring).

    Raises
    ------
    DataFileNotFoundError
        When the dataset's files are absent.
    UnknownNameError
        For a dataset the paper did not use.
    """
    from ..datasets import load

    if name in ("synthetic-l", "synthetic-h"):
        from sklearn.datasets import make_classification

        if name == "synthetic-l":
            kw = {"n_samples": 10_000, "n_features": 40, "n_informative": 30, "random_state": 1000}
        else:
            kw = {
                "n_samples": 2_000,
                "n_features": 2_000,
                "n_informative": 10,
                "n_redundant": 0,
                "random_state": 1,
            }
        X, y = make_classification(n_classes=2, class_sep=2.0, **kw)
        y = np.where(y == 1, 1.0, -1.0)
        n_tr = int(X.shape[0] * 0.8)
        desc = (
            f"make_classification({', '.join(f'{k}={v}' for k, v in kw.items())}, "
            "class_sep=2.0) as in the authors' code; first 80 % train; raw features"
        )
        return Split(
            name, X[:n_tr], y[:n_tr], X[n_tr:], y[n_tr:], "binary", np.inf, desc, (-1.0, 1.0)
        )
    if name not in ("adult", "kddcup99", "mnist"):
        raise UnknownNameError(
            f"the paper protocol covers adult, kddcup99, mnist, synthetic-l, synthetic-h; "
            f"got {name!r}"
        )
    kw: dict[str, Any] = {"normalize_rows": False}
    if name == "kddcup99":
        kw.update(n_samples=70_000, test_size=0.0, random_state=PAPER_SEED)
    ds = load(name, data_home, **kw)
    X_parts = [ds.X_train] + ([ds.X_test] if ds.X_test is not None else [])
    y_parts = [ds.y_train] + ([ds.y_test] if ds.y_test is not None else [])
    Xtr, ytr, Xte, yte = _pool_shuffle_split(X_parts, y_parts, PAPER_SEED)
    desc = (
        f"{ds.description} — paper protocol: pooled, shuffled with seed {PAPER_SEED}, "
        "split 80/20; schema features without row normalization"
    )
    return Split(ds.name, Xtr, ytr, Xte, yte, ds.task, float(ds.row_norm_bound), desc, ds.classes)


# ----------------------------------------------------------------------------- grids
#: The honest protocol's hyperparameters: none beyond the estimator's defaults
#: (and ``data_norm`` = the public row bound of the split).
HONEST_PARAMS: dict[str, dict[str, Any]] = {}

#: Published grids (authors' ``gridsearch.py``), in dperm's parameter names.
#: ``data_norm`` is the paper's L (rows clipped to it).  Keys that an
#: estimator does not accept are dropped at run time (and reported).
_PAPER_GRIDS: dict[str, dict[str, list[Any]]] = {
    "amp": {
        "data_norm": [0.1, 1.0, 10.0],
        "eps_frac": [0.9, 0.95, 0.98, 0.99],
        "eps_out_frac": [0.001, 0.01, 0.1, 0.5],
    },
    "amp-nt": {"data_norm": [1.0]},
    "dp-sgd": {
        "data_norm": [0.1, 1.0, 10.0],
        "alpha": [0.0, 1e-4, 1e-3],
        "learning_rate": [0.1, 1.0, 10.0],
        "steps": [100, 500, 1000],
        "batch_size": [50],
        "radius": [None, 1.0, 10.0, 100.0],
    },
    "bolt-on": {
        "data_norm": [0.1, 1.0, 10.0],
        "alpha": [1e-4, 1e-3],
        "learning_rate": [0.001, 0.01, 0.1],
        "epochs": [5, 10, 100],
        "batch_size": [50],
    },
    "bolt-on-sc": {
        "data_norm": [0.1, 1.0, 10.0],
        "alpha": [1e-4, 1e-3],
        "epochs": [200],
        "batch_size": [50],
        "radius": [1.0, 10.0, 100.0],
    },
    "frank-wolfe": {
        "data_norm": [1.0, 0.1, 0.01],
        "data_norm_ord": ["linf"],
        "n_steps": [1000, 500, 100, 50, 20, 10, 5],
        "radius": [1.0, 10.0, 100.0, 500.0],
    },
    "objective": {"data_norm": [0.1, 1.0, 10.0], "alpha": [1e-4, 1e-3, 1e-2]},
    "output": {"data_norm": [0.1, 1.0, 10.0], "alpha": [1e-4, 1e-3, 1e-2]},
    "dp-gd": {
        "data_norm": [0.1, 1.0, 10.0],
        "alpha": [0.0, 1e-4, 1e-3],
        "steps": [100, 500, 1000],
    },
}


def paper_grid(algorithm: str) -> list[dict[str, Any]]:
    """The published grid of ``algorithm`` as a list of parameter dicts
    (Cartesian product); ``[{"data_norm": 1.0}]`` for algorithms the paper did
    not tune."""
    grid = _PAPER_GRIDS.get(algorithm, {"data_norm": [1.0]})
    keys = list(grid)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*grid.values())]
