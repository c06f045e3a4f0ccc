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
    get_accountant,
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

#: the privacy target and public row bound of most fits below
TARGET = dict(epsilon=1.0, delta=1e-5, data_norm=1.0)


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


def epsilon_spent(event, delta, accountant="rdp"):
    """ε of ``event`` by a fresh accountant of the event's own neighbouring relation."""
    if isinstance(event, NonPrivate):
        return math.inf
    acc = get_accountant(accountant, neighbouring=event.neighbouring)
    return acc.compose(event).get_epsilon(delta)


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
                dataset_size=10,
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
    kw = dict(TARGET, dataset_size=300, accountant="rdp", random_state=3)
    a = dp_sgd.fit(Logistic(), X, y, **kw)
    b = dp_sgd.fit(Logistic(), X.toarray(), y, **kw)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-10, atol=1e-12)
    assert a.event == b.event


# ------------------------------------------------------------------ noise distribution
@pytest.mark.parametrize(
    ("sampling", "neighbouring", "factor"),
    [
        ("poisson", "add-remove", 1.0),
        ("poisson", "replace-one", 2.0),
        ("without_replacement", "replace-one", 2.0),
        ("shuffle", "replace-one", 2.0),
    ],
)
def test_update_with_zero_gradients_is_exactly_gaussian(sampling, neighbouring, factor):
    """All gradients 0 (rows 0): θ_T − θ_0 = −η Σ_t noise_t / m, each coordinate
    N(0, T (η z·factor·C / m)²), m = qN (Poisson) or b; factor 2 under replace-one."""
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
        neighbouring=neighbouring,
        dataset_size=n,
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


def _recorded(fit, n, *, column=1.0, noise_multiplier=1.0, learning_rate=0.1, **kw):
    """Run ``fit`` (clipping norm 1; noise multiplier 1 and learning rate 0.1 unless
    given) on X = [row index, ``column``], y = 1, with a zero per-example gradient that
    records the rows of every batch: (Result, batches)."""
    X = np.column_stack([np.arange(n, dtype=float), np.full(n, column)])
    batches = []

    def peg(theta, Xb, yb):
        batches.append(Xb[:, 0].astype(int))
        return np.zeros((Xb.shape[0], 2))

    kw.update(noise_multiplier=noise_multiplier, learning_rate=learning_rate)
    r = fit(None, X, np.ones(n), per_example_grad=peg, clipping_norm=1.0, **kw)
    return r, batches


def test_empty_poisson_batches_still_get_noise():
    n, thetas = 20, []
    _, batches = _recorded(
        dp_sgd.fit,
        n,
        column=0.0,
        sampling_rate=0.01,
        dataset_size=n,
        steps=200,
        learning_rate=1.0,
        random_state=0,
        callback=lambda t, T, th: thetas.append(th.copy()),
    )
    sizes = np.array([len(b) for b in batches])
    assert (sizes == 0).sum() > 100  # most batches are empty at q n = 0.2
    steps_moved = np.linalg.norm(np.diff(np.array(thetas), axis=0), axis=1)
    assert np.all(steps_moved > 0)  # every step, empty or not, adds fresh noise


