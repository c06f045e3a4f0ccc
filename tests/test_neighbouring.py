"""Neighbouring relations: events, sound conversions, accountants, Ledger, calibration.

Every ε of dperm is stated for a relation (replace-one or add/remove-one); these
tests check that the relation travels with the events, that accountants never
mix relations silently, that the add/remove → replace-one conversion matches
its closed forms, and that the replace-one Poisson-subsampled Gaussian is
accounted exactly as dp-accounting's REPLACE_ONE PLD and an independent
numerical integration say.
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from dperm.accounting import (
    ACCOUNTANT_NAMES,
    ADD_REMOVE,
    NEIGHBOURING_RELATIONS,
    REPLACE_ONE,
    Composed,
    EpsilonDelta,
    Gaussian,
    Laplace,
    Ledger,
    NonPrivate,
    NoOp,
    OptimalCompositionAccountant,
    PldAccountant,
    PoissonSampled,
    PureEpsilon,
    RdpAccountant,
    SampledWithoutReplacement,
    SelfComposed,
    calibrate_gaussian,
    calibrate_noise,
    check_neighbouring,
    delta_spent,
    epsilon_spent,
    event_from_dict,
    event_from_json,
    gaussian_epsilon,
    get_accountant,
    to_replace_one,
)
from dperm.exceptions import (
    BudgetExceededError,
    InvalidPrivacyParameter,
    UnsupportedEventError,
)

AR, R1 = ADD_REMOVE, REPLACE_ONE
VDI = 1e-3  # coarse PLD discretization: fast, still pessimistic


def fast(name, **kwargs):
    if name in ("pld", "auto"):
        kwargs.setdefault("value_discretization_interval", VDI)
    return get_accountant(name, **kwargs)


# ------------------------------------------------------------------ events
def test_relation_names_and_spellings():
    assert NEIGHBOURING_RELATIONS == ("replace-one", "add-remove")
    for spelling in ("replace-one", "replace_one", " Replace-One ", "replace"):
        assert check_neighbouring(spelling) == R1
    for spelling in (
        "add-remove",
        "add_remove",
        "add-or-remove-one",
        "add-remove-one",
        "ADD/REMOVE",
    ):
        assert check_neighbouring(spelling) == AR
    for bad in ("swap", "", None, 1, "add"):
        with pytest.raises(InvalidPrivacyParameter, match=repr(bad).replace("(", r"\(")):
            check_neighbouring(bad)
    with pytest.raises(InvalidPrivacyParameter, match="neighbouring"):
        Gaussian(1.0, neighbouring="bogus")


def test_leaves_default_to_replace_one_and_wrappers_derive():
    leaves = [Gaussian(1.0), Laplace(1.0), PureEpsilon(1.0), EpsilonDelta(1.0, 1e-6)]
    leaves += [NoOp(), NonPrivate()]
    for leaf in leaves:
        assert leaf.neighbouring == R1
        fields = {k: v for k, v in leaf.to_dict().items() if k not in ("kind", "neighbouring")}
        assert type(leaf)(**fields, neighbouring="add_remove").neighbouring == AR
    # the field is keyword-only and normalised
    g = Gaussian(2.0, neighbouring="add_remove")
    assert g.neighbouring == AR and g != Gaussian(2.0)
    with pytest.raises(TypeError):
        Gaussian(2.0, AR)  # keyword only
    assert PoissonSampled(0.1, g).neighbouring == AR
    assert SelfComposed(PoissonSampled(0.1, g), 3).neighbouring == AR
    assert Composed((g, NoOp())).neighbouring == AR  # NoOp composes with either
    assert Composed((NoOp(neighbouring=AR),)).neighbouring == AR
    assert Composed(()).neighbouring == R1
    assert SampledWithoutReplacement(2, 10, Gaussian(1.0)).neighbouring == R1
    assert SampledWithoutReplacement(2, 10, NoOp(neighbouring=AR)).neighbouring == R1


def test_mixed_relations_and_add_remove_wor_are_refused_at_construction():
    with pytest.raises(InvalidPrivacyParameter, match="one neighbouring relation"):
        Composed((Gaussian(1.0), Gaussian(1.0, neighbouring=AR)))
    with pytest.raises(InvalidPrivacyParameter, match="one neighbouring relation"):
        Composed(
            (SelfComposed(PureEpsilon(1.0), 2), PoissonSampled(0.1, Gaussian(1.0, neighbouring=AR)))
        )
    with pytest.raises(InvalidPrivacyParameter, match="replace-one"):
        SampledWithoutReplacement(2, 10, Gaussian(1.0, neighbouring=AR))


ALL_EVENTS = [
    Gaussian(1.5, neighbouring=AR),
    Laplace(2.0, neighbouring=AR),
    PureEpsilon(0.3, neighbouring=AR),
    EpsilonDelta(0.7, 1e-7, neighbouring=AR),
    NoOp(neighbouring=AR),
    NonPrivate(neighbouring=AR),
    SelfComposed(PoissonSampled(0.01, Gaussian(1.1, neighbouring=AR)), 50),
    Composed((PureEpsilon(0.1), SampledWithoutReplacement(5, 50, Gaussian(2.0)), NoOp())),
    PoissonSampled(0.02, Gaussian(0.8)),
]


@pytest.mark.parametrize("event", ALL_EVENTS, ids=lambda e: e.kind)
def test_serialization_round_trips_the_relation(event):
    d = event.to_dict()
    assert d["neighbouring"] == event.neighbouring
    back = event_from_json(event.to_json())
    assert back == event and back.neighbouring == event.neighbouring
    assert json.loads(event.to_json())["neighbouring"] == event.neighbouring


def test_old_dicts_load_as_replace_one_and_contradictions_are_refused():
    assert event_from_dict({"kind": "Gaussian", "noise_multiplier": 2.0}) == Gaussian(2.0)
    old = {
        "kind": "PoissonSampled",
        "sampling_rate": 0.1,
        "event": {"kind": "Laplace", "noise_multiplier": 1.0},
    }
    assert event_from_dict(old).neighbouring == R1
    lying = PoissonSampled(0.1, Gaussian(1.0, neighbouring=AR)).to_dict()
    lying["neighbouring"] = R1
    with pytest.raises(InvalidPrivacyParameter, match="states neighbouring"):
        event_from_dict(lying)


# -------------------------------------------------------------- conversion
def test_to_replace_one_closed_forms():
    eps, delta = 0.8, 1e-6
    assert to_replace_one(Gaussian(3.0, neighbouring=AR)) == Gaussian(1.5)
    assert to_replace_one(Laplace(4.0, neighbouring=AR)) == Laplace(2.0)
    assert to_replace_one(PureEpsilon(eps, neighbouring=AR)) == PureEpsilon(2 * eps)
    got = to_replace_one(EpsilonDelta(eps, delta, neighbouring=AR))
    assert got.neighbouring == R1 and got.epsilon == 2 * eps
    assert got.delta == pytest.approx((1 + math.exp(eps)) * delta, rel=1e-15)
    assert to_replace_one(EpsilonDelta(50.0, 0.5, neighbouring=AR)).delta == 1.0  # capped
    sgd = SelfComposed(PoissonSampled(0.01, Gaussian(1.2, neighbouring=AR)), 100)
    assert to_replace_one(sgd) == SelfComposed(PoissonSampled(0.01, Gaussian(0.6)), 100)
    mixed = Composed((PureEpsilon(0.1, neighbouring=AR), NoOp(), Laplace(1.0, neighbouring=AR)))
    assert to_replace_one(mixed) == Composed((PureEpsilon(0.2), NoOp(), Laplace(0.5)))
    assert to_replace_one(NonPrivate(neighbouring=AR)) == NonPrivate()
    for ev in (Gaussian(1.0), SelfComposed(PoissonSampled(0.1, Gaussian(1.0)), 2)):
        assert to_replace_one(ev) is ev  # replace-one events are unchanged
    with pytest.raises(InvalidPrivacyParameter):
        to_replace_one("Gaussian")


def test_gaussian_conversion_is_exact_for_a_clipped_sum():
    """A sum of records with ‖xᵢ‖ ≤ C plus N(0, s²): add/remove sensitivity C,
    replace-one sensitivity 2C, so the replace-one ε of the converted event is
    the analytic-Gaussian ε at σ = s/(2C) (Balle & Wang 2018, Thm 8)."""
    s, C, delta = 3.0, 1.0, 1e-5
    conv = to_replace_one(Gaussian(s / C, neighbouring=AR))
    exact = gaussian_epsilon(s / (2 * C), delta)
    assert epsilon_spent(conv, delta, "pld") == pytest.approx(exact, rel=2e-3)
    assert epsilon_spent(conv, delta, "pld") >= exact * (1 - 1e-9)


# ------------------------------------------------------------- accountants
@pytest.mark.parametrize("name", ACCOUNTANT_NAMES)
def test_add_remove_accountants_refuse_replace_one_events_before_any_change(name):
    acc = fast(name, neighbouring=AR)
    first = next(
        e
        for e in (Gaussian(2.0, neighbouring=AR), PureEpsilon(0.5, neighbouring=AR))
        if acc.supports(e)
    )
    acc.compose(first)
    eps = acc.get_epsilon(1e-5)
    for ev in (Gaussian(2.0), PureEpsilon(0.5), SampledWithoutReplacement(1, 10, Gaussian(3.0))):
        assert not acc.supports(ev)
        with pytest.raises(UnsupportedEventError, match="replace-one"):
            acc.compose(ev)
        assert acc.events == (first,) and acc.get_epsilon(1e-5) == eps
    acc.compose(NoOp())  # NoOp composes with either relation
    assert acc.get_config()["neighbouring"] == AR
    assert get_accountant(name, **acc.get_config()).neighbouring == AR


@pytest.mark.parametrize("name", ACCOUNTANT_NAMES)
def test_replace_one_accountants_convert_add_remove_events_and_say_so(name):
    ar = next(
        e
        for e in (Gaussian(2.0, neighbouring=AR), PureEpsilon(0.5, neighbouring=AR))
        if fast(name).supports(e)
    )
    acc = fast(name).compose(ar, count=3)
    assert acc.neighbouring == R1
    assert acc.events == (SelfComposed(to_replace_one(ar), 3),)
    (conv,) = acc.conversions
    assert conv.original == ar and conv.converted == to_replace_one(ar) and conv.count == 3
    ref = fast(name).compose(to_replace_one(ar), count=3)
    assert acc.get_epsilon(1e-6) == ref.get_epsilon(1e-6)
    assert ref.conversions == ()


def test_rdp_refuses_replace_one_poisson_but_keeps_wor_and_add_remove():
    acc = RdpAccountant()
    acc.compose(Gaussian(5.0))
    before = acc.rdp
    r1 = PoissonSampled(0.01, Gaussian(1.0))
    with pytest.raises(UnsupportedEventError, match=r"'pld'.*without replacement"):
        acc.compose(r1)
    np.testing.assert_array_equal(acc.rdp, before)
    assert acc.supports(SampledWithoutReplacement(10, 1000, Gaussian(1.0)))
    assert acc.supports(PoissonSampled(1.0, Gaussian(1.0)))  # q = 1: no sampling
    assert acc.supports(PoissonSampled(0.3, Gaussian(0.0)))  # no noise: ε = ∞ is valid
    assert RdpAccountant(neighbouring=AR).supports(
        PoissonSampled(0.01, Gaussian(1.0, neighbouring=AR))
    )
    # the add/remove event converted into a replace-one RDP accountant is refused too
    assert not acc.supports(PoissonSampled(0.01, Gaussian(1.0, neighbouring=AR)))


def _dpa_replace_one(std, q, steps, vdi=VDI):
    from dp_accounting import dp_event as de
    from dp_accounting.pld import pld_privacy_accountant as pa
    from dp_accounting.privacy_accountant import NeighboringRelation

    acc = pa.PLDAccountant(
        neighboring_relation=NeighboringRelation.REPLACE_ONE, value_discretization_interval=vdi
    )
    return acc.compose(de.PoissonSampledDpEvent(q, de.GaussianDpEvent(std)), steps)


@pytest.mark.parametrize(("s", "q", "steps"), [(1.0, 0.01, 1000), (2.4, 0.05, 300), (0.8, 0.3, 5)])
def test_replace_one_poisson_pld_equals_dp_accounting_replace_one(s, q, steps):
    """Clipped sum, per-record bound C = 1, noise std s: dp-accounting's
    REPLACE_ONE analysis with standard deviation s and sensitivity 1 (a record
    moves the sum by at most 1, so replacing it by ±1 each way) is our
    ``PoissonSampled(q, Gaussian(s / 2C))`` replace-one event."""
    theirs = _dpa_replace_one(s, q, steps)
    ours = PldAccountant(VDI).compose(SelfComposed(PoissonSampled(q, Gaussian(s / 2.0)), steps))
    # dperm's vectorised PLD: dp-accounting's discretisation, up to FFT rounding and its
    # window bound (10⁻¹⁵ added to δ; dperm 10⁻²⁰)
    for delta in (1e-5, 1e-8):
        assert ours.get_epsilon(delta) == pytest.approx(theirs.get_epsilon(delta), rel=1e-6)
    assert ours.get_delta(1.0) == pytest.approx(theirs.get_delta(1.0), rel=1e-6)
    # and the add/remove event of the same run, converted, gives the same numbers
    ar = SelfComposed(PoissonSampled(q, Gaussian(s, neighbouring=AR)), steps)
    assert epsilon_spent(ar, 1e-5, fast("pld"), neighbouring=R1) == ours.get_epsilon(1e-5)


def test_replace_one_poisson_delta_matches_numerical_integration():
    """Independent check of one step: δ(ε) = ∫ (P(x) − e^ε Q(x))₊ dx with
    P = (1−q)N(0, s²) + qN(1, s²), Q = (1−q)N(0, s²) + qN(−1, s²) (the larger
    direction by symmetry); the pessimistic PLD is never below it and close."""
    s, q = 0.8, 0.2
    ours = PldAccountant(1e-4).compose(PoissonSampled(q, Gaussian(s / 2.0)))

    def hockey(eps):
        def f(x):
            p = (1 - q) * stats.norm.pdf(x, 0, s) + q * stats.norm.pdf(x, 1, s)
            r = (1 - q) * stats.norm.pdf(x, 0, s) + q * stats.norm.pdf(x, -1, s)
            return max(p - math.exp(eps) * r, 0.0)

        return integrate.quad(f, -12 * s - 1, 12 * s + 1, limit=400, epsabs=1e-13)[0]

    for eps in (0.1, 0.5, 1.0):
        exact = hockey(eps)
        got = ours.get_delta(eps)
        assert got >= exact - 1e-10
        assert got == pytest.approx(exact, rel=5e-3, abs=1e-9)


@pytest.mark.parametrize("sigma", [0.7, 1.3, 3.0])
def test_q_one_replace_one_poisson_is_the_plain_gaussian(sigma):
    """dp-accounting's REPLACE_ONE PLD with std 2σ at q = 1 (shifts ±1) is the
    Gaussian(σ) mechanism; nearly-1 q approaches it from below."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.privacy_accountant import NeighboringRelation

    theirs = pld_lib.from_gaussian_mechanism(
        standard_deviation=2 * sigma,
        sampling_prob=1.0,
        neighboring_relation=NeighboringRelation.REPLACE_ONE,
        value_discretization_interval=VDI,
    ).get_epsilon_for_delta(1e-5)
    plain = epsilon_spent(Gaussian(sigma), 1e-5, fast("pld"))
    assert plain == pytest.approx(theirs, rel=1e-6)
    assert epsilon_spent(PoissonSampled(1.0, Gaussian(sigma)), 1e-5, fast("pld")) == plain
    near = epsilon_spent(PoissonSampled(1 - 1e-6, Gaussian(sigma)), 1e-5, fast("pld"))
    assert near <= plain * (1 + 1e-6) and near == pytest.approx(plain, rel=1e-3)
    assert plain == pytest.approx(gaussian_epsilon(sigma, 1e-5), rel=2e-3)


