"""The first hour of a new user (issue #21): bad input everywhere the issue found it.

Every CLI error is one stderr line ``dperm: error: …`` in command-line terms (flags, not
keyword arguments) with exit status 2 and no traceback; a model file that was tampered
with is refused when it is loaded; a model saved from a CSV scores new raw rows (from
the command line and from Python alike); messages never echo a record's values.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dperm
from _helpers import tamper_model_file
from dperm.cli import main
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter, LabelError, ModelFileError

ROOT = Path(__file__).resolve().parents[1]
PY_SPELLINGS = ("={", "=True", "categorical=", "allow_data_bounds", "bounds=", "categories=")


def run(argv, capsys):
    """(exit status, stdout, stderr) of ``dperm argv`` run in this process."""
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def assert_cli_error(argv, capsys, *needles):
    """Exit 2, one stderr line ``dperm: error: …`` naming every needle, no Python
    keyword spelling and no traceback."""
    status, _, err = run(argv, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("dperm: error:")]
    assert status == 2, (status, err)
    assert len(errors) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    assert not any(s in errors[0] for s in PY_SPELLINGS), errors[0]
    return errors[0]


@pytest.fixture
def shop(tmp_path):
    """A CSV with a numeric, a categorical column and a binary label, and a second file
    of new rows (a colour outside the public list among them, and no label column)."""
    rng = np.random.default_rng(0)
    n = 600
    x = rng.uniform(0, 10, n)
    colour = rng.choice(["red", "blue", "green"], n)
    y = np.where(x + 3 * (colour == "red") + rng.normal(0, 1, n) > 6, "yes", "no")
    path = tmp_path / "shop.csv"
    pd.DataFrame({"x": x, "colour": colour, "buys": y}).to_csv(path, index=False)
    new = tmp_path / "new.csv"
    pd.DataFrame({"colour": ["red", "blue", "purple"], "x": [9.0, 1.0, 5.0]}).to_csv(
        new, index=False
    )
    return path, new


FIT = ["fit", "--target", "buys", "--classes", "no,yes", "--bounds", "x=0:10", "--no-reference"]
FIT += ["--quiet"]
CATS = ["--categories", "colour=red,blue,green"]


# ----------------------------------------------------------------------------- CLI errors
def test_cli_errors_are_one_line_in_cli_terms(shop, tmp_path, capsys):
    csv, _ = shop
    # a categorical column without its public list: refused like a numeric one
    msg = assert_cli_error([*FIT, "--csv", csv], capsys, "colour", "--categories")
    assert "--allow-data-bounds" in msg
    assert_cli_error(
        ["fit", "--csv", csv, "--target", "buys", "--classes", "no,yes", *CATS, "--quiet"],
        capsys,
        "x",
        "--bounds",
    )
    # options that would do nothing
    assert_cli_error(["fit", "--ledger-epsilon", "1", "--quiet"], capsys, "--ledger")
    ledger = tmp_path / "spent.json"
    base = [*FIT, "--csv", csv, *CATS, "--ledger", ledger]
    assert run([*base, "--ledger-epsilon", "2"], capsys)[0] == 0
    assert_cli_error([*base, "--ledger-epsilon", "3"], capsys, "--ledger-epsilon 3", "2")
    assert_cli_error([*base, "--ledger-delta", "1e-3"], capsys, "--ledger-delta")
    # a missing folder, for the model and for bench's data
    assert_cli_error(["fit", "--save", tmp_path / "no" / "m.dperm", "--quiet"], capsys, "--save")
    assert_cli_error(["bench", "--data-home", tmp_path / "none", "--quiet"], capsys, "--data-home")
    assert_cli_error(["account", "--noise-multiplier", "1", "--neighbouring", "x"], capsys, "x")
    assert_cli_error(["fit", "--epsilon", "-1", "--quiet"], capsys, "--epsilon")


def test_regression_targets_under_task_binary_are_not_echoed(tmp_path, capsys):
    p = tmp_path / "r.csv"
    y = np.round(np.random.default_rng(1).normal(size=50) * 1000, 3)
    pd.DataFrame({"x": np.linspace(0, 1, 50), "y": y}).to_csv(p, index=False)
    msg = assert_cli_error(
        ["fit", "--csv", p, "--target", "y", "--bounds", "x=0:1", "--task", "binary"], capsys
    )
    assert not any(f"{v:g}" in msg for v in y[:10])


def test_help_renders_every_option(capsys):
    status, out, _ = run(["fit", "--help"], capsys)
    assert status == 0
    assert "{col: [lo, hi]}" in out  # not eaten as markup
    assert "<bool>" not in out and "--json " not in out.replace("--json  ", "")
    assert "--bounds COL=LO:HI|FILE" in out and "--quiet" in out
    for command in ("predict", "account", "calibrate", "audit", "bench"):
        assert run([command, "--help"], capsys)[0] == 0


def test_python_dash_m_dperm():
    proc = subprocess.run(
        [sys.executable, "-m", "dperm", "--version"],
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert proc.returncode == 0 and proc.stdout.startswith("dperm ")


def test_audit_list_separates_runners_from_targets_and_mutants(capsys):
    status, out, _ = run(["audit", "--list", "--json"], capsys)
    groups = json.loads(out)
    assert status == 0 and set(groups) == {"runners", "targets", "mutants"}
    assert "objective" in groups["runners"] and "tukey-unsafe" in groups["targets"]
    assert not any(n.endswith(("-raw", "-unsafe")) for n in groups["runners"])


def test_account_and_calibrate_say_the_relation(capsys):
    status, out, _ = run(["account", "--noise-multiplier", "2", "--steps", "3", "--json"], capsys)
    assert status == 0 and json.loads(out)["neighbouring"] == "replace-one"
    status, out, _ = run(
        ["calibrate", "--epsilon", "1", "--steps", "3", "--neighbouring", "add-remove", "--json"],
        capsys,
    )
    assert status == 0 and json.loads(out)["neighbouring"] == "add-remove"


def test_ledger_line_explains_what_it_totals(shop, tmp_path, capsys):
    csv, _ = shop
    ledger = tmp_path / "l.json"
    argv = [*FIT, "--csv", csv, *CATS, "--ledger", ledger, "--ledger-epsilon", "3", "--json"]
    status, out, _ = run(argv, capsys)
    res = json.loads(out)
    assert status == 0 and res["ledger_fits"] == 1 and res["ledger_epsilon"] == 3.0
    assert 0 < res["ledger_spent_epsilon"] <= res["epsilon"] and res["ledger_accountant"]


# ----------------------------------------------------------------------------- progress
def test_progress_lines_on_a_pipe_and_quiet(capsys):
    from dperm.cli._common import step

    with step("slow thing", True, threshold=0.0, heartbeat=0.05):
        __import__("time").sleep(0.2)
    err = capsys.readouterr().err
    assert err.startswith("dperm: slow thing …") and "slow thing done" in err
    assert err.count("slow thing …") >= 2  # the heartbeat: a line while it runs
    with step("slow thing", False, threshold=0.0):
        pass
    assert capsys.readouterr().err == ""
    status, _, err = run(["fit", "--mechanism", "dp-sgd", "--epochs", "1", "--quiet"], capsys)
    assert status == 0 and "dperm:" not in err.replace("dperm: warning", "")


# ----------------------------------------------------------------------------- saved schema
def test_fit_save_then_predict_raw_rows(shop, tmp_path, capsys):
    csv, new = shop
    model = tmp_path / "m.dperm"
    status, out, _ = run([*FIT, "--csv", csv, *CATS, "--seed", "0", "--save", model], capsys)
    assert status == 0
    # issue #32: a value outside the public category list is refused (it would be
    # encoded as zeros, silently changing the row's prediction), naming column and value
    assert_cli_error(["predict", "--model", model, "--csv", new], capsys, "colour", "purple")
    known = tmp_path / "known.csv"
    pd.read_csv(new).iloc[:2].to_csv(known, index=False)
    preds = tmp_path / "p.csv"
    status, _, err = run(["predict", "--model", model, "--csv", known, "--out", preds], capsys)
    assert status == 0, err
    cli = pd.read_csv(preds)["prediction"].to_numpy()
    pipe = dperm.load(model)
    raw = pd.read_csv(new, dtype={"colour": str})
    # the file's own labels, not the encoded −1/+1 (issue #32)
    assert np.array_equal(pipe.predict(raw.iloc[:2]), cli) and set(cli) <= {"no", "yes"}
    # the schema: the raw columns in, the encoded design into the model
    enc = pipe.steps[0][1]
    assert enc.get_feature_names_out().tolist() == [
        "x",
        "colour=red",
        "colour=blue",
        "colour=green",
    ]
    X = enc.transform(raw)  # the encoder itself maps an unknown value to zeros
    assert np.array_equal(pipe.steps[1][1].predict(X[:2]), cli)
    assert np.allclose(X[2], [0.5 / np.sqrt(2), 0, 0, 0]) and np.all(np.linalg.norm(X, axis=1) <= 1)
    text = dperm.privacy_statement(pipe)
    assert "SchemaEncoder" in text and "spends nothing" in text
    status, out, _ = run(["predict", "--model", model, "--csv", known], capsys)  # stdout
    assert status == 0 and out.split() == ["prediction", *map(str, cli)]
    # a row lacking a schema column, a missing model, a file that is not a model
    pd.DataFrame({"x": [1.0]}).to_csv(tmp_path / "bad.csv", index=False)
    assert_cli_error(["predict", "--model", model, "--csv", tmp_path / "bad.csv"], capsys, "colour")
    assert_cli_error(["predict", "--model", tmp_path / "none", "--csv", new], capsys, "none")
    assert_cli_error(["predict", "--model", csv, "--csv", new], capsys, "not a dperm model")


def test_data_bounds_mark_the_saved_pipeline(shop, tmp_path, capsys):
    csv, new = shop
    model = tmp_path / "leak.dperm"
    argv = ["fit", "--csv", csv, "--target", "buys", "--classes", "no,yes"]
    argv += ["--allow-data-bounds", "--quiet"]
    status, out, err = run([*argv, "--no-reference", "--json", "--save", model], capsys)
    assert status == 0 and json.loads(out)["bounds_from_data"] is True
    assert "PrivacyLeakWarning" in err
    meta = dperm.io.read_metadata(model)
    assert meta["privacy"]["epsilon"] is None  # no finite guarantee is claimed
    assert "NOT hold" in (tmp_path / "leak.dperm.privacy.txt").read_text()
    assert len(dperm.load(model).predict(pd.read_csv(new))) == 3


# ----------------------------------------------------------------------------- loader
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    X = np.random.default_rng(2).normal(size=(300, 4)) / 3
    y = np.where(X[:, 0] > 0, 1, -1)
    clf = dperm.DPLogisticRegression(classes=[-1, 1], data_norm=2.0, random_state=0).fit(X, y)
    path = tmp_path_factory.mktemp("m") / "m.dperm"
    dperm.save(clf, path)
    return path


def _set_attr(key, value):
    def edit(m):
        m["attributes"][key] = value

    return edit


def _set_privacy(key, value):
    def edit(m):
        m["privacy"][key] = value

    return edit


@pytest.mark.parametrize(
    ("case", "arrays", "meta", "needle"),
    [
        ("coef NaN", {"coef_": np.full((1, 4), np.nan)}, None, "non-finite"),
        ("intercept (3,)", {"intercept_": np.zeros(3)}, None, "intercept_"),
        ("classes -1 0 1", {"classes_": np.array([-1.0, 0.0, 1.0])}, None, "classes_"),
        ("coef (1, 99)", {"coef_": np.zeros((1, 99))}, None, "n_features_in_"),
        ("n_features_in_ 7", None, _set_attr("n_features_in_", 7), "n_features_in_"),
        ("coef strings", {"coef_": np.array([["a", "b", "c", "d"]])}, None, "real numbers"),
        ("epsilon lowered", None, _set_attr("epsilon_", 0.1), "epsilon"),
        ("privacy block", None, _set_privacy("epsilon", 0.5), "epsilon"),
        ("relation", None, _set_privacy("neighbouring", "add-remove"), "relation"),
    ],
)
def test_tampered_model_files_are_refused_at_load(saved, tmp_path, case, arrays, meta, needle):
    bad = tamper_model_file(saved, tmp_path / "bad.dperm", arrays, meta)
    with pytest.raises(ModelFileError, match=needle):
        dperm.load(bad)


def test_the_untampered_copy_loads(saved, tmp_path):
    assert dperm.load(tamper_model_file(saved, tmp_path / "same.dperm")).coef_.shape == (1, 4)


def test_save_errors_are_specific(saved, tmp_path):
    model = dperm.load(saved)
    with pytest.raises(ModelFileError, match="does not exist"):
        dperm.save(model, "/nonexistent/dir/m.dperm")
    with pytest.raises(ModelFileError, match="NoneType"):
        dperm.save(model, None)
    with pytest.raises(ModelFileError, match="folder"):
        dperm.save(model, tmp_path)
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


# ----------------------------------------------------------------------------- messages
def test_messages_never_echo_values(tmp_path):
    clf = dperm.DPLogisticRegression(classes=[-1, 1])
    with pytest.raises(InvalidDataError) as info:
        clf.fit(np.array([0.123456, 0.654321, 0.5]), np.array([1, -1, 1]))
    assert "0.123456" not in str(info.value) and "Expected 2D array" in str(info.value)
    with pytest.raises(InvalidDataError) as info:
        clf.fit(np.array([["secret", "b"], ["c", "d"]]), np.array([1, -1]))
    assert "secret" not in str(info.value)
    from dperm.preprocessing import PublicOneHotEncoder

    enc = PublicOneHotEncoder(categories=[["a", "b"]])
    with pytest.raises(InvalidDataError) as info:
        enc.fit(np.array([["a"], ["private-value"]], dtype=object))
    assert "private-value" not in str(info.value)
    p = tmp_path / "b.csv"
    pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [0.123, 4.567, 8.901]}).to_csv(p, index=False)
    with pytest.raises(LabelError) as info:
        dperm.datasets.load_csv(p, "y", bounds={"x": (0, 5)}, classes=[0, 1])
    assert "4.567" not in str(info.value)
    with pytest.raises(InvalidDataError) as info:
        from dperm.schema import NumericColumn

        NumericColumn("x", 0, 1).transform(np.array(["secret"], dtype=object))
    assert "secret" not in str(info.value)


def test_load_csv_needs_public_categories(shop):
    csv, _ = shop
    with pytest.raises(InvalidPrivacyParameter, match=r"\['colour'\].*allow_data_bounds"):
        dperm.datasets.load_csv(csv, "buys", bounds={"x": (0, 10)}, classes=["no", "yes"])
    ds = dperm.datasets.load_csv(
        csv,
        "buys",
        bounds={"x": (0, 10)},
        categories={"colour": ["red", "blue", "green"]},
        classes=["no", "yes"],
    )
    assert ds.encoder.dp_event_.to_dict()["kind"] == "NoOp"
    assert np.array_equal(
        ds.encoder.transform(pd.read_csv(csv, dtype={"colour": str})).shape, (600, 4)
    )
