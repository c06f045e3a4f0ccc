"""``dperm fit`` on any CSV (issue #13 §4), its bad inputs (one stderr line, exit 2),
the ledger across invocations, the non-private reference (issue #12 §3) and the
lazy imports of the command line."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from dperm.cli import app, main

BOUNDS = {"x1": [-2.0, 2.0], "x2": [0.0, 10.0]}


def _run_main(argv, capsys):
    """Run the console entry point in-process; (exit code, stdout, stderr)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


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


def _json(res):
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


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
    assert out["mechanism"] == "adassp"  # the estimator's default, not the CLI's
    assert out["bounds_from_data"] is False
    assert "train_r2" in out["outside_guarantee"] and "test_r2" not in out["outside_guarantee"]
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
    loaded = dperm.load(model_path)
    pred = loaded.predict(ds.X_test)
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
    model = dperm.load(tmp_path / "m.skops")
    assert model.privacy_statement() == (tmp_path / "m.skops.privacy.txt").read_text()
    assert model.epsilon_ == out["epsilon"]


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


def test_ledger_spends_across_invocations_and_refuses_overspend(regression_csv, tmp_path, capsys):
    from dperm.accounting import Ledger

    path, schema = regression_csv
    ledger = tmp_path / "spent.json"
    argv = ["fit", "--csv", str(path), "--target", "y", "--label-bound", "5"]
    argv += ["--bounds", str(schema), "--categories", "colour=red,green,blue"]
    argv += ["--ledger", str(ledger), "--epsilon", "1", "--delta", "1e-6", "--no-reference"]
    code, _, err = _run_main([*argv, "--json"], capsys)
    assert code == 2 and "--ledger-epsilon" in err  # no file and no budget
    assert not ledger.exists()
    code, out, _ = _run_main([*argv, "--ledger-epsilon", "1.5", "--json"], capsys)
    assert code == 0
    first = json.loads(out)
    book = Ledger.load(ledger)
    assert book.epsilon == 1.5 and len(book.entries) == 1
    assert first["ledger_spent_epsilon"] == pytest.approx(book.spent()[0])
    assert 0.5 < book.spent()[0] <= 1.0 + 1e-9  # a (1, 1e-6) fit, read at δ = 1e-5
    before = ledger.read_text()
    code, out, err = _run_main([*argv, "--json"], capsys)  # 1 + 1 > 1.5: refused
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == ""
    assert len(lines) == 1 and lines[0].startswith("dperm: error:") and "budget" in lines[0]
    assert ledger.read_text() == before  # nothing recorded
    code, out, _ = _run_main([*argv, "--epsilon", "0.3", "--json"], capsys)
    assert code == 0 and len(Ledger.load(ledger).entries) == 2