def test_inclusion_counts_are_binomial_T_q():
    """Run the real fit with a gradient that records which rows it sees; each
    row's inclusion count over T steps must be Binomial(T, q) (chi-square)."""
    n, T, q = 400, 250, 0.08
    r, batches = _recorded(
        dp_sgd.fit,
        n,
        noise_multiplier=2.0,
        sampling_rate=q,
        dataset_size=n,
        steps=T,
        random_state=5,
    )
    assert all(len(np.unique(b)) == len(b) for b in batches)  # no repeats inside a batch
    counts = np.bincount(np.concatenate(batches), minlength=n)
    batch_sizes = [len(b) for b in batches]
    assert r.event == SelfComposed(PoissonSampled(q, Gaussian(2.0, neighbouring="add-remove")), T)
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
    r, seen = _recorded(dp_sgd.fit_single_sample, n, steps=T, random_state=2)
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
        dataset_size=n,
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
        dp_sgd.fit(
            Logistic(), X, y, **TARGET, noise_multiplier=0.0, dataset_size=400, accountant="rdp"
        )


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
        dataset_size=1000,
        batch_size=50,
        epochs=3,
        accountant="rdp",
        random_state=0,
    )
    d = r.diagnostics
    q, T, z = d["sampling_rate"], d["steps"], d["noise_multiplier"]
    assert q == pytest.approx(0.05) and T == 60
    assert r.event == SelfComposed(PoissonSampled(q, Gaussian(z, neighbouring="add-remove")), T)
    assert epsilon_spent(r.event, 1e-6) <= 0.8
    from dperm.algorithms._gradient_calibration import CALIBRATION_RTOL

    less = z * (1 - 2 * CALIBRATION_RTOL)
    looser = SelfComposed(PoissonSampled(q, Gaussian(less, neighbouring="add-remove")), T)
    assert epsilon_spent(looser, 1e-6) > 0.8  # the smallest certified noise (within rtol)
    assert d["neighbouring"] == "add-remove" and d["accountant"] == "rdp"
    assert d["sensitivity"] == d["clipping_norm"] == 1.0
    for key in ("noise_multiplier", "steps", "sampling_rate", "accountant"):
        assert key in d


def test_without_replacement_and_shuffle_events():
    X, y = _binary(n=200)
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        **TARGET,
        batch_size=20,
        steps=25,
        sampling="without_replacement",
        random_state=0,
    )
    z = r.diagnostics["noise_multiplier"]
    assert r.event == SelfComposed(SampledWithoutReplacement(20, 200, Gaussian(z)), 25)
    assert r.diagnostics["sensitivity"] == pytest.approx(2.0)  # replace-one: 2C
    r = dp_sgd.fit(
        Logistic(), X, y, **TARGET, batch_size=30, steps=13, sampling="shuffle", random_state=0
    )
    z = r.diagnostics["noise_multiplier"]
    # ⌊200/30⌋ = 6 batches per epoch → 13 steps touch 3 epochs; one Gaussian per epoch
    assert r.event == SelfComposed(Gaussian(z, neighbouring="replace-one"), 3)
    assert r.diagnostics["accountant"] == "pld"  # the tightest that supports the event
    assert epsilon_spent(r.event, 1e-5, accountant="pld") <= 1.0
    # fixed-size batches: the PLD of pld_dense.fixed_size_gaussian_pld (the default),
    # tighter than RDP's bound (Wang, Balle, Kasiviswanathan 2019)
    runs = {
        acc: dp_sgd.fit(
            Logistic(),
            X,
            y,
            **TARGET,
            batch_size=20,
            steps=5,
            sampling="without_replacement",
            accountant=acc,
            random_state=0,
        )
        for acc in ("pld", "rdp")
    }
    z_pld, z_rdp = (runs[a].diagnostics["noise_multiplier"] for a in ("pld", "rdp"))
    assert z_pld < z_rdp and epsilon_spent(runs["pld"].event, 1e-5, accountant="pld") <= 1.0


def test_pld_calibration_is_certified_by_pld():
    X, y = _binary(n=500)
    r = dp_sgd.fit(
        Logistic(),
        X,
        y,
        epsilon=0.3,  # σ ≈ 3: PLD evaluations are fast there
        delta=1e-5,
        data_norm=1.0,
        dataset_size=500,
        batch_size=25,
        steps=10,
        random_state=0,
    )
    z = r.diagnostics["noise_multiplier"]
    assert epsilon_spent(r.event, 1e-5, accountant="pld") <= 0.3 + 1e-9
    looser = SelfComposed(PoissonSampled(0.05, Gaussian(0.995 * z, neighbouring="add-remove")), 10)
    assert epsilon_spent(looser, 1e-5, accountant="pld") > 0.3  # smallest certified noise
    assert r.diagnostics["accountant"] == "pld"


