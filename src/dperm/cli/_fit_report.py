"""What ``dperm fit`` measures and prints: utility, privacy spent, diagnostics.

:func:`measure` computes the keys of ``dperm fit --json`` from a fitted estimator (with a
non-private reference fit of the same regularized objective, unless skipped);
:func:`print_fit_table` prints them as the table of ``dperm fit``.  The rows computed from
the private training data without noise (:data:`NON_PRIVATE_KEYS`) are labelled
"(not private)".
"""

from __future__ import annotations

import math
from typing import Any

from ._common import step

__all__ = ["NON_PRIVATE_KEYS", "measure", "print_fit_table"]

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


def measure(est, ds, model, mechanism, delta, fit_seconds, reference, verbose) -> dict:
    """The measured keys of :func:`run_fit`: utility, privacy spent, diagnostics."""
    import numpy as np

    from ..utility import excess_empirical_risk, nonprivate_fit

    ref = None
    if reference:
        # the private fit's own regularized objective (l2_, regularizer_,
        # constraint_), its tol and its iteration cap; for a multinomial model one
        # softmax problem in vec(Θ) (dperm.utility.objective_problems).  A gradient-perturbation
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
    if has_test and not regression:
        _warn_single_class(est, ds)
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
            "alpha": None if getattr(est, "alpha_", None) is None else float(est.alpha_),
            # mechanism="auto": what the public rule chose and why (None for a named one)
            "auto": None if getattr(est, "auto_", None) is None else est.auto_.describe(),
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
    # issue #36: the private scale adaptation (its share of the budget) and the clipping
    scaling = diag.get("feature_scaling")
    out["feature_scaling_share"] = None if scaling is None else float(scaling["share"])
    out["clipping"] = diag.get("clipping")
    # the theory next to the measurement (issue #5): dperm.theory.bound_for_estimator
    from ..theory import bound_for_estimator

    bound = bound_for_estimator(est, ds.n_train)
    out["theoretical_bound"] = None if bound is None else float(bound.value)
    out["theoretical_bound_detail"] = None if bound is None else bound.to_dict()
    # issue #23: each source text's theorem, evaluated for this run (dperm.theory.seeds)
    from ..theory import seed_bounds_for_estimator

    out["seed_bounds"] = [b.to_dict() for b in seed_bounds_for_estimator(est, ds.n_train)]
    return out


def _warn_single_class(est, ds) -> None:
    """A UserWarning naming the fixes when the private classifier predicts one class
    for every test row although the test rows hold several (issue #32: a raw CSV with
    honest but wide bounds fitted the majority class, silently).  Read off the test
    rows like ``test_accuracy``; it changes nothing that is released."""
    import warnings

    import numpy as np

    if np.unique(est.predict(ds.X_test)).size == 1 and np.unique(ds.y_test).size > 1:
        warnings.warn(
            "the private model predicts one class for every test row (majority-class "
            "accuracy): the signal is below the noise. Typical fixes: public --bounds "
            "closer to the documented range of each column (lo:hi:log for heavy-tailed "
            "non-negative columns), fewer features, or a larger --epsilon",
            UserWarning,
            stacklevel=2,
        )


def _ledger_rows(result: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The ledger rows: what the ledger totals, and why it may differ from this fit's ε."""
    acc = result.get("ledger_accountant") or "its accountants"
    return (
        (
            f"ledger: ε of all {result.get('ledger_fits', '?')} fit(s) in {result['ledger']}",
            f"{result['ledger_spent_epsilon']:.6g} of {result.get('ledger_epsilon', math.nan):.6g}"
            f" at δ = {result.get('ledger_delta', math.nan):.3g}",
        ),
        (
            "  (composed by)",
            f"{acc}: the events composed tightly at the ledger's δ, so one fit's share "
            "can be below its own ε",
        ),
    )


def _note(result: dict[str, Any], key: str) -> str:
    """ " (not private)" when ``key`` is listed outside the guarantee (a file's test rows)."""
    return " (not private)" if key in (result.get("outside_guarantee") or ()) else ""


def print_fit_table(result: dict[str, Any]) -> None:
    """Print the result of ``dperm fit`` (the dict of :func:`run_fit`) as a table; the
    keys computed from the training data without noise are marked "(not private)"."""
    from rich.console import Console
    from rich.table import Table

    key = result["metric"]  # "accuracy" or "r2": the suffix of the utility keys
    metric = "R²" if key == "r2" else "accuracy"

    def fmt(v, spec=".4f"):
        return "—" if v is None else format(v, spec)

    delta_note = " (default min(1/n², 1e-5))" if result["delta_default"] else ""
    if result.get("delta_source"):  # --ledger: a share of the ledger's remaining δ
        delta_note = f" ({result['delta_source']})"
    np_note = " (not private)"  # rows computed from the training data without noise
    table = Table(title="dperm fit", show_header=True, header_style="bold")
    # labels up to 40 characters stay whole (a longer one, a seed theorem's name,
    # wraps); values wrap in the rest of the width
    table.add_column("quantity", width=40)
    table.add_column("value", justify="right")
    rows = [
        ("dataset", result["dataset"]),
        ("n_train", str(result["n_train"])),
        ("n_test", str(result["n_test"])),
        ("d (features)", str(result["n_features"])),
        ("model", result["model"]),
        ("mechanism", result["mechanism"]),
        # the choice (the reason is in --json's "auto" and the model's diagnostics_)
        *((("auto rule", result["auto"].partition(" because")[0]),) if result.get("auto") else ()),
        ("ε spent", fmt(result["epsilon"], ".6g")),
        ("δ spent", fmt(result["delta"], ".3g") + delta_note),
        ("neighbouring", result.get("neighbouring", "replace-one")),
        *(_ledger_rows(result) if "ledger" in result else ()),
        *(
            (("WARNING", "bounds read from the data: NO end-to-end DP guarantee"),)
            if result.get("bounds_from_data")
            else ()
        ),
        # the test rows of a user's file are its own records: outside the guarantee
        (f"test {metric}{_note(result, f'test_{key}')}", fmt(result[f"test_{key}"])),
        *(
            ((f"test RMSE{_note(result, 'test_rmse')}", fmt(result.get("test_rmse"), ".4g")),)
            if key == "r2"
            else ()
        ),
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
        *(
            (f"seed bound: {b['source'].split(' (')[0][:48]}", fmt(b["value"], ".4g"))
            for b in result.get("seed_bounds") or ()
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
        *(
            (("private feature scaling", f"share {result['feature_scaling_share']:.3g} of ε"),)
            if result.get("feature_scaling_share") is not None
            else ()
        ),
        (f"rows clipped{np_note}", str(result["n_clipped"])),
        *(
            (f"{label}{np_note}", str(result[k]))
            for k, label in (("n_imputed", "cells imputed"), ("n_clipped_labels", "labels clipped"))
            if k in result
        ),
        (f"fit seconds{np_note}", fmt(result["fit_seconds"], ".3f")),
    ]
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)
