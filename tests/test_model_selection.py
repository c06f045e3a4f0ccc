"""Tests of dperm.model_selection: the laws of K, the Papernot–Steinke and
Liu–Talwar bounds (closed forms and dp-accounting as an independent
implementation), calibration round trips and the private search itself."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln
from sklearn.linear_model import LogisticRegression

from dperm import DPLogisticRegression
from dperm.accounting import Ledger, analytic_gaussian_noise_multiplier
from dperm.accounting.events import EpsilonDelta, Gaussian, PureEpsilon
from dperm.accounting.rdp import DEFAULT_ORDERS, rdp_gaussian
from dperm.exceptions import (
    InvalidPrivacyParameter,
    UnknownNameError,
    UnsupportedEventError,
    UnsupportedOperationError,
)
from dperm.model_selection import (
    Poisson,
    PrivateRandomSearch,
    TruncatedNegativeBinomial,
    calibrate_run_epsilon,
    liu_talwar_guarantee,
    rdp_poisson_repetitions,
    rdp_truncated_negative_binomial,
    search_epsilon,
)

ORDERS = np.asarray(DEFAULT_ORDERS)


# ------------------------------------------------------------------ laws of K
@pytest.mark.parametrize("eta", [-0.5, 0.0, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("mean", [1.5, 10.0])
def test_tnb_pmf_sums_to_one_and_has_the_declared_mean(eta, mean):
    law = TruncatedNegativeBinomial.from_mean(eta, mean)
    k = np.arange(1, 400_000)
    p = np.exp(law.logpmf(k))
    assert math.isclose(p.sum(), 1.0, rel_tol=1e-6)
    assert math.isclose((k * p).sum(), mean, rel_tol=1e-5)
    assert math.isclose(law.mean(), mean, rel_tol=1e-9)
    assert law.logpmf(0) == -np.inf


def test_tnb_special_cases_closed_forms():
    g = 0.2
    k = np.arange(1, 30)
    geo = TruncatedNegativeBinomial(1.0, g)  # geometric on {1, 2, ...}
    np.testing.assert_allclose(np.exp(geo.logpmf(k)), g * (1 - g) ** (k - 1), rtol=1e-12)
    log = TruncatedNegativeBinomial(0.0, g)  # logarithmic law
    np.testing.assert_allclose(
        np.exp(log.logpmf(k)), (1 - g) ** k / (k * math.log(1 / g)), rtol=1e-12
    )
    eta = 2.5  # Definition 1 directly: (1-γ)^k/(γ^{-η}-1) · Γ(k+η)/(Γ(η) k!)
    want = (1 - g) ** k / (g**-eta - 1) * np.exp(gammaln(k + eta) - gammaln(eta) - gammaln(k + 1))
    np.testing.assert_allclose(np.exp(TruncatedNegativeBinomial(eta, g).logpmf(k)), want, 1e-12)


@pytest.mark.parametrize(
    "law",
    [
        TruncatedNegativeBinomial.from_mean(0.0, 6.0),
        TruncatedNegativeBinomial.from_mean(-0.5, 6.0),
        TruncatedNegativeBinomial.from_mean(1.0, 6.0),
        TruncatedNegativeBinomial.from_mean(2.0, 6.0),
        Poisson(6.0),
    ],
)
def test_sampler_follows_the_declared_law_chi2(law):
    rng = np.random.default_rng(12345)
    n = 4000
    draws = np.array([law.sample(rng) for _ in range(n)])
    lo = 0 if isinstance(law, Poisson) else 1
    k = np.arange(lo, 200)
    p = np.exp(law.logpmf(k))
    # bins with expected count ≥ 5, the rest pooled into one tail bin
    keep = n * p >= 5
    last = int(k[keep][-1])
    observed = np.array([*(np.sum(draws == j) for j in k[keep]), np.sum(draws > last)], float)
    expected = np.append(n * p[keep], n * (1.0 - p[keep].sum()))
    assert expected[-1] >= 5
    _, pval = stats.chisquare(observed, expected)
    assert pval > 1e-3


def test_bad_laws_are_refused():
    with pytest.raises(InvalidPrivacyParameter):
        TruncatedNegativeBinomial(-1.0, 0.5)
    with pytest.raises(InvalidPrivacyParameter):
        TruncatedNegativeBinomial(1.0, 1.0)
    with pytest.raises(InvalidPrivacyParameter):
        TruncatedNegativeBinomial.from_mean(1.0, 1.0)
    with pytest.raises(InvalidPrivacyParameter):
        Poisson(0.0)


# ------------------------------------------------------------------ RDP theorems
@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0, 2.0])
def test_tnb_bound_for_pure_base_matches_the_closed_form(eta):
    """Q is ε-DP, read as ρ(λ) = ε at every order.  Theorem 2's λ̂-term
    (1−1/λ̂)ε + log(1/γ)/λ̂ is then decreasing in λ̂ (log(1/γ) > ε), so it is
    smallest at the largest order Λ, and ε'(λ) = ε + (1+η)(ε + (log(1/γ) − ε)/Λ)
    + log E[K]/(λ − 1) is decreasing in λ: after monotonicity every order gets
    the value at Λ, which tends to (2 + η)ε: Papernot & Steinke's Corollary 3
    (3ε for the geometric law)."""
    eps = 0.3
    law = TruncatedNegativeBinomial.from_mean(eta, 10.0)
    big = ORDERS.max()
    lg = math.log(1 / law.gamma)
    assert lg > eps
    got = rdp_truncated_negative_binomial(ORDERS, np.full(ORDERS.shape, eps), eta, law.gamma)
    want = eps + (1 + eta) * (eps + (lg - eps) / big) + math.log(law.mean()) / (big - 1)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert abs(want - (2 + eta) * eps) < 2e-3


def test_tnb_bound_two_orders_by_hand():
    sigma = 2.0
    a = np.array([2.0, 8.0])
    r = a / (2 * sigma**2)
    eta, gamma = 0.5, 0.1
    mean = eta * (1 - gamma) / (gamma * (1 - gamma**eta))
    c = (1 + eta) * min(
        (1 - 1 / lh) * rh - math.log(gamma) / lh for lh, rh in zip(a, r, strict=True)
    )
    want = r + c + math.log(mean) / (a - 1)
    want = np.minimum(want, want[::-1].min())  # monotonicity in the order
    got = rdp_truncated_negative_binomial(a, r, eta, gamma)
    np.testing.assert_allclose(got, [min(want[0], want[1]), want[1]], rtol=1e-12)


dpa_event = pytest.importorskip("dp_accounting.dp_event")
dpa_rdp = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")


def _dp_accounting_rdp(sigma, mean, shape):
    acc = dpa_rdp.RdpAccountant(list(ORDERS))
    acc.compose(dpa_event.RepeatAndSelectDpEvent(dpa_event.GaussianDpEvent(sigma), mean, shape))
    return np.asarray(acc._rdp)


@pytest.mark.parametrize("sigma", [1.0, 4.0])
@pytest.mark.parametrize(("shape", "mean"), [(0.0, 20.0), (0.5, 7.0), (1.0, 10.0), (2.0, 5.0)])
def test_tnb_matches_dp_accounting(sigma, shape, mean):
    """Independent implementation: dp-accounting 0.6's RepeatAndSelectDpEvent."""
    law = TruncatedNegativeBinomial.from_mean(shape, mean)
    mine = law.rdp(ORDERS, rdp_gaussian(sigma, ORDERS))
    theirs = _dp_accounting_rdp(sigma, mean, shape)
    np.testing.assert_allclose(mine, theirs, rtol=1e-8)  # γ found by bisection in both