def test_given_noise_multiplier_must_meet_target():
    X, y = _binary()
    kw = dict(
        data_norm=1.0, batch_size=40, steps=100, delta=1e-5, dataset_size=400, accountant="rdp"
    )
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
        (dict(dataset_size=0), "dataset_size"),
        (dict(dataset_size=2.5), "dataset_size"),
        (dict(dataset_size=None), "dataset_size"),
        (dict(dataset_size=None, sampling_rate=0.1, steps=3, learning_rate=0.1), "dataset_size"),
        (dict(neighbouring="replace-one", dataset_size=99), "dataset_size"),
        (dict(neighbouring="add-remove", sampling="shuffle", batch_size=10), "replace-one"),
        (dict(sampling="without_replacement", neighbouring="add-remove"), "replace-one"),
    ],
)
def test_bad_input_raises_specific_errors(kwargs, match):
    X, y = _binary(n=100)
    base = dict(TARGET, dataset_size=100, random_state=0)
    base.update(kwargs)
    with pytest.raises(InvalidPrivacyParameter, match=match):
        dp_sgd.fit(Logistic(), X, y, **base)


def test_bad_names_and_missing_bounds():
    X, y = _binary(n=100)
    kw = dict(epsilon=1.0, delta=1e-5, dataset_size=100)
    with pytest.raises(UnknownNameError, match="sampling"):
        dp_sgd.fit(Logistic(), X, y, data_norm=1.0, sampling="shuffled", **kw)
    with pytest.raises(UnknownNameError, match="accountant"):
        dp_sgd.fit(Logistic(), X, y, data_norm=1.0, accountant="rpd", **kw)
    with pytest.raises(UnknownNameError, match="averaging"):
        dp_sgd.fit(Logistic(), X, y, data_norm=1.0, averaging="mean", **kw)
    with pytest.raises(InvalidPrivacyParameter, match="neighbouring"):
        dp_sgd.fit(Logistic(), X, y, data_norm=1.0, neighbouring="add-remove-two", **kw)
    with pytest.raises(InvalidPrivacyParameter, match="clipping_norm"):
        dp_sgd.fit(Logistic(), X, y, **kw)  # no data_norm, no C
    with pytest.raises(InvalidPrivacyParameter, match="epsilon and delta"):
        dp_sgd.fit(Logistic(), X, y, data_norm=1.0, dataset_size=100)
    with pytest.raises(InvalidPrivacyParameter, match="radius"):  # squared loss: no L
        dp_sgd.fit(Squared(), X, np.clip(X[:, 0], -1, 1), data_norm=1.0, **kw)
    with pytest.raises(InvalidPrivacyParameter, match="replace-one"):  # no add/remove law
        dp_sgd.fit_single_sample(Logistic(), X, y, data_norm=1.0, neighbouring="add-remove")


# ------------------------------------------------------------ post-processing options
def test_projection_regularizer_momentum_and_averaging():
    X, y = _binary(4, n=300)
    kw = dict(
        epsilon=2.0, delta=1e-5, data_norm=1.0, dataset_size=300, accountant="rdp", random_state=1
    )
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
    kw = dict(
        epsilon=1.0, delta=1e-6, data_norm=1.0, dataset_size=n, accountant="rdp", random_state=0
    )
    r = dp_sgd.fit(Softmax(k), X, y, **kw)
    assert r.theta.shape == (d, k)
    assert np.mean(np.argmax(X @ r.theta, axis=1) == y) > 0.8
    assert r.diagnostics["clipping_norm"] == pytest.approx(math.sqrt(2))  # L of softmax
    rs = dp_sgd.fit(Softmax(k), sp.csr_matrix(X), y, **kw)
    np.testing.assert_allclose(rs.theta, r.theta, rtol=1e-10, atol=1e-12)


def test_rows_above_data_norm_are_clipped_and_counted():
    X, y = _binary(n=100)
    X = X.copy()
    X[:7] *= 5.0
    with pytest.warns(ClippingWarning):
        r = dp_sgd.fit(Logistic(), X, y, **TARGET, dataset_size=100, accountant="rdp")
    assert r.diagnostics["n_clipped"] == 7


