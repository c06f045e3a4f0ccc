"""Back ends of ``dperm account`` / ``dperm calibrate``."""

from __future__ import annotations

import json
import math

import pytest

from dperm.cli.account import account_command, render
from dperm.cli.calibrate import calibrate_command
from dperm.exceptions import InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError

ISSUE_EXAMPLE = dict(noise_multiplier=1.1, sampling_rate=0.004, steps=15000, delta=1e-5)
AR = dict(neighbouring="add-remove")  # DP-SGD's classical analysis (Abadi et al. 2016)


@pytest.fixture(scope="module")
def dp_accounting_values():
    from dp_accounting import dp_event as de
    from dp_accounting.pld import pld_privacy_accountant as pa
    from dp_accounting.rdp import rdp_privacy_accountant as ra

    ev = de.PoissonSampledDpEvent(0.004, de.GaussianDpEvent(1.1))
    rdp = ra.RdpAccountant().compose(ev, 15000).get_epsilon(1e-5)
    pld = pa.PLDAccountant().compose(ev, 15000).get_epsilon(1e-5)
    return rdp, pld


def test_account_rdp_example(dp_accounting_values):
    out = account_command(**ISSUE_EXAMPLE, **AR, accountant="rdp", json_output=True)
    assert out["accountant"] == "rdp"
    assert out["neighbouring"] == "add-remove"  # asked for: the add/remove analysis
    assert out["epsilon"] == pytest.approx(dp_accounting_values[0], rel=1e-3)
    assert out["epsilon"] <= dp_accounting_values[0] * (1 + 1e-9)
    assert out["order"] > 1 and out["seconds"] >= 0
    assert {k: out[k] for k in ISSUE_EXAMPLE} == ISSUE_EXAMPLE
    text = render(out, json_output=True)
    assert json.loads(text)["epsilon"] == pytest.approx(out["epsilon"])


def test_account_pld_example_matches_dp_accounting_and_beats_rdp(dp_accounting_values):
    out = account_command(**ISSUE_EXAMPLE, **AR, accountant="pld", json_output=True)
    # dperm's vectorised PLD: dp-accounting's discretisation, up to FFT rounding
    assert out["epsilon"] == pytest.approx(dp_accounting_values[1], rel=1e-6)
    assert out["epsilon"] < account_command(**ISSUE_EXAMPLE, **AR)["epsilon"]
    assert "order" not in out


def test_account_without_replacement_and_errors():
    out = account_command(1.0, sampling_rate=0.01, steps=100, sampling="without_replacement")
    assert 0 < out["epsilon"] < math.inf
    assert out["neighbouring"] == "replace-one"  # WBK19 is a replace-one bound
    same = account_command(
        1.0, sampling_rate=0.01, steps=100, sampling="without_replacement", population_size=1000
    )
    assert same["epsilon"] == pytest.approx(out["epsilon"], rel=1e-12)
    with pytest.raises(UnknownNameError):
        account_command(1.0, accountant="moments")
    with pytest.raises(UnknownNameError):
        account_command(1.0, sampling="shuffle")
    with pytest.raises(UnsupportedEventError):
        account_command(1.0, accountant="basic")
    with pytest.raises(UnsupportedEventError, match="pld"):  # no exact replace-one RDP
        account_command(1.0, sampling_rate=0.5, accountant="rdp")
    with pytest.raises(InvalidPrivacyParameter, match="steps"):
        account_command(1.0, steps=-1)
    with pytest.raises(InvalidPrivacyParameter, match="sampling_rate"):
        account_command(1.0, sampling_rate=0.0)
    assert account_command(0.0, sampling_rate=0.5, steps=3)["epsilon"] == math.inf
    assert '"inf"' in render(account_command(0.0), json_output=True)
    assert "epsilon" in render(account_command(2.0))


def test_calibrate_command_round_trip():
    out = calibrate_command(2.0, 1e-5, sampling_rate=0.004, steps=15000, accountant="rdp", **AR)
    assert out["achieved_epsilon"] <= 2.0
    assert out["achieved_epsilon"] == pytest.approx(2.0, rel=1e-3)
    back = account_command(out["noise_multiplier"], 0.004, 15000, 1e-5, **AR)
    assert back["epsilon"] == pytest.approx(out["achieved_epsilon"], rel=1e-12)
    wor = calibrate_command(2.0, 1e-5, 0.01, 200, "rdp", sampling="without_replacement")
    assert wor["achieved_epsilon"] <= 2.0


def test_account_and_calibrate_default_to_the_relation_of_the_fits():
    """Every dperm fit is replace-one: so are dperm account / calibrate unless asked,
    with the PLD accountant (the exact replace-one Poisson-subsampled Gaussian)."""
    from dperm.accounting import PoissonSampled, SelfComposed, epsilon_spent
    from dperm.accounting.events import Gaussian

    out = account_command(1.1, sampling_rate=0.01, steps=300, delta=1e-5)
    assert out["neighbouring"] == "replace-one" and out["accountant"] == "pld"
    event = SelfComposed(PoissonSampled(0.01, Gaussian(1.1, neighbouring="replace-one")), 300)
    assert out["epsilon"] == pytest.approx(epsilon_spent(event, 1e-5, "pld"), rel=1e-9)
    cal = calibrate_command(1.0, 1e-5, sampling_rate=0.01, steps=300)
    assert cal["neighbouring"] == "replace-one" and cal["accountant"] == "pld"
    assert 0.99 <= cal["achieved_epsilon"] <= 1.0
    full = account_command(2.0, steps=10, delta=1e-5)  # q = 1: no subsampling, RDP is exact
    assert full["neighbouring"] == "replace-one" and full["accountant"] == "rdp"