@pytest.mark.parametrize("sigma", [1.0, 4.0])
@pytest.mark.parametrize("mu", [3.0, 10.0])
def test_poisson_matches_dp_accounting_plus_monotonicity(sigma, mu):
    """dp-accounting applies Theorem 6 order by order; we also apply the
    monotonicity of RDP in the order, which can only lower the values."""
    mine = rdp_poisson_repetitions(ORDERS, rdp_gaussian(sigma, ORDERS), mu)
    theirs = _dp_accounting_rdp(sigma, mu, np.inf)
    closed = np.minimum.accumulate(theirs[::-1])[::-1]
    np.testing.assert_allclose(mine, closed, rtol=1e-9)
    assert np.all(mine <= theirs * (1 + 1e-12))


@pytest.mark.parametrize("rep", ["truncated_negative_binomial", "geometric", "poisson"])
def test_search_epsilon_is_monotone(rep):
    runs = [0.05, 0.1, 0.3, 1.0]
    eps = [search_epsilon(e, 1e-6, repetitions=rep, mean_runs=10) for e in runs]
    assert all(b > a for a, b in itertools.pairwise(eps))
    means = [3.0, 10.0, 30.0]
    by_mean = [search_epsilon(0.2, 1e-6, repetitions=rep, mean_runs=m) for m in means]
    assert all(b > a for a, b in itertools.pairwise(by_mean))
    # selecting is never cheaper than one run (the base curve alone)
    assert eps[1] > 0.1