def _bad_inputs(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    headers_only = tmp_path / "header.csv"
    headers_only.write_text("a,y\n")
    good = tmp_path / "good.csv"
    good.write_text("a,y\n" + "".join(f"{i % 7},{i % 2}\n" for i in range(40)))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{a: [0, 1]")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    fit = ["fit", "--csv", str(good), "--target", "y"]
    return [
        # the noise is ~1e300: the perturbed objective cannot be minimized, nothing is released
        (["fit", "--epsilon", "1e-300"], "exact minimizer"),
        (["fit", "--csv", str(empty), "--target", "y"], "empty"),
        (["fit", "--csv", str(headers_only), "--target", "y", "--bounds", "a=0:7"], "no rows"),
        (["fit", "--csv", str(good), "--target", "nope", "--bounds", "a=0:7"], "nope"),
        ([*fit, "--bounds", "a=0:7", "--bounds", "zz=0:1"], "zz"),
        ([*fit, "--bounds", "a=0"], "lo:hi"),
        ([*fit, "--bounds", "a=7:0"], "lo < hi"),
        ([*fit, "--bounds", "a=x:y"], "two numbers"),
        ([*fit, "--bounds", str(tmp_path / "missing.json")], "missing.json"),
        ([*fit, "--bounds", str(bad_json)], "not valid JSON"),
        ([*fit, "--bounds", "a=0:7", "--categories", "a="], "categories"),
        (fit, "no public bound"),
        ([*fit, "--bounds", "a=0:7", "--multi-class", "nope"], "multi_class"),
        (["fit", "--bounds", "a=0:1"], "--csv"),
        (["bench", "--out", str(a_file / "sub")], "not a writable folder"),
        (["bench", "--out", str(a_file)], "not a writable folder"),
    ]


@pytest.mark.parametrize("case", range(16))
def test_bad_input_is_one_stderr_line_and_exit_2(case, tmp_path, capsys):
    argv, needle = _bad_inputs(tmp_path)[case]
    code, out, err = _run_main(argv, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (argv, err)
    assert len(lines) == 1 and lines[0].startswith("dperm: error:"), lines
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err and out == ""


@pytest.mark.skipif(
    getattr(os, "geteuid", lambda: 0)() == 0, reason="root can write into a read-only folder"
)
def test_bench_out_in_an_unwritable_folder(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    code, _, err = _run_main(["bench", "--out", str(ro / "x")], capsys)
    assert code == 2 and "not a writable folder" in err and len(err.strip().splitlines()) == 1


def test_no_reference_skips_the_non_private_fit(monkeypatch):
    import dperm.utility

    calls = []
    real = dperm.utility.nonprivate_fit

    def spy(est, X, y, **kw):
        calls.append(kw)
        return real(est, X, y, **kw)

    monkeypatch.setattr(dperm.utility, "nonprivate_fit", spy)
    out = _json(CliRunner().invoke(app, ["fit", "--json", "--seed", "0", "--no-reference"]))
    assert calls == []
    assert out["excess_empirical_risk"] is None and out["nonprivate_test_accuracy"] is None
    assert out["test_accuracy"] is not None
    out = _json(CliRunner().invoke(app, ["fit", "--json", "--seed", "0"]))
    assert len(calls) == 1 and out["excess_empirical_risk"] >= -1e-9


def test_reference_of_a_dp_sgd_fit_is_capped_by_its_passes(monkeypatch):
    """The reference of a DP-SGD fit (unregularized by default: the minimum may
    not exist) is capped at the passes the fit made, at a gradient residual 1e-4."""
    import dperm.utility

    seen = {}
    real = dperm.utility.nonprivate_fit

    def spy(est, X, y, **kw):
        seen.update(kw, est=est)
        return real(est, X, y, **kw)

    monkeypatch.setattr(dperm.utility, "nonprivate_fit", spy)
    argv = ["fit", "--json", "--seed", "0", "--mechanism", "dp-sgd", "--epochs", "3"]
    out = _json(CliRunner().invoke(app, [*argv, "--batch-size", "64"]))
    est = seen["est"]
    assert seen["tol"] == max(est.tol, 1e-4)
    passes = out["steps"] * out["sampling_rate"]
    assert passes == pytest.approx(3.0, rel=0.05)  # --epochs reached the estimator
    assert out["sampling_rate"] == pytest.approx(64 / out["n_train"])  # so did --batch-size
    assert seen["max_iter"] == max(100, math.ceil(passes)) < est.max_iter


def test_multi_class_option_reaches_the_estimator(tmp_path, monkeypatch):
    from dperm import cli

    rng = np.random.default_rng(1)
    n = 600
    a = rng.uniform(0, 3, n)
    path = tmp_path / "three.csv"
    path.write_text("a,y\n" + "".join(f"{v:.4f},{int(v)}\n" for v in a))
    seen = {}
    real = cli._make_model

    def spy(*args, **kwargs):
        seen["est"] = real(*args, **kwargs)
        return seen["est"]

    monkeypatch.setattr(cli, "_make_model", spy)
    argv = ["fit", "--csv", str(path), "--target", "y", "--bounds", "a=0:3", "--task"]
    argv += ["multiclass", "--mechanism", "dp-sgd", "--multi-class", "multinomial"]
    argv += ["--epsilon", "5", "--seed", "0", "--json", "--no-reference"]
    res = CliRunner().invoke(app, argv)
    out = _json(res)
    assert seen["est"].multi_class == "multinomial" and seen["est"].coef_.shape == (3, 1)
    assert 0.0 <= out["test_accuracy"] <= 1.0
    assert "PrivacyLeakWarning" in res.stderr  # the label set was read from the CSV


def test_slow_steps_report_progress_on_stderr(capsys):
    import time

    from dperm._cli_fit import step

    with step("quick", threshold=0.5):
        pass
    assert capsys.readouterr().err == ""
    with step("slow", threshold=0.05):
        time.sleep(0.2)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "dperm: slow …" and err[1].startswith("dperm: slow done (")


def test_account_path_imports_no_heavy_modules():
    code = (
        "import sys, dperm.cli, dperm._cli_account, dperm.accounting;"
        "print(sorted(m for m in ('scipy.optimize', 'scipy.sparse', 'sklearn', 'pandas')"
        " if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