def test_pld_composes_pure_and_approximate_dp_events():
    """``from_privacy_parameters`` is the dominating pair of (ε, δ)-DP: alone it
    gives back (ε, δ); k-fold it matches the exact optimal composition (KOV)."""
    acc = PldAccountant(1e-4).compose(EpsilonDelta(0.5, 1e-6))
    assert acc.get_delta(0.5) == pytest.approx(1e-6, rel=1e-3)
    assert acc.get_epsilon(1e-6) == pytest.approx(0.5, abs=2e-4)
    k, e0 = 20, 0.3
    pld = PldAccountant(1e-4).compose(PureEpsilon(e0), count=k).get_epsilon(1e-6)
    opt = OptimalCompositionAccountant().compose(PureEpsilon(e0), count=k).get_epsilon(1e-6)
    assert pld >= opt * (1 - 1e-9) and pld == pytest.approx(opt, rel=1e-2)
    # one PLD holds an objective-perturbation fit and a DP-SGD fit
    both = PldAccountant(VDI).compose(EpsilonDelta(1.0, 1e-6))
    both.compose(SelfComposed(PoissonSampled(0.01, Gaussian(0.6)), 500))
    sgd = epsilon_spent(SelfComposed(PoissonSampled(0.01, Gaussian(0.6)), 500), 1e-5, fast("pld"))
    assert max(1.0, sgd) < both.get_epsilon(1e-5) < 1.0 + sgd + 1e-9


