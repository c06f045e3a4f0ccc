"""The vectorised PLD numerics (dperm.accounting.pld_dense) against independent
computations: the C library's erfc, mpmath, the exact Gaussian privacy profile
(Balle & Wang 2018) and dp-accounting's PLD package (its loops, its FFT)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dperm.accounting import PldAccountant, gaussian_epsilon
from dperm.accounting import events as ev
from dperm.accounting import pld_dense as pd

AR, RO = "add-remove", "replace-one"


def test_norm_logsf_against_libm_and_mpmath():
    x = np.linspace(-12.0, 37.0, 20001)
    ours = pd.norm_logsf(x)
    libm = np.array([math.log(0.5 * math.erfc(v / math.sqrt(2.0))) for v in x])
    # erfc's relative error grows with z² (Numerical Recipes' bound); log absolute
    assert np.max(np.abs(ours - libm) / np.maximum(1.0, np.abs(libm))) < 2e-15
    mpmath = pytest.importorskip("mpmath")
    for v in (0.0, 1.5, 9.745474864965935, 25.0, 38.0):
        exact = float(mpmath.log(mpmath.erfc(mpmath.mpf(v) / mpmath.sqrt(2)) / 2))
        assert pd.norm_logsf(v) == pytest.approx(exact, rel=1e-14)
    # the truncation point of the grid: Φ̄(z) = e⁻⁵⁰/2
    assert float(pd.norm_logsf(pd.TAIL_Z)) == pytest.approx(-50.0 + math.log(0.5), abs=1e-9)


@pytest.mark.parametrize(("s", "q"), [(0.6, 0.00064), (1.3, 0.05), (4.0, 0.5), (0.9, 1.0)])
def test_hockey_stick_closed_forms_match_dp_accounting(s, q):
    """δ(ε) of the three pairs, vectorised here, against dp-accounting's
    per-point inverse of the privacy loss."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    eps = np.linspace(-2.0, 6.0, 41)
    kinds = {
        "remove": plm.AdjacencyType.REMOVE,
        "add": plm.AdjacencyType.ADD,
        "replace": plm.AdjacencyType.REPLACE,
    }
    for kind, adjacency in kinds.items():
        theirs = plm.GaussianPrivacyLoss(
            s, sampling_prob=q, adjacency_type=adjacency
        ).get_delta_for_epsilon(eps)
        ours = pd._GAUSS_DELTA[kind](eps.copy(), s, q)
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_unsampled_gaussian_is_never_below_the_exact_epsilon(sigma):
    for delta in (1e-3, 1e-6, 1e-10):
        exact = gaussian_epsilon(sigma, delta)
        for rel in (AR, RO):
            got = PldAccountant(1e-4, neighbouring=rel).compose(
                ev.Gaussian(sigma, neighbouring=rel)
            )
            eps = got.get_epsilon(delta)
            assert exact <= eps <= exact * (1 + 1e-3) + 1e-4
        # replace-one, q = 1: the pair N(−1, (2σ)²) vs N(1, (2σ)²) is Gaussian(σ)
        pld = pd.gaussian_pld(2.0 * sigma, 1.0, RO, 1e-4)
        assert pld.epsilon(delta) == pytest.approx(exact, rel=1e-3, abs=1e-4)
        assert pld.epsilon(delta) >= exact


def _dp_accounting_epsilon(sigma, q, steps, delta, relation, vdi):
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import pld_privacy_accountant as pa

    rel = {AR: NeighboringRelation.ADD_OR_REMOVE_ONE, RO: NeighboringRelation.REPLACE_ONE}
    acc = pa.PLDAccountant(rel[relation], value_discretization_interval=vdi)
    # dp-accounting's replace-one Gaussian: std m on records of norm 1 that differ by 2,
    # i.e. m = 2σ for dperm's σ relative to the replace-one sensitivity 2C
    m = sigma if relation == AR else 2.0 * sigma
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(m)), steps)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize(
    ("sigma", "q", "steps", "delta", "vdi"),
    [
        (1.1, 0.004, 1500, 1e-5, 1e-3),
        (0.8, 0.01, 300, 1e-7, 1e-3),
        (2.0, 0.05, 100, 1e-6, 1e-3),
        (0.6, 0.2, 10, 1e-4, 1e-3),
        (5.0, 0.5, 40, 1e-9, 1e-3),
        (2.071, 0.004, 15_000, 1e-6, 1e-4),
    ],
)
def test_composed_pld_matches_dp_accounting_under_both_relations(sigma, q, steps, delta, vdi):
    """Same discretisation as dp-accounting: the same ε to float error, and never
    below its (pessimistic, upper-bound) value beyond that error."""
    for rel in (AR, RO):
        event = ev.SelfComposed(ev.PoissonSampled(q, ev.Gaussian(sigma, neighbouring=rel)), steps)
        ours = PldAccountant(vdi, neighbouring=rel).compose(event).get_epsilon(delta)
        theirs = _dp_accounting_epsilon(sigma, q, steps, delta, rel, vdi)
        assert ours == pytest.approx(theirs, rel=1e-6)
        assert ours >= theirs * (1 - 1e-6)