def test_defaults_follow_the_documented_rule():
    h = dp_sgd.default_hyperparameters(10_000, 20, 0.1, clipping_norm=1.0, smoothness=0.25)
    assert h == {"batch_size": 100, "epochs": 2, "learning_rate": 4.0}
    assert dp_sgd.default_hyperparameters(100, 2, 5.0, clipping_norm=2.0)["epochs"] == 10
    assert dp_sgd.default_hyperparameters(100, 2, 5.0, clipping_norm=2.0)["learning_rate"] == 0.25
    X, y = _binary(n=2500)
    kw = dict(epsilon=0.5, delta=1e-6, data_norm=1.0, random_state=0)
    d = dp_sgd.fit(Logistic(), X, y, neighbouring="replace-one", **kw).diagnostics
    assert d["batch_size"] == 50 and d["steps"] == 150  # b = √n, 3 epochs = 3/q steps
    assert d["learning_rate"] <= 4.0
    # under add/remove the rule reads the public size, never X.shape[0]
    d = dp_sgd.fit(Logistic(), X, y, dataset_size=10_000, accountant="rdp", **kw).diagnostics
    assert d["batch_size"] == 100 and d["sampling_rate"] == 0.01 and d["steps"] == 300
    assert d["normalizer"] == 100 and d["dataset_size"] == 10_000