# ------------------------------------------------------------ epsilon_spent
def test_epsilon_spent_defaults_to_the_event_relation():
    ar = SelfComposed(PoissonSampled(0.01, Gaussian(1.0, neighbouring=AR)), 200)
    e_rdp = epsilon_spent(ar, 1e-5)  # RDP, add/remove (as before relations were recorded)
    assert e_rdp == RdpAccountant(neighbouring=AR).compose(ar).get_epsilon(1e-5)
    pld = fast("pld")  # an instance is copied for each call
    e_r1 = epsilon_spent(ar, 1e-5, pld, neighbouring=R1)
    assert e_r1 == epsilon_spent(to_replace_one(ar), 1e-5, pld)
    e_ar = epsilon_spent(ar, 1e-5, fast("pld", neighbouring=AR))
    assert e_r1 > e_ar  # replace-one costs more at the same noise
    with pytest.raises(UnsupportedEventError):
        epsilon_spent(Gaussian(1.0), 1e-5, neighbouring=AR)
    assert delta_spent(PureEpsilon(1.0, neighbouring=AR), 2.0, "basic", neighbouring=R1) == 0.0
    assert delta_spent(PureEpsilon(1.0, neighbouring=AR), 1.9, "basic", neighbouring=R1) == 1.0
    with pytest.raises(InvalidPrivacyParameter, match="neighbouring"):
        epsilon_spent(Gaussian(1.0), 1e-5, RdpAccountant(), neighbouring=AR)


