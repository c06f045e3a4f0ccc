"""`dperm bench` (issue #7): a small configuration end to end, the file formats,
monotonicity in ε, the non-private upper envelope, protocols and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from dperm.bench import PUBLISHED, PUBLISHED_EPSILON, comparison_frame, run_bench
from dperm.bench.protocols import PAPER_SEED, get_protocol, paper_grid, paper_split
from dperm.bench.report import RESULT_COLUMNS
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError

EPS = (0.05, 5.0)
REPEATS = 2
ALGS = ("non-private", "objective", "output")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    df = run_bench(
        ["synthetic-l"], EPS, ALGS, repeats=REPEATS, out_dir=out, progress=False, random_state=3
    )
    return df, out


def _sd_of_mean(row) -> float:
    """Standard error of a row's mean accuracy: the spread over repeats and the
    binomial error of the test-set estimate."""
    p = row["accuracy_mean"]
    return math.sqrt(row["accuracy_sd"] ** 2 / row["repeats"] + p * (1 - p) / row["n_test"])


def test_file_formats(small_run):
    df, out = small_run
    assert list(df.columns) == RESULT_COLUMNS
    csv = pd.read_csv(out / "results.csv")
    assert list(csv.columns) == RESULT_COLUMNS
    assert len(csv) == len(ALGS) * len(EPS)
    assert set(csv["algorithm"]) == set(ALGS)
    assert np.all((csv["accuracy_mean"] >= 0) & (csv["accuracy_mean"] <= 1))
    priv = csv[csv["algorithm"] != "non-private"]
    assert np.all(priv["repeats"] == REPEATS)
    assert np.all(priv["fit_seconds_mean"] > 0)
    assert np.all(np.isfinite(priv["excess_risk_mean"]))
    assert np.all(priv["excess_risk_mean"] >= -1e-6)  # J(θ_priv) ≥ min J
    assert np.allclose(csv["delta"], 1.0 / csv["n_train"] ** 2)
    for hp in priv["hyperparameters"]:
        assert "alpha_" in json.loads(hp)

    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["protocol"] == "honest"
    assert data["meta"]["repeats"] == REPEATS
    assert len(data["results"]) == len(csv)
    assert set(data["results"][0]) == set(RESULT_COLUMNS)

    # every ε says which neighbouring relation it is for (issue #10 §2)
    assert set(priv["neighbouring"]) == {"replace-one"}
    assert set(csv.loc[csv["algorithm"] == "non-private", "neighbouring"]) == {"n/a (non-private)"}
    assert {r["neighbouring"] for r in data["results"]} == {"replace-one", "n/a (non-private)"}

    md = (out / "results.md").read_text()
    assert "protocol `honest`" in md and "## synthetic-l" in md
    assert md.count("| objective perturbation | dperm | replace-one |") == 1
    assert "| algorithm | source | neighbouring |" in md
    png = out / "accuracy_vs_epsilon_synthetic-l.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    comp = (out / "comparison.md").read_text()
    assert "synthetic-l" in comp and "not run" in comp  # e.g. AMP was not run here
    assert "were not run" in (out / "defaults.md").read_text()  # no "auto" row here


def test_accuracy_non_decreasing_in_epsilon(small_run):
    df, _ = small_run
    for alg in ("objective", "output"):
        part = df[df["algorithm"] == alg].sort_values("epsilon")
        lo, hi = part.iloc[0], part.iloc[-1]
        tol = 3 * math.hypot(_sd_of_mean(lo), _sd_of_mean(hi))
        assert hi["accuracy_mean"] >= lo["accuracy_mean"] - tol, alg


def test_non_private_is_the_upper_envelope(small_run):
    df, _ = small_run
    ref = df[df["algorithm"] == "non-private"].iloc[0]
    assert ref["accuracy_mean"] > 0.9
    for _, row in df[df["algorithm"] != "non-private"].iterrows():
        tol = 3 * math.hypot(_sd_of_mean(row), _sd_of_mean(ref))
        assert row["accuracy_mean"] <= ref["accuracy_mean"] + tol, row["algorithm"]


def test_missing_dataset_is_skipped_with_a_note(tmp_path):
    df = run_bench(
        ["adult", "synthetic-h"],
        [1.0],
        ["non-private"],
        repeats=1,
        data_home=tmp_path / "empty",
        out_dir=tmp_path / "out",
        progress=False,
    )
    assert set(df["dataset"]) == {"synthetic-h"}
    notes = df.attrs["meta"]["notes"]
    assert any("adult" in n and "skipped" in n for n in notes)
    assert "adult" in (tmp_path / "out" / "results.md").read_text()  # the note


def test_paper_protocol_is_labelled_non_private_tuning(tmp_path):
    df = run_bench(
        ["synthetic-l"], [1.0], ["non-private", "output"], repeats=1, protocol="paper",
        out_dir=tmp_path, progress=False, excess_risk=False,
    )  # fmt: skip
    row = df[df["algorithm"] == "output"].iloc[0]
    assert "NON-PRIVATE TUNING" in row["tuning"]
    assert "best of 9 grid points" in row["note"] and "non-private tuning" in row["note"]
    assert row["n_train"] == 8000 and row["delta"] == pytest.approx(1 / 8000**2)
    assert "NON-PRIVATE TUNING" in (tmp_path / "results.md").read_text()
    assert (
        "NON-PRIVATE TUNING"
        in json.loads((tmp_path / "results.json").read_text())["meta"]["tuning"]
    )
    assert json.loads(row["hyperparameters"])["data_norm"] in (0.1, 1.0, 10.0)


def test_paper_split_reproduces_the_published_preparation():
    s = paper_split("synthetic-l")
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=10_000, n_features=40, n_informative=30, n_classes=2, class_sep=2.0,
        random_state=1000,
    )  # fmt: skip
    np.testing.assert_array_equal(s.X_train, X[:8000])
    np.testing.assert_array_equal(s.y_test, np.where(y[8000:] == 1, 1.0, -1.0))
    assert PAPER_SEED == 10000019
    grid = paper_grid("frank-wolfe")
    assert len(grid) == 3 * 7 * 4
    assert {g["data_norm_ord"] for g in grid} == {"linf"}


def test_comparison_with_published_numbers():
    rows = []
    for alg, acc in (("non-private", 0.85), ("amp", 0.70)):
        rows.append({"dataset": "adult", "algorithm": alg, "source": "dperm",
                     "epsilon": 0.1, "accuracy_mean": acc, "accuracy_sd": 0.01})  # fmt: skip
    comp = comparison_frame(pd.DataFrame(rows))
    assert len(comp) == len(PUBLISHED["adult"])
    amp = comp[comp["algorithm"] == "amp"].iloc[0]
    assert amp["published"] == 79.1 and amp["dperm"] == pytest.approx(70.0)
    assert amp["difference"] == pytest.approx(70.0 - 79.1)
    assert comp[comp["algorithm"] == "frank-wolfe"]["dperm"].isna().all()
    assert PUBLISHED_EPSILON["mnist"] == 1.0 and PUBLISHED["mnist"]["non-private"] == 91.5


def test_defaults_table_puts_auto_next_to_the_best_mechanism_and_the_peers():
    """defaults.md: the auto row, what it chose, the best dperm mechanism of the cell at
    its defaults (auto and tuned rows excluded), the gap, and the peers (or "not run")."""
    from dperm.bench.report import defaults_frame, defaults_markdown

    def row(alg, acc, src="dperm", eps=0.1, hp=None):
        return {"dataset": "adult", "algorithm": alg, "source": src, "epsilon": eps,
                "accuracy_mean": acc, "accuracy_sd": 0.01,
                "hyperparameters": json.dumps(hp or {})}  # fmt: skip

    df = pd.DataFrame(
        [
            row("non-private", 0.85, src="scikit-learn"),
            row("auto", 0.80, hp={"mechanism_": "amp"}),
            row("objective", 0.79),
            row("dp-gd", 0.81),
            row("objective+tuned", 0.83),  # tuned: not a candidate for "best"
            row("opacus", 0.78, src="opacus"),
            row("objective", 0.83, eps=1.0),  # no auto row at ε = 1: no table row
        ]
    )
    comp = defaults_frame(df)
    assert len(comp) == 1
    r = comp.iloc[0]
    assert r["auto_choice"] == "amp" and r["best"] == "dp-gd"
    assert r["auto"] == pytest.approx(80.0) and r["gap"] == pytest.approx(-1.0)
    assert r["opacus"] == pytest.approx(78.0) and math.isnan(r["diffprivlib"])
    md = defaults_markdown(df)
    assert "| dperm defaults (auto) |" in md and "| adult | 0.1 | 85.0 | 80.0 ± 1.0 | amp |" in md
    assert "DP-GD 81.0 ± 1.0 | -1.0 | not run | 78.0 |" in md
    assert "not run" in defaults_markdown(df[df["algorithm"] != "auto"])


def test_bad_options(tmp_path):
    with pytest.raises(UnknownNameError):
        run_bench(["synthetic-l"], [1.0], ["nope"], out_dir=tmp_path, progress=False)
    with pytest.raises(UnknownNameError):
        run_bench(["nope"], [1.0], ["non-private"], out_dir=tmp_path, progress=False)
    with pytest.raises(UnknownNameError):
        get_protocol("clever")
    with pytest.raises(InvalidPrivacyParameter):
        run_bench(["synthetic-l"], [-1.0], ["non-private"], out_dir=tmp_path, progress=False)
    with pytest.raises(InvalidPrivacyParameter):
        run_bench(["synthetic-l"], [1.0], ["non-private"], repeats=0, out_dir=tmp_path,
                  progress=False)  # fmt: skip


def test_peer_missing_is_a_note_not_an_error(tmp_path):
    from dperm.bench.peers import available_peers

    if "diffprivlib" in available_peers():
        pytest.skip("diffprivlib is installed here")
    df = run_bench(["synthetic-h"], [1.0], ["non-private", "diffprivlib"], repeats=1,
                   out_dir=tmp_path, progress=False)  # fmt: skip
    assert set(df["algorithm"]) == {"non-private"}
    assert any("diffprivlib" in n for n in df.attrs["meta"]["notes"])


def test_diffprivlib_peer_gets_data_norm_explicitly(tmp_path):
    from dperm.bench.peers import available_peers

    if "diffprivlib" not in available_peers():
        pytest.skip("diffprivlib is not usable here")
    df = run_bench(["synthetic-h"], [1.0], ["diffprivlib"], repeats=1, out_dir=tmp_path,
                   progress=False)  # fmt: skip
    row = df.iloc[0]
    assert row["source"] == "diffprivlib"
    assert json.loads(row["hyperparameters"])["data_norm"] == 1.0


def test_cli_bench(tmp_path, capsys):
    from dperm.cli import main

    args = ["bench", "--datasets", "synthetic-h", "--algorithms", "non-private,objective"]
    args += ["--epsilons", "1", "--repeats", "1", "--out", str(tmp_path), "--no-progress"]
    rc = main(args)
    assert rc == 0
    printed = capsys.readouterr().out
    assert "synthetic-h" in printed and "objective perturbation" in printed
    assert (tmp_path / "results.csv").exists()
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--epsilons", "abc", "--out", str(tmp_path), "--no-progress"])
    assert exc.value.code == 2
    assert "epsilons" in capsys.readouterr().err


def test_bench_fits_with_the_public_label_set():
    """The bench passes the split's public label set (here 3 classes, one absent
    from the training labels), never the set read off y_train."""
    from dperm.bench import runner
    from dperm.bench.protocols import Split
    from dperm.exceptions import PrivacyLeakWarning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    X /= 1.001 * np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(np.int64)  # labels 0, 1 only; the public set is 0, 1, 2
    split = Split("toy", X[:200], y[:200], X[200:], y[200:], "multiclass", 1.0, "toy", (0, 1, 2))
    *_, used, _dropped, relation = runner._fit_dperm(
        "objective", split, {}, 3.0, 1e-5, 0, None, False
    )
    assert used["classes"] == [0, 1, 2] and relation == "replace-one"
    # a split without a public label set falls back to y_train, and says so
    bare = Split("toy", X[:200], y[:200], X[200:], y[200:], "binary", 1.0, "toy")
    with pytest.warns(PrivacyLeakWarning, match="no public label set"):
        *_, used, _dropped, relation = runner._fit_dperm(
            "objective", bare, {}, 1.0, 1e-5, 0, None, False
        )
    assert used["classes"] == [0, 1]


def test_tuned_privately_spends_the_cell_budget_on_the_whole_search(tmp_path):
    """``objective+tuned``: a private random search whose (ε, δ) is the cell's own —
    the run budget is smaller than ε, and the search's ε (runs, scores and selection)
    is at most the cell's ε; the comparison gains the tuned column."""
    df = run_bench(["synthetic-l"], [1.0], ["objective", "objective+tuned"], repeats=1,
                   out_dir=tmp_path, progress=False, random_state=5)  # fmt: skip
    row = df[df["algorithm"] == "objective+tuned"].iloc[0]
    hp = json.loads(row["hyperparameters"])
    assert hp["accounting"] == "papernot-steinke"
    assert hp["search_epsilon"] <= 1.0 * (1 + 1e-9) and hp["run_epsilon"] < 0.7
    assert "alpha" in hp["best_params"] and row["neighbouring"] == "replace-one"
    assert row["accuracy_mean"] > 0.7
    comp = comparison_frame(pd.DataFrame(
        [{"dataset": "adult", "algorithm": a, "source": "dperm", "epsilon": 0.1,
          "accuracy_mean": v, "accuracy_sd": 0.0}
         for a, v in (("dp-sgd", 0.81), ("dp-sgd+tuned", 0.8))]))  # fmt: skip
    sgd = comp[comp["algorithm"] == "dp-sgd"].iloc[0]
    assert sgd["dperm"] == pytest.approx(81.0) and sgd["tuned"] == pytest.approx(80.0)


def test_multiclass_data_is_fitted_as_one_multinomial_model():
    from dperm.bench import runner
    from dperm.bench.protocols import Split

    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 3))
    X *= 0.95 / np.linalg.norm(X, axis=1).max()
    y = np.argmax(X @ rng.normal(size=(3, 3)) * 5, axis=1)
    split = Split("toy", X[:600], y[:600], X[600:], y[600:], "multiclass", 1.0, "toy", (0, 1, 2))
    acc, _, bound, _, used, _, rel = runner._fit_dperm(
        "objective", split, {}, 1.0, 1e-6, 0, None, True
    )
    assert used["multi_class"] == "multinomial" and rel == "replace-one"
    assert math.isnan(bound) and acc > 0.6
    _, _, _, _, used, _, _ = runner._fit_dperm("frank-wolfe", split, {}, 1.0, 1e-6, 0, None, False)
    assert "multi_class" not in used  # one-vs-rest with ε/3 per class
