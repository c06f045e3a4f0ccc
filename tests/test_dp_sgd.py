"""Tests of mini-batch and single-sample DP-SGD and the shared gradient loop."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dperm.accounting import (
    Gaussian,
    NonPrivate,
    PoissonSampled,
    SampledWithoutReplacement,
    SelfComposed,
    epsilon_spent,
)
from dperm.algorithms import _gradient_loop as gl
from dperm.algorithms import dp_sgd
from dperm.constraints import L2Ball
from dperm.exceptions import (
    ClippingWarning,
    InvalidDataError,
    InvalidPrivacyParameter,
    UnknownNameError,
    UnsupportedEventError,
)
from dperm.losses import Hinge, HuberSVM, Logistic, Softmax, Squared
from dperm.regularizers import L1


def _binary(seed=0, n=400, d=5, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X *= 0.999 / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    w = rng.normal(size=d)
    y = np.where(X @ w + 0.1 * rng.normal(size=n) > 0, 1.0, -1.0)
    if sparse:
        X[rng.random((n, d)) < 0.5] = 0.0
        X = sp.csr_matrix(X)
    return X, y


# --------------------------------------------------------------------------- fast paths
shapes = st.tuples(st.integers(0, 10_000), st.integers(1, 15), st.integers(1, 6), st.booleans())
glm_losses = st.sampled_from([Logistic(), HuberSVM(0.3), Hinge(), Squared(label_bound=3.0)])


@settings(max_examples=30, deadline=None)
@given(shapes, glm_losses, st.floats(0.01, 10.0))
def test_glm_clipped_sum_equals_loop_over_examples(args, loss, clipping_norm):
    seed, n, d, sparse = args
    rng = np.random.default_rng(seed)
    Xd = rng.normal(size=(n, d)) * rng.uniform(0.1, 3.0)
    if sparse:
        Xd[rng.random((n, d)) < 0.5] = 0.0
    X = sp.csr_matrix(Xd) if sparse else Xd
    y = (
        rng.uniform(-3, 3, size=n)
        if isinstance(loss, Squared)
        else np.where(rng.random(n) < 0.5, -1.0, 1.0)
    )
    theta = rng.normal(size=d)
    expected = np.zeros(d)
    for i in range(n):  # independent: the gradient of a one-row dataset, clipped by hand
        g = loss.gradient(theta, Xd[i : i + 1], y[i : i + 1])
        nrm = np.linalg.norm(g)
        expected += g if nrm <= clipping_norm else g * (clipping_norm / nrm)
    xnorms = np.linalg.norm(Xd, axis=1)
    got = gl.glm_clipped_sum(loss, theta, X, y, xnorms, clipping_norm)
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-12)
    # per-example gradients of the loss agree with the one-row loop as well
    G = loss.per_example_gradients(theta, X, y)
    for i in range(n):
        np.testing.assert_allclose(
            G[i], loss.gradient(theta, Xd[i : i + 1], y[i : i + 1]), atol=1e-13
        )


@settings(max_examples=20, deadline=None)
@given(shapes, st.floats(0.01, 10.0))
def test_generic_clipped_sum_equals_loop(args, clipping_norm):
    seed, n, d, _ = args
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    theta = rng.normal(size=d)
    loss = Logistic()
    got = gl.generic_clipped_sum(loss.per_example_gradients, theta, X, y, clipping_norm)
    expected = gl.glm_clipped_sum(loss, theta, X, y, np.linalg.norm(X, axis=1), clipping_norm)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)


def test_generic_path_rejects_wrong_shapes_and_zeroes_nonfinite_rows():
    X, y = _binary(n=10, d=3)
    theta = np.zeros(3)
    for bad in (lambda t, Xb, yb: np.zeros((Xb.shape[0], 4)), lambda t, Xb, yb: np.zeros(3)):
        with pytest.raises(InvalidDataError, match="per_example_grad"):
            gl.generic_clipped_sum(bad, theta, X, y, 1.0)
        with pytest.raises(InvalidDataError, match="per_example_grad"):
            dp_sgd.fit(
                None,
                X,
                y,
                per_example_grad=bad,
                clipping_norm=1.0,
                noise_multiplier=1.0,
                batch_size=5,
                steps=2,
                learning_rate=0.1,
                random_state=0,
            )

    def nan_first(t, Xb, yb):
        G = np.ones((Xb.shape[0], 3))
        if Xb.shape[0]:
            G[0, 1] = np.nan
        return G

    got = gl.generic_clipped_sum(nan_first, theta, X, y, 10.0)
    np.testing.assert_allclose(got, np.full(3, 9.0))  # the NaN row contributes 0


def test_dense_and_sparse_runs_are_identical():
    X, y = _binary(1, n=300, d=6, sparse=True)
    kw = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, random_state=3)
    a = dp_sgd.fit(Logistic(), X, y, **kw)
    b = dp_sgd.fit(Logistic(), X.toarray(), y, **kw)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-10, atol=1e-12)
    assert a.event == b.event


# ------------------------------------------------------------------ noise distribution
@pytest.mark.parametrize(
    ("sampling", "factor"), [("poisson", 1.0), ("without_replacement", 2.0), ("shuffle", 2.0)]
)
def test_update_with_zero_gradients_is_exactly_gaussian(sampling, factor):
    """All gradients 0 (rows 0): θ_T − θ_0 = −η Σ_t noise_t / m, each coordinate
    N(0, T (η z·factor·C / m)²), m = qn (Poisson) or b."""
    n, d, steps, C, z, eta = 100, 4000, 3, 0.7, 1.3, 0.5
    X = np.zeros((n, d))
    y = np.ones(n)
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        noise_multiplier=z,
        clipping_norm=C,
        batch_size=20,
        steps=steps,
        learning_rate=eta,
        sampling=sampling,
        random_state=11,
    )
    m = 20.0
    sd = math.sqrt(steps) * eta * z * factor * C / m
    assert r.diagnostics["noise_std"] == pytest.approx(z * factor * C / m)
    sample = r.theta / sd
    # KS test at level 1e-3 (fixed seed); moments with tolerances from the sample size
    assert stats.kstest(sample, "norm").pvalue > 1e-3
    assert abs(sample.mean()) < 4.0 / math.sqrt(d)
    assert abs(sample.var(ddof=1) - 1.0) < 4.0 * math.sqrt(2.0 / (d - 1))


def test_empty_poisson_batches_still_get_noise():
    n = 20
    X = np.column_stack([np.arange(n, dtype=float), np.zeros(n)])
    y = np.ones(n)
    sizes, thetas = [], []

    def peg(theta, Xb, yb):
        sizes.append(Xb.shape[0])
        return np.zeros((Xb.shape[0], 2))

    dp_sgd.fit(
        None,
        X,
        y,
        per_example_grad=peg,
        clipping_norm=1.0,
        noise_multiplier=1.0,
        sampling_rate=0.01,
        steps=200,
        learning_rate=1.0,
        random_state=0,
        callback=lambda t, T, th: thetas.append(th.copy()),
    )
    sizes = np.array(sizes)
    assert (sizes == 0).sum() > 100  # most batches are empty at q n = 0.2
    steps_moved = np.linalg.norm(np.diff(np.array(thetas), axis=0), axis=1)
    assert np.all(steps_moved > 0)  # every step, empty or not, adds fresh noise


def test_inclusion_counts_are_binomial_T_q():
    """Run the real fit with a gradient that records which rows it sees; each
    row's inclusion count over T steps must be Binomial(T, q) (chi-square)."""
    n, T, q = 400, 250, 0.08
    X = np.column_stack([np.arange(n, dtype=float), np.ones(n)])
    y = np.ones(n)
    counts = np.zeros(n, dtype=int)
    batch_sizes = []

    def peg(theta, Xb, yb):
        idx = Xb[:, 0].astype(int)
        assert len(np.unique(idx)) == len(idx)  # no repeats inside a Poisson batch
        counts[idx] += 1
        batch_sizes.append(len(idx))
        return np.zeros((Xb.shape[0], 2))

    r = dp_sgd.fit(
        None,
        X,
        y,
        per_example_grad=peg,
        clipping_norm=1.0,
        noise_multiplier=2.0,
        sampling_rate=q,
        steps=T,
        learning_rate=0.1,
        random_state=5,
    )
    assert r.event == SelfComposed(PoissonSampled(q, Gaussian(2.0)), T)
    # chi-square goodness of fit of the n counts to Binomial(T, q), bins with E ≥ 5
    edges = np.arange(0, T + 2)
    pmf = stats.binom.pmf(edges[:-1], T, q)
    obs = np.bincount(counts, minlength=T + 1)
    big = np.flatnonzero(n * pmf >= 5)
    lo, hi = big[0] + 1, big[-1]  # pool each tail into one bin of expectation ≥ 5
    o = np.concatenate([[obs[:lo].sum()], obs[lo:hi], [obs[hi:].sum()]])
    e = n * np.concatenate([[pmf[:lo].sum()], pmf[lo:hi], [pmf[hi:].sum()]])
    assert e.min() >= 5
    assert stats.chisquare(o, e).pvalue > 1e-3
    # batch sizes are Binomial(n, q): mean within 4 standard errors
    bs = np.array(batch_sizes)
    assert abs(bs.mean() - n * q) < 4 * math.sqrt(n * q * (1 - q) / T)