@pytest.mark.parametrize("rep", ["truncated_negative_binomial", "geometric", "poisson"])
@pytest.mark.parametrize("target", [0.5, 2.0])
def test_calibration_round_trip(rep, target):
    e = calibrate_run_epsilon(target, 1e-7, repetitions=rep, mean_runs=8, eta=0.5)
    got = search_epsilon(e, 1e-7, repetitions=rep, mean_runs=8, eta=0.5)
    assert got <= target
    assert got >= target * (1 - 1e-4)


def test_liu_talwar_closed_form():
    eps, tot_delta, cap = liu_talwar_guarantee(0.2, 1e-12, 0.1, 1e-7)
    assert cap == math.ceil(math.log(1e7) / 0.1)
    assert math.isclose(eps, 0.6 + 3 * math.sqrt(2e-12))
    assert math.isclose(tot_delta, math.sqrt(2e-12) * cap + 1e-7)
    assert liu_talwar_guarantee(0.2, 0.0, 0.5, 1e-3)[:2] == (pytest.approx(0.6), 1e-3)
    with pytest.raises(InvalidPrivacyParameter):
        liu_talwar_guarantee(0.2, 1e-9, 0.0, 1e-3)


def _best_of_capped_geometric(p, order, gamma, cap):
    """Exact law of the best-scored output of min(K, cap) runs, K ~ Geometric(γ) on
    {1, 2, …}, for a base mechanism with finite output law ``p`` and scores
    increasing along ``order``: P(best ≤ j) = E[F(j)^K]."""
    k = np.arange(1, cap + 1)
    pk = gamma * (1 - gamma) ** (k - 1)
    pk[-1] = (1 - gamma) ** (cap - 1)  # the cap takes the tail
    cdf = np.cumsum(p[order])
    F = (pk[None, :] * cdf[:, None] ** k[None, :]).sum(axis=1)
    out = np.empty_like(p)
    out[order] = np.diff(np.concatenate([[0.0], F]))
    return out


@pytest.mark.parametrize(("eps1", "d1", "gamma"), [(0.3, 1e-6, 0.1), (1.0, 1e-4, 0.3)])
def test_liu_talwar_guarantee_holds_on_worst_case_base_mechanisms(eps1, d1, gamma):
    """An independent check of the restated Theorem 3.4: base mechanisms built from
    the canonical (ε₁, δ₁) pair (every (ε₁, δ₁)-DP pair is a post-processing of it),
    each atom split in two with random shares and every output scored in a random
    order; the exact law of the capped random-stopping selection never has a
    hockey-stick divergence above the claimed δ at the claimed ε."""
    eps_t, delta_t, cap = liu_talwar_guarantee(eps1, d1, gamma, 1e-3)
    e = math.exp(eps1)
    p = np.array([d1, (1 - d1) * e / (1 + e), (1 - d1) / (1 + e), 0.0])
    q = p[::-1].copy()
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(100):
        share = rng.uniform(size=4)
        P, Q = (
            np.concatenate([p * share, p * (1 - share)]),
            np.concatenate([q * share, q * (1 - share)]),
        )
        order = rng.permutation(8)
        sp = _best_of_capped_geometric(P, order, gamma, cap)
        sq = _best_of_capped_geometric(Q, order, gamma, cap)
        assert sp.sum() == pytest.approx(1.0) and sq.sum() == pytest.approx(1.0)
        for a, b in ((sp, sq), (sq, sp)):
            worst = max(worst, float(np.maximum(a - math.exp(eps_t) * b, 0.0).sum()))
    assert worst <= delta_t