# -------------------------------------------------------------------- auto
def test_auto_reports_the_minimum_of_the_accountants_that_accepted_everything():
    history = [PureEpsilon(0.2), PureEpsilon(0.2), Laplace(5.0), PureEpsilon(0.2)]
    auto = fast("auto")
    for ev in history:
        auto.compose(ev)
    # Laplace(5) is a 0.2-DP atom like the others, so even "optimal" accepts all
    assert auto.alive == ("pld", "rdp", "optimal", "advanced", "basic", "split")
    delta = 1e-6
    each = {}
    for name in ("pld", "rdp", "optimal", "advanced", "basic"):
        acc = fast(name)
        for ev in history:
            acc.compose(ev)
        each[name] = acc.get_epsilon(delta)
    assert auto.epsilons(delta) == each
    method, eps = auto.best_method(delta)
    assert eps == min(each.values()) == auto.get_epsilon(delta) and each[method] == eps
    # the PLD knows the Laplace mechanism's own loss distribution, tighter than the
    # generic 0.2-DP atom the exact optimal composition (KOV 2015 Thm 3.3) sees
    assert method == "pld" and each["pld"] < each["optimal"] < each["advanced"]
    auto.compose(PureEpsilon(0.05))  # heterogeneous now: the optimal accountant drops out
    assert "optimal" not in auto.alive and auto.best_method(delta)[0] != "optimal"


