"""The ``dperm`` command line: fit (table and JSON), account/calibrate wiring,
and one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from dperm.cli import app, main

FIT_KEYS = {
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
}


def _run_main(argv, capsys):
    """Run the console entry point in-process; (exit code, stdout, stderr)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_fit_json_on_the_default_dataset():
    res = CliRunner().invoke(app, ["fit", "--json", "--seed", "0"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1  # one JSON object
    out = json.loads(lines[0])
    assert FIT_KEYS <= set(out)
    assert out["dataset"] == "breast-cancer" and out["model"] == "logistic"
    assert out["mechanism"] == "objective" and out["epsilon"] == 1.0
    assert out["delta"] == pytest.approx(1.0 / out["n_train"] ** 2)  # default δ = 1/n²
    # 57 of the 569 rows are the public rows that set the schema (public_fraction)
    assert out["n_train"] + out["n_test"] == 569 - 57 and out["n_features"] == 30
    for k in ("test_accuracy", "train_accuracy", "nonprivate_test_accuracy"):
        assert 0.0 <= out[k] <= 1.0
    assert out["excess_empirical_risk"] >= -1e-9 and out["fit_seconds"] > 0
    assert out["dp_event"]["kind"] == "EpsilonDelta"


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
        ["fit", "--csv", str(path), "--target", "target", "--allow-data-bounds", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["dataset"] == "iris" and out["n_features"] == 4
    assert "PrivacyLeakWarning" in res.stderr  # bounds read from data are flagged


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["fit", "--epsilon", "-1"], "epsilon"),
        (["fit", "--epsilon", "abc"], "--epsilon"),
        (["fit", "--delta", "1.5"], "delta"),
        (["fit", "--no-such-option"], "no-such-option"),
        (["fit", "--dataset", "nope"], "available"),
        (["fit", "--mechanism", "nope"], "registered"),
        (["fit", "--model", "tree"], "model"),
        (["fit", "--data-norm", "0"], "data_norm"),
        (["account"], "noise-multiplier"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(argv, needle, capsys):
    code, out, err = _run_main(argv, capsys)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dperm: error:")
    assert needle in lines[0]
    assert "Traceback" not in err and out == ""


def test_missing_data_file_is_a_one_line_error(tmp_path, capsys):
    code, _, err = _run_main(["fit", "--dataset", "adult", "--data-home", str(tmp_path)], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "adult" in err


def test_account_and_calibrate_wiring(capsys):
    code, out, _ = _run_main(
        ["account", "--noise-multiplier", "2.0", "--delta", "1e-5", "--json"], capsys
    )
    assert code == 0
    acc = json.loads(out)
    assert acc["accountant"] == "rdp" and 0 < acc["epsilon"] < 10
    code, out, _ = _run_main(["calibrate", "--epsilon", "1.0", "--delta", "1e-5", "--json"], capsys)
    assert code == 0
    cal = json.loads(out)
    assert cal["noise_multiplier"] > 0 and cal["achieved_epsilon"] <= 1.0 + 1e-9


def test_no_arguments_prints_help(capsys):
    code, out, _ = _run_main([], capsys)
    assert code == 0 and "fit" in out and "calibrate" in out


def test_console_script_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "dperm.cli", "fit", "--epsilon", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "epsilon must be > 0" in proc.stderr


def test_fit_with_constraint_and_penalty_options(monkeypatch):
    """--constraint/--constraint-radius keep θ inside the set; --penalty/--alpha
    reach the estimator (issue #5: constraint= and penalty= from the CLI)."""
    import numpy as np

    from dperm import cli

    seen = {}
    real = cli._make_model

    def spy(*args, **kwargs):
        seen["est"] = real(*args, **kwargs)
        return seen["est"]

    monkeypatch.setattr(cli, "_make_model", spy)
    res = CliRunner().invoke(
        app, ["fit", "--json", "--seed", "1", "--constraint", "l1", "--constraint-radius", "2"]
    )
    assert res.exit_code == 0, res.output
    est = seen["est"]
    theta = np.r_[est.coef_.ravel(), est.intercept_ / est.intercept_scaling]
    assert np.abs(theta).sum() <= 2.0 * (1 + 1e-9)
    res = CliRunner().invoke(
        app, ["fit", "--json", "--seed", "1", "--penalty", "l1", "--alpha", "0.01"]
    )
    assert res.exit_code == 0, res.output
    assert seen["est"].penalty == "l1" and json.loads(res.stdout)["alpha"] == 0.01


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


def test_fit_passes_the_public_multiclass_label_set(monkeypatch):
    """A multi-class dataset (as MNIST: labels 0..k−1 from the schema) is fitted with
    classes = the schema's label set, even when a class is absent from the training
    rows, so classes_ and the shape of coef_ do not depend on the data."""
    import numpy as np

    from dperm import cli, datasets

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    X /= 1.001 * np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(np.int64)  # classes 0, 1 present; 2 absent
    ds = datasets.Dataset(
        "toy-mnist", X[:300], y[:300], X[300:], y[300:], ["a", "b", "c"], "multiclass",
        1.0, None, "toy", classes=(0, 1, 2),
    )  # fmt: skip
    monkeypatch.setattr(datasets, "load", lambda *a, **k: ds)
    seen = {}
    real = cli._make_model

    def spy(*args, **kwargs):
        seen["est"] = real(*args, **kwargs)
        return seen["est"]

    monkeypatch.setattr(cli, "_make_model", spy)
    res = CliRunner().invoke(app, ["fit", "--json", "--seed", "0", "--epsilon", "3"])
    assert res.exit_code == 0, res.output
    assert "PrivacyLeakWarning" not in res.stderr
    assert seen["est"].classes_.tolist() == [0, 1, 2] and seen["est"].coef_.shape == (3, 3)


def test_audit_list_prints_every_registered_runner_and_missing_options_exit_2(capsys):
    from dperm.audit import available_runners

    code, out, _ = _run_main(["audit", "--list"], capsys)
    assert code == 0
    assert out.split() == available_runners()
    assert {"objective", "dp-sgd", "adassp", "tukey", "dual-frank-wolfe"} <= set(out.split())
    code, _, err = _run_main(["audit", "--epsilon", "1"], capsys)
    assert code == 2
    assert "--mechanism" in err and len(err.strip().splitlines()) == 1