@pytest.mark.parametrize(
    ("shape", "rep"),
    [(0.0, "truncated_negative_binomial"), (1.0, "geometric"), (np.inf, "poisson")],
)
def test_search_epsilon_end_to_end_matches_dp_accounting(shape, rep):
    """Gaussian runs with a negligible score (ε_s tiny: its Laplace curve lies
    below the Gaussian's, so max(·) is the Gaussian): the whole pipeline
    (base curve, Theorem 2/6, conversion) against dp-accounting."""
    sigma = analytic_gaussian_noise_multiplier(0.5, 1e-8)
    mine = search_epsilon(
        0.5,
        1e-8,
        repetitions=rep,
        mean_runs=10,
        eta=0.0,
        run_event=_gaussian_run,
        run_delta=1e-8,
        score_epsilon=1e-4,
    )
    acc = dpa_rdp.RdpAccountant(list(ORDERS))
    acc.compose(dpa_event.RepeatAndSelectDpEvent(dpa_event.GaussianDpEvent(sigma), 10, shape))
    assert mine == pytest.approx(acc.get_epsilon(1e-8), rel=1e-8)


def _gaussian_run(e, d):
    return Gaussian(analytic_gaussian_noise_multiplier(e, d))


# ------------------------------------------------------------------ the search
def _data(seed, n=3000, d=5):
    rng = np.random.default_rng(seed)
    w = np.array([3.0, -2.0, 1.0, 0.0, 0.5])[:d]
    X = rng.normal(size=(n, d))
    X *= 0.999 / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1, 0)
    return X, y


SPACE = {"alpha": [1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0]}


def test_search_event_budget_and_release():
    X, y = _data(0)
    base = DPLogisticRegression(classes=[0, 1])
    s = PrivateRandomSearch(base, SPACE, epsilon=1.0, delta=1e-6, random_state=1).fit(X, y)
    assert s.accounting_ == "papernot-steinke"
    assert isinstance(s.dp_event_, EpsilonDelta)
    assert s.epsilon_ <= 1.0 and s.delta_ == 1e-6
    assert getattr(s.dp_event_, "neighbouring", "replace-one") == "replace-one"
    best = s.best_estimator_
    assert best.dp_event_ == s.dp_event_
    assert best.run_dp_event_ == PureEpsilon(s.run_epsilon_)
    assert s.best_params_["alpha"] in SPACE["alpha"]
    diag = s.search_diagnostics_
    assert len(diag["configs"]) == len(diag["noisy_scores"]) == diag["n_runs"] >= 1
    assert s.best_score_ == max(diag["noisy_scores"])
    ledger = Ledger(epsilon=1.0, delta=1e-6, accountant="basic")
    assert ledger.spend(s.dp_event_, "search") <= 1.0
    np.testing.assert_array_equal(s.predict(X[:10]), best.predict(X[:10]))


def test_liu_talwar_search():
    X, y = _data(1)
    base = DPLogisticRegression(classes=[0, 1])
    s = PrivateRandomSearch(
        base, SPACE, epsilon=1.0, delta=1e-6, repetitions="geometric", run_delta="auto"
    )
    s.set_params(random_state=2).fit(X, y)
    assert s.accounting_ == "liu-talwar"
    assert s.epsilon_ <= 1.0 + 1e-12 and s.delta_ <= 1e-6 * (1 + 1e-9)
    assert 0 < s.run_delta_ < 1e-15
    assert isinstance(s.best_estimator_.run_dp_event_, EpsilonDelta)


