"""``dperm fit``: load data, fit a private model, measure it, optionally save it.

Examples (shell)::

    dperm fit                                   # breast-cancer, logistic, objective, ε = 1
    dperm fit --dataset adult --data-home ../shared/data --epsilon 1 --json
    dperm fit --csv data.csv --target label --classes no,yes --model svm \\
        --mechanism output --delta 0 --bounds age=17:90 --bounds hours=1:99 \\
        --categories colour=red,green,blue
    dperm fit --csv data.csv --target y --task regression --bounds schema.json \\
        --label-bound 5 --ledger budget.db --ledger-epsilon 3 --ledger-delta 1e-5

:func:`run_fit` does the work and returns the keys of ``--json``, along the path a
fit takes:

1. inputs: :func:`_check_options` (before anything is read), then
   :func:`~dperm.cli._fit_inputs.load_fit_dataset` and
   :func:`~dperm.cli._fit_inputs.public_data_norm` (data sources, public schema);
2. ledger: :func:`_reserve` (:mod:`dperm.cli._fit_ledger`), before the fit reads the data;
3. fit: :func:`make_estimator` (shared with ``dperm audit --one-run``) and
   :func:`_private_fit`;
4. report: :func:`_report` (the measurements of :mod:`dperm.cli._fit_report`);
5. save: :func:`_release` (the ledger commit, then :func:`_save_model`).
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from ..exceptions import (
    DpermError,
    InvalidPrivacyParameter,
    UnknownNameError,
)
from ._common import (
    FILE_SCHEMA,
    JSON,
    QUIET,
    Opt,
    json_safe,
    one_line_errors,
    show_warning_one_line,
    step,
    with_options,
)
from ._fit_inputs import dask_scheduler, load_fit_dataset, public_data_norm
from ._fit_ledger import (
    commit_fit,
    delta_source,
    ledger_keys,
    open_ledger,
    reserve_fit,
    settles_ledger,
)
from ._fit_report import NON_PRIVATE_KEYS, measure, print_fit_table

__all__ = ["FIT_KEYS", "NON_PRIVATE_KEYS", "fit_command", "make_estimator", "run_fit"]

_MODELS = ("logistic", "svm", "linear", "mlp")
#: the DPMLPClassifier parameters `dperm fit --model mlp` passes on (docs/neural_networks.md)
_MLP_PARAMS = (
    "epsilon", "delta", "data_norm", "random_state", "classes", "batch_size", "epochs",
    "learning_rate",
)  # fmt: skip
#: the keys of ``dperm fit --json`` for a classification task: the release (ε, δ spent
#: and the test accuracy of the private model) and the diagnostics of
#: :data:`NON_PRIVATE_KEYS`
FIT_KEYS = (
    "dataset",
    "n_train",
    "n_test",
    "n_features",
    "model",
    "mechanism",
    "epsilon",
    "delta",
    "test_accuracy",
    *NON_PRIVATE_KEYS,
)


def _make_model(model: str, task: str, params: dict[str, Any], label_bound, constraint_radius):
    from ..estimators import DPLinearRegression, DPLinearSVC, DPLogisticRegression

    if model not in _MODELS:
        raise UnknownNameError(f"unknown model {model!r}; choose one of {list(_MODELS)}")
    if task == "regression":
        if model != "linear":
            raise InvalidPrivacyParameter(
                f"the dataset is a regression task; use --model linear, got --model {model}"
            )
        if label_bound is None or not math.isfinite(label_bound):
            raise InvalidPrivacyParameter(
                "a regression needs the public bound B on |y| (its documented range): pass "
                "--label-bound B"
            )
        # the estimator's own defaults (AdaSSP; default_constraint_radius when a
        # mechanism needs a radius) apply unless --constraint-radius is given
        extra = {} if constraint_radius is None else {"constraint_radius": constraint_radius}
        if params.pop("feature_scaling", "public") != "public":
            raise InvalidPrivacyParameter(
                "--feature-scaling private is an option of classification (--model logistic)"
            )
        params = {k: v for k, v in params.items() if k not in ("classes", "multi_class")}
        return DPLinearRegression(label_bound=label_bound, **extra, **params)
    if model == "linear":
        raise InvalidPrivacyParameter(
            f"the dataset is a {task} classification task; use --model logistic or svm"
        )
    if model == "mlp":  # DP PCA + DP-SGD network (dperm.estimators.mlp); needs torch
        from ..estimators.mlp import DPMLPClassifier

        unused = sorted(k for k in params if k not in (*_MLP_PARAMS, "verbose"))
        if unused or constraint_radius is not None:
            raise InvalidPrivacyParameter(
                f"--model mlp does not take {unused or ['--constraint-radius']} (options of "
                "the linear models)"
            )
        return DPMLPClassifier(**{k: v for k, v in params.items() if k in _MLP_PARAMS})
    if model != "logistic" and params.pop("feature_scaling", "public") != "public":
        raise InvalidPrivacyParameter(
            f"--feature-scaling private is an option of --model logistic, got --model {model}"
        )
    cls = DPLogisticRegression if model == "logistic" else DPLinearSVC
    if constraint_radius is not None and params.get("constraint") is None:
        params = {**params, "constraint": "l2"}  # a radius alone means the ℓ2 ball
    return cls(constraint_radius=constraint_radius, **params)


@settles_ledger  # a --ledger reservation not committed is cancelled on an exception
def run_fit(
    *,
    dataset: str | None = None,
    data_home: str | Path | None = None,
    csv: str | Path | None = None,
    target: str | None = None,
    allow_data_bounds: bool = False,
    parquet: str | Path | None = None,
    csv_dir: str | Path | None = None,
    positive_label: str | None = None,
    model: str | None = None,
    mechanism: str | None = None,
    epsilon: float = 1.0,
    delta: float | None = None,
    data_norm: float | None = None,
    constraint_radius: float | None = None,
    constraint: str | None = None,
    penalty: str | None = None,
    alpha: float | None = None,
    seed: int | None = None,
    progress: bool = False,
    save: str | Path | None = None,
    tune: bool = False,
    bounds: list[str] | dict | None = None,
    categories: list[str] | dict | None = None,
    categorical: list[str] | None = None,
    classes: str | list | None = None,
    label_bound: float | None = None,
    task: str | None = None,
    impute: list[str] | dict | None = None,
    multi_class: str | None = None,
    batch_size: int | None = None,
    epochs: int | None = None,
    learning_rate: float | None = None,
    feature_scaling: str | None = None,
    ledger: str | Path | None = None,
    ledger_epsilon: float | None = None,
    ledger_delta: float | None = None,
    ledger_budget: str | None = None,
    ledger_key: str | Path | None = None,
    wait: float | None = None,
    reference: bool = True,
    notes: bool = False,
) -> dict[str, Any]:
    """Load data, fit a private model and measure it; the work behind ``dperm fit``.

    ``tune`` selects Λ privately (:func:`dperm.model_selection.tuning_search`):
    ε and δ are then the budget of the whole search, and the result gains a
    ``tuned`` key (the selected parameters, released by the search).

    ``progress`` shows a progress bar (on stderr) during the iterations of the
    gradient-perturbation mechanisms, and a note on stderr for every step
    slower than a second.  ``save`` writes the fitted model with
    :func:`dperm.io.save` and its privacy statement to ``<save>.privacy.txt``.

    ``bounds`` / ``categories`` / ``impute`` (``col=lo:hi`` / ``col=a,b,c`` /
    ``col=value`` items or schema files, or dicts), ``categorical``, ``classes``
    (``"a,b,c"`` or a list), ``label_bound``, ``task`` and ``positive_label`` are the
    public schema of a ``csv`` file (CSV, or Parquet by suffix ``.parquet``) or a Dask
    source (:data:`~dperm.cli._common.FILE_SCHEMA`): nothing of it is read off the data,
    the task and the labels included.  ``feature_scaling``
    (:class:`~dperm.estimators.DPLogisticRegression`'s parameter; None: "private" for a
    ``csv`` file's classification with the logistic model, whose bounds a user writes
    generously, else the estimator's default) finds the columns' location and scale
    privately within the fit's (ε, δ) (issue #36).  ``ledger`` names a
    store (a SQLite file, a JSON store or a ``postgresql://`` URL) holding the
    budget ``ledger_budget`` (default "default", created with budget
    ``ledger_epsilon``, ``ledger_delta``) spent across invocations, processes and
    machines (:mod:`dperm.cli._fit_ledger`): the fit's (ε, δ) is reserved before
    the fit (refused with ``BudgetExceededError`` when the budget cannot afford
    it; with ``wait`` seconds, retried while other fits' open reservations settle)
    and committed, with the model file's SHA-256, before the model file is moved into
    place; ``ledger_key`` is the key file of a signed budget.  ``reference=False``
    skips the non-private reference fit (its keys are then None); otherwise it
    minimizes the private fit's own regularized objective with the estimator's
    ``tol``/``max_iter``.

    Returns
    -------
    dict
        The keys of ``dperm fit --json`` (see :data:`FIT_KEYS`) plus
        ``metric`` ("accuracy" or "r2" for regression: the keys ``test_r2``,
        ``test_rmse``, ``train_r2``, ``nonprivate_test_r2`` then replace the
        ``*_accuracy`` ones), ``bounds_from_data`` (True when a bound or
        category list was read from the data: no end-to-end guarantee),
        ``delta_default``,
        ``dp_event``, ``alpha``, ``neighbouring`` (the relation ε and δ are
        stated for: "replace-one") and ``outside_guarantee`` (the keys of
        :data:`NON_PRIVATE_KEYS`: diagnostics computed from the training data
        without noise, not covered by the privacy guarantee).

    Raises
    ------
    DpermError
        Any validation error (unknown dataset or model, missing file, bad ε, …).
    """
    verbose = progress or notes  # plain progress lines on stderr; --quiet: none
    budget_options = (ledger_epsilon, ledger_delta, ledger_budget, ledger_key, wait)
    _check_options(epsilon, delta, save, ledger, budget_options)
    book = (
        None
        if ledger is None
        else open_ledger(ledger, ledger_epsilon, ledger_delta, ledger_budget, ledger_key)
    )
    ds, bounds_from_data = load_fit_dataset(
        dataset,
        data_home,
        csv=csv,
        parquet=parquet,
        csv_dir=csv_dir,
        allow_data_bounds=allow_data_bounds,
        verbose=verbose,
        target=target,
        bounds=bounds,
        categories=categories,
        categorical=categorical,
        classes=classes,
        task=task,
        label_bound=label_bound,
        positive_label=positive_label,
        impute=impute,
    )
    data_norm = public_data_norm(ds, data_norm)
    fit_delta, reservation = _reserve(book, epsilon, delta, ds, wait)
    est, model = make_estimator(
        ds,
        model,
        epsilon=epsilon,
        delta=fit_delta,  # None → the default min(1/n², 1e-5) inside the estimator
        data_norm=data_norm,
        seed=seed,
        constraint_radius=constraint_radius,
        verbose=progress,
        mechanism=mechanism,  # None: the estimator's default (AdaSSP for regression)
        constraint=constraint,
        penalty=penalty,
        alpha=alpha,
        multi_class=multi_class,
        batch_size=batch_size,
        epochs=epochs,
        learning_rate=learning_rate,
        feature_scaling=_feature_scaling(feature_scaling, csv, ds, model, mechanism),
    )
    fit = _private_fit(est, ds, model, tune, epsilon, fit_delta, verbose)
    from_file = (csv or parquet or csv_dir) is not None  # its public schema goes with the model
    out = _report(fit, delta, reference, bounds_from_data, verbose, from_file)
    if book is not None and delta is None:  # the δ label says where δ came from
        out["delta_source"] = delta_source(fit_delta, ds.n_train)
    return _release(out, fit, book, reservation, save, from_file)


def _feature_scaling(feature_scaling, csv, ds, model, mechanism) -> str | None:
    """``--feature-scaling``: as given, or "private" for the logistic model's default
    mechanism (auto, or dp-sgd) on a ``--csv`` file's classification task (its bounds are
    a user's honest, generous ones; the built-in loaders' schemas are tuned), else None
    (the estimator's default)."""
    if feature_scaling is not None:
        return feature_scaling
    default = model in (None, "logistic") and mechanism in (None, "auto", "dp-sgd")
    return "private" if csv is not None and ds.task != "regression" and default else None


def _check_options(epsilon, delta, save, ledger, budget_options: tuple) -> None:
    """Fail fast, before opening a ledger or loading any data: ε, δ, the ``--save``
    folder, and ``--ledger-*`` options without ``--ledger``."""
    from .._validation import check_delta, check_epsilon

    check_epsilon(epsilon)
    if delta is not None:
        check_delta(delta, allow_zero=True)
    if save is not None and not Path(save).parent.is_dir():
        from ..io import ModelFileError

        raise ModelFileError(f"--save: folder {str(Path(save).parent)!r} does not exist")
    if ledger is None and any(v is not None for v in budget_options):
        raise InvalidPrivacyParameter(
            "--ledger-epsilon, --ledger-delta, --ledger-budget, --ledger-key and --wait name a "
            "budget of a --ledger store; give --ledger LOCATION too (or drop them)"
        )
    wait = budget_options[-1]
    if wait is not None and not (isinstance(wait, int | float) and 0 <= wait < math.inf):
        raise InvalidPrivacyParameter(f"--wait must be seconds ≥ 0, got {wait!r}")


def make_estimator(
    ds, model: str | None, *, epsilon, delta, data_norm, seed, constraint_radius=None, **optional
):
    """The estimator ``dperm fit`` (and ``dperm audit --one-run``) builds for ``ds``.

    ``epsilon``, ``delta`` (None: 1/n² inside the estimator), ``data_norm`` and ``seed``
    (``random_state``) are always passed; the ``optional`` estimator parameters
    (``mechanism``, ``penalty``, ``verbose``, …) only when given (not None), so that the
    estimator's own defaults (alpha="auto", penalty="l2", no constraint) stay in one
    place.  ``model`` None is the task's natural model (linear for regression, else
    logistic).

    Returns
    -------
    (estimator, str)
        The unfitted estimator and the model's name.

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError
        A model or option the task does not take.
    """
    params = {"epsilon": epsilon, "delta": delta, "data_norm": data_norm, "random_state": seed}
    if ds.task != "regression" and ds.classes is not None:
        # the public label set of the schema: {−1, +1} for binary data (the loaders'
        # encoding), 0..9 for MNIST; never read off y (a CSV's multi-class label set
        # is, and the estimator then warns that it is not protected)
        params["classes"] = list(ds.classes)
    params.update({key: val for key, val in optional.items() if val is not None})
    if optional.get("multi_class") is not None and ds.task == "regression":
        raise InvalidPrivacyParameter("--multi-class is only used by classifiers")
    if model is None:  # the task's natural model
        model = "linear" if ds.task == "regression" else "logistic"
    return _make_model(model, ds.task, params, ds.label_bound, constraint_radius), model


@dataclass(frozen=True)
class _Fit:
    """A private fit, for its report and its release."""

    est: Any  # the fitted estimator (the search's best one with --tune)
    ds: Any  # the Dataset it was fitted on
    model: str  # logistic | svm | linear | mlp
    mechanism: str  # the mechanism the fit ran
    tuned: dict | None  # --tune: the selected parameters (released by the search)
    seconds: float


def _reserve(book, epsilon: float, delta: float | None, ds, wait=None) -> tuple[float | None, Any]:
    """``--ledger``: reserve (or refuse) the fit's (ε, δ) before the fit reads the data,
    waiting up to ``wait`` seconds for other fits' reservations (``--wait``).  Returns
    the δ of the fit (``delta``, or the default :func:`charged_delta` fixed by the
    reservation) and the reservation; without a ledger, ``delta`` and None."""
    if book is None:
        return delta, None
    reservation = reserve_fit(book, epsilon, delta, ds.n_train, f"dperm fit {ds.name}", wait)
    return reservation.event.delta, reservation


def _private_fit(est, ds, model: str, tune: bool, epsilon: float, delta, verbose: bool) -> _Fit:
    """Fit ``est`` on the training rows, or (``tune``) run the private search around it
    (:func:`dperm.model_selection.tuning_search`; its ``dp_event_`` covers every run).

    Raises
    ------
    InvalidPrivacyParameter
        ``tune`` with ``--model mlp``, or a fit that fails numerically (e.g. ε = 1e-300).
    """
    if model == "mlp" and tune:
        raise InvalidPrivacyParameter("--tune is not available for --model mlp")
    mechanism = getattr(est, "mechanism", "dp-sgd-network")  # --model mlp: DP PCA + DP-SGD
    t0 = time.perf_counter()
    tuned = None
    with step(f"private fit ({mechanism}, {ds.n_train} rows)", verbose):
        if tune:  # private search (docs/model_selection.md)
            from ..model_selection import tuning_search

            search = tuning_search(est).fit(ds.X_train, ds.y_train)
            est, tuned = search.best_estimator_, search.best_params_
        else:
            try:
                est.fit(ds.X_train, ds.y_train)
            except DpermError:
                raise
            except (ValueError, ArithmeticError) as exc:  # e.g. ε = 1e-300: noise overflows
                raise InvalidPrivacyParameter(
                    f"the {mechanism} fit failed numerically at epsilon={epsilon:g}, "
                    f"delta={delta}: {exc}"
                ) from None
    seconds = time.perf_counter() - t0
    mechanism = getattr(est, "mechanism_", None) or mechanism
    return _Fit(est, ds, model, mechanism, tuned, seconds)


def _report(
    fit: _Fit, delta: float | None, reference: bool, bounds_from_data: bool, verbose, from_file
):
    """The keys of ``dperm fit --json`` (:func:`~dperm.cli._fit_report.measure`) with
    ``bounds_from_data`` and, after ``--tune``, ``tuned``; ``delta`` is ``--delta``
    (None: the default δ).  The test rows of a user's file (``from_file``) are its own
    held-out records: the test metric is then listed as outside the guarantee, with the
    file's imputed cells and clipped labels (counts of the private data)."""
    reference = reference and fit.model != "mlp"  # no non-private reference of a network
    out = measure(fit.est, fit.ds, fit.model, fit.mechanism, delta, fit.seconds, reference, verbose)
    out["bounds_from_data"] = bounds_from_data
    if from_file:
        counts = {k: getattr(fit.ds, k, None) for k in ("n_imputed", "n_clipped_labels")}
        out.update({k: int(v) for k, v in counts.items() if v is not None})  # Dask: none
        metric = "r2" if fit.ds.task == "regression" else "accuracy"
        extra = [f"test_{metric}", *(k for k in counts if k in out)]
        if metric == "r2":
            extra.insert(1, "test_rmse")
        out["outside_guarantee"] = [*out["outside_guarantee"], *extra]
    if fit.tuned is not None:
        out["tuned"] = fit.tuned
    return out


def _release(out: dict, fit: _Fit, book, reservation, save, from_file: bool):
    """``--save`` and ``--ledger`` after the fit: the reservation is committed before the
    model file is in place (:func:`_save_model`), then ``out`` gains the ``ledger_*`` keys.
    A saved model of a file (``from_file``) holds its public schema (the pipeline scores
    raw rows) and predicts the public names of its labels (``--classes``)."""
    commit = None
    if book is not None:
        label = f"dperm fit {fit.ds.name} {fit.model} {fit.mechanism}"
        commit = functools.partial(commit_fit, reservation, fit.est, label)
    if save is not None:
        encoder = fit.ds.encoder if from_file else None
        names = getattr(fit.ds, "label_names", None) if from_file else None
        bounds_from_data = bool(out.get("bounds_from_data"))
        out.update(_save_model(fit.est, Path(save), bounds_from_data, encoder, commit, names))
    elif commit is not None:
        out["_entry"] = commit()
    if book is not None:
        out.update(ledger_keys(book, out.pop("_entry")))
    return out


def _save_model(
    est,
    path: Path,
    bounds_from_data: bool = False,
    encoder=None,
    commit=None,
    label_names=None,
) -> dict[str, Any]:
    """``dperm fit --save``: the model file and its privacy statement next to it.  With
    the ``encoder`` of a file's public schema, the file holds the pipeline (schema
    encoder, model): ``dperm.load(path).predict(raw_frame)`` and ``dperm predict``.
    ``commit`` (``--ledger``) is called with (path, staged file) once the model is
    written next to ``path``, before it is moved there: a model file in place is
    always charged.  ``label_names`` (a file's public labels, :attr:`Dataset.label_names`)
    replace the encoded ones in ``classes_``, so that the saved model predicts the
    file's labels (a relabelling of the released model: post-processing); the parameter
    ``classes`` becomes the names (public: the file's ``--classes``, never read off the
    data; :func:`_name_classes`)."""
    from ..io import privacy_statement, save

    if label_names is not None:
        _name_classes(est, label_names)

    if bounds_from_data:  # the statement must not claim public bounds
        est.privacy_caveats_ = (
            "bounds or category lists were read from the private data (--allow-data-bounds): "
            "the preprocessing is data-dependent, so the (ε, δ) guarantee below does NOT hold "
            "end to end",
        )
    if "verbose" in est.get_params(deep=False):
        est.set_params(verbose=False)  # the command's progress display, not the model's
    model = est
    if encoder is not None:
        from sklearn.pipeline import Pipeline

        model = Pipeline([("schema", encoder), ("model", est)])
    statement_path = path.with_name(path.name + ".privacy.txt")
    staged = path.with_name(f".{path.name}.{os.getpid()}.staged")
    save(model, staged)  # ModelFileError (one line, exit 2) when it cannot be written
    try:
        entry = None if commit is None else commit((path, staged))
        os.replace(staged, path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    try:
        statement_path.write_text(privacy_statement(model), encoding="utf-8")
    except OSError as exc:
        from ..io import ModelFileError

        raise ModelFileError(
            f"--save: cannot write {str(statement_path)!r}: {exc.strerror or exc}"
        ) from None
    out = {"saved_model": str(path), "privacy_statement": str(statement_path)}
    return out if commit is None else {**out, "_entry": entry}


def _name_classes(est, names) -> None:
    """Relabel a fitted classifier with the public ``names`` of its encoded classes
    (post-processing of the released model): ``classes_`` the sorted names — the order
    the estimators keep ``classes_`` in, which a saved model is checked against — with
    the coefficient rows permuted to match (a binary model's sign flipped when its
    positive class sorts first), and the parameter ``classes`` the names, so the
    statement says the label set is public.  A model without one coefficient row per
    class or a binary sign (a network) keeps its encoded labels when the names are not
    in sorted order."""
    import numpy as np

    classes = getattr(est, "classes_", None)
    names = [str(v) for v in names]
    if classes is None or len(classes) != len(names) or len(set(names)) != len(names):
        return
    order = np.argsort(np.asarray(names), kind="stable")  # sorted position → class code
    coef = getattr(est, "coef_", None)
    if not np.array_equal(order, np.arange(len(names))):
        if coef is None or not hasattr(est, "intercept_"):
            return
        if len(names) == 2 and np.atleast_2d(coef).shape[0] == 1:
            est.coef_, est.intercept_ = -coef, -est.intercept_  # +1 is the other class now
        elif np.atleast_2d(coef).shape[0] == len(names):
            est.coef_, est.intercept_ = coef[order], est.intercept_[order]
        else:
            return
    est.classes_ = np.asarray(names)[order]
    if "classes" in est.get_params(deep=False):
        est.set_params(classes=[names[i] for i in order])


#: the options of ``dperm fit``, in the order of ``--help``
_OPTIONS = {
    "dataset": Opt(
        str | None, None, "Built-in dataset (default breast-cancer); see dperm.datasets."
    ),
    "data_home": Opt(Path | None, None, "Folder with the data files (default $DPERM_DATA_HOME)."),
    "csv": Opt(Path | None, None, "Fit on a CSV (or .parquet) file instead."),
    **FILE_SCHEMA,  # the public schema of a file: shared with dperm audit --one-run
    "allow_data_bounds": Opt(
        bool, False, "CSV: read missing bounds and category lists from the data (LEAKS)."
    ),
    "parquet": Opt(Path | None, None, "Fit with Dask on a Parquet directory (docs/cluster.md)."),
    "csv_dir": Opt(Path | None, None, "Fit with Dask on a directory (or glob) of CSV files."),
    "scheduler": Opt(
        str | None, None, "Dask scheduler: local (a LocalCluster) or ADDRESS (tcp://…)."
    ),
    "model": Opt(
        str | None, None, "logistic | svm | linear | mlp (default: linear for regression)"
    ),
    "mechanism": Opt(
        str | None,
        None,
        "auto (default: a public rule of n, d, k, ε, δ; see docs/choosing_a_mechanism.md) "
        "| objective | output | amp | dp-sgd | any registered mechanism",
    ),
    "epsilon": Opt(float, 1.0, "Privacy budget ε."),
    "delta": Opt(
        float | None, None, "δ (default min(1/n², 1e-5), n = training rows; 0 = pure ε-DP)."
    ),
    "data_norm": Opt(float | None, None, "Row ℓ2 bound (default: the dataset's public bound)."),
    "constraint_radius": Opt(
        float | None, None, "Radius of the constraint set (default: the estimator's public rule)."
    ),
    "constraint": Opt(str | None, None, "l2 | l1 | box | none: fit θ inside this set."),
    "penalty": Opt(str | None, None, "l2 (default) | l1 | elasticnet | none"),
    "alpha": Opt(float | None, None, "Regularization strength Λ (default: the public rule)."),
    "seed": Opt(int | None, None, "Seed of the privacy noise."),
    "save": Opt(Path | None, None, "Write the model (dperm.load) and PATH.privacy.txt."),
    "json_output": JSON,
    "tune": Opt(bool, False, "Private search around the auto choice; ε, δ cover it all."),
    "multi_class": Opt(
        str | None, None, "auto (default: multinomial where supported) | ovr | multinomial."
    ),
    "batch_size": Opt(int | None, None, "DP-SGD expected batch size."),
    "epochs": Opt(int | None, None, "DP-SGD/DP-GD epochs."),
    "learning_rate": Opt(float | None, None, "DP-SGD/DP-GD step size."),
    "feature_scaling": Opt(
        str | None,
        None,
        "public | private: find the columns' location and scale privately, in the same "
        "ε (default: private for --csv with --model logistic).",
    ),
    "ledger": Opt(
        str | None,
        None,
        "Budget store spent across runs: FILE.db (SQLite), FILE.json or postgresql://URL; "
        "reserves the fit before it runs, refuses an overspend (docs/budgets.md).",
        metavar="LOCATION",
    ),
    "ledger_epsilon": Opt(float | None, None, "Budget ε of a new --ledger budget."),
    "ledger_delta": Opt(float | None, None, "Budget δ of a new --ledger budget (1e-5)."),
    "ledger_budget": Opt(str | None, None, "Budget name in the --ledger store (default)."),
    "ledger_key": Opt(
        str | None,
        None,
        "Key file of a signed --ledger budget: signs the fit's records (docs/budgets.md).",
        metavar="FILE",
    ),
    "wait": Opt(
        float | None,
        None,
        "--ledger: when other fits' open reservations are all that keeps this one out, wait "
        "up to SECONDS for them to settle (default: refuse at once).",
        metavar="SECONDS",
    ),
    "no_reference": Opt(bool, False, "Skip the non-private reference fit."),
    "quiet": QUIET,
}


@with_options(_OPTIONS)
def fit_command(**options: Any) -> None:
    """Fit a private model and report privacy spent and utility."""
    json_output, save = options.pop("json_output"), options["save"]
    reference = not options.pop("no_reference")
    quiet = options.pop("quiet")
    with (
        one_line_errors(),
        warnings.catch_warnings(record=True) as caught,
        dask_scheduler(options.pop("scheduler")),
    ):
        # warnings (e.g. rows clipped) become one stderr line each, never stdout,
        # printed after a successful fit only: a failed one prints its error alone
        warnings.simplefilter("always")
        result = run_fit(**options, progress=not quiet, reference=reference, notes=not quiet)
    for w in caught:
        show_warning_one_line(w.message, w.category, w.filename, w.lineno)
    if json_output:
        typer.echo(json.dumps({k: json_safe(v) for k, v in result.items()}))
    else:
        print_fit_table(result)
        if save is not None:
            typer.echo(Path(result["privacy_statement"]).read_text(encoding="utf-8"))
            typer.echo(f"model saved to {result['saved_model']}")
