"""Issue #32, the CSV path a new user takes: raw units, labels, ``dperm predict``.

* the default fit does not depend on the units of a regression target (dollars or
  $100,000 with the matching public label bound);
* a raw CSV scored through its public bounds equals the same rows pre-scaled by them,
  and the default row scaling of an all-numeric classification file ("unit") keeps the
  signal that the worst-case division lost (raw WDBC: majority class before);
* a model that predicts one class for every test row is flagged, naming the fixes;
* ``dperm predict`` prints the file's labels, refuses a category outside the public list
  (naming column and value) and a text column given to an array model (one line).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dperm.cli import app
from dperm.cli.fit import run_fit
from dperm.datasets import load_csv
from dperm.estimators import DPLinearRegression
from dperm.exceptions import (
    ClippingWarning,
    DpermError,
    InvalidDataError,
    InvalidPrivacyParameter,
)
from dperm.losses import MARGIN_BOUND, Huber, Logistic

runner = CliRunner()


def _regression_csv(tmp_path, scale: float) -> tuple:
    rng = np.random.default_rng(0)
    n = 3000
    X = rng.uniform(0, 10, (n, 4))
    y = np.clip(1.0 + 0.3 * X[:, 0] - 0.2 * X[:, 1] + rng.normal(0, 0.4, n), 0, 5) * scale
    path = tmp_path / f"reg_{scale:g}.csv"
    pd.DataFrame({**{f"x{j}": X[:, j] for j in range(4)}, "y": y}).to_csv(path, index=False)
    return path, {f"x{j}": (0.0, 10.0) for j in range(4)}


def test_regression_fit_does_not_depend_on_the_units_of_y(tmp_path):
    # issue #32: California in dollars (label bound 500,001) fitted R² −0.06 where
    # the same target in $100,000 (bound 5.00001) fitted 0.60
    results = []
    for scale in (1.0, 1e5):
        path, bounds = _regression_csv(tmp_path, scale)
        out = run_fit(
            csv=path,
            target="y",
            bounds=bounds,
            task="regression",
            label_bound=5.0 * scale,
            seed=3,
            reference=False,
        )
        results.append(out)
    r2 = [r["test_r2"] for r in results]
    assert r2[0] > 0.5
    assert r2[1] == pytest.approx(r2[0], abs=1e-6)
    assert results[1]["test_rmse"] == pytest.approx(1e5 * results[0]["test_rmse"], rel=1e-5)


def test_huber_margin_prior_is_in_the_units_of_y():
    assert Logistic().margin_bound == MARGIN_BOUND
    assert Huber(h=2.0).margin_bound == pytest.approx(20.0)  # = 4B at B = 5 (unchanged)
    assert Huber(h=2e5).margin_bound == pytest.approx(2e6)
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (800, 3)) / 2
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=800)
    fits = [
        DPLinearRegression(label_bound=3.0 * c, epsilon=1.0, random_state=0).fit(
            X, np.clip(y, -3, 3) * c
        )
        for c in (1.0, 1e4)
    ]
    np.testing.assert_allclose(fits[1].coef_, 1e4 * fits[0].coef_, rtol=1e-6, atol=1e-6)
    assert fits[1].diagnostics_["extra_l2"] == pytest.approx(fits[0].diagnostics_["extra_l2"])


@pytest.fixture(scope="module")
def wdbc(tmp_path_factory):
    from sklearn.datasets import load_breast_cancer

    folder = tmp_path_factory.mktemp("wdbc")
    frame = load_breast_cancer(as_frame=True).frame
    frame.columns = [c.replace(" ", "_") for c in frame.columns]
    features = [c for c in frame.columns if c != "target"]
    # public bounds: [0, 1.2·max] of each non-negative measurement (stands for a
    # documented range somewhat wider than the data)
    bounds = {c: (0.0, 1.2 * float(frame[c].max())) for c in features}
    raw = folder / "wdbc_raw.csv"
    frame.to_csv(raw, index=False)
    scaled = frame.copy()
    for c in features:
        scaled[c] = frame[c] / bounds[c][1]
    pre = folder / "wdbc_scaled.csv"
    scaled.to_csv(pre, index=False)
    return raw, pre, bounds, features


def test_raw_csv_scores_as_the_rows_scaled_by_its_public_schema(wdbc):
    raw, pre, bounds, features = wdbc
    unit = dict.fromkeys(features, (0.0, 1.0))
    accs = []
    for seed in range(3):
        kw = dict(target="target", classes="0,1", seed=seed, reference=False)
        a = run_fit(csv=raw, bounds=bounds, **kw)
        b = run_fit(csv=pre, bounds=unit, **kw)
        assert a["test_accuracy"] == pytest.approx(b["test_accuracy"])
        accs.append(a["test_accuracy"])
    # the worst-case division (normalize_rows=True) fitted the majority class (0.63)
    # here; "unit" rows keep the signal
    assert np.mean(accs) > 0.8
    ds = load_csv(raw, "target", bounds=bounds, classes=[0, 1])
    np.testing.assert_allclose(np.linalg.norm(ds.X_train, axis=1), 1.0)


def test_log_bounds_on_the_command_line(wdbc, tmp_path):
    raw, _, bounds, _ = wdbc
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({c: [0.0, hi, "log"] for c, (_, hi) in bounds.items()}))
    res = runner.invoke(
        app,
        [
            *("fit", "--csv", str(raw), "--target", "target", "--classes", "0,1"),
            *("--bounds", str(schema)),
            *("--json", "--seed", "0", "--no-reference", "--quiet"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.splitlines()[-1])["test_accuracy"] > 0.8
    res = runner.invoke(
        app,
        [
            *("fit", "--csv", str(raw), "--target", "target", "--classes", "0,1"),
            *("--bounds", "mean_area=0:5:sqrt"),
        ],
    )
    assert res.exit_code == 2
    assert "can only be 'log'" in res.output


def test_single_class_model_is_flagged_with_the_fixes(wdbc):
    raw, _, _, features = wdbc
    loose = dict.fromkeys(features, (0.0, 1e6))  # honest but useless bounds
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_fit(
            csv=raw, target="target", classes="0,1", bounds=loose, seed=0, reference=False
        )
    assert out["test_accuracy"] < 0.7
    messages = [str(w.message) for w in caught]
    assert any("predicts one class for every test row" in m and "--bounds" in m for m in messages)


def _named_model(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    x = rng.uniform(0, 10, n)
    colour = rng.choice(["red", "blue"], n)
    y = np.where(x + 3 * (colour == "red") > 6.5, "spam", "ham")
    train = tmp_path / "train.csv"
    pd.DataFrame({"x": x, "colour": colour, "label": y}).to_csv(train, index=False)
    model = tmp_path / "m.dperm"
    res = runner.invoke(
        app,
        [
            *("fit", "--csv", str(train), "--target", "label", "--bounds", "x=0:10"),
            *("--classes", "ham,spam"),
            *("--categories", "colour=red,blue", "--epsilon", "5", "--seed", "0"),
            *("--save", str(model), "--quiet", "--no-reference"),
        ],
    )
    assert res.exit_code == 0, res.output
    return model


def test_predict_prints_the_files_labels(tmp_path):
    model = _named_model(tmp_path)
    new = tmp_path / "new.csv"
    pd.DataFrame({"x": [9.5, 0.5], "colour": ["red", "blue"]}).to_csv(new, index=False)
    res = runner.invoke(app, ["predict", "--model", str(model), "--csv", str(new)])
    assert res.exit_code == 0, res.output
    assert res.stdout.split() == ["prediction", "spam", "ham"]
    statement = (tmp_path / "m.dperm.privacy.txt").read_text()
    # the names are the public --classes (issue #36), not read off the file
    assert "read from the training labels" not in statement
    assert "classes = ['ham', 'spam']" in statement


def test_predict_refuses_an_unknown_category(tmp_path):
    model = _named_model(tmp_path)
    new = tmp_path / "new.csv"
    pd.DataFrame({"x": [9.5, 0.5], "colour": ["RED", "blue"]}).to_csv(new, index=False)
    res = runner.invoke(app, ["predict", "--model", str(model), "--csv", str(new)])
    assert res.exit_code == 2
    err = res.output.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in res.output
    assert "'colour'" in err[0] and "'RED'" in err[0] and "did you mean 'red'" in err[0]


def test_predict_text_column_on_an_array_model_is_one_line(tmp_path):
    import dperm
    from dperm.estimators import DPLogisticRegression

    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (200, 2))
    est = DPLogisticRegression(classes=[-1, 1], random_state=0).fit(X, np.sign(X[:, 0] + 1e-9))
    model = tmp_path / "arr.dperm"
    dperm.save(est, model)
    new = tmp_path / "text.csv"
    pd.DataFrame({"a": [0.1, 0.2], "b": ["x", "y"]}).to_csv(new, index=False)
    res = runner.invoke(app, ["predict", "--model", str(model), "--csv", str(new)])
    assert res.exit_code == 2
    assert "Traceback" not in res.output and "not numeric" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_bad_bound_third_part_is_refused():
    from dperm.cli._fit_inputs import split_bounds

    assert split_bounds(["a=0:10:log", "b=1:2"]) == ({"a": (0.0, 10.0), "b": (1.0, 2.0)}, ["a"])
    with pytest.raises(InvalidPrivacyParameter, match="lo ≥ 0"):
        split_bounds(["a=-1:10:log"])


def test_the_pipeline_the_refusal_names_fits_raw_rows(wdbc):
    # the _refuse_mostly_clipped message names this pipeline (issue #32: the one it named
    # before, [0, 1] features then the ball, fitted the majority class, 0.63)
    from sklearn.pipeline import make_pipeline

    from dperm import DPLogisticRegression
    from dperm.preprocessing import PublicMinMaxScaler, RowNormalizer

    raw, _, bounds, features = wdbc
    frame = pd.read_csv(raw)
    X, y = frame[features].to_numpy(), frame["target"].to_numpy()
    with (
        warnings.catch_warnings(),
        pytest.raises(InvalidDataError, match=r"feature_range=\(-1, 1\)"),
    ):
        warnings.simplefilter("ignore", ClippingWarning)  # every row: then the refusal
        DPLogisticRegression(classes=[0, 1], random_state=0).fit(X, y)
    rng = np.random.default_rng(0)
    test = rng.permutation(len(y))[:120]
    train = np.setdiff1d(np.arange(len(y)), test)
    accs = []
    for seed in range(3):
        pipe = make_pipeline(
            PublicMinMaxScaler([bounds[c] for c in features], feature_range=(-1, 1)),
            RowNormalizer(mode="sphere"),
            DPLogisticRegression(classes=[0, 1], random_state=seed),
        )
        accs.append(pipe.fit(X[train], y[train]).score(X[test], y[test]))
    assert np.mean(accs) > 0.8


# ----------------------------------------------------------------------------- issue #36
def _spam_file(tmp_path, n=600, classes=("ham", "spam")):
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 10, n)
    colour = rng.choice(["red", "blue"], n)
    k = len(classes)
    code = np.clip(((x + 3 * (colour == "red")) / 13 * k).astype(int), 0, k - 1)
    path = tmp_path / f"train{k}.csv"
    frame = pd.DataFrame({"x": x, "colour": colour, "label": np.asarray(classes)[code]})
    frame.to_csv(path, index=False)
    return path, frame


@pytest.mark.parametrize(
    "names", [("ham", "spam"), ("spam", "ham"), ("c", "a", "b")], ids=lambda v: ",".join(v)
)
def test_saved_model_predicts_the_public_names_in_any_order(tmp_path, names):
    """--classes in any order: the saved model keeps the public names (sorted, with its
    coefficient rows or sign moved to match) and predicts them; the file loads."""
    import dperm

    path, frame = _spam_file(tmp_path, classes=tuple(sorted(names)))
    model = tmp_path / "m.dperm"
    res = runner.invoke(
        app,
        [
            *("fit", "--csv", str(path), "--target", "label", "--bounds", "x=0:10"),
            *("--categories", "colour=red,blue", "--classes", ",".join(names)),
            *("--epsilon", "8", "--seed", "0", "--save", str(model), "--quiet", "--no-reference"),
        ],
    )
    assert res.exit_code == 0, res.output
    pipe = dperm.load(model)
    assert list(pipe[-1].classes_) == sorted(names)
    assert pipe[-1].get_params()["classes"] == sorted(names)
    pred = pipe.predict(frame)
    assert set(pred) <= set(names) and np.mean(pred == frame["label"]) > 0.7
    statement = dperm.privacy_statement(pipe)
    assert "read from the training labels" not in statement
    assert "a training label outside it was refused" in statement


def test_integer_targets_with_a_label_bound_fit_a_regression(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, 2000)
    y = np.clip(np.round(25 * x + rng.normal(0, 1.5, 2000)), 0, 25).astype(int)
    path = tmp_path / "ints.csv"
    pd.DataFrame({"x": x, "y": y}).to_csv(path, index=False)
    out = run_fit(csv=path, target="y", bounds=["x=0:1"], label_bound=30, seed=0, reference=False)
    assert out["metric"] == "r2" and out["model"] == "linear" and out["test_r2"] > 0.5


def test_a_two_row_file_gets_a_small_default_delta(tmp_path):
    path = tmp_path / "two.csv"
    pd.DataFrame({"x": [1.0, 2.0], "y": ["no", "yes"]}).to_csv(path, index=False)
    argv = ["fit", "--csv", str(path), "--target", "y", "--classes", "no,yes", "--bounds"]
    argv += ["x=0:10"]
    res = runner.invoke(app, [*argv, "--no-reference", "--quiet", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.splitlines()[-1])["delta"] == 1e-5
    table = runner.invoke(app, [*argv, "--no-reference", "--quiet"]).stdout
    assert "(default min(1/n², 1e-5))" in table


def test_the_file_test_metric_is_marked_not_private(tmp_path):
    path, _ = _spam_file(tmp_path)
    argv = ["fit", "--csv", str(path), "--target", "label", "--bounds", "x=0:10"]
    argv += ["--categories", "colour=red,blue", "--classes", "ham,spam", "--quiet"]
    res = runner.invoke(app, [*argv, "--no-reference"])
    assert res.exit_code == 0, res.output
    assert "│ test accuracy (not private)" in res.stdout
    assert "cells imputed (not private)" in res.stdout
    out = json.loads(runner.invoke(app, [*argv, "--no-reference", "--json"]).stdout)
    assert "test_accuracy" in out["outside_guarantee"] and out["n_imputed"] == 0
    builtin = runner.invoke(app, ["fit", "--quiet", "--no-reference", "--mechanism", "objective"])
    assert "│ test accuracy (not private)" not in builtin.stdout  # a public test split
    assert "│ test accuracy " in builtin.stdout


def test_schema_options_on_the_command_line(tmp_path):
    path, frame = _spam_file(tmp_path)
    frame["k"] = np.arange(len(frame)) % 3
    frame.loc[5, "x"] = np.nan
    frame.to_csv(path, index=False)
    base = ["fit", "--csv", str(path), "--target", "label", "--bounds", "x=0:10"]
    base += ["--classes", "ham,spam", "--quiet", "--no-reference", "--json"]
    cats = ["--categories", "colour=red,blue", "--categories", "k=0,1,2"]
    # a column of codes with a list is categorical, --categorical or not (its kind is the
    # caller's, not the values')
    for extra in ([], ["--categorical", "k"]):
        res = runner.invoke(app, [*base, *cats, *extra, "--impute", "x=2.5"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout.splitlines()[-1])
        assert out["n_imputed"] == 1 and out["n_features"] == 6
    schema = tmp_path / "cats.json"
    schema.write_text(json.dumps({"colour": "red"}))
    res = runner.invoke(app, [*base, "--categories", str(schema), "--bounds", "k=0:2"])
    assert res.exit_code == 2 and "where a list is expected" in res.output
    one = runner.invoke(
        app,
        [
            *("audit", "--one-run", "--csv", str(path), "--target", "label", "--bounds", "x=0:10"),
            *cats, "--categorical", "k", "--classes", "ham,spam", "--epsilon", "1",
            *("--canaries", "100", "--seed", "0", "--json", "--quiet"),
        ],
    )  # fmt: skip
    assert one.exit_code == 0, one.output
    assert json.loads(one.stdout)["dataset"] == path.stem


def test_the_multiclass_warning_names_the_real_option():
    from dperm.cli._common import cli_message

    msg = cli_message("Pass the public label set, e.g. classes=[0, 1] or classes=range(10).")
    assert msg == "Pass the public label set, e.g. --classes 0,1 or --classes 0,1,…,9."


def test_the_schema_errors_name_the_flags():
    """The messages of the label rule in command-line terms: the flag, a space, the value."""
    from dperm.cli._common import cli_message
    from dperm.datasets._prepare import label_rule

    def message(**kw):
        with pytest.raises(DpermError) as e:
            label_rule(**kw)
        return cli_message(str(e.value))

    assert message(task="foo").startswith("--task must be one of")
    assert message(classes=["no"]).startswith("--classes must hold at least two")
    msg = message(positive_label="yes", classes=["a", "b"])
    assert msg.startswith("--positive-label 'yes' with --classes a,b:"), msg
    assert "or --positive-label (that value +1" in message()


def test_unreadable_files_are_one_line_naming_the_option(tmp_path):
    """A malformed schema file or CSV: exit 2 and one line naming the option or the file
    (a bad YAML file was a traceback; a binary file a bare codec message)."""
    path, _ = _spam_file(tmp_path)
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xd8\xff\x00\x81" * 10)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("x,colour,label\n1,red,ham\n2,blue,spam,7\n")
    base = ["fit", "--target", "label", "--classes", "ham,spam", "--quiet"]
    cases = [
        (["--csv", str(path), "--bounds", str(binary)], ("--bounds:", "b.json", "not UTF-8")),
        (["--csv", str(binary), "--bounds", "x=0:10"], ("b.json", "cannot be read as a CSV")),
        (["--csv", str(ragged), "--bounds", "x=0:10"], ("ragged.csv", "line 3")),
    ]
    pytest.importorskip("yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("x: [0, 10\n")
    cases.append((["--csv", str(path), "--bounds", str(bad)], ("--bounds:", "bad.yaml", "YAML")))
    for argv, needles in cases:
        res = runner.invoke(app, [*base, *argv, "--categories", "colour=red,blue"])
        assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
        assert all(n in res.output for n in needles), res.output


def test_a_regression_without_its_bound_names_the_flag(tmp_path):
    """--task regression alone (as the task error suggests) is refused naming --label-bound
    (it said "the dataset has none")."""
    rng = np.random.default_rng(0)
    path = tmp_path / "r.csv"
    pd.DataFrame({"x": rng.uniform(0, 1, 50), "y": rng.normal(size=50)}).to_csv(path, index=False)
    argv = ["fit", "--csv", str(path), "--target", "y", "--bounds", "x=0:1", "--quiet"]
    res = runner.invoke(app, [*argv, "--task", "regression"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "--label-bound" in res.output, res.output