def test_gaussian_runs_described_by_run_event():
    X, y = _data(5)
    base = DPLogisticRegression(classes=[0, 1], mechanism="output")
    s = PrivateRandomSearch(
        base, SPACE, epsilon=1.0, delta=1e-6, run_event=_gaussian_run, random_state=3
    ).fit(X, y)
    assert s.accounting_ == "papernot-steinke"
    assert s.run_delta_ == 1e-6 and s.score_epsilon_ == pytest.approx(s.run_epsilon_ / 4)
    assert s.best_estimator_.run_dp_event_ == _gaussian_run(s.run_epsilon_, 1e-6)
    assert s.epsilon_ <= 1.0
    # Gaussian runs are cheaper in RDP than ε-DP runs: a larger per-run ε
    assert s.run_epsilon_ > calibrate_run_epsilon(1.0, 1e-6)
    # a run_event that does not describe the runs (objective perturbation's
    # Gaussian path is only (ε, δ)-DP: no RDP curve) is refused
    bad = PrivateRandomSearch(
        base.set_params(mechanism="objective"),
        SPACE,
        epsilon=1.0,
        delta=1e-6,
        run_event=_gaussian_run,
        random_state=3,
    )
    with pytest.raises(UnsupportedEventError):
        bad.fit(X, y)


def test_selected_model_beats_the_median_configuration():
    """Output perturbation with a tiny Λ has a huge sensitivity 2L/(nΛ): such
    configurations are near chance, the large-Λ ones are good."""
    X, y = _data(2, n=6000)
    Xt, yt = _data(3, n=4000)
    space = {"mechanism": ["output"], "alpha": [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]}
    base = DPLogisticRegression(classes=[0, 1])
    s = PrivateRandomSearch(
        base, space, epsilon=1.0, delta=1e-6, repetitions="geometric", mean_runs=8, random_state=4
    ).fit(X, y)
    assert s.search_diagnostics_["n_runs"] >= 2
    # every configuration at the same per-run budget on the same rows
    accs = [
        DPLogisticRegression(classes=[0, 1], mechanism="output", alpha=a, delta=0.0)
        .set_params(epsilon=s.run_epsilon_, random_state=10 + i)
        .fit(X, y)
        .score(Xt, yt)
        for i, a in enumerate(space["alpha"])
    ]
    assert np.max(accs) - np.min(accs) > 0.2  # the space has good and bad configurations
    assert s.score(Xt, yt) > np.median(accs)


def test_poisson_zero_runs_releases_nothing():
    X, y = _data(0, n=200)
    base = DPLogisticRegression(classes=[0, 1])
    s = PrivateRandomSearch(
        base, SPACE, epsilon=1.0, delta=1e-6, repetitions="poisson", mean_runs=1e-3
    )
    s.set_params(random_state=0).fit(X, y)
    assert s.search_diagnostics_["n_runs"] == 0
    assert s.best_estimator_ is None
    with pytest.raises(UnsupportedOperationError):
        s.predict(X)


class _LeakyLogistic(DPLogisticRegression):
    """Claims more than the per-run curve: an (ε, δ>0) event for a pure run."""

    def fit(self, X, y):
        super().fit(X, y)
        self.dp_event_ = EpsilonDelta(self.epsilon, 1e-5)
        return self


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"epsilon": 0.0}, InvalidPrivacyParameter),
        ({"epsilon": -1.0}, InvalidPrivacyParameter),
        ({"delta": 0.0}, InvalidPrivacyParameter),
        ({"param_distributions": {}}, InvalidPrivacyParameter),
        ({"param_distributions": {"alpha": []}}, InvalidPrivacyParameter),
        ({"param_distributions": {"epsilon": [1.0, 2.0]}}, InvalidPrivacyParameter),
        ({"param_distributions": {"no_such": [1]}}, InvalidPrivacyParameter),
        ({"repetitions": "uniform"}, UnknownNameError),
        ({"run_delta": 1e-9}, InvalidPrivacyParameter),  # needs the geometric law
        ({"validation_fraction": 0.0}, InvalidPrivacyParameter),
        ({"validation_fraction": 1.0}, InvalidPrivacyParameter),
        ({"mean_runs": 1.0}, InvalidPrivacyParameter),
        ({"estimator": LogisticRegression()}, UnsupportedEventError),
        ({"estimator": _LeakyLogistic(classes=[0, 1])}, UnsupportedEventError),
    ],
)
def test_bad_input_is_refused(kwargs, exc):
    X, y = _data(0, n=300)
    params = {"estimator": DPLogisticRegression(classes=[0, 1]), "param_distributions": SPACE}
    params.update(kwargs)
    est = params.pop("estimator")
    space = params.pop("param_distributions")
    with pytest.raises(exc):
        PrivateRandomSearch(est, space, random_state=0, **params).fit(X, y)


