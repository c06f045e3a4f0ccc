"""``dperm fit``: the built-in datasets and any CSV (issue #13 §4), its table and JSON, the
public schema options, the ledger across invocations, the non-private reference
(issue #12 §3) and the options that reach the estimator.  Errors and the other commands:
``test_cli.py``."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from dperm.accounting import EpsilonDelta
from dperm.cli import FIT_KEYS, app

BOUNDS = {"x1": [-2.0, 2.0], "x2": [0.0, 10.0]}


def _json(res):
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture
def built(monkeypatch):
    """The estimators ``dperm fit`` builds (a spy on dperm.cli.fit._make_model)."""
    from dperm.cli import fit

    seen = []
    real = fit._make_model

    def spy(*args, **kwargs):
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(fit, "_make_model", spy)
    return seen


@pytest.fixture
def reference_calls(monkeypatch):
    """The keyword arguments (and ``est``, ``X``, ``y``) of every non-private reference fit."""
    import dperm.utility

    calls = []
    real = dperm.utility.nonprivate_fit

    def spy(est, X, y, **kw):
        calls.append({**kw, "est": est, "X": X, "y": y})
        return real(est, X, y, **kw)

    monkeypatch.setattr(dperm.utility, "nonprivate_fit", spy)
    return calls


@pytest.fixture
def regression_csv(tmp_path):
    """A CSV no loader knows: y = 2·x1 + 0.3·x2 + a colour effect + noise, |y| ≤ 5."""
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 3000
    x1 = rng.uniform(-2, 2, n)
    x2 = rng.uniform(0, 10, n)
    colour = rng.choice(["red", "green", "blue"], n)
    y = 0.8 * x1 + 0.15 * x2 - 0.75 + (colour == "red") + rng.normal(0, 0.2, n)
    path = tmp_path / "houses.csv"
    pd.DataFrame({"x1": x1, "x2": x2, "colour": colour, "y": np.clip(y, -5, 5)}).to_csv(
        path, index=False
    )
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(BOUNDS))
    return path, schema


# ----------------------------------------------------------------------------- built-in data


def test_fit_json_on_the_default_dataset():
    res = CliRunner().invoke(app, ["fit", "--json", "--seed", "0"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1  # one JSON object
    out = json.loads(lines[0])
    assert set(FIT_KEYS) <= set(out)
    assert out["dataset"] == "breast-cancer" and out["model"] == "logistic"
    # the default mechanism="auto" and what it chose (binary logistic, nε/√D < 5000:
    # DP-SGD clipped below the Lipschitz bound)
    assert out["mechanism"] == "dp-sgd" and out["epsilon"] == 1.0
    assert out["auto"].startswith("auto → dp-sgd (batch_size=")
    assert out["delta"] == pytest.approx(1.0 / out["n_train"] ** 2)  # default δ = 1/n²
    # 57 of the 569 rows are the public rows that set the schema (public_fraction)
    assert out["n_train"] + out["n_test"] == 569 - 57 and out["n_features"] == 30
    for k in ("test_accuracy", "train_accuracy", "nonprivate_test_accuracy"):
        assert 0.0 <= out[k] <= 1.0
    assert out["excess_empirical_risk"] >= -1e-9 and out["fit_seconds"] > 0
    assert out["dp_event"]["kind"] == "SelfComposed"  # DP-SGD: T sampled Gaussian steps


def test_fit_table_and_pure_epsilon_output_perturbation():
    res = CliRunner().invoke(
        app, ["fit", "--model", "svm", "--mechanism", "output", "--delta", "0", "--seed", "1"]
    )
    assert res.exit_code == 0, res.output
    for label in ("test accuracy", "excess empirical risk", "non-private test accuracy", "svm"):
        assert label in res.stdout


def test_fit_on_a_csv_file(tmp_path):
    from sklearn.datasets import load_iris

    iris = load_iris(as_frame=True).frame
    path = tmp_path / "iris.csv"
    iris.to_csv(path, index=False)
    res = CliRunner().invoke(
        app,
        [
            *("fit", "--csv", str(path), "--target", "target", "--classes", "0,1,2"),
            *("--allow-data-bounds", "--json"),
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["dataset"] == "iris" and out["n_features"] == 4
    assert "PrivacyLeakWarning" in res.stderr  # bounds read from data are flagged


def test_fit_with_constraint_and_penalty_options(built):
    """--constraint/--constraint-radius keep θ inside the set; --penalty/--alpha
    reach the estimator (issue #5: constraint= and penalty= from the CLI)."""
    res = CliRunner().invoke(
        app, ["fit", "--json", "--seed", "1", "--constraint", "l1", "--constraint-radius", "2"]
    )
    assert res.exit_code == 0, res.output
    est = built[-1]
    theta = np.r_[est.coef_.ravel(), est.intercept_ / est.intercept_scaling]
    assert np.abs(theta).sum() <= 2.0 * (1 + 1e-9)
    res = CliRunner().invoke(
        app, ["fit", "--json", "--seed", "1", "--penalty", "l1", "--alpha", "0.01"]
    )
    assert res.exit_code == 0, res.output
    assert built[-1].penalty == "l1" and json.loads(res.stdout)["alpha"] == 0.01


# ----------------------------------------------------------------------------- issue #10
def test_fit_json_states_the_relation_and_marks_non_private_diagnostics():
    res = CliRunner().invoke(app, ["fit", "--json", "--seed", "0"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["neighbouring"] == "replace-one"
    assert out["dp_event"].get("neighbouring", "replace-one") == "replace-one"
    outside = set(out["outside_guarantee"])
    assert outside == {
        "train_accuracy",
        "excess_empirical_risk",
        "nonprivate_test_accuracy",
        "n_clipped",
        "fit_seconds",
    }
    assert outside <= set(out)  # the keys themselves keep working
    assert not outside & {"epsilon", "delta", "test_accuracy", "neighbouring"}
    # the built-in binary data set is fitted with its public label set: no leak warning
    assert "PrivacyLeakWarning" not in res.stderr


def test_fit_table_labels_non_private_rows():
    res = CliRunner().invoke(app, ["fit", "--seed", "0"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()

    def row(label):
        hits = [ln for ln in lines if label in ln]
        assert len(hits) == 1, (label, hits)
        return hits[0]

    assert "replace-one" in row("neighbouring")
    for label in (
        "train accuracy",
        "excess empirical risk",
        "non-private test accuracy",
        "rows clipped",
        "fit seconds",
    ):
        assert "(not private)" in row(label), label
    for label in ("ε spent", "δ spent", "test accuracy  ", "neighbouring"):
        assert "(not private)" not in row(label), label


def test_fit_passes_the_public_multiclass_label_set(monkeypatch, built):
    """A multi-class dataset (as MNIST: labels 0..k−1 from the schema) is fitted with
    classes = the schema's label set, even when a class is absent from the training
    rows, so classes_ and the shape of coef_ do not depend on the data."""
    from dperm import datasets

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    X /= 1.001 * np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(np.int64)  # classes 0, 1 present; 2 absent
    ds = datasets.Dataset(
        "toy-mnist", X[:300], y[:300], X[300:], y[300:], ["a", "b", "c"], "multiclass",
        1.0, None, "toy", classes=(0, 1, 2),
    )  # fmt: skip
    monkeypatch.setattr(datasets, "load", lambda *a, **k: ds)
    res = CliRunner().invoke(app, ["fit", "--json", "--seed", "0", "--epsilon", "3"])
    assert res.exit_code == 0, res.output
    assert "PrivacyLeakWarning" not in res.stderr


# ----------------------------------------------------------------------------- any CSV
def test_csv_regression_with_schema_file_saves_a_model(regression_csv, tmp_path):
    import dperm
    from dperm import datasets

    path, schema = regression_csv
    model_path = tmp_path / "m.dperm"
    argv = ["fit", "--csv", str(path), "--target", "y", "--task", "regression"]
    argv += ["--bounds", str(schema), "--categories", "colour=red,green,blue"]
    argv += ["--label-bound", "5", "--save", str(model_path), "--json", "--seed", "0"]
    out = _json(CliRunner().invoke(app, argv))
    assert {"test_r2", "test_rmse", "train_r2", "nonprivate_test_r2"} <= set(out)
    assert not any("accuracy" in k for k in out)
    assert out["metric"] == "r2" and out["model"] == "linear"
    # the estimator's default (auto: the Huber surrogate by objective perturbation)
    assert out["mechanism"] == "objective" and out["auto"].startswith("auto → objective")
    assert out["bounds_from_data"] is False
    # the test rows are the file's own records (issue #36): outside the guarantee too
    assert {"train_r2", "test_r2", "test_rmse"} <= set(out["outside_guarantee"])
    # an independent computation: the same public split, the saved model's predictions
    ds = datasets.load_csv(
        path,
        "y",
        bounds=BOUNDS,
        categories={"colour": ["red", "green", "blue"]},
        categorical=["colour"],
        task="regression",
        label_bound=5.0,
    )
    import pandas as pd

    loaded = dperm.load(model_path)  # the pipeline (public schema, model)
    pred = loaded[-1].predict(ds.X_test)
    assert np.array_equal(
        ds.encoder.transform(pd.read_csv(path)), loaded[0].transform(pd.read_csv(path))
    )
    rmse = float(np.sqrt(np.mean((pred - ds.y_test) ** 2)))
    assert out["test_rmse"] == pytest.approx(rmse, rel=1e-9)
    r2 = 1.0 - rmse**2 / float(np.var(ds.y_test))
    assert out["test_r2"] == pytest.approx(r2, rel=1e-9)
    assert out["test_r2"] > 0.5  # 3000 rows, ε = 1: AdaSSP recovers the linear signal
    statement = (tmp_path / "m.dperm.privacy.txt").read_text()
    assert "label_bound = 5" in statement and "NOT hold" not in statement


def test_the_issues_done_when_command_works_literally(regression_csv, tmp_path, monkeypatch):
    """`dperm fit --csv FILE --target y --task regression --bounds schema.json
    --label-bound 5 --save m.skops --json` on a CSV no loader knows (numeric columns)."""
    import pandas as pd

    import dperm

    path, schema = regression_csv
    pd.read_csv(path).drop(columns="colour").to_csv(tmp_path / "FILE.csv", index=False)
    (tmp_path / "schema.json").write_text(schema.read_text())
    monkeypatch.chdir(tmp_path)
    argv = "fit --csv FILE.csv --target y --task regression --bounds schema.json "
    argv += "--label-bound 5 --save m.skops --json"
    out = _json(CliRunner().invoke(app, argv.split()))
    assert out["saved_model"] == "m.skops" and out["bounds_from_data"] is False
    assert out["test_r2"] > 0.3 and out["neighbouring"] == "replace-one"
    model = dperm.load(tmp_path / "m.skops")  # the pipeline (public schema, model)
    assert dperm.privacy_statement(model) == (tmp_path / "m.skops.privacy.txt").read_text()
    assert model[-1].epsilon_ == out["epsilon"]
    raw = pd.read_csv(tmp_path / "FILE.csv")
    assert len(model.predict(raw)) == len(raw)


def test_bounds_items_equal_the_schema_file(regression_csv):
    path, schema = regression_csv
    base = ["fit", "--csv", str(path), "--target", "y", "--label-bound", "5", "--json"]
    base += ["--seed", "3", "--categories", "colour=red,green,blue", "--no-reference"]
    a = _json(CliRunner().invoke(app, [*base, "--bounds", str(schema)]))
    b = _json(CliRunner().invoke(app, [*base, "--bounds", "x1=-2:2", "--bounds", "x2=0:10"]))
    assert a["test_r2"] == b["test_r2"] and a["metric"] == "r2"  # task inferred: float y


def test_allow_data_bounds_is_flagged_in_json_table_and_statement(regression_csv, tmp_path):
    path, _ = regression_csv
    argv = ["fit", "--csv", str(path), "--target", "y", "--label-bound", "5"]
    argv += ["--bounds", "x1=-2:2", "--allow-data-bounds", "--seed", "0"]
    out = _json(CliRunner().invoke(app, [*argv, "--json"]))
    assert out["bounds_from_data"] is True
    res = CliRunner().invoke(app, [*argv, "--save", str(tmp_path / "leaky.dperm")])
    assert res.exit_code == 0, res.output
    assert "WARNING" in res.stdout and "bounds read from the data" in res.stdout
    assert "PrivacyLeakWarning" in res.stderr
    assert "NOT hold" in (tmp_path / "leaky.dperm.privacy.txt").read_text()
    # public bounds for everything: no flag, no warning row
    clean = [a for a in argv if a != "--allow-data-bounds"]
    clean += ["--bounds", "x2=0:10", "--categories", "colour=red,green,blue"]
    res = CliRunner().invoke(app, clean)
    assert res.exit_code == 0, res.output
    assert "WARNING" not in res.stdout and "PrivacyLeakWarning" not in res.stderr


def test_ledger_spends_across_invocations_and_refuses_overspend(regression_csv, tmp_path):
    from dperm.accounting import Ledger

    path, schema = regression_csv
    ledger = tmp_path / "budget.db"
    argv = ["fit", "--csv", str(path), "--target", "y", "--label-bound", "5"]
    argv += ["--bounds", str(schema), "--categories", "colour=red,green,blue"]
    argv += ["--ledger", str(ledger), "--epsilon", "1", "--delta", "1e-6", "--no-reference"]
    argv += ["--json"]
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2 and "--ledger-epsilon" in res.stderr  # no file and no budget
    assert not ledger.exists()
    first = _json(CliRunner().invoke(app, [*argv, "--ledger-epsilon", "1.5"]))
    book = Ledger.open(ledger)
    assert book.epsilon == 1.5 and len(book.entries) == 1
    assert first["ledger_spent_epsilon"] == pytest.approx(book.spent()[0])
    assert first["ledger_budget"] == "default" and first["ledger_reserved"] == 0
    assert 0.5 < book.spent()[0] <= 1.0 + 1e-9  # a (1, 1e-6) fit, read at δ = 1e-5
    entry = book.entries[0]
    assert entry.status == "committed" and entry.reserved == EpsilonDelta(1.0, 1e-6)
    assert entry.actual is not None and entry.label.startswith("dperm fit")
    n_records = len(book.records)
    res = CliRunner().invoke(app, argv)  # 1 + 1 > 1.5: refused
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == 2 and res.stdout == ""
    assert len(lines) == 1 and lines[0].startswith("dperm: error:") and "budget" in lines[0]
    assert len(Ledger.open(ledger).records) == n_records  # nothing recorded
    res = CliRunner().invoke(app, [*argv, "--ledger-epsilon", "2"])  # a budget is fixed
    assert res.exit_code == 2 and "fixed" in res.stderr
    # another budget of the same store, and a saved model charged with its hash
    model = tmp_path / "m.dperm"
    out = _json(
        CliRunner().invoke(
            app, [*argv, "--ledger-budget", "other", "--ledger-epsilon", "1", "--save", str(model)]
        )
    )
    other = Ledger.open(ledger, "other")
    (charged,) = other.entries
    assert out["ledger_budget"] == "other" and charged.model == str(model.resolve())
    assert charged.model_sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    assert not list(tmp_path.glob(".m.dperm*"))  # no staged file left behind
    _json(CliRunner().invoke(app, [*argv, "--epsilon", "0.3"]))
    assert len(Ledger.open(ledger).entries) == 2


def test_ledger_reservation_is_cancelled_when_the_fit_fails(regression_csv, tmp_path):
    """A fit that raises after its reservation (here: a model the task refuses, found
    after the reservation) cancels it: the budget is charged nothing."""
    from dperm.accounting import Ledger

    path, schema = regression_csv
    ledger = tmp_path / "budget.json"  # the JSON store: same protocol
    argv = ["fit", "--csv", str(path), "--target", "y", "--label-bound", "5", "--json"]
    argv += ["--bounds", str(schema), "--categories", "colour=red,green,blue"]
    argv += ["--ledger", str(ledger), "--ledger-epsilon", "1", "--epsilon", "0.5"]
    res = CliRunner().invoke(app, [*argv, "--model", "svm"])  # regression: refused
    assert res.exit_code == 2
    book = Ledger.open(ledger)
    assert [r.kind for r in book.records] == ["create", "reserve", "cancel"]
    assert book.entries == () and book.spent()[0] == 0.0


# ----------------------------------------------------------------------------- the reference
def test_no_reference_skips_the_non_private_fit(reference_calls):
    out = _json(CliRunner().invoke(app, ["fit", "--json", "--seed", "0", "--no-reference"]))
    assert reference_calls == []
    assert out["excess_empirical_risk"] is None and out["nonprivate_test_accuracy"] is None
    assert out["test_accuracy"] is not None
    out = _json(CliRunner().invoke(app, ["fit", "--json", "--seed", "0"]))
    assert len(reference_calls) == 1 and out["excess_empirical_risk"] >= -1e-9


def test_reference_of_a_dp_sgd_fit_is_capped_by_its_passes(reference_calls):
    """The reference of a DP-SGD fit (unregularized by default: the minimum may
    not exist) is capped at the passes the fit made, at a gradient residual 1e-4."""
    argv = ["fit", "--json", "--seed", "0", "--mechanism", "dp-sgd", "--epochs", "3"]
    out = _json(CliRunner().invoke(app, [*argv, "--batch-size", "64"]))
    seen = reference_calls[-1]
    est = seen["est"]
    assert seen["tol"] == max(est.tol, 1e-4)
    passes = out["steps"] * out["sampling_rate"]
    assert passes == pytest.approx(3.0, rel=0.05)  # --epochs reached the estimator
    assert out["sampling_rate"] == pytest.approx(64 / out["n_train"])  # so did --batch-size
    assert seen["max_iter"] == max(100, math.ceil(passes)) < est.max_iter


def test_reference_of_a_multinomial_fit_is_the_utility_layers(tmp_path, built, reference_calls):
    """The non-private reference of a multinomial (softmax) fit comes from
    dperm.utility.nonprivate_fit, like every other model's: one softmax problem on the
    fit's own regularized objective. Its excess risk equals J(Θ_priv) − min J computed
    independently here (scipy's L-BFGS on the clipped, intercept-augmented design)."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(2)
    n = 900
    a, b = rng.uniform(0, 3, n), rng.uniform(-1, 1, n)
    path = tmp_path / "three.csv"
    path.write_text(
        "a,b,y\n" + "".join(f"{u:.4f},{v:.4f},{int(u)}\n" for u, v in zip(a, b, strict=True))
    )
    argv = ["fit", "--csv", str(path), "--target", "y", "--bounds", "a=0:3", "--bounds"]
    argv += ["b=-1:1", "--classes", "0,1,2", "--epsilon", "5", "--seed", "0", "--json"]
    # AMP named: a ridge-regularized objective (Λ > 0) has a unique minimizer on these
    # separable labels (the auto default here, clipped DP-SGD, has Λ = 0)
    argv += ["--mechanism", "amp"]
    out = _json(CliRunner().invoke(app, argv))
    est = built[-1]
    assert est.loss_.multiclass and est.coef_.shape == (3, 2)  # one softmax model
    assert len(reference_calls) == 1 and reference_calls[0]["est"] is est
    assert out["nonprivate_test_accuracy"] > out["test_accuracy"] - 0.05

    X, y = reference_calls[0]["X"], reference_calls[0]["y"]
    Xd, _ = est._design(X, warn=False)
    Xd = np.asarray(Xd.to_dense() if hasattr(Xd, "to_dense") else Xd)
    target = np.searchsorted(est.classes_, np.asarray(y))
    shape, lam = (Xd.shape[1], 3), float(est.l2_)

    def objective(w):  # (1/n)Σ softmax loss + (Λ/2)‖Θ‖², independently of dperm.solvers
        Z = Xd @ w.reshape(shape)
        Z -= Z.max(axis=1, keepdims=True)
        P = np.exp(Z)
        P /= P.sum(axis=1, keepdims=True)
        val = -np.mean(np.log(P[np.arange(len(target)), target])) + 0.5 * lam * float(w @ w)
        P[np.arange(len(target)), target] -= 1.0
        return val, (Xd.T @ P / len(target)).ravel() + lam * w

    best = minimize(objective, np.zeros(shape[0] * 3), jac=True, method="L-BFGS-B",
                    options={"maxiter": 5000, "gtol": 1e-10, "ftol": 0.0})  # fmt: skip
    intercept = est.intercept_ / float(est.intercept_scaling)
    W_priv = np.vstack([est.coef_.T, intercept])
    expected = objective(W_priv.ravel())[0] - best.fun
    assert out["excess_empirical_risk"] == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_multi_class_option_reaches_the_estimator(tmp_path, built):
    rng = np.random.default_rng(1)
    n = 600
    a = rng.uniform(0, 3, n)
    path = tmp_path / "three.csv"
    path.write_text("a,y\n" + "".join(f"{v:.4f},{int(v)}\n" for v in a))
    argv = ["fit", "--csv", str(path), "--target", "y", "--bounds", "a=0:3", "--task"]
    argv += ["multiclass", "--classes", "0,1,2", "--mechanism", "dp-sgd", "--multi-class"]
    argv += ["multinomial"]
    argv += ["--epsilon", "5", "--seed", "0", "--json", "--no-reference"]
    res = CliRunner().invoke(app, argv)
    out = _json(res)
    assert built[-1].multi_class == "multinomial" and built[-1].coef_.shape == (3, 1)
    assert 0.0 <= out["test_accuracy"] <= 1.0
    # the public label list (--classes): nothing read off the file (issue #36)
    assert "PrivacyLeakWarning" not in res.stderr
