"""The ``dperm`` command line: ``dperm fit | account | calibrate | bench | audit``.

Examples (shell)::

    dperm fit                                   # breast-cancer, logistic, objective, ε = 1
    dperm fit --dataset adult --data-home ../shared/data --epsilon 1 --json
    dperm fit --csv data.csv --target label --model svm --mechanism output --delta 0
    dperm account --noise-multiplier 1.1 --sampling-rate 0.004 --steps 15000 --delta 1e-5
    dperm calibrate --epsilon 2 --delta 1e-5 --sampling-rate 0.004 --steps 15000

Errors raised by dperm (bad ε, unknown dataset, missing file, …) and usage
errors print one line on stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

import contextlib
import json
import math
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
        from . import __version__

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
    except DpermError as exc:
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
        if constraint_radius is None:
            # public rule: predictions up to ±4·label_bound on rows at the norm bound
            constraint_radius = 4.0 * label_bound / params["data_norm"]
        return DPLinearRegression(
            label_bound=label_bound, constraint_radius=constraint_radius, **params
        )
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
    model: str = "logistic",
    mechanism: str = "objective",
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
) -> dict[str, Any]:
    """Load data, fit a private model and measure it; the work behind ``dperm fit``.

    ``tune`` selects Λ privately (:func:`dperm.model_selection.tuning_search`):
    ε and δ are then the budget of the whole search, and the result gains a
    ``tuned`` key (the selected parameters, released by the search).

    ``progress`` shows a progress bar (on stderr) during the iterations of the
    gradient-perturbation mechanisms.  ``save`` writes the fitted model with
    :func:`dperm.io.save` and its privacy statement to ``<save>.privacy.txt``.

    Returns
    -------
    dict
        The keys of ``dperm fit --json`` (see :data:`_FIT_KEYS`) plus
        ``metric`` ("accuracy" or "r2" for regression), ``delta_default``,
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
    from .utility import excess_empirical_risk, nonprivate_fit

    if save is not None and not Path(save).parent.is_dir():  # fail before fitting
        from .io import ModelFileError

        raise ModelFileError(f"--save: folder {str(Path(save).parent)!r} does not exist")
    if csv is not None:
        if dataset is not None:
            raise InvalidPrivacyParameter("give either --dataset or --csv, not both")
        if target is None:
            raise InvalidPrivacyParameter("--csv needs --target COLUMN (the label column)")
        ds = datasets.load_csv(csv, target, allow_data_bounds=allow_data_bounds)
    else:
        if target is not None:
            raise InvalidPrivacyParameter("--target is only used with --csv")
        ds = datasets.load(dataset or datasets.DEFAULT_DATASET, data_home)
    if data_norm is None:
        data_norm = ds.row_norm_bound
        if not math.isfinite(data_norm):
            raise InvalidPrivacyParameter(
                f"dataset {ds.name!r} has no public row-norm bound; pass --data-norm"
            )
    n = ds.n_train
    params = {
        "epsilon": epsilon,
        "delta": delta,  # None → 1/n² inside the estimator
        "mechanism": mechanism,
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
    for key, val in (("constraint", constraint), ("penalty", penalty), ("alpha", alpha)):
        if val is not None:
            params[key] = val
    est = _make_model(model, ds.task, params, ds.label_bound, constraint_radius)
    t0 = time.perf_counter()
    tuned = None
    if tune:  # private search; its dp_event_ covers every run (docs/model_selection.md)
        from .model_selection import tuning_search

        search = tuning_search(est).fit(ds.X_train, ds.y_train)
        est, tuned = search.best_estimator_, search.best_params_
    else:
        est.fit(ds.X_train, ds.y_train)
    fit_seconds = time.perf_counter() - t0
    reference = nonprivate_fit(est, ds.X_train, ds.y_train)
    has_test = ds.X_test is not None and ds.n_test > 0
    out: dict[str, Any] = {
        "dataset": ds.name,
        "n_train": n,
        "n_test": ds.n_test,
        "n_features": ds.n_features,
        "model": model,
        "mechanism": mechanism,
        "epsilon": float(est.epsilon_),
        "delta": float(est.delta_),
        "test_accuracy": float(est.score(ds.X_test, ds.y_test)) if has_test else None,
        "train_accuracy": float(est.score(ds.X_train, ds.y_train)),
        "excess_empirical_risk": excess_empirical_risk(
            est, ds.X_train, ds.y_train, reference=reference
        ),
        "nonprivate_test_accuracy": (
            float(reference.score(ds.X_test, ds.y_test)) if has_test else None
        ),
        "n_clipped": int(est.n_clipped_),
        "fit_seconds": fit_seconds,
        "metric": "r2" if ds.task == "regression" else "accuracy",
        "delta_default": delta is None,
        "alpha": float(est.alpha_),
        "dp_event": est.dp_event_.to_dict(),
        # the relation ε and δ are stated for (docs/neighbouring.md)
        "neighbouring": est.neighbouring_,
        # computed from the private training data without noise: for the data
        # owner, outside the (ε, δ) guarantee (don't publish them)
        "outside_guarantee": list(NON_PRIVATE_KEYS),
    }
    # what a gradient-perturbation fit ran with (issue #4): from the first
    # class's diagnostics (one-vs-rest fits share the schedule and the noise)
    diag = est.diagnostics_ if isinstance(est.diagnostics_, dict) else est.diagnostics_[0]
    for key in ("noise_multiplier", "steps", "sampling_rate", "accountant"):
        val = diag.get(key)
        out[key] = val if val is None or isinstance(val, str) else float(val)
    # the theory next to the measurement (issue #5): dperm.theory.bound_for_estimator
    from .theory import bound_for_estimator

    bound = bound_for_estimator(est, n)
    out["theoretical_bound"] = None if bound is None else float(bound.value)
    out["theoretical_bound_detail"] = None if bound is None else bound.to_dict()
    if tuned is not None:
        out["tuned"] = tuned
    if save is not None:
        out.update(_save_model(est, Path(save), bool(out.get("bounds_from_data"))))
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

    metric = "R²" if result["metric"] == "r2" else "accuracy"

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
        (f"test {metric}", fmt(result["test_accuracy"])),
        (f"train {metric}{np_note}", fmt(result["train_accuracy"])),
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
        (f"non-private test {metric}{np_note}", fmt(result["nonprivate_test_accuracy"])),
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
    csv: Annotated[Path | None, typer.Option("--csv", help="Fit on a CSV file instead.")] = None,
    target: Annotated[str | None, typer.Option("--target", help="Label column of --csv.")] = None,
    allow_data_bounds: Annotated[
        bool,
        typer.Option("--allow-data-bounds", help="CSV: read missing bounds from the data (LEAKS)."),
    ] = False,
    model: Annotated[str, typer.Option("--model", help="logistic | svm | linear")] = "logistic",
    mechanism: Annotated[
        str, typer.Option("--mechanism", help="objective | output | any registered mechanism")
    ] = "objective",
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
            help="Radius of the constraint set (--model linear: default 4·label_bound/data_norm).",
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
) -> None:
    """Fit a private model and report privacy spent and utility."""
    with _one_line_errors(), warnings.catch_warnings():
        # warnings (e.g. rows clipped) become one stderr line each, never stdout
        warnings.simplefilter("always")
        warnings.showwarning = _show_warning_one_line
        result = run_fit(
            dataset=dataset,
            data_home=data_home,
            csv=csv,
            target=target,
            allow_data_bounds=allow_data_bounds,
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
        )
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
            help="Comma-separated: non-private, registered mechanisms, peers (default: all).",
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
        str,
        typer.Option(
            "--mechanism",
            help="Audit runner: objective, output, dp-gd, dp-gd-add-remove, dp-sgd, "
            "dp-sgd-replace-one, estimator-dp-sgd, amp, amp-nt, bolt-on, gaussian, laplace, "
            "snapping, discrete-gaussian.",
        ),
    ],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Claimed ε.")],
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