def test_single_sample_draws_one_uniform_index_per_step():
    n, T = 50, 5000
    X = np.column_stack([np.arange(n, dtype=float), np.ones(n)])
    y = np.ones(n)
    seen = []

    def peg(theta, Xb, yb):
        seen.append(Xb[:, 0].astype(int))
        return np.zeros((Xb.shape[0], 2))

    r = dp_sgd.fit_single_sample(
        None,
        X,
        y,
        per_example_grad=peg,
        clipping_norm=1.0,
        noise_multiplier=1.0,
        steps=T,
        learning_rate=0.1,
        random_state=2,
    )
    seen = np.concatenate(seen)
    assert seen.shape == (T,)
    assert stats.chisquare(np.bincount(seen, minlength=n)).pvalue > 1e-3
    assert r.event == SelfComposed(SampledWithoutReplacement(1, n, Gaussian(1.0)), T)
    assert r.diagnostics["neighbouring"] == "replace-one"
    assert r.diagnostics["sensitivity"] == pytest.approx(2.0)


# ------------------------------------------------------------------- degenerate limits
def test_zero_noise_and_huge_clipping_reproduce_nonprivate_minibatch_sgd():
    X, y = _binary(2, n=120, d=4)
    n, b, T, eta = 120, 30, 12, 0.8
    loss = Logistic()
    r = dp_sgd.fit(
        loss,
        X,
        y,
        noise_multiplier=0.0,
        clipping_norm=1e12,
        batch_size=b,
        steps=T,
        learning_rate=eta,
        sampling="shuffle",
        random_state=9,
    )
    # independent replay: the same permutations, plain mini-batch SGD
    sample_rng, _ = np.random.default_rng(9).spawn(2)
    theta = np.zeros(4)
    t = 0
    while t < T:
        perm = sample_rng.permutation(n)
        for j in range(min(n // b, T - t)):
            idx = perm[j * b : (j + 1) * b]
            theta = theta - eta * loss.gradient(theta, X[idx], y[idx])
            t += 1
    np.testing.assert_allclose(r.theta, theta, rtol=1e-12, atol=1e-14)
    assert r.event == NonPrivate()
    assert epsilon_spent(r.event, 1e-5) == math.inf
    # q = 1 Poisson sampling with σ = 0 is gradient descent
    r = dp_sgd.fit(
        loss,
        X,
        y,
        noise_multiplier=0.0,
        clipping_norm=1e12,
        sampling_rate=1.0,
        steps=T,
        learning_rate=eta,
        delta=1e-5,
    )
    theta = np.zeros(4)
    for _ in range(T):
        theta = theta - eta * loss.gradient(theta, X, y)
    np.testing.assert_allclose(r.theta, theta, rtol=1e-12)
    assert r.diagnostics["epsilon_spent"] == math.inf


def test_zero_noise_cannot_meet_a_target_epsilon():
    X, y = _binary()
    with pytest.raises(InvalidPrivacyParameter, match="epsilon=inf"):
        dp_sgd.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5, noise_multiplier=0.0, data_norm=1.0)


# --------------------------------------------------------------- calibration & events
def test_calibrated_poisson_event_is_tight_and_certified():
    X, y = _binary(n=1000)
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        epsilon=0.8,
        delta=1e-6,
        data_norm=1.0,
        batch_size=50,
        epochs=3,
        random_state=0,
    )
    d = r.diagnostics
    q, T, z = d["sampling_rate"], d["steps"], d["noise_multiplier"]
    assert q == pytest.approx(0.05) and T == 60
    assert r.event == SelfComposed(PoissonSampled(q, Gaussian(z)), T)
    assert epsilon_spent(r.event, 1e-6) <= 0.8
    looser = SelfComposed(PoissonSampled(q, Gaussian(z * 0.999)), T)
    assert epsilon_spent(looser, 1e-6) > 0.8  # the smallest certified noise (rtol 1e-4)
    assert d["neighbouring"] == "add-remove-one" and d["accountant"] == "rdp"
    assert d["sensitivity"] == d["clipping_norm"] == 1.0
    for key in ("noise_multiplier", "steps", "sampling_rate", "accountant"):
        assert key in d