def test_auto_is_never_below_the_exact_gaussian_and_drops_refusing_methods():
    sigmas = [2.0, 3.0, 1.5, 4.0]
    auto = fast("auto")
    for s in sigmas:
        auto.compose(Gaussian(s))
    sigma_eff = sum(s**-2 for s in sigmas) ** -0.5  # exact (Dong, Roth & Su 2019)
    for delta in (1e-3, 1e-6):
        exact = gaussian_epsilon(sigma_eff, delta)
        assert exact * (1 - 1e-9) <= auto.get_epsilon(delta) <= exact * 1.01
    assert auto.alive == ("pld", "rdp", "split")  # composition theorems refuse Gaussians
    # a replace-one DP-SGD run: only the PLD accounts it
    auto.compose(SelfComposed(PoissonSampled(0.02, Gaussian(0.7)), 100))
    assert auto.alive == ("pld", "split") and auto.best_method(1e-5)[0] == "pld"
    before = auto.get_epsilon(1e-5)
    with pytest.raises(UnsupportedEventError, match="no accountant"):
        # (a generic inner event is amplified by Lemma 15.4 everywhere; a composed one is not)
        auto.compose(SampledWithoutReplacement(2, 10, SelfComposed(PureEpsilon(1.0), 2)))
    assert auto.get_epsilon(1e-5) == before and auto.alive == ("pld", "split")
    # sampling without replacement: the PLD accounts it too (fixed_size_gaussian_pld)
    auto.compose(SampledWithoutReplacement(10, 1000, Gaussian(3.0)), count=50)
    assert auto.alive == ("pld", "split")
    method, eps = auto.best_method(1e-5)
    assert method == "pld" and before < eps < math.inf
    assert 0.0 < auto.get_delta(eps) <= 1e-5 * (1 + 1e-6)


