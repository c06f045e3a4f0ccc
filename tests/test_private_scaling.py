"""Private feature scaling (``dperm.algorithms.private_scaling``) and its use by DP-SGD.

Three Gaussian releases within the public row bound, replace-one: their sensitivities
(brute force over adversarial neighbours), their one event (the composition of three
Gaussians is the Gaussian of z⁻² = Σzₖ⁻², checked against the analytic Gaussian), the
joint calibration with the DP-SGD steps (one event that spends ε), the map back to the
original features (an identity of margins), the estimates' accuracy, the utility it
buys, and the errors.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dperm import DPLogisticRegression
from dperm.accounting.events import Composed, Gaussian
from dperm.accounting.gaussian import analytic_gaussian_noise_multiplier, gaussian_epsilon
from dperm.accounting.registry import epsilon_spent
from dperm.algorithms import dp_sgd
from dperm.algorithms import private_scaling as ps
from dperm.design import as_design
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError
from dperm.losses import Logistic, Softmax


def _offcentre(seed=0, n=3000, d=6, spread=0.02, k=2):
    """Rows near one corner of the unit ball (the generous-bounds problem): features
    0.3 ± spread, the label in the spread's directions."""
    model = np.random.default_rng(99)  # the same population for every seed
    centre = model.uniform(0.15, 0.35, size=d)
    scale, w = model.uniform(0.5, 2.0, size=d), model.normal(size=d)
    rng = np.random.default_rng(seed)
    X = centre + spread * rng.normal(size=(n, d)) * scale
    score = (X - centre) @ w / spread
    y = np.where(score > 0, 1.0, -1.0) if k == 2 else np.digitize(score, [-0.7, 0.7])
    return X, y