def test_without_replacement_and_shuffle_events():
    X, y = _binary(n=200)
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        epsilon=1.0,
        delta=1e-5,
        data_norm=1.0,
        batch_size=20,
        steps=25,
        sampling="without_replacement",
        random_state=0,
    )
    z = r.diagnostics["noise_multiplier"]
    assert r.event == SelfComposed(SampledWithoutReplacement(20, 200, Gaussian(z)), 25)
    assert r.diagnostics["sensitivity"] == pytest.approx(2.0)  # replace-one: 2C
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        epsilon=1.0,
        delta=1e-5,
        data_norm=1.0,
        batch_size=30,
        steps=13,
        sampling="shuffle",
        random_state=0,
    )
    z = r.diagnostics["noise_multiplier"]
    # ⌊200/30⌋ = 6 batches per epoch → 13 steps touch 3 epochs; one Gaussian per epoch
    assert r.event == SelfComposed(Gaussian(z), 3)
    assert epsilon_spent(r.event, 1e-5) <= 1.0
    with pytest.raises(UnsupportedEventError):  # PLD has no without-replacement event
        dp_sgd.fit(
            Logistic(),
            X,
            y,
            epsilon=1.0,
            delta=1e-5,
            data_norm=1.0,
            batch_size=20,
            steps=5,
            sampling="without_replacement",
            accountant="pld",
        )