def test_auto_split_is_basic_composition_at_equal_delta_shares():
    # RDP refuses the (ε, δ) event, the optimal composition theorem the Gaussians
    a = SelfComposed(SampledWithoutReplacement(10, 1000, Gaussian(2.0)), 30)
    b = EpsilonDelta(0.5, 1e-7)
    auto = fast("auto", methods=["rdp", "optimal", "split"]).compose(Composed((a, b)))
    delta = 1e-5
    expected = epsilon_spent(a, delta / 2, "rdp") + epsilon_spent(b, delta / 2, "optimal")
    assert auto.best_method(delta) == ("split", pytest.approx(expected, rel=1e-12))


# ------------------------------------------------------------------ ledger
SGD_R1 = SelfComposed(PoissonSampled(0.01, Gaussian(0.6)), 500)


def test_default_ledger_holds_dp_sgd_and_objective_perturbation():
    ledger = Ledger(epsilon=3.0, delta=1e-5, accountant=fast("auto"))
    e1 = ledger.spend(SGD_R1, "dp-sgd")
    assert ledger.certified_by == "pld" and ledger.neighbouring == R1
    assert e1 == pytest.approx(epsilon_spent(SGD_R1, 1e-5, fast("pld")), rel=1e-12)
    e2 = ledger.spend(EpsilonDelta(0.5, 1e-6), "objective perturbation")
    assert e1 < e2 <= 3.0 and ledger.certified_by == "pld"
    e3 = ledger.spend(PureEpsilon(0.1, neighbouring=AR), "add/remove release")
    assert e3 > e2
    entry = ledger.entries[-1]
    assert entry.neighbouring == AR and entry.converted and entry.accounted == PureEpsilon(0.2)
    with pytest.raises(BudgetExceededError, match="replace-one"):
        ledger.spend(SelfComposed(SGD_R1, 4))
    assert len(ledger.entries) == 3 and ledger.spent()[0] == e3