def test_tilted_tails_match_extended_precision_dp_accounting(monkeypatch):
    """62 500 steps of q = 1.6·10⁻⁵ (n = 4·10⁶, batch 64): the double-precision FFT
    power is rounding noise below ~10⁻¹⁴, the tilted estimates are not.  The
    independent check: dp-accounting with its FFT in extended precision (noise
    ~10⁻¹⁸ per probability) at δ = 10⁻¹⁰, where plain dp-accounting is already
    off; at δ = 1/n² = 6.25·10⁻¹⁴ (below even the extended-precision noise
    summed over the tail) ε(σ) must still be smooth and decreasing."""
    from dp_accounting.pld import common

    q, steps = 64 / 4e6, 62_500
    sigmas = (0.44, 0.445, 0.45, 0.455)
    events = {s: ev.SelfComposed(ev.PoissonSampled(q, ev.Gaussian(s)), steps) for s in sigmas}
    accs = {s: PldAccountant(1e-4).compose(e) for s, e in events.items()}
    plain = float(_dp_accounting_epsilon(0.45, q, steps, 1e-10, RO, 1e-4))
    double = common.self_convolve
    monkeypatch.setattr(
        common,
        "self_convolve",
        lambda lst, num, tail: double(np.asarray(lst, dtype=np.longdouble), num, tail),
    )
    extended = float(_dp_accounting_epsilon(0.45, q, steps, 1e-10, RO, 1e-4))
    ours = accs[0.45].get_epsilon(1e-10)
    assert ours == pytest.approx(extended, rel=1e-4)
    assert ours >= extended * (1 - 1e-6)
    assert abs(plain - extended) > 10 * abs(ours - extended)  # the noise we remove
    curve = np.array([accs[s].get_epsilon(1 / 4e6**2) for s in sigmas])
    assert (np.diff(curve) < 0).all() and (np.diff(curve, 2) > 0).all()  # no noise


def test_laplace_and_epsilon_delta_match_dp_accounting():
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    h = 1e-4
    for q, b in ((0.1, 1.0), (0.3, 0.5), (1.0, 2.0)):
        theirs = pld_lib.from_laplace_mechanism(b, value_discretization_interval=h, sampling_prob=q)
        ours = pd.laplace_pld(b, q, h)
        for n in (1, 20):
            t, o = theirs.self_compose(n), ours.self_compose(n)
            assert o.epsilon(1e-6) == pytest.approx(t.get_epsilon_for_delta(1e-6), rel=1e-7)
            assert o.delta(0.5) == pytest.approx(t.get_delta_for_epsilon(0.5), rel=1e-6)
    from dp_accounting.pld import common

    params = common.DifferentialPrivacyParameters(0.5, 1e-7)
    theirs = pld_lib.from_privacy_parameters(params, value_discretization_interval=h)
    ours = pd.epsilon_delta_pld(0.5, 1e-7, h)
    t, o = theirs.self_compose(30), ours.self_compose(30)
    assert o.epsilon(1e-5) == pytest.approx(t.get_epsilon_for_delta(1e-5), rel=1e-9)


def test_epsilon_and_delta_are_inverse_and_pessimistic_structure():
    pld = pd.gaussian_pld(0.9, 0.01, AR, 1e-4).self_compose(500)
    assert pld.add is not None  # add/remove at q < 1: two directions, the larger counts
    for delta in (1e-3, 1e-6, 1e-9):
        eps = pld.epsilon(delta)
        assert pld.delta(eps) == pytest.approx(delta, rel=1e-6)
        assert eps == max(
            pd.epsilon_for_delta(pld.remove, delta), pd.epsilon_for_delta(pld.add, delta)
        )
    # the composed PMF keeps its mass (to the truncated tails) and is non-negative
    for pmf in (pld.remove, pld.add):
        assert (pmf.probs >= 0).all()
        # (negative connect-the-dots masses from rounding are set to 0: a little more)
        assert 1.0 - 1e-9 <= pmf.probs.sum() + pmf.inf_mass <= 1.0 + 1e-3
    # more noise never certifies more ε
    assert pd.gaussian_pld(1.0, 0.01, AR, 1e-4).self_compose(500).epsilon(1e-6) < pld.epsilon(1e-6)
    # ε(δ) is ∞ when the mass at +∞ exceeds δ
    assert pd.epsilon_delta_pld(1.0, 1e-3, 1e-4).epsilon(1e-4) == math.inf