def test_progress_bar_and_estimator_registration():
    from dperm.estimators import DPLogisticRegression
    from dperm.estimators._mechanisms import available_mechanisms

    X, y = _binary(n=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rich may warn about a missing terminal
        r = dp_sgd.fit(
            Logistic(),
            X,
            y,
            **TARGET,
            dataset_size=300,
            accountant="rdp",
            progress=True,
            random_state=0,
        )
    assert r.diagnostics["steps"] > 0
    assert {"dp-gd", "dp-sgd", "dp-sgd-single"} <= set(available_mechanisms())
    for mech in ("dp-sgd", "dp-sgd-single", "dp-gd"):
        clf = DPLogisticRegression(
            epsilon=1.0, mechanism=mech, classes=[-1, 1], random_state=0
        ).fit(X, y)
        acc = clf.diagnostics_["accountant"]
        assert acc == "pld"  # fixed-size batches (dp-sgd-single) included
        assert clf.diagnostics_["neighbouring"] == clf.dp_event_.neighbouring == "replace-one"
        assert epsilon_spent(clf.dp_event_, clf.delta_, accountant=acc) <= 1.0 + 1e-9
        assert clf.diagnostics_["mechanism"] == mech
        assert clf.alpha_ == 0.0
    clf = DPLogisticRegression(
        epsilon=1.0, mechanism="dp-sgd", epochs=3, batch_size=20, classes=[-1, 1], random_state=0
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
        **TARGET,
        dataset_size=500,
        accountant="rdp",
        alpha=0.1,
        schedule="inverse_time",
        random_state=0,
    )
    assert r.diagnostics["schedule"].startswith("InverseTime")
    assert np.all(np.isfinite(r.theta))


@pytest.mark.parametrize("sampling", ["without_replacement", "shuffle"])
def test_fixed_size_batches_are_exact_and_uniform(sampling):
    n, b, T = 60, 12, 400
    _, batches = _recorded(dp_sgd.fit, n, batch_size=b, steps=T, sampling=sampling, random_state=8)
    assert all(len(B) == b == len(np.unique(B)) for B in batches)
    counts = np.bincount(np.concatenate(batches), minlength=n)
    assert stats.chisquare(counts).pvalue > 1e-3
    if sampling == "shuffle":  # n/b = 5 batches per epoch: each epoch is a partition
        for e in range(T // 5):
            epoch = np.concatenate(batches[5 * e : 5 * e + 5])
            np.testing.assert_array_equal(np.sort(epoch), np.arange(n))


# ------------------------------------------- issue #10: public constants, relations
_CONSTANTS = (
    "sampling_rate",
    "batch_size",
    "steps",
    "epochs",
    "noise_multiplier",
    "noise_std",
    "sensitivity",
    "normalizer",
    "dataset_size",
    "learning_rate",
    "schedule",
    "delta",
    "epsilon",
    "epsilon_spent",
    "accountant",
    "neighbouring",
)


def _copies(n):
    """n copies of (e₁, +1): the add/remove pair of the issue is (_copies(100), _copies(101))."""
    return np.tile([[1.0, 0.0]], (n, 1)), np.ones(n)


def test_add_remove_constants_are_functions_of_public_inputs_only():
    """D = 100 copies of (e₁, +1), D′ = 101 copies: with neighbouring="add-remove"
    and a public dataset_size every constant of the run (q, b, T, z, σ, δ, the
    normaliser, the learning rate) is identical on D and D′, and the event too."""
    kw = dict(TARGET, neighbouring="add-remove", dataset_size=100)
    runs = [dp_sgd.fit(Hinge(), *_copies(n), random_state=0, **kw) for n in (100, 101)]
    a, b = (r.diagnostics for r in runs)
    assert {k: a[k] for k in _CONSTANTS} == {k: b[k] for k in _CONSTANTS}
    assert runs[0].event == runs[1].event
    assert runs[0].event.neighbouring == a["neighbouring"] == "add-remove"
    assert a["normalizer"] == pytest.approx(a["sampling_rate"] * 100)
    assert a["batch_size"] == 16 and a["steps"] == 25  # b = max(16, √100), E = 4 epochs
    # a default that needs a size, without dataset_size: a specific error naming it
    for n in (100, 101):
        with pytest.raises(InvalidPrivacyParameter, match="dataset_size"):
            dp_sgd.fit(Hinge(), *_copies(n), **TARGET)
        with pytest.raises(InvalidPrivacyParameter, match="dataset_size"):
            dp_sgd.fit(
                Hinge(),
                *_copies(n),
                **TARGET,
                neighbouring="add-remove",
                sampling_rate=0.1,
                steps=5,
                learning_rate=0.1,
            )


def test_add_remove_runs_differ_only_by_the_added_row(monkeypatch):
    """Spy on the sampler: with the same seed, D and D′ = D + one row draw the same
    Bernoulli inclusions for the shared rows and the same noise, so the released
    θ differ by exactly η/(q·N) · (number of steps that sampled the new row) · e₁
    (hinge loss in its linear region: every sampled row contributes −e₁).  A
    normaliser, q, T or σ read off X.shape[0] would change every step."""
    seen = {}
    orig = gl.PoissonSampler.batches

    def spy(self, rng, steps):
        out = seen.setdefault(self.n, [])
        for idx in orig(self, rng, steps):
            out.append(np.arange(self.n) if idx is None else np.asarray(idx))
            yield idx

    monkeypatch.setattr(gl.PoissonSampler, "batches", spy)
    eta = 1e-3
    kw = dict(
        **TARGET,
        learning_rate=eta,
        neighbouring="add-remove",
        dataset_size=100,
        accountant="rdp",
        random_state=2024,
    )
    r100 = dp_sgd.fit(Hinge(), *_copies(100), **kw)
    r101 = dp_sgd.fit(Hinge(), *_copies(101), **kw)
    T = r100.diagnostics["steps"]
    assert len(seen[100]) == len(seen[101]) == T
    for b100, b101 in zip(seen[100], seen[101], strict=True):
        np.testing.assert_array_equal(b101[b101 < 100], b100)  # shared rows coincide
    k = sum(int(100 in b) for b in seen[101])
    assert k >= 1  # the seed makes the new row appear (else the test would be vacuous)
    m = r100.diagnostics["normalizer"]
    assert m == pytest.approx(r100.diagnostics["sampling_rate"] * 100)
    assert np.abs(r100.theta[0]) < 0.5  # margins stayed in the hinge's linear region
    np.testing.assert_allclose(r101.theta - r100.theta, [eta * k / m, 0.0], atol=1e-12)


def test_add_remove_normaliser_is_the_public_size_not_the_row_count():
    """σ = 0 replay: 100 rows, public dataset_size = 1000; the update is
    η/(q·1000) Σ_t |B_t| e₁ — dividing by q·X.shape[0] would be 10× larger."""
    sizes = []

    def peg(theta, Xb, yb):
        sizes.append(Xb.shape[0])
        return -Xb.copy()  # every sampled row's gradient is −e₁, norm 1

    eta, q = 0.01, 0.1
    r = dp_sgd.fit(
        None,
        *_copies(100),
        per_example_grad=peg,
        clipping_norm=1.0,
        noise_multiplier=0.0,
        sampling_rate=q,
        steps=7,
        learning_rate=eta,
        neighbouring="add-remove",
        dataset_size=1000,
        random_state=3,
    )
    assert r.diagnostics["normalizer"] == pytest.approx(100.0)
    assert sum(sizes) > 0
    np.testing.assert_allclose(r.theta, [eta * sum(sizes) / (q * 1000), 0.0], rtol=1e-12)


def test_replace_one_poisson_is_accounted_by_the_replace_one_pld():
    X, y = _binary(n=400)
    kw = dict(TARGET, batch_size=40, steps=20, random_state=0)
    r = dp_sgd.fit(Logistic(), X, y, neighbouring="replace-one", **kw)
    d = r.diagnostics
    z = d["noise_multiplier"]
    assert r.event == SelfComposed(PoissonSampled(0.1, Gaussian(z, neighbouring="replace-one")), 20)
    assert d["accountant"] == "pld" and d["neighbouring"] == "replace-one"
    assert d["sensitivity"] == pytest.approx(2.0)  # 2C
    assert d["normalizer"] == pytest.approx(40.0) and d["dataset_size"] == 400  # n public
    assert d["noise_std"] == pytest.approx(z * 2.0 / 40.0)
    # the same noise std under add/remove is a smaller ε: the relations differ
    ar = SelfComposed(PoissonSampled(0.1, Gaussian(2 * z, neighbouring="add-remove")), 20)
    assert epsilon_spent(ar, 1e-5, accountant="pld") < 0.9 * d["epsilon_spent"]
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        dp_sgd.fit(Logistic(), X, y, neighbouring="replace-one", accountant="rdp", **kw)


def test_estimator_dp_sgd_epsilon_is_the_replace_one_epsilon_of_dp_accounting():
    """Issue #10 (2): recompute the estimator's ε with dp-accounting's PLD under
    REPLACE_ONE on an independently built event.  dp-accounting's replace-one
    Gaussian with ``noise_multiplier`` m compares N(−1, m²)-mixtures with
    N(+1, m²)-mixtures: the per-record vector has norm 1 (our C) and the two
    records differ by 2.  So m = (noise std on the clipped sum) / C =
    (noise_std on the average · normaliser) / C — not the std over 2C."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import pld_privacy_accountant

    from dperm.estimators import DPLogisticRegression

    X, y = _binary(7, n=2000)
    clf = DPLogisticRegression(
        epsilon=1.0, mechanism="dp-sgd", classes=[-1, 1], random_state=0
    ).fit(X, y)
    d = clf.diagnostics_
    assert d["neighbouring"] == clf.dp_event_.neighbouring == "replace-one"
    assert d["accountant"] == "pld"
    m = d["noise_std"] * d["normalizer"] / d["clipping_norm"]
    if d["clipping"] == "adaptive":  # the count of unclipped examples shares the step
        # (Andrew et al. 2021): one Gaussian mechanism on (sum/C, centred count/½) —
        # every record's pair lies in the unit ball around 0 (the count enters as ±½) —
        # so m⁻² = (noise on the sum / C)⁻² + (noise on the count / ½)⁻²
        m = (m**-2 + (2.0 * d["count_noise_std"]) ** -2) ** -0.5
    acc = pld_privacy_accountant.PLDAccountant(NeighboringRelation.REPLACE_ONE)
    acc.compose(
        dp_event.PoissonSampledDpEvent(d["sampling_rate"], dp_event.GaussianDpEvent(m)),
        d["steps"],
    )
    eps = acc.get_epsilon(clf.delta_)
    assert eps <= clf.epsilon_ * (1 + 1e-6)
    assert eps >= 0.95 * clf.epsilon_  # tight, not a loose over-noising
    # RDP stays selectable: fixed-size batches without replacement (WBK bound)
    clf = DPLogisticRegression(
        epsilon=1.0, mechanism="dp-sgd", accountant="rdp", classes=[-1, 1], random_state=0
    ).fit(X, y)
    assert isinstance(clf.dp_event_.event, SampledWithoutReplacement)
    assert clf.diagnostics_["accountant"] == "rdp"
    assert epsilon_spent(clf.dp_event_, clf.delta_, accountant="rdp") <= 1.0 + 1e-9
