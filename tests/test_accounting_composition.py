"""Basic, advanced and optimal composition against worked examples by hand."""

from __future__ import annotations

import math

import pytest

from dperm.accounting import (
    AdvancedCompositionAccountant,
    BasicCompositionAccountant,
    Composed,
    EpsilonDelta,
    Gaussian,
    Laplace,
    NonPrivate,
    NoOp,
    OptimalCompositionAccountant,
    PoissonSampled,
    PureEpsilon,
    SelfComposed,
    get_accountant,
    kov_optimal_delta,
)
from dperm.exceptions import UnknownNameError, UnsupportedEventError


# ------------------------------------------------------------------- basic
def test_basic_sums_epsilon_and_delta():
    acc = BasicCompositionAccountant()
    acc.compose(PureEpsilon(0.5)).compose(EpsilonDelta(0.25, 1e-6), count=3)
    acc.compose(Laplace(4.0))  # ε = 1/b = 0.25
    acc.compose(Composed((NoOp(), PureEpsilon(0.125))))
    assert acc.get_epsilon(1e-5) == pytest.approx(0.5 + 0.75 + 0.25 + 0.125)
    assert acc.get_epsilon(3e-6) == pytest.approx(1.625)
    assert acc.get_epsilon(2.9e-6) == math.inf  # δ budget below Σδ
    assert acc.get_delta(1.625) == pytest.approx(3e-6)
    assert acc.get_delta(1.6) == 1.0
    assert len(acc.events) == 4


def test_basic_rounds_up_and_is_exact_on_representable_sums():
    acc = BasicCompositionAccountant().compose(EpsilonDelta(0.1, 1e-6), count=10)
    assert acc.get_epsilon(1e-5) >= 1.0 - 1e-15
    assert acc.delta_sum >= 10 * 1e-6 * (1 - 1e-15)


def test_basic_nonprivate_and_gaussian():
    acc = BasicCompositionAccountant().compose(PureEpsilon(1.0)).compose(NonPrivate())
    assert acc.get_epsilon(0.1) == math.inf
    with pytest.raises(UnsupportedEventError, match="rdp"):
        BasicCompositionAccountant().compose(Gaussian(1.0))
    with pytest.raises(UnsupportedEventError):
        BasicCompositionAccountant().compose(PoissonSampled(0.1, Gaussian(1.0)))
    # trivial sampling rates are exact identities
    acc = BasicCompositionAccountant().compose(PoissonSampled(1.0, PureEpsilon(0.3)))
    acc.compose(PoissonSampled(0.0, PureEpsilon(5.0)))
    assert acc.get_epsilon(0.0) == pytest.approx(0.3)


# ---------------------------------------------------------------- advanced
def test_dwork_roth_theorem_3_20_worked_example():
    # k = 100 mechanisms, each (0.1, 1e-8)-DP; target δ = 1e-5 → δ' = 1e-5 − 100·1e-8 = 9e-6
    k, eps0, d0, delta = 100, 0.1, 1e-8, 1e-5
    delta_prime = delta - k * d0  # 9e-6
    expected = math.sqrt(2 * k * math.log(1 / delta_prime)) * eps0 + k * eps0 * (math.exp(eps0) - 1)
    acc = AdvancedCompositionAccountant(bound="dwork_roth")
    acc.compose(EpsilonDelta(eps0, d0), count=k)
    assert acc.get_epsilon(delta) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(5.8721, abs=1e-3)  # √(200 ln(1/9e-6))·0.1 + 10(e^0.1 − 1)
    # basic composition wins for few mechanisms: min(kε, ...)
    acc2 = AdvancedCompositionAccountant(bound="dwork_roth").compose(PureEpsilon(1.0), count=3)
    assert acc2.get_epsilon(1e-5) == pytest.approx(3.0)
    # no slack left: δ ≤ kδ₀
    assert acc.get_epsilon(k * d0 / 2) == math.inf
    # get_delta inverts get_epsilon
    d = acc.get_delta(expected)
    assert d == pytest.approx(delta, rel=1e-9)
    assert acc.get_epsilon(d) <= expected * (1 + 1e-12)


def test_dwork_roth_refuses_heterogeneous_and_leaves_state():
    acc = AdvancedCompositionAccountant(bound="dwork_roth").compose(PureEpsilon(0.1), count=10)
    e = acc.get_epsilon(1e-5)
    assert not acc.supports(PureEpsilon(0.2))
    with pytest.raises(UnsupportedEventError, match="kov"):
        acc.compose(PureEpsilon(0.2))
    assert acc.get_epsilon(1e-5) == e
    assert acc.supports(NonPrivate())  # ε = ∞ may always be added


def test_kov_theorem_3_4_worked_example():
    k, eps0, delta = 100, 0.1, 1e-5
    s2 = k * eps0 * (math.exp(eps0) - 1) / (math.exp(eps0) + 1)
    b2 = s2 + eps0 * math.sqrt(2 * k * math.log(math.e + math.sqrt(k * eps0**2) / delta))
    b3 = s2 + eps0 * math.sqrt(2 * k * math.log(1 / delta))
    expected = min(k * eps0, b2, b3)
    acc = get_accountant("advanced").compose(SelfComposed(PureEpsilon(eps0), k))
    assert acc.get_epsilon(delta) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(5.2981, abs=1e-4)
    # tighter than Dwork–Roth
    dr = AdvancedCompositionAccountant("dwork_roth").compose(SelfComposed(PureEpsilon(eps0), k))
    assert acc.get_epsilon(delta) < dr.get_epsilon(delta)
    d = acc.get_delta(expected)
    assert d <= delta * (1 + 1e-9) and d == pytest.approx(delta, rel=1e-6)