# ----------------------------------------------------------------- sensitivities
def test_the_three_releases_have_their_stated_sensitivities():
    """Replacing one row moves the row sum by ≤ 2R, the histogram by ≤ √2 and the pair
    (Σu, Σ|u|) by ≤ 2r — over adversarial neighbours (antipodal rows, a row moved far
    out, a row moved between bins)."""
    rng = np.random.default_rng(1)
    R, d, n = 1.0, 5, 50
    X = rng.normal(size=(n, d))
    X *= rng.uniform(0.05, 1.0, size=(n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    m = rng.normal(size=d) * 0.1
    r = 0.3
    edges = 2.0 * R * 2.0 ** (-np.arange(ps.HISTOGRAM_BINS + 1) / 2.0)

    def hist(rho):  # the bins of step 2
        k = np.searchsorted(-edges, -rho, side="left") - 1
        return np.bincount(np.clip(k, 0, ps.HISTOGRAM_BINS), minlength=edges.size)

    for trial in range(200):
        Xp = X.copy()
        v = rng.normal(size=d)
        Xp[0] = v / np.linalg.norm(v) * (R if trial % 2 else rng.uniform(0, R))
        if trial % 3 == 0:
            Xp[0] = -X[0] / max(np.linalg.norm(X[0]), 1e-12) * R
        D, Dp = as_design(X, R), as_design(Xp, R)
        t1, sq1, _ = ps._features(D)
        t2, sq2, _ = ps._features(Dp)
        assert np.linalg.norm(t1 - t2) <= 2 * R * (1 + 1e-12)
        rho1, rho2 = ps._distances(D, m, sq1), ps._distances(Dp, m, sq2)
        assert np.linalg.norm(hist(rho1) - hist(rho2)) <= math.sqrt(2) + 1e-12
        a1, b1 = ps._deviation_sums(D, m, rho1, r)
        a2, b2 = ps._deviation_sums(Dp, m, rho2, r)
        joint = math.sqrt(np.sum((a1 - a2) ** 2) + np.sum((b1 - b2) ** 2))
        assert joint <= 2 * r * (1 + 1e-9)


def test_the_event_is_one_gaussian_of_multiplier_z():
    """Composed((G(z₁), G(z₂), G(z₃))) with Σzₖ⁻² = z⁻²: the exact ε of the Gaussian of
    multiplier z (Dong, Roth & Su 2022, Cor. 3.3; Balle & Wang 2018)."""
    z, delta = 3.0, 1e-6
    event = ps.event_of(z)
    assert isinstance(event, Composed) and len(event.events) == 3
    assert all(isinstance(e, Gaussian) and e.neighbouring == "replace-one" for e in event.events)
    assert sum(e.noise_multiplier**-2 for e in event.events) == pytest.approx(z**-2)
    exact = gaussian_epsilon(z, delta)
    assert epsilon_spent(event, delta, "pld") == pytest.approx(exact, rel=5e-3)


def test_the_plan_takes_its_share_and_the_steps_spend_the_rest():
    """z_s = z_G(ε, δ)/√f; the DP-SGD steps are calibrated for the composition: one event
    Composed((scaling, steps)) that spends 99.5–100 % of ε."""
    plan = ps.plan("private", 0.3, 1.0, 1e-6, "replace-one")
    zg = analytic_gaussian_noise_multiplier(1.0, 1e-6)
    assert plan.noise_multiplier == pytest.approx(zg / math.sqrt(0.3))
    X, y = _offcentre(n=1500)
    D = as_design(X, 1.0, intercept_scaling=0.5)
    res = dp_sgd.fit(
        Logistic(), D, y, epsilon=1.0, delta=1e-6, data_norm=D.bound,
        neighbouring="replace-one", batch_size=100, epochs=3, feature_scaling="private",
        scaling_share=0.3, random_state=0,
    )  # fmt: skip
    assert isinstance(res.event, Composed) and res.event.events[0] == plan.event
    assert 0.995 <= res.diagnostics["epsilon_spent"] <= 1.0
    assert epsilon_spent(res.event, 1e-6, "pld") <= 1.0 + 1e-9
    assert res.diagnostics["feature_scaling"]["share"] == 0.3


def test_the_releases_carry_their_stated_noise():
    """The noise actually added: N(0, (2R·z₁)²) on the row sum, N(0, (2r·z₃)²) on the sums
    of the clipped deviations and of their absolute values (the three coordinates'
    calibration of the module docstring; the histogram's is the audit's mutant) —
    each recovered against the sums computed here from X, m and r, KS against N(0, 1)
    over d = 3000 coordinates, and the std within 5/√d."""
    from scipy import stats

    rng = np.random.default_rng(7)
    R, n, d, z = 1.0, 30, 3000, 1.7
    X = rng.normal(size=(n, d)) + 0.5
    X *= rng.uniform(0.2, 1.0, size=(n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    res = ps.fit(as_design(X, R), data_norm=R, noise_multiplier=z, rng=rng)
    info = res.diagnostics
    z1, _, z3 = ps.stage_multipliers(z)
    rel, r = info["released"], info["radius"]
    dev = X - rel["centre"]
    u = dev * np.minimum(1.0, r / np.linalg.norm(dev, axis=1, keepdims=True))
    for released, exact, sigma in (
        (rel["row_sum"], X.sum(axis=0), 2.0 * R * z1),
        (rel["deviation_sum"], u.sum(axis=0), 2.0 * r * z3),
        (rel["abs_deviation_sum"], np.abs(u).sum(axis=0), 2.0 * r * z3),
    ):
        noise = (released - exact) / sigma
        assert stats.kstest(noise, "norm").pvalue > 1e-3
        assert np.std(noise) == pytest.approx(1.0, abs=5.0 / math.sqrt(d))


# ----------------------------------------------------------------- the estimates and the map
def test_estimates_find_the_columns_at_large_epsilon_and_pool_at_small():
    X, _ = _offcentre(n=20_000, d=8)
    D = as_design(X, 1.0)
    mean, mad = X.mean(axis=0), np.abs(X - X.mean(axis=0)).mean(axis=0)
    res = ps.fit(D, data_norm=1.0, noise_multiplier=0.5, rng=np.random.default_rng(0))
    np.testing.assert_allclose(res.location, mean, atol=0.15 * mad.min())
    np.testing.assert_allclose(res.scale, mad, rtol=0.15)
    assert res.diagnostics["shrinkage"][0] > 0.9  # the columns' own means
    tiny = ps.fit(D, data_norm=1.0, noise_multiplier=500.0, rng=np.random.default_rng(0))
    assert tiny.diagnostics["shrinkage"][0] < 0.2  # the noise dominates: the pooled mean
    assert np.all(tiny.scale > 0) and np.all(np.isfinite(tiny.location))
    # (no claim on the spread of tiny.location: at z = 500 the step-3 correction is
    # noise, and its spread is the noise's — 0.85 of the columns' in median over seeds
    # 0–29, before and after the histogram's counts were clipped at zero)


@pytest.mark.parametrize("k", [1, 3])
def test_unscaled_theta_gives_the_same_margins_on_the_original_rows(k):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 5)) / 5
    m, s = rng.normal(size=5) * 0.1, rng.uniform(0.1, 1.0, size=5)
    theta = rng.normal(size=(6,) if k == 1 else (6, k))
    rows = np.hstack([X, np.full((40, 1), 0.5)])
    mapped = ps.affine_map(m, s, True, 2.5)(rows.copy())
    back = ps.unscale_theta(theta, m, s, 2.5, 0.5)
    np.testing.assert_allclose(rows @ back, mapped @ theta, rtol=1e-12, atol=1e-12)
    with pytest.raises(InvalidPrivacyParameter, match="intercept"):
        ps.unscale_theta(theta, m, s, 2.5, None)


def test_the_data_is_not_modified_and_only_read():
    X, y = _offcentre(n=800)
    before = X.copy()
    X.setflags(write=False)  # a write would raise
    clf = DPLogisticRegression(
        epsilon=2.0, classes=[-1, 1], feature_scaling="private", random_state=0
    ).fit(X, y)
    np.testing.assert_array_equal(X, before)
    assert clf.coef_.shape == (1, 6)


# ----------------------------------------------------------------- the estimator
@pytest.mark.parametrize("k", [2, 3])
def test_private_scaling_fits_what_the_public_rows_cannot(k):
    """Rows near one corner of a generous bound: the public features fit at the base
    rate, the privately scaled ones well above (issue #36); one event, ε spent."""
    X, y = _offcentre(seed=3, n=4000, k=k)
    classes = [-1, 1] if k == 2 else [0, 1, 2]
    Xt, yt = _offcentre(seed=4, n=2000, k=k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = DPLogisticRegression(epsilon=1.0, classes=classes, random_state=0).fit(X, y)
    scaled = DPLogisticRegression(
        epsilon=1.0, classes=classes, feature_scaling="private", random_state=0
    ).fit(X, y)
    assert scaled.score(Xt, yt) > plain.score(Xt, yt) + 0.1
    assert scaled.score(Xt, yt) > (0.85 if k == 2 else 0.7)
    assert isinstance(scaled.dp_event_, Composed) and scaled.epsilon_ == 1.0
    assert scaled.auto_.settings["feature_scaling"] == "private"
    info = scaled.diagnostics_["feature_scaling"]
    assert info["share"] == pytest.approx(0.3 / math.sqrt(k - 1))
    assert "feature_scaling='private'" in scaled.auto_.reason


def test_a_noisy_histogram_never_collapses_the_radius_at_small_n():
    """n = 200 at ε = 0.5: the histogram's noise (σ ≈ 30 a bin) is of the order of n/2, and
    its cumulative sum from the empty large-radius bins was a random walk that could cross
    n/2 only far below the data's median — a radius 10⁻⁴ of the true one, hence scales
    of 10⁻⁴ and coefficients of 10⁶ in about 12 % of the fits.  Counts clipped at zero
    (post-processing) make the walk monotone: the radius may be overestimated, never
    collapsed."""
    radius_ratio, largest_coef = [], []
    for seed in range(40):
        X, y = _offcentre(seed=seed, n=200)
        true = np.median(np.linalg.norm(X - X.mean(axis=0), axis=1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = DPLogisticRegression(
                epsilon=0.5, classes=[-1, 1], feature_scaling="private", random_state=seed
            ).fit(X, y)
        radius_ratio.append(model.diagnostics_["feature_scaling"]["median_distance"] / true)
        largest_coef.append(np.abs(model.coef_).max())
    assert min(radius_ratio) > 0.5, min(radius_ratio)
    assert max(largest_coef) < 1e3, max(largest_coef)


def test_feature_scaling_errors_name_the_parameter():
    X, y = _offcentre(n=300)
    with pytest.raises(UnknownNameError, match="feature_scaling"):
        DPLogisticRegression(feature_scaling="maybe", classes=[-1, 1]).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="feature_scaling"):
        DPLogisticRegression(feature_scaling="private", mechanism="objective", classes=[-1, 1]).fit(
            X, y
        )
    with pytest.raises(InvalidPrivacyParameter, match="replace-one"):
        ps.plan("private", None, 1.0, 1e-6, "add-remove")
    # rows not clipped to the bound the noise is calibrated for: refused, not released
    rng = np.random.default_rng(0)
    for design in (as_design(5.0 * X), as_design(X, 2.0)):
        with pytest.raises(InvalidPrivacyParameter, match="clipped to data_norm"):
            ps.fit(design, data_norm=1.0, noise_multiplier=1.0, rng=rng)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        ps.plan("private", None, None, 1e-6, "replace-one")
    with pytest.raises(InvalidPrivacyParameter, match="scaling_share"):
        ps.plan("private", 1.5, 1.0, 1e-6, "replace-one")
    with pytest.raises(InvalidPrivacyParameter, match="intercept"):
        dp_sgd.fit(
            Softmax(2), as_design(X, 1.0), (y > 0).astype(int), epsilon=1.0, delta=1e-6,
            data_norm=1.0, neighbouring="replace-one", batch_size=30, epochs=1,
            feature_scaling="private",
        )  # fmt: skip


# ----------------------------------------------------------------- dperm fit --csv
def test_dperm_fit_csv_scales_privately_by_default(tmp_path):
    """``dperm fit --csv`` (logistic, auto) finds the columns' scale privately: the share
    is reported, ``--feature-scaling public`` turns it off, and another model refuses it
    by name (one line, exit 2)."""
    import json

    from typer.testing import CliRunner

    from dperm.cli import app

    X, y = _offcentre(seed=5, n=600)
    lines = ["a,b,c,d,e,f,label"] + [
        ",".join(f"{v:.5f}" for v in row) + f",{int(t > 0)}" for row, t in zip(X, y, strict=True)
    ]
    path = tmp_path / "corner.csv"
    path.write_text("\n".join(lines) + "\n")
    argv = ["fit", "--csv", str(path), "--target", "label", "--classes", "0,1"]
    argv += ["--epsilon", "2", "--seed", "0"]
    argv += [a for c in "abcdef" for a in ("--bounds", f"{c}=0:5")] + ["--json"]
    runner = CliRunner()
    out = json.loads(runner.invoke(app, [*argv, "--no-reference"]).stdout.splitlines()[-1])
    assert out["feature_scaling_share"] == pytest.approx(0.3)
    assert out["dp_event"]["kind"] == "Composed" and out["epsilon"] == 2.0
    off = runner.invoke(app, [*argv, "--no-reference", "--feature-scaling", "public"])
    assert json.loads(off.stdout.splitlines()[-1])["feature_scaling_share"] is None
    assert out["test_accuracy"] > json.loads(off.stdout.splitlines()[-1])["test_accuracy"]
    bad = runner.invoke(app, [*argv, "--model", "svm", "--feature-scaling", "private"])
    assert bad.exit_code == 2 and "--feature-scaling" in bad.output