def test_pld_calibration_is_certified_by_pld():
    X, y = _binary(n=500)
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        epsilon=0.3,  # σ ≈ 3: PLD evaluations are fast there
        delta=1e-5,
        data_norm=1.0,
        batch_size=25,
        steps=10,
        accountant="pld",
        random_state=0,
    )
    z = r.diagnostics["noise_multiplier"]
    assert epsilon_spent(r.event, 1e-5, accountant="pld") <= 0.3 + 1e-9
    looser = SelfComposed(PoissonSampled(0.05, Gaussian(0.995 * z)), 10)
    assert epsilon_spent(looser, 1e-5, accountant="pld") > 0.3  # smallest certified noise
    assert r.diagnostics["accountant"] == "pld"


def test_given_noise_multiplier_must_meet_target():
    X, y = _binary()
    kw = dict(data_norm=1.0, batch_size=40, steps=100, delta=1e-5)
    with pytest.raises(InvalidPrivacyParameter, match="more than the target epsilon"):
        dp_sgd.fit(Logistic(), X, y, epsilon=0.1, noise_multiplier=0.5, **kw)
    r = dp_sgd.fit(Logistic(), X, y, epsilon=10.0, noise_multiplier=2.0, random_state=0, **kw)
    assert r.diagnostics["epsilon_spent"] <= 10.0


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(sampling_rate=0.0), "sampling_rate"),
        (dict(sampling_rate=1.5), "sampling_rate"),
        (dict(sampling_rate=-0.1), "sampling_rate"),
        (dict(sampling_rate=float("nan")), "sampling_rate"),
        (dict(steps=0), "steps"),
        (dict(steps=-3), "steps"),
        (dict(epochs=0), "epochs"),
        (dict(clipping_norm=0.0), "clipping_norm"),
        (dict(clipping_norm=-1.0), "clipping_norm"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(learning_rate=-0.5), "learning_rate"),
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=10_000), "batch_size"),
        (dict(sampling_rate=0.1, batch_size=10), "not both"),
        (dict(steps=10, epochs=2), "not both"),
        (dict(momentum=1.0), "momentum"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.5), "delta"),
        (dict(noise_multiplier=-1.0, epsilon=None), "noise_multiplier"),
    ],
)
def test_bad_input_raises_specific_errors(kwargs, match):
    X, y = _binary(n=100)
    base = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, random_state=0)
    base.update(kwargs)
    with pytest.raises(InvalidPrivacyParameter, match=match):
        dp_sgd.fit(Logistic(), X, y, **base)