def test_kov_theorem_3_5_heterogeneous_by_hand():
    events = [(0.1, 1e-7, 50), (0.3, 0.0, 20)]
    acc = AdvancedCompositionAccountant()
    for e, d, c in events:
        acc.compose(EpsilonDelta(e, d), count=c)
    delta = 1e-5
    keep = math.prod((1 - d) ** c for _, d, c in events)
    dt = 1 - (1 - delta) / keep
    s1 = sum(c * e for e, _, c in events)
    s2 = sum(c * e * math.tanh(e / 2) for e, _, c in events)
    s3 = sum(c * e * e for e, _, c in events)
    expected = min(
        s1,
        s2 + math.sqrt(2 * s3 * math.log(math.e + math.sqrt(s3) / dt)),
        s2 + math.sqrt(2 * s3 * math.log(1 / dt)),
    )
    assert acc.get_epsilon(delta) == pytest.approx(expected, rel=1e-9)


def test_advanced_unknown_bound():
    with pytest.raises(UnknownNameError, match="bound"):
        AdvancedCompositionAccountant(bound="drv")


# ----------------------------------------------------------------- optimal
def test_kov_optimal_two_fold_by_hand():
    # k = 2, ε₀ = 1: only ℓ = 0 contributes for ε < 2:
    # δ(ε) = (e² − e^ε)/(1 + e)²;  δ(0) = (e − 1)/(e + 1)
    e = math.e
    assert kov_optimal_delta(1.0, 0.0, 2, 0.0) == pytest.approx((e - 1) / (e + 1), rel=1e-12)
    assert kov_optimal_delta(1.0, 0.0, 2, 1.0) == pytest.approx(
        (e**2 - e) / (1 + e) ** 2, rel=1e-12
    )
    assert kov_optimal_delta(1.0, 0.0, 2, 2.0) == 0.0
    # with δ₀: δ = 1 − (1 − δ₀)²(1 − δ_RR)
    d0 = 1e-3
    want = 1 - (1 - d0) ** 2 * (1 - (e**2 - e) / (1 + e) ** 2)
    assert kov_optimal_delta(1.0, d0, 2, 1.0) == pytest.approx(want, rel=1e-12)


def test_kov_theorem_3_3_discrete_points_by_hand():
    # Theorem 3.3 at ε = (k − 2i)ε₀: δ_i = Σ_{ℓ<i} C(k,ℓ)(e^{(k−ℓ)ε₀} − e^{(k−2i+ℓ)ε₀})/(1+e^{ε₀})^k
    k, eps0 = 10, 0.3
    for i in range(1, 5):
        want = (
            sum(
                math.comb(k, ell)
                * (math.exp((k - ell) * eps0) - math.exp((k - 2 * i + ell) * eps0))
                for ell in range(i)
            )
            / (1 + math.exp(eps0)) ** k
        )
        got = kov_optimal_delta(eps0, 0.0, k, (k - 2 * i) * eps0)
        assert got == pytest.approx(want, rel=1e-12)


def test_optimal_accountant_epsilon_inverts_delta_and_beats_advanced():
    acc = OptimalCompositionAccountant().compose(Laplace(10.0), count=100)  # ε₀ = 0.1
    eps = acc.get_epsilon(1e-5)
    assert kov_optimal_delta(0.1, 0.0, 100, eps) <= 1e-5
    assert kov_optimal_delta(0.1, 0.0, 100, eps * (1 - 1e-9)) > 1e-5
    adv = get_accountant("advanced").compose(Laplace(10.0), count=100)
    assert (
        eps
        < adv.get_epsilon(1e-5)
        < get_accountant("basic").compose(Laplace(10.0), count=100).get_epsilon(1e-5)
    )
    assert acc.get_delta(eps) <= 1e-5


def test_optimal_refuses_heterogeneous_and_handles_edges():
    acc = OptimalCompositionAccountant().compose(PureEpsilon(0.5), count=4)
    snapshot = acc.get_epsilon(1e-6)
    with pytest.raises(UnsupportedEventError, match="identical"):
        acc.compose(Composed((PureEpsilon(0.5), PureEpsilon(0.2))))
    assert acc.get_epsilon(1e-6) == snapshot
    acc.compose(EpsilonDelta(0.5, 0.0))  # the same atom is fine
    assert acc.get_epsilon(1e-6) > snapshot
    assert OptimalCompositionAccountant().get_epsilon(1e-5) == 0.0
    big = OptimalCompositionAccountant().compose(PureEpsilon(1.0), count=3)
    assert big.get_epsilon(0.0) == pytest.approx(3.0)
    assert OptimalCompositionAccountant().compose(NonPrivate()).get_epsilon(0.5) == math.inf
    d0 = OptimalCompositionAccountant().compose(EpsilonDelta(0.1, 1e-4), count=10)
    assert d0.get_epsilon(1e-4) == math.inf  # below 1 − (1 − δ₀)^k


def test_optimal_large_k_is_fast_and_between_bounds():
    acc = OptimalCompositionAccountant().compose(PureEpsilon(0.01), count=100_000)
    eps = acc.get_epsilon(1e-6)
    adv = get_accountant("advanced").compose(PureEpsilon(0.01), count=100_000).get_epsilon(1e-6)
    assert 0 < eps < adv