def test_cli_tune_reports_the_whole_search():
    from dperm.cli import run_fit
    from dperm.model_selection import DEFAULT_ALPHA_GRID

    out = run_fit(dataset="breast-cancer", epsilon=1.0, seed=0, tune=True, mechanism="objective")
    assert out["tuned"]["alpha"] in DEFAULT_ALPHA_GRID
    assert out["dp_event"]["kind"] == "EpsilonDelta"
    assert out["epsilon"] == out["dp_event"]["epsilon"] <= 1.0
    assert "tuned" not in run_fit(dataset="breast-cancer", epsilon=1.0, seed=0)


def test_tuning_search_routes_and_refusals():
    from dperm.model_selection import tuning_search

    assert tuning_search(DPLogisticRegression(mechanism="output")).run_delta is None
    sgd = tuning_search(DPLogisticRegression(mechanism="dp-sgd"))
    assert (sgd.repetitions, sgd.run_delta) == ("geometric", "auto")
    with pytest.raises(InvalidPrivacyParameter):
        tuning_search(DPLogisticRegression(mechanism="amp-nt"))


def test_continuous_distributions_are_sampled_within_their_support():
    X, y = _data(6, n=1500)
    space = {"alpha": stats.loguniform(1e-4, 1e-1), "mechanism": ["objective", "output"]}
    s = PrivateRandomSearch(
        DPLogisticRegression(classes=[0, 1]),
        space,
        epsilon=1.0,
        delta=1e-6,
        repetitions="geometric",
        mean_runs=4,
        random_state=7,
    ).fit(X, y)
    alphas = [c["alpha"] for c in s.search_diagnostics_["configs"]]
    assert all(1e-4 <= a <= 1e-1 for a in alphas)
    assert len(set(alphas)) == len(alphas)  # fresh draws, not a grid


@pytest.mark.parametrize(
    ("mechanism", "multi_class", "route"),
    [
        ("objective", "multinomial", {"run_delta": 0.0}),
        ("output", "multinomial", {"run_delta": 0.0}),
        ("amp", "multinomial", {"repetitions": "geometric", "run_delta": "auto"}),
        ("dp-sgd", "multinomial", {"repetitions": "geometric", "run_delta": "auto"}),
        ("dp-sgd", "ovr", {"repetitions": "geometric", "run_delta": "auto"}),
    ],
)
def test_search_works_with_the_multinomial_and_gradient_mechanisms(mechanism, multi_class, route):
    """Every run's event is certified (pure: its RDP; (ε, δ): basic, PLD for the
    replace-one Poisson events of DP-SGD, RDP) and the search's ε is the target."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1500, 3))
    X *= 0.95 / np.linalg.norm(X, axis=1).max()
    y = np.argmax(X @ rng.normal(size=(3, 3)) * 6, axis=1)
    space = {"alpha": ["auto"]} if mechanism in ("amp", "objective", "output") else {
        "epochs": [1, 2]}  # fmt: skip
    base = DPLogisticRegression(mechanism=mechanism, multi_class=multi_class, classes=[0, 1, 2])
    s = PrivateRandomSearch(base, space, epsilon=3.0, delta=1e-6, mean_runs=2.0, random_state=0,
                            **route).fit(X, y)  # fmt: skip
    assert s.epsilon_ <= 3.0 * (1 + 1e-9) and s.delta_ <= 1e-6 * (1 + 1e-9)
    assert s.best_estimator_.dp_event_ == s.dp_event_
    if multi_class == "multinomial":
        assert s.best_estimator_.coef_.shape == (3, 3)


def test_tuning_search_refuses_amp():
    from dperm.model_selection import tuning_search

    with pytest.raises(InvalidPrivacyParameter, match="nothing to tune"):
        tuning_search(DPLogisticRegression(mechanism="amp"))