def test_the_plain_default_ledger_accepts_every_event_kind():
    ledger = Ledger(epsilon=50.0, delta=1e-5)
    assert ledger.accountant.name == "auto" and ledger.neighbouring == R1
    for ev in (
        PureEpsilon(0.5),
        EpsilonDelta(0.5, 1e-7),
        Gaussian(4.0),
        Laplace(3.0),
        PoissonSampled(0.05, Gaussian(2.0, neighbouring=AR)),
        SelfComposed(PoissonSampled(0.05, Gaussian(2.0)), 20),
        SampledWithoutReplacement(10, 100, Gaussian(3.0)),
        Composed((PureEpsilon(0.1), Gaussian(5.0))),
    ):
        ledger.spend(ev)
    # the PLD accounts every one of them (fixed-size batches included)
    assert ledger.certified_by == "pld" and ledger.spent()[0] < 50.0


def test_add_remove_ledger_refuses_replace_one_events():
    ledger = Ledger(2.0, 1e-5, accountant="auto", neighbouring=AR)
    assert ledger.neighbouring == AR
    ledger.spend(PoissonSampled(0.01, Gaussian(1.0, neighbouring=AR)))
    with pytest.raises(UnsupportedEventError, match="add/remove"):
        ledger.spend(PureEpsilon(0.1))
    assert len(ledger.entries) == 1
    with pytest.raises(InvalidPrivacyParameter, match="neighbouring"):
        Ledger(1.0, 1e-5, accountant=RdpAccountant(), neighbouring=AR)


def test_ledger_json_round_trips_relation_mode_and_conversions(tmp_path):
    ledger = Ledger(4.0, 1e-5, accountant=fast("auto", methods=["pld", "basic"]))
    ledger.spend(SGD_R1, "sgd")
    ledger.spend(PureEpsilon(0.25, neighbouring=AR), "ar")
    path = tmp_path / "ledger.json"
    ledger.save(path)
    data = json.loads(path.read_text())
    assert data["neighbouring"] == R1 and data["version"] == 2
    assert data["accountant"]["name"] == "auto"
    assert data["accountant"]["config"]["methods"] == ["pld", "basic"]
    assert [e["neighbouring"] for e in data["entries"]] == [R1, AR]
    loaded = Ledger.load(path)
    assert loaded.events == ledger.events and loaded.entries == ledger.entries
    assert loaded.spent() == ledger.spent() and loaded.certified_by == "pld"
    assert loaded.accountant.get_config() == ledger.accountant.get_config()
    ar = Ledger(4.0, 1e-5, accountant="basic", neighbouring=AR)
    ar.spend(PureEpsilon(1.0, neighbouring=AR))
    back = Ledger.from_dict(ar.to_dict())
    assert back.neighbouring == AR and back.spent() == (1.0, 1e-5)
    bad = ar.to_dict() | {"neighbouring": R1}
    with pytest.raises(InvalidPrivacyParameter, match="neighbouring"):
        Ledger.from_dict(bad)