def test_bad_names_and_missing_bounds():
    X, y = _binary(n=100)
    with pytest.raises(UnknownNameError, match="sampling"):
        dp_sgd.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5, data_norm=1.0, sampling="shuffled")
    with pytest.raises(UnknownNameError, match="accountant"):
        dp_sgd.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5, data_norm=1.0, accountant="rpd")
    with pytest.raises(UnknownNameError, match="averaging"):
        dp_sgd.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5, data_norm=1.0, averaging="mean")
    with pytest.raises(InvalidPrivacyParameter, match="clipping_norm"):
        dp_sgd.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5)  # no data_norm, no C
    with pytest.raises(InvalidPrivacyParameter, match="epsilon and delta"):
        dp_sgd.fit(Logistic(), X, y, data_norm=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="radius"):  # squared loss: no L
        dp_sgd.fit(Squared(), X, np.clip(X[:, 0], -1, 1), epsilon=1.0, delta=1e-5, data_norm=1.0)


# ------------------------------------------------------------ post-processing options
def test_projection_regularizer_momentum_and_averaging():
    X, y = _binary(4, n=300)
    kw = dict(epsilon=2.0, delta=1e-5, data_norm=1.0, random_state=1)
    r = dp_sgd.fit(Logistic(), X, y, constraint=L2Ball(0.3), **kw)
    assert np.linalg.norm(r.theta) <= 0.3 + 1e-12
    r = dp_sgd.fit(Logistic(), X, y, regularizer=L1(5.0), learning_rate=1.0, **kw)
    assert np.count_nonzero(r.theta) < X.shape[1]  # the prox step creates exact zeros
    a = dp_sgd.fit(Logistic(), X, y, momentum=0.5, averaging="tail", **kw)
    b = dp_sgd.fit(Logistic(), X, y, momentum=0.5, averaging="tail", **kw)
    np.testing.assert_array_equal(a.theta, b.theta)  # reproducible from random_state
    # averaging = mean of the iterates the callback sees
    iterates = []
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        averaging="uniform",
        steps=15,
        batch_size=30,
        callback=lambda t, T, th: iterates.append(th.copy()),
        **kw,
    )
    np.testing.assert_allclose(r.theta, np.mean(iterates, axis=0), atol=1e-13)


def test_softmax_model_through_dp_sgd():
    rng = np.random.default_rng(0)
    n, d, k = 3000, 4, 3
    centers = rng.normal(size=(k, d)) * 2
    y = rng.integers(0, k, size=n)
    X = centers[y] + rng.normal(size=(n, d)) * 0.5
    X *= 0.999 / np.linalg.norm(X, axis=1, keepdims=True)
    r = dp_sgd.fit(Softmax(k), X, y, epsilon=1.0, delta=1e-6, data_norm=1.0, random_state=0)
    assert r.theta.shape == (d, k)
    assert np.mean(np.argmax(X @ r.theta, axis=1) == y) > 0.8
    assert r.diagnostics["clipping_norm"] == pytest.approx(math.sqrt(2))  # L of softmax
    rs = dp_sgd.fit(
        Softmax(k), sp.csr_matrix(X), y, epsilon=1.0, delta=1e-6, data_norm=1.0, random_state=0
    )
    np.testing.assert_allclose(rs.theta, r.theta, rtol=1e-10, atol=1e-12)


def test_rows_above_data_norm_are_clipped_and_counted():
    X, y = _binary(n=100)
    X = X.copy()
    X[:7] *= 5.0
    with pytest.warns(ClippingWarning):
        r = dp_sgd.fit(Logistic(), X, y, epsilon=1.0, delta=1e-5, data_norm=1.0, random_state=0)
    assert r.diagnostics["n_clipped"] == 7


def test_defaults_follow_the_documented_rule():
    h = dp_sgd.default_hyperparameters(10_000, 20, 0.1, clipping_norm=1.0, smoothness=0.25)
    assert h == {"batch_size": 100, "epochs": 2, "learning_rate": 4.0}
    assert dp_sgd.default_hyperparameters(100, 2, 5.0, clipping_norm=2.0)["epochs"] == 10
    assert dp_sgd.default_hyperparameters(100, 2, 5.0, clipping_norm=2.0)["learning_rate"] == 0.25
    X, y = _binary(n=2500)
    r = dp_sgd.fit(Logistic(), X, y, epsilon=0.5, delta=1e-6, data_norm=1.0, random_state=0)
    d = r.diagnostics
    assert d["batch_size"] == 50 and d["steps"] == 150  # b = √n, 3 epochs = 3/q steps
    assert d["learning_rate"] <= 4.0


