"""Issue #36: the audit of the path users run on their own file (runner ``cli-csv``).

The dataset is the *file*: two CSV files that differ in one record (its label), fitted
through the code of ``dperm fit --csv`` (load_csv's public split, label rule and schema,
then the estimator dperm fit builds with every default, the private feature scaling
included).  The honest runner is not refuted at ε = 0.5, 1, 4 and shows power at ε = 4 in
CI (at ε = 1, 6000 runs per file: ``docs/auditing.md``); the mutant with the stratified
split of dperm before issue #36 is refuted (``tests/test_audit_mutants.py``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import dperm
from dperm.audit import audit, get_runner
from dperm.audit.fits import (
    CSV_CANARY,
    CSV_ROWS,
    CSV_TRAIN_ROWS,
    _run_cli_csv,
    csv_pair,
    csv_split,
)
from dperm.audit.mutants import stratified_train_rows
from dperm.cli.audit import list_runners
from dperm.cli.fit import run_fit
from dperm.datasets._prepare import file_split


def test_the_runner_and_its_mutant_are_listed():
    groups = list_runners()
    assert "cli-csv" in [n for n, _ in groups["runners"]]
    assert "cli-csv[stratified-split]" in [n for n, _ in groups["mutants"]]
    r = get_runner("cli-csv")
    assert r.neighbouring == "replace-one" and r.n == CSV_ROWS
    assert CSV_TRAIN_ROWS == file_split(CSV_ROWS, 0.2, 0)[0].size  # its default δ's n
    assert r.default_delta == min(1.0 / CSV_TRAIN_ROWS**2, 1e-5)


def test_the_pair_is_two_files_that_differ_in_one_record():
    p = csv_pair()
    diff = np.flatnonzero((p.y != p.y_prime) | np.any(p.X != p.X_prime, axis=1))
    assert diff.size == 1
    (c,) = diff
    assert c in set(csv_split(p.y)) and c in set(csv_split(p.y_prime))  # a training row
    assert np.array_equal(p.X[c], CSV_CANARY) and p.y[c] == -1 and p.y_prime[c] == 1
    # the honest split keeps the training rows: every other row at ±(1, 1) in one block of
    # two columns, a public spread with both labels at each point, orthogonal to the canary
    rest = np.delete(np.arange(p.y.size), c)
    assert np.all(np.count_nonzero(p.X[rest], axis=1) == 2)
    assert np.all(p.X[rest] @ np.asarray(CSV_CANARY) == 0.0)
    for row in ([1, 1, 0, 0], [-1, -1, 0, 0], [0, 0, 1, 1], [0, 0, -1, -1]):
        at = rest[np.all(p.X[rest] == row, axis=1)]
        assert abs(np.mean(p.y[at])) < 0.01 and at.size > 200
    # the split of dperm before issue #36 moved rows: they push the model along the canary
    m = get_runner("cli-csv[stratified-split]").make_pair()
    assert np.array_equal(m.y, p.y) and np.array_equal(m.y_prime, p.y_prime)
    moved = set(stratified_train_rows(m.y)) ^ set(stratified_train_rows(m.y_prime))
    moved = np.array(sorted(moved))
    assert moved.size > 100
    assert np.all(np.abs(m.X[moved] @ np.asarray(CSV_CANARY)) == 4.0)  # on ±(1, −1, 1, −1)
    kept = np.setdiff1d(rest, moved)
    assert np.array_equal(m.X[kept], p.X[kept])


def test_the_scaling_gives_the_columns_one_scale():
    """The pair's columns have the same public spread: the private scaling pools their
    scale in most runs, and in every run its scale is within half of the true mean
    absolute deviation 1/(2√2) (a zero row's scale would be set by the noise alone, about
    |m| ≈ 0.05): the canary's standardized row is well determined, and the score is
    ⟨w, canary⟩/(sκ) when the scales agree."""
    from dperm.algorithms import private_scaling
    from dperm.audit.fits import load_csv_pair_file
    from dperm.design import as_design

    p = csv_pair()
    ds = load_csv_pair_file(p.X, p.y)
    # the effective rows DP-SGD scales (unit rows, the implicit intercept column 0.5)
    X = as_design(ds.X_train, 1.0, intercept_scaling=0.5)
    pooled = []
    for seed in range(40):  # z = 8: the scaling's multiplier at ε ≈ 1 (share 0.3)
        res = private_scaling.fit(
            X, data_norm=1.0, noise_multiplier=8.0, rng=np.random.default_rng(seed)
        )
        assert np.all(np.abs(res.scale / 8**-0.5 - 1.0) < 0.5), res.scale
        pooled.append(np.all(res.scale == res.scale[0]))
    assert np.mean(pooled) > 0.6


def test_the_runner_fits_what_dperm_fit_csv_fits(tmp_path):
    """The released model of the runner is the model `dperm fit --csv` saves for the same
    file and seed (an independent path: the CLI's loader, make_estimator and --save), the
    private feature scaling included."""
    p = csv_pair()
    path = tmp_path / "d.csv"
    cols = [f"x{j}" for j in range(p.X.shape[1])]
    frame = pd.DataFrame(p.X, columns=cols).assign(label=np.where(p.y > 0, "yes", "no"))
    frame.to_csv(path, index=False)
    model = tmp_path / "m.dperm"
    with warnings.catch_warnings():  # the pair has no signal to learn: one class predicted
        warnings.simplefilter("ignore", UserWarning)
        run_fit(
            csv=path, target="label", bounds=[f"{c}=-1:1" for c in cols], classes="no,yes",
            epsilon=1.0, seed=5, save=model, reference=False,
        )  # fmt: skip
    pipe = dperm.load(model)
    assert pipe[-1].feature_scaling == "private"  # the file's default
    probes = pd.DataFrame([CSV_CANARY, (0.0,) * len(cols)], columns=cols)
    f = pipe.decision_function(probes)
    delta = get_runner("cli-csv").default_delta
    assert pipe[-1].delta_ == pytest.approx(delta)
    np.testing.assert_allclose(_run_cli_csv(p.X, p.y, 1.0, delta, 5), [f[0] - f[1]], rtol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_the_honest_runner_is_not_refuted(epsilon):
    res = audit("cli-csv", epsilon=epsilon, runs=250, random_state=3, n_jobs=2)
    assert not res.violated, res.summary()
    if epsilon == 4.0:  # power: the canary's label shows through the released model
        assert res.epsilon_lower_bound > 1.0, res.summary()
