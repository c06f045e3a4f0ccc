"""The ``dperm`` command line: ``dperm fit | account | calibrate | bench | audit``.

Examples (shell)::

    dperm fit                                   # breast-cancer, logistic, objective, ε = 1
    dperm fit --dataset adult --data-home ../shared/data --epsilon 1 --json
    dperm fit --csv data.csv --target label --model svm --mechanism output --delta 0 \
        --bounds age=17:90 --bounds hours=1:99 --categories colour=red,green,blue
    dperm fit --csv data.csv --target y --task regression --bounds schema.json \
        --label-bound 5 --ledger spent.json --ledger-epsilon 3 --ledger-delta 1e-5
    dperm account --noise-multiplier 1.1 --sampling-rate 0.004 --steps 15000 --delta 1e-5
    dperm calibrate --epsilon 2 --delta 1e-5 --sampling-rate 0.004 --steps 15000

Errors raised by dperm (bad ε, unknown dataset, missing file, …) and usage
errors print one line on stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from .exceptions import DpermError, InvalidPrivacyParameter, UnknownNameError

__all__ = ["app", "main", "run_fit"]

app = typer.Typer(
    name="dperm",
    help="Differentially private empirical risk minimization.",
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", help="Print the dperm version and exit.", is_eager=True)
    ] = False,
) -> None:
    """Differentially private empirical risk minimization."""
    if version:
        from ._version import __version__

        typer.echo(f"dperm {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:  # `dperm` alone: show the commands
        typer.echo(ctx.get_help())


_MODELS = ("logistic", "svm", "linear")
#: keys of ``dperm fit --json`` computed from the private training data without
#: noise (diagnostics for the data owner, outside the privacy guarantee); the
#: table labels their rows "(not private)"
NON_PRIVATE_KEYS = (
    "train_accuracy",
    "excess_empirical_risk",
    "nonprivate_test_accuracy",
    "n_clipped",
    "fit_seconds",
)
_FIT_KEYS = (
    "dataset",
    "n_train",
    "n_test",
    "n_features",
    "model",
    "mechanism",
    "epsilon",
    "delta",
    "test_accuracy",
    "train_accuracy",
    "excess_empirical_risk",
    "nonprivate_test_accuracy",
    "n_clipped",
    "fit_seconds",
)


def _fail(exc: BaseException) -> typer.Exit:
    """Print ``exc`` as one line on stderr; the caller raises the returned Exit(2)."""
    msg = " ".join(str(exc).split()) or type(exc).__name__
    typer.echo(f"dperm: error: {msg}", err=True)
    return typer.Exit(code=2)


@contextlib.contextmanager
def _one_line_errors() -> Iterator[None]:
    """Turn a :class:`~dperm.exceptions.DpermError` raised inside into one stderr
    line and exit status 2 (:func:`_fail`) — the error handling of every command."""
    try:
        yield
    except (DpermError, OSError, ValueError, ArithmeticError) as exc:
        # OSError: unwritable/missing paths; ValueError/ArithmeticError: a value the
        # numerics cannot use (e.g. ε = 1e-300) — bad input, not a crash
        raise _fail(exc) from None


# options that several commands share
_JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
_SamplingRateOption = Annotated[float, typer.Option("--sampling-rate", help="q in (0, 1].")]
_StepsOption = Annotated[int, typer.Option("--steps", help="Number of releases.")]
_AccountantOption = Annotated[str, typer.Option("--accountant", help="rdp | pld | …")]
_SamplingOption = Annotated[str, typer.Option("--sampling", help="poisson | without_replacement")]


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    return v


# ----------------------------------------------------------------------------- fit
def _make_model(model: str, task: str, params: dict[str, Any], label_bound, constraint_radius):
    from .estimators import DPLinearRegression, DPLinearSVC, DPLogisticRegression

    if model not in _MODELS:
        raise UnknownNameError(f"unknown model {model!r}; choose one of {list(_MODELS)}")
    if task == "regression":
        if model != "linear":
            raise InvalidPrivacyParameter(
                f"the dataset is a regression task; use --model linear, got --model {model}"
            )
        if label_bound is None or not math.isfinite(label_bound):
            raise InvalidPrivacyParameter(
                "regression needs a public label bound; the dataset has none"
            )
        # the estimator's own defaults (AdaSSP; default_constraint_radius when a
        # mechanism needs a radius) apply unless --constraint-radius is given
        extra = {} if constraint_radius is None else {"constraint_radius": constraint_radius}
        params = {k: v for k, v in params.items() if k not in ("classes", "multi_class")}
        return DPLinearRegression(label_bound=label_bound, **extra, **params)
    if model == "linear":
        raise InvalidPrivacyParameter(
            f"the dataset is a {task} classification task; use --model logistic or svm"
        )
    cls = DPLogisticRegression if model == "logistic" else DPLinearSVC
    if constraint_radius is not None and params.get("constraint") is None:
        params = {**params, "constraint": "l2"}  # a radius alone means the ℓ2 ball
    return cls(constraint_radius=constraint_radius, **params)


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
    label_bound: float | None = None,
    task: str | None = None,
    multi_class: str | None = None,
    batch_size: int | None = None,
    epochs: int | None = None,
    learning_rate: float | None = None,
    ledger: str | Path | None = None,
    ledger_epsilon: float | None = None,
    ledger_delta: float | None = None,
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

    ``bounds`` / ``categories`` (``col=lo:hi`` / ``col=a,b,c`` items or schema
    files, or dicts), ``label_bound`` and ``task`` are the public schema of a
    ``csv`` file (CSV, or Parquet by suffix ``.parquet``).  ``ledger`` names a
    JSON :class:`~dperm.accounting.Ledger` spent across invocations (created
    with budget ``ledger_epsilon``, ``ledger_delta``): a fit the ledger cannot
    afford is refused before fitting (``BudgetExceededError``), the ledger is
    saved after a successful fit.  ``reference=False`` skips the non-private
    reference fit (its keys are then None); otherwise it minimizes the private
    fit's own regularized objective with the estimator's ``tol``/``max_iter``.

    Returns
    -------
    dict
        The keys of ``dperm fit --json`` (see :data:`_FIT_KEYS`) plus
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
    from . import datasets
    from ._cli_fit import check_ledger, open_ledger, parse_bounds, parse_categories, step
    from .exceptions import PrivacyLeakWarning

    # step timings are for a person at a terminal; piped/captured stderr keeps one line per error
    verbose_steps = (progress or notes) and sys.stderr.isatty()
    from ._validation import check_delta, check_epsilon

    check_epsilon(epsilon)  # fail fast, before loading any data
    if delta is not None:
        check_delta(delta, allow_zero=True)
    if save is not None and not Path(save).parent.is_dir():  # fail before fitting
        from .io import ModelFileError

        raise ModelFileError(f"--save: folder {str(Path(save).parent)!r} does not exist")
    ledger_path = None if ledger is None else Path(ledger)
    book = None if ledger_path is None else open_ledger(ledger_path, ledger_epsilon, ledger_delta)
    bounds_from_data = False
    if parquet is not None or csv_dir is not None:  # Dask (docs/cluster.md): never gathered
        from ._cli_fit import load_dask_dataset

        if dataset is not None or csv is not None or (parquet and csv_dir) or allow_data_bounds:
            raise InvalidPrivacyParameter(
                "give one of --dataset, --csv, --parquet, --csv-dir; --allow-data-bounds is "
                "not available with --parquet/--csv-dir (bounds must be public)"
            )
        fmt = "parquet" if parquet is not None else "csv"
        ds = load_dask_dataset(
            parquet or csv_dir, fmt, target, bounds, categories, task, label_bound, positive_label
        )
    elif csv is not None:
        if dataset is not None:
            raise InvalidPrivacyParameter("give either --dataset or --csv, not both")
        if target is None:
            raise InvalidPrivacyParameter("--csv needs --target COLUMN (the label column)")
        bounds_map = bounds if isinstance(bounds, dict) else parse_bounds(bounds)
        cats_map = categories if isinstance(categories, dict) else parse_categories(categories)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = datasets.load_csv(
                csv,
                target,
                bounds=bounds_map,
                categories=cats_map,
                categorical=list(cats_map) or None,
                task=task,
                label_bound=label_bound,
                allow_data_bounds=allow_data_bounds,
            )
        for w in caught:  # re-emit; a leak warning at load time means data bounds
            bounds_from_data |= issubclass(w.category, PrivacyLeakWarning)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    else:
        if target is not None or bounds or categories or task is not None:
            raise InvalidPrivacyParameter(
                "--target, --bounds, --categories and --task are only used with --csv"
            )
        with step(f"loading {dataset or datasets.DEFAULT_DATASET}", verbose_steps):
            ds = datasets.load(dataset or datasets.DEFAULT_DATASET, data_home)
        if label_bound is not None:
            raise InvalidPrivacyParameter("--label-bound is only used with --csv")
    if data_norm is None:
        data_norm = ds.row_norm_bound
        if not math.isfinite(data_norm):
            raise InvalidPrivacyParameter(
                f"dataset {ds.name!r} has no public row-norm bound; pass --data-norm"
            )
    n = ds.n_train
    if book is not None:  # refuse an overspend before any work on the data
        check_ledger(book, epsilon, 1.0 / n**2 if delta is None else delta)
    params = {
        "epsilon": epsilon,
        "delta": delta,  # None → 1/n² inside the estimator
        "data_norm": data_norm,
        "random_state": seed,
        "verbose": progress,
    }
    # optional estimator parameters: only passed when given, so the estimator's
    # own defaults (alpha="auto", penalty="l2", no constraint) stay in one place
    if ds.task != "regression" and ds.classes is not None:
        # the public label set of the schema: {−1, +1} for binary data (the loaders'
        # encoding), 0..9 for MNIST; never read off y (a CSV's multi-class label set
        # is, and the estimator then warns that it is not protected)
        params["classes"] = list(ds.classes)
    for key, val in (
        ("mechanism", mechanism),  # None: the estimator's default (AdaSSP for regression)
        ("constraint", constraint),
        ("penalty", penalty),
        ("alpha", alpha),
        ("multi_class", multi_class),
        ("batch_size", batch_size),
        ("epochs", epochs),
        ("learning_rate", learning_rate),
    ):
        if val is not None:
            params[key] = val
    if multi_class is not None and ds.task == "regression":
        raise InvalidPrivacyParameter("--multi-class is only used by classifiers")
    if model is None:  # the task's natural model
        model = "linear" if ds.task == "regression" else "logistic"
    est = _make_model(model, ds.task, params, ds.label_bound, constraint_radius)
    mechanism = est.mechanism
    t0 = time.perf_counter()
    tuned = None
    with step(f"private fit ({mechanism})", verbose_steps):
        if tune:  # private search; its dp_event_ covers every run (docs/model_selection.md)
            from .model_selection import tuning_search

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
    fit_seconds = time.perf_counter() - t0
    if book is not None:  # record the spend (refused → BudgetExceededError, exit 2)
        book.spend(est.dp_event_, label=f"dperm fit {ds.name} {model} {mechanism}")
    out = _measure(est, ds, model, mechanism, delta, fit_seconds, reference, verbose_steps)
    out["bounds_from_data"] = bounds_from_data
    if tuned is not None:
        out["tuned"] = tuned
    if save is not None:
        out.update(_save_model(est, Path(save), bool(out.get("bounds_from_data"))))
    if book is not None:
        book.save(ledger_path)
        out["ledger"] = str(ledger_path)
        out["ledger_spent_epsilon"] = float(book.spent()[0])
    return out


def _measure(est, ds, model, mechanism, delta, fit_seconds, reference, verbose) -> dict:
    """The measured keys of :func:`run_fit`: utility, privacy spent, diagnostics."""
    import numpy as np

    from ._cli_fit import step
    from .utility import excess_empirical_risk, nonprivate_fit

    ref = None
    if reference and getattr(est, "multi_class", "ovr") == "multinomial":
        # dperm.utility.nonprivate_fit solves the binary / one-vs-rest problems only
        warnings.warn(
            "no non-private reference for --multi-class multinomial (not implemented); "
            "its rows are left empty",
            UserWarning,
            stacklevel=2,
        )
        reference = False
    if reference:
        # the private fit's own regularized objective (l2_, regularizer_,
        # constraint_), its tol and its iteration cap.  A gradient-perturbation
        # fit has no tol (it runs `steps` noisy steps at sampling rate q, i.e.
        # steps·q passes): its reference gets as many full-gradient iterations as
        # the fit made passes (at least 100) and a gradient residual of 1e-4, far
        # below the fit's own noise.  Without regularization (DP-SGD's default
        # alpha = 0) the minimum may not exist and the solver would otherwise run
        # to max_iter (issue #12 §3: 21 min on KDD Cup 99)
        tol = float(getattr(est, "tol", 1e-10))
        max_iter = int(getattr(est, "max_iter", 10_000))
        diag = est.diagnostics_ if isinstance(est.diagnostics_, dict) else est.diagnostics_[0]
        if diag.get("steps") is not None:
            passes = float(diag["steps"]) * float(diag.get("sampling_rate") or 1.0)
            max_iter = min(max_iter, max(100, math.ceil(passes)))
            tol = max(tol, 1e-4)
        with step("non-private reference fit (skip with --no-reference)", verbose):
            ref = nonprivate_fit(est, ds.X_train, ds.y_train, tol=tol, max_iter=max_iter)
    has_test = ds.X_test is not None and ds.n_test > 0
    regression = ds.task == "regression"
    metric = "r2" if regression else "accuracy"
    out: dict[str, Any] = {
        "dataset": ds.name,
        "n_train": ds.n_train,
        "n_test": ds.n_test,
        "n_features": ds.n_features,
        "model": model,
        "mechanism": mechanism,
        "epsilon": float(est.epsilon_),
        "delta": float(est.delta_),
        f"test_{metric}": float(est.score(ds.X_test, ds.y_test)) if has_test else None,
    }
    if regression:
        out["test_rmse"] = (
            float(np.sqrt(np.mean((est.predict(ds.X_test) - ds.y_test) ** 2))) if has_test else None
        )
    out[f"train_{metric}"] = float(est.score(ds.X_train, ds.y_train))
    out["excess_empirical_risk"] = (
        None if ref is None else excess_empirical_risk(est, ds.X_train, ds.y_train, reference=ref)
    )
    out[f"nonprivate_test_{metric}"] = (
        float(ref.score(ds.X_test, ds.y_test)) if (has_test and ref is not None) else None
    )
    out.update(
        {
            "n_clipped": int(est.n_clipped_),
            "fit_seconds": fit_seconds,
            "metric": metric,
            "delta_default": delta is None,
            "alpha": float(est.alpha_),
            "dp_event": est.dp_event_.to_dict(),
            # the relation ε and δ are stated for (docs/neighbouring.md)
            "neighbouring": est.neighbouring_,
            # computed from the private training data without noise: for the data
            # owner, outside the (ε, δ) guarantee (don't publish them)
            "outside_guarantee": [k.replace("accuracy", metric) for k in NON_PRIVATE_KEYS],
        }
    )
    # what a gradient-perturbation fit ran with (issue #4): from the first
    # class's diagnostics (one-vs-rest fits share the schedule and the noise)
    diag = est.diagnostics_ if isinstance(est.diagnostics_, dict) else est.diagnostics_[0]
    for key in ("noise_multiplier", "steps", "sampling_rate", "accountant"):
        val = diag.get(key)
        out[key] = val if val is None or isinstance(val, str) else float(val)
    # the theory next to the measurement (issue #5): dperm.theory.bound_for_estimator
    from .theory import bound_for_estimator

    bound = bound_for_estimator(est, ds.n_train)
    out["theoretical_bound"] = None if bound is None else float(bound.value)
    out["theoretical_bound_detail"] = None if bound is None else bound.to_dict()
    return out


def _save_model(est, path: Path, bounds_from_data: bool = False) -> dict[str, str]:
    """``dperm fit --save``: the model file and its privacy statement next to it."""
    from .io import ModelFileError, save

    if bounds_from_data:  # the statement must not claim public bounds
        est.privacy_caveats_ = (
            "bounds or category lists were read from the private data (--allow-data-bounds): "
            "the preprocessing is data-dependent, so the (ε, δ) guarantee below does NOT hold "
            "end to end",
        )
    statement_path = path.with_name(path.name + ".privacy.txt")
    try:
        save(est, path)
        statement_path.write_text(est.privacy_statement(), encoding="utf-8")
    except OSError as exc:
        raise ModelFileError(f"--save: cannot write {str(path)!r}: {exc}") from None
    return {"saved_model": str(path), "privacy_statement": str(statement_path)}


def _print_fit_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    key = result["metric"]  # "accuracy" or "r2": the suffix of the utility keys
    metric = "R²" if key == "r2" else "accuracy"

    def fmt(v, spec=".4f"):
        return "—" if v is None else format(v, spec)

    delta_note = " (default 1/n²)" if result["delta_default"] else ""
    np_note = " (not private)"  # rows computed from the training data without noise
    table = Table(title="dperm fit", show_header=True, header_style="bold")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("dataset", result["dataset"]),
        ("n_train", str(result["n_train"])),
        ("n_test", str(result["n_test"])),
        ("d (features)", str(result["n_features"])),
        ("model", result["model"]),
        ("mechanism", result["mechanism"]),
        ("ε spent", fmt(result["epsilon"], ".6g")),
        ("δ spent", fmt(result["delta"], ".3g") + delta_note),
        ("neighbouring", result.get("neighbouring", "replace-one")),
        *(
            (("ledger ε spent (all fits)", fmt(result["ledger_spent_epsilon"], ".6g")),)
            if "ledger" in result
            else ()
        ),
        *(
            (("WARNING", "bounds read from the data: NO end-to-end DP guarantee"),)
            if result.get("bounds_from_data")
            else ()
        ),
        (f"test {metric}", fmt(result[f"test_{key}"])),
        *((("test RMSE", fmt(result.get("test_rmse"), ".4g")),) if key == "r2" else ()),
        (f"train {metric}{np_note}", fmt(result[f"train_{key}"])),
        (f"excess empirical risk{np_note}", fmt(result["excess_empirical_risk"], ".4g")),
        (
            "theoretical bound"
            + (
                ""
                if (result.get("theoretical_bound_detail") or {}).get("constant_known", True)
                else " (rate, constant 1)"
            ),
            fmt(result.get("theoretical_bound"), ".4g"),
        ),
        (f"non-private test {metric}{np_note}", fmt(result[f"nonprivate_test_{key}"])),
        *(
            (label, fmt(result.get(key), ".4g") if key != "accountant" else result[key])
            for key, label in (
                ("noise_multiplier", "noise multiplier"),
                ("steps", "steps"),
                ("sampling_rate", "sampling rate"),
                ("accountant", "accountant"),
            )
            if result.get(key) is not None
        ),
        (f"rows clipped{np_note}", str(result["n_clipped"])),
        (f"fit seconds{np_note}", fmt(result["fit_seconds"], ".3f")),
    ]
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)


@app.command("fit")
def fit_command(
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset", help="Built-in dataset (default breast-cancer); see dperm.datasets."
        ),
    ] = None,
    data_home: Annotated[
        Path | None,
        typer.Option("--data-home", help="Folder with the data files (default $DPERM_DATA_HOME)."),
    ] = None,
    csv: Annotated[
        Path | None, typer.Option("--csv", help="Fit on a CSV (or .parquet) file instead.")
    ] = None,
    target: Annotated[str | None, typer.Option("--target", help="Label column of --csv.")] = None,
    allow_data_bounds: Annotated[
        bool,
        typer.Option("--allow-data-bounds", help="CSV: read missing bounds from the data (LEAKS)."),
    ] = False,
    parquet: Annotated[
        Path | None,
        typer.Option("--parquet", help="Fit with Dask on a Parquet directory (docs/cluster.md)."),
    ] = None,
    csv_dir: Annotated[
        Path | None,
        typer.Option("--csv-dir", help="Fit with Dask on a directory (or glob) of CSV files."),
    ] = None,
    positive_label: Annotated[
        str | None,
        typer.Option("--positive-label", help="--parquet/--csv-dir: target value mapped to +1."),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler", help="Dask scheduler: local (a LocalCluster) or ADDRESS (tcp://…)."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="logistic | svm | linear (default: linear for regression)"),
    ] = None,
    mechanism: Annotated[
        str | None,
        typer.Option(
            "--mechanism",
            help="objective | output | dp-sgd | any registered mechanism "
            "(default: the estimator's: objective; adassp for regression)",
        ),
    ] = None,
    epsilon: Annotated[float, typer.Option("--epsilon", help="Privacy budget ε.")] = 1.0,
    delta: Annotated[
        float | None,
        typer.Option("--delta", help="δ (default 1/n², n = training rows; 0 = pure ε-DP)."),
    ] = None,
    data_norm: Annotated[
        float | None,
        typer.Option("--data-norm", help="Row ℓ2 bound (default: the dataset's public bound)."),
    ] = None,
    constraint_radius: Annotated[
        float | None,
        typer.Option(
            "--constraint-radius",
            help="Radius of the constraint set (default: the estimator's public rule).",
        ),
    ] = None,
    constraint: Annotated[
        str | None,
        typer.Option("--constraint", help="l2 | l1 | box | none: fit θ inside this set."),
    ] = None,
    penalty: Annotated[
        str | None, typer.Option("--penalty", help="l2 (default) | l1 | elasticnet | none")
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option("--alpha", help="Regularization strength Λ (default: the public rule)."),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the privacy noise.")] = None,
    save: Annotated[
        Path | None,
        typer.Option("--save", help="Write the model (dperm.load) and PATH.privacy.txt."),
    ] = None,
    json_output: _JsonOption = False,
    tune: Annotated[
        bool,
        typer.Option("--tune", help="Select Λ privately; ε, δ cover the whole search."),
    ] = False,
    bounds: Annotated[
        list[str] | None,
        typer.Option(
            "--bounds", help="Public bounds: a JSON file {col: [lo, hi]} or col=lo:hi (repeat)."
        ),
    ] = None,
    categories: Annotated[
        list[str] | None,
        typer.Option(
            "--categories", help="Public categories: a JSON file {col: [...]} or col=a,b,c."
        ),
    ] = None,
    label_bound: Annotated[
        float | None,
        typer.Option("--label-bound", help="CSV regression: public bound B on |y|."),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option("--task", help="CSV: binary | multiclass | regression (default: inferred)."),
    ] = None,
    multi_class: Annotated[
        str | None, typer.Option("--multi-class", help="ovr | multinomial (dp-sgd).")
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", help="DP-SGD expected batch size.")
    ] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", help="DP-SGD/DP-GD epochs.")] = None,
    learning_rate: Annotated[
        float | None, typer.Option("--learning-rate", help="DP-SGD/DP-GD step size.")
    ] = None,
    ledger: Annotated[
        Path | None,
        typer.Option("--ledger", help="JSON ledger spent across runs; refuses overspend."),
    ] = None,
    ledger_epsilon: Annotated[
        float | None, typer.Option("--ledger-epsilon", help="Budget ε of a new --ledger.")
    ] = None,
    ledger_delta: Annotated[
        float | None, typer.Option("--ledger-delta", help="Budget δ of a new --ledger (1e-5).")
    ] = None,
    no_reference: Annotated[
        bool,
        typer.Option("--no-reference", help="Skip the non-private reference fit."),
    ] = False,
) -> None:
    """Fit a private model and report privacy spent and utility."""
    from ._cli_fit import dask_scheduler

    with (
        _one_line_errors(),
        warnings.catch_warnings(record=True) as caught,
        dask_scheduler(scheduler),
    ):
        # warnings (e.g. rows clipped) become one stderr line each, never stdout,
        # printed after a successful fit only: a failed one prints its error alone
        warnings.simplefilter("always")
        result = run_fit(
            dataset=dataset,
            data_home=data_home,
            csv=csv,
            target=target,
            allow_data_bounds=allow_data_bounds,
            parquet=parquet,
            csv_dir=csv_dir,
            positive_label=positive_label,
            model=model,
            mechanism=mechanism,
            epsilon=epsilon,
            delta=delta,
            data_norm=data_norm,
            constraint_radius=constraint_radius,
            constraint=constraint,
            penalty=penalty,
            alpha=alpha,
            seed=seed,
            progress=not json_output,
            save=save,
            tune=tune,
            bounds=bounds,
            categories=categories,
            label_bound=label_bound,
            task=task,
            multi_class=multi_class,
            batch_size=batch_size,
            epochs=epochs,
            learning_rate=learning_rate,
            ledger=ledger,
            ledger_epsilon=ledger_epsilon,
            ledger_delta=ledger_delta,
            reference=not no_reference,
            notes=True,
        )
    for w in caught:
        _show_warning_one_line(w.message, w.category, w.filename, w.lineno)
    if json_output:
        typer.echo(json.dumps({k: _json_safe(v) for k, v in result.items()}))
    else:
        _print_fit_table(result)
        if save is not None:
            typer.echo(Path(result["privacy_statement"]).read_text(encoding="utf-8"))
            typer.echo(f"model saved to {result['saved_model']}")


def _show_warning_one_line(message, category, filename, lineno, file=None, line=None):
    typer.echo(f"dperm: warning: {category.__name__}: {message}", err=True)


# ----------------------------------------------------------------------------- accounting
@app.command("account")
def account_cmd(
    noise_multiplier: Annotated[float, typer.Option("--noise-multiplier", help="σ per unit Δ₂.")],
    sampling_rate: _SamplingRateOption = 1.0,
    steps: _StepsOption = 1,
    delta: Annotated[float, typer.Option("--delta", help="δ.")] = 1e-5,
    accountant: _AccountantOption = "rdp",
    sampling: _SamplingOption = "poisson",
    json_output: _JsonOption = False,
    plot: Annotated[
        str | None,
        typer.Option("--plot", help="Write the privacy profile δ(ε) and the PLD to this PNG."),
    ] = None,
) -> None:
    """ε spent by `steps` (subsampled) Gaussian releases."""
    with _one_line_errors():
        from ._cli_account import account_command, render

        result = account_command(
            noise_multiplier,
            sampling_rate=sampling_rate,
            steps=steps,
            delta=delta,
            accountant=accountant,
            sampling=sampling,
            json_output=json_output,
            plot=plot,
        )
    typer.echo(render(result, json_output=json_output))


@app.command("calibrate")
def calibrate_cmd(
    epsilon: Annotated[float, typer.Option("--epsilon", help="Target ε.")],
    delta: Annotated[float, typer.Option("--delta", help="Target δ.")] = 1e-5,
    sampling_rate: _SamplingRateOption = 1.0,
    steps: _StepsOption = 1,
    accountant: _AccountantOption = "rdp",
    sampling: _SamplingOption = "poisson",
    json_output: _JsonOption = False,
) -> None:
    """Smallest noise multiplier making `steps` Gaussian releases (ε, δ)-DP."""
    with _one_line_errors():
        from ._cli_account import calibrate_command, render

        result = calibrate_command(
            epsilon, delta, sampling_rate, steps, accountant, sampling=sampling
        )
    typer.echo(render(result, json_output=json_output))


# ----------------------------------------------------------------------------- more commands
# `dperm bench` and `dperm audit` are added here by their modules' owners, each as
#     @app.command("bench")
#     def bench_cmd(...): ...            # import its back end lazily inside,
# running its back end inside `with _one_line_errors():` like the commands above.


@app.command("bench")
def bench_cmd(
    datasets: Annotated[
        str | None,
        typer.Option(
            "--datasets",
            help="Comma-separated: adult,kddcup99,mnist,synthetic-l,synthetic-h (default: "
            "those present).",
        ),
    ] = None,
    epsilons: Annotated[str, typer.Option("--epsilons", help="Comma-separated ε values.")] = (
        "0.1,1"
    ),
    algorithms: Annotated[
        str | None,
        typer.Option(
            "--algorithms",
            help="Comma-separated: non-private, registered mechanisms, tuned variants, peers "
            "(default: the published comparison plus dperm's other classifiers).",
        ),
    ] = None,
    repeats: Annotated[int, typer.Option("--repeats", help="Private fits per cell.")] = 3,
    protocol: Annotated[
        str,
        typer.Option("--protocol", help="honest (defaults) | paper (non-private tuning)."),
    ] = "honest",
    data_home: Annotated[
        Path | None, typer.Option("--data-home", help="Folder of the real data.")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("bench-out"),
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="Hide the progress bar.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Base seed of the fits.")] = 0,
) -> None:
    """Benchmark every DP-ERM algorithm against the published comparison (Iyengar et al. 2019)."""
    with _one_line_errors():
        from ._cli_bench import bench_command

        text = bench_command(
            datasets=datasets,
            epsilons=epsilons,
            algorithms=algorithms,
            repeats=repeats,
            protocol=protocol,
            data_home=data_home,
            out=out,
            progress=not no_progress,
            seed=seed,
        )
    typer.echo(text)


@app.command("audit")
def audit_cmd(
    mechanism: Annotated[
        str | None,
        typer.Option(
            "--mechanism",
            help="Audit runner, e.g. objective, output, dp-gd, dp-sgd, estimator-dp-sgd, amp, "
            "adassp, tukey, dual-frank-wolfe (`dperm audit --list` prints every one).",
        ),
    ] = None,
    epsilon: Annotated[float | None, typer.Option("--epsilon", help="Claimed ε.")] = None,
    list_runners: Annotated[
        bool, typer.Option("--list", help="Print the available audit runners and exit.")
    ] = False,
    delta: Annotated[
        float | None, typer.Option("--delta", help="Claimed δ (default: the mechanism's).")
    ] = None,
    runs: Annotated[
        int | None,
        typer.Option("--runs", help="Runs per neighbouring dataset (default: the mechanism's)."),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the runs.")] = None,
    n_jobs: Annotated[
        int | None, typer.Option("--n-jobs", help="Worker processes (default: all cores).")
    ] = None,
    json_output: _JsonOption = False,
    method: Annotated[
        str | None,
        typer.Option(
            "--method",
            help="gdp or clopper-pearson (default: gdp for Gaussian-noise mechanisms).",
        ),
    ] = None,
) -> None:
    """Empirical lower bound ε_LB on the ε a mechanism really spends (canary audit)."""
    with _one_line_errors():
        if list_runners:
            from .audit import available_runners

            typer.echo("\n".join(available_runners()))
            return
        if mechanism is None or epsilon is None:
            raise InvalidPrivacyParameter(
                "dperm audit needs --mechanism NAME and --epsilon EPS (or --list)"
            )
        from ._cli_audit import audit_command, render

        result = audit_command(
            mechanism, epsilon, delta, runs, seed, n_jobs, json_output, method=method
        )
    typer.echo(render(result, json_output=json_output))


# ----------------------------------------------------------------------------- entry point
def main(argv: list[str] | None = None) -> int:
    """Console-script entry point (``dperm = "dperm.cli:main"``).

    Usage errors and dperm errors print one line on stderr and exit 2.
    """
    try:
        rv = app(args=argv, prog_name="dperm", standalone_mode=False)
    except DpermError as exc:  # pragma: no cover - commands catch their own
        raise SystemExit(_fail(exc).exit_code) from None
    except Exception as exc:
        # Click / Typer usage errors (bad option, bad value, missing argument):
        # duck-typed, so it works whether typer bundles click or depends on it
        fmt = getattr(exc, "format_message", None)
        code = getattr(exc, "exit_code", None)
        if callable(fmt) and isinstance(code, int):
            msg = " ".join(str(fmt()).split())
            typer.echo(f"dperm: error: {msg}", err=True)
            raise SystemExit(code) from None
        if type(exc).__name__ == "Abort":  # Ctrl-C / EOF at a prompt
            typer.echo("dperm: aborted", err=True)
            raise SystemExit(1) from None
        raise
    if isinstance(rv, int) and not isinstance(rv, bool) and rv:
        raise SystemExit(rv)
    return 0


if __name__ == "__main__":  # pragma: no cover
    main()