def test_progress_bar_and_estimator_registration():
    from dperm.estimators import DPLogisticRegression
    from dperm.estimators._mechanisms import available_mechanisms

    X, y = _binary(n=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rich may warn about a missing terminal
        r = dp_sgd.fit(
            Logistic(), X, y, epsilon=1.0, delta=1e-5, data_norm=1.0, progress=True, random_state=0
        )
    assert r.diagnostics["steps"] > 0
    assert {"dp-gd", "dp-sgd", "dp-sgd-single"} <= set(available_mechanisms())
    for mech in ("dp-sgd", "dp-sgd-single", "dp-gd"):
        clf = DPLogisticRegression(epsilon=1.0, mechanism=mech, random_state=0).fit(X, y)
        assert epsilon_spent(clf.dp_event_, clf.delta_) <= 1.0 + 1e-9
        assert clf.diagnostics_["mechanism"] == mech
        assert clf.alpha_ == 0.0
    clf = DPLogisticRegression(
        epsilon=1.0, mechanism="dp-sgd", epochs=3, batch_size=20, random_state=0
    ).fit(X, y)
    assert clf.diagnostics_["batch_size"] == 20
    assert clf.diagnostics_["steps"] == 45


def test_schedules():
    from dperm.schedules import Constant, InverseSqrt, InverseTime, get_schedule

    assert get_schedule("constant", 0.5)(7) == 0.5 and Constant(0.5).is_constant
    assert get_schedule("inverse_sqrt", 0.5)(4) == pytest.approx(0.25)
    s = get_schedule("inverse_time", 2.0, strong_convexity=0.1)
    assert s(1) == 2.0 and s(100) == pytest.approx(0.1)  # min(cap, 1/(α t))
    assert InverseTime(0.5)(4) == pytest.approx(0.5) and InverseSqrt(1.0)(9) == pytest.approx(1 / 3)
    assert get_schedule(lambda t: 1.0 / t)(4) == 0.25
    assert get_schedule(0.3)(10) == 0.3
    with pytest.raises(UnknownNameError, match="schedule"):
        get_schedule("cosine", 0.1)
    with pytest.raises(InvalidPrivacyParameter, match="strong_convexity"):
        get_schedule("inverse_time", 0.1)
    with pytest.raises(InvalidPrivacyParameter, match="learning rate returned"):
        get_schedule(lambda t: -1.0)(1)
    with pytest.raises(InvalidPrivacyParameter, match="learning_rate"):
        Constant(float("inf"))
    # a strongly convex objective (α > 0) with the 1/(α t) schedule converges privately
    X, y = _binary(6, n=500)
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        epsilon=1.0,
        delta=1e-5,
        data_norm=1.0,
        alpha=0.1,
        schedule="inverse_time",
        random_state=0,
    )
    assert r.diagnostics["schedule"].startswith("InverseTime")
    assert np.all(np.isfinite(r.theta))


@pytest.mark.parametrize("sampling", ["without_replacement", "shuffle"])
def test_fixed_size_batches_are_exact_and_uniform(sampling):
    n, b, T = 60, 12, 400
    X = np.column_stack([np.arange(n, dtype=float), np.ones(n)])
    batches = []

    def peg(theta, Xb, yb):
        batches.append(Xb[:, 0].astype(int))
        return np.zeros((Xb.shape[0], 2))

    dp_sgd.fit(
        None,
        X,
        np.ones(n),
        per_example_grad=peg,
        clipping_norm=1.0,
        noise_multiplier=1.0,
        batch_size=b,
        steps=T,
        learning_rate=0.1,
        sampling=sampling,
        random_state=8,
    )
    assert all(len(B) == b == len(np.unique(B)) for B in batches)
    counts = np.bincount(np.concatenate(batches), minlength=n)
    assert stats.chisquare(counts).pvalue > 1e-3
    if sampling == "shuffle":  # n/b = 5 batches per epoch: each epoch is a partition
        for e in range(T // 5):
            epoch = np.concatenate(batches[5 * e : 5 * e + 5])
            np.testing.assert_array_equal(np.sort(epoch), np.arange(n))