# ------------------------------------------------------------- calibration
def test_replace_one_poisson_calibration_with_pld_is_conservative_and_tight():
    steps, q, delta = 300, 0.02, 1e-5
    pld = get_accountant("pld", value_discretization_interval=VDI)
    for eps in (0.5, 2.0):
        sigma = calibrate_noise(
            lambda s: SelfComposed(PoissonSampled(q, Gaussian(s)), steps),
            eps,
            delta,
            accountant=pld,
            neighbouring="replace-one",
            rtol=1e-4,
        )
        ev = SelfComposed(PoissonSampled(q, Gaussian(sigma)), steps)
        back = epsilon_spent(ev, delta, pld)
        assert back <= eps and back == pytest.approx(eps, rel=2e-3)
        less = SelfComposed(PoissonSampled(q, Gaussian(sigma * (1 - 3e-4))), steps)
        assert epsilon_spent(less, delta, pld) > eps
        same = calibrate_gaussian(
            eps,
            delta,
            steps=steps,
            sampling_rate=q,
            accountant=pld,
            neighbouring="replace-one",
        )
        assert same == sigma
    pld_ar = get_accountant("pld", value_discretization_interval=VDI, neighbouring=AR)
    ar = calibrate_gaussian(2.0, delta, steps=steps, sampling_rate=q, accountant=pld_ar)
    # same run, same ε: replace-one needs more noise (std 2σ·C) than add/remove (σ·C)
    assert 2 * sigma > 1.1 * ar
    # an add/remove event calibrated against a replace-one accountant is converted: σ doubles
    conv = calibrate_gaussian(2.0, delta, steps=steps, sampling_rate=q, accountant=pld)
    assert conv == pytest.approx(2 * sigma, rel=3e-4)


def test_calibration_relation_errors():
    with pytest.raises(UnsupportedEventError, match="pld"):
        calibrate_gaussian(1.0, 1e-5, steps=10, sampling_rate=0.1, neighbouring="replace-one")
    with pytest.raises(InvalidPrivacyParameter, match="replace-one"):
        calibrate_gaussian(
            1.0,
            1e-5,
            sampling_rate=0.1,
            sampling="without_replacement",
            population_size=100,
            neighbouring="add-remove",
        )
    with pytest.raises(InvalidPrivacyParameter, match="neighbouring"):
        calibrate_noise(lambda s: Gaussian(s), 1.0, 1e-5, neighbouring="both")


# ------------------------------------------------------------ import graph
ACCOUNTING = Path(__import__("dperm.accounting").accounting.__file__).parent


def _internal_imports(path: Path) -> set[str]:
    """Sibling modules of dperm.accounting that ``path`` imports (anywhere in it)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("dperm.accounting."):
                out.add(node.module.split(".")[2])
    return out


def test_accounting_import_graph_has_no_cycle():
    mods = {p.stem: _internal_imports(p) for p in ACCOUNTING.glob("*.py") if p.stem != "__init__"}
    assert not (mods["base"] - {"events"}), mods["base"]  # base knows no accountant
    assert not mods["events"]
    importers_of_registry = {m for m, deps in mods.items() if "registry" in deps}
    assert importers_of_registry <= {"calibrate", "ledger", "ledger_sync", "ledger_persist"}
    # depth-first search for a cycle
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for d in mods.get(m, ()):
            if state.get(d) == 1:
                raise AssertionError(f"import cycle: {' -> '.join([*stack, m, d])}")
            if d in mods and state.get(d) is None:
                visit(d, [*stack, m])
        state[m] = 2

    for m in mods:
        if m not in state:
            visit(m, [])


@pytest.mark.parametrize(
    "module",
    sorted(p.stem for p in ACCOUNTING.glob("*.py") if p.stem != "__init__"),
)
def test_each_accounting_module_imports_first_in_a_fresh_interpreter(module):
    code = f"import dperm.accounting.{module} as m; print(m.__name__)"
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"dperm.accounting.{module}"
