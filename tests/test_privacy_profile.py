"""Privacy profile δ(ε) and privacy-loss distribution, against closed forms."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm
from typer.testing import CliRunner

from dperm.accounting.events import (
    ADD_REMOVE,
    Composed,
    Gaussian,
    Laplace,
    NonPrivate,
    PoissonSampled,
    PureEpsilon,
    SampledWithoutReplacement,
    SelfComposed,
)
from dperm.cli import app
from dperm.exceptions import InvalidPrivacyParameter, UnsupportedEventError
from dperm.privacy_profile import (
    plot_privacy_profile,
    privacy_loss_distribution,
    privacy_profile,
)


def _gauss_delta(eps, mu):
    return norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("sigma", [0.7, 2.0])
def test_gaussian_profile_closed_form(sigma):
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    got = privacy_profile(Gaussian(sigma), eps)
    want = _gauss_delta(eps, 1.0 / sigma)
    assert np.all(got >= want - 1e-9)  # pessimistic discretization
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-6)


def test_composition_of_gaussians_is_gaussian_with_sqrt_k():
    got = privacy_profile(SelfComposed(Gaussian(2.0), 4), [1.0])
    np.testing.assert_allclose(got, _gauss_delta(1.0, 1.0), rtol=2e-2)


def test_pure_epsilon_profile_closed_form():
    # dominating pair of ε-DP: δ(e) = (e^ε − e^e)/(1 + e^ε) for e ≤ ε, 0 beyond
    e0 = 1.0
    eps = np.array([0.0, 0.3, 0.9, 1.0, 1.5])
    want = np.maximum(0.0, (math.exp(e0) - np.exp(eps)) / (1 + math.exp(e0)))
    np.testing.assert_allclose(privacy_profile(PureEpsilon(e0), eps), want, atol=1e-3)


def test_pld_moments_gaussian_and_identity():
    mu = 1.0 / 1.5
    pld = privacy_loss_distribution(Gaussian(1.5))
    p, l = pld["probs"], pld["losses"]
    assert p.sum() + pld["infinity_mass"] == pytest.approx(1.0, abs=1e-9)
    mean = float(np.sum(p * l))
    var = float(np.sum(p * l * l)) - mean**2
    assert mean == pytest.approx(mu**2 / 2, abs=5e-3)
    assert var == pytest.approx(mu**2, rel=2e-2)
    # δ(ε) = E(1 − e^{ε − L})₊ from the PMF equals the accountant's profile
    for eps in (0.2, 1.0):
        d = float(np.sum(p * np.maximum(0.0, 1 - np.exp(eps - l)))) + pld["infinity_mass"]
        assert d == pytest.approx(privacy_profile(Gaussian(1.5), [eps])[0], rel=1e-6, abs=1e-12)


def test_relation_and_unbounded_events():
    ev = SelfComposed(PoissonSampled(0.01, Gaussian(1.0, neighbouring=ADD_REMOVE)), 50)
    assert privacy_loss_distribution(ev)["neighbouring"] == ADD_REMOVE
    assert privacy_loss_distribution(NonPrivate())["infinity_mass"] == 1.0
    assert privacy_profile(NonPrivate(), [5.0])[0] == 1.0
    lap = privacy_profile(Composed([Laplace(1.0), PureEpsilon(0.5)]), [10.0])
    assert lap[0] < 1e-3


def test_errors():
    with pytest.raises(InvalidPrivacyParameter, match="epsilons"):
        privacy_profile(Gaussian(1.0), [-1.0])
    with pytest.raises(UnsupportedEventError):
        privacy_profile("gaussian", [1.0])
    with pytest.raises(UnsupportedEventError):
        privacy_profile(SampledWithoutReplacement(10, 100, Laplace(1.0)), [1.0])
    with pytest.raises(InvalidPrivacyParameter, match="value_discretization_interval"):
        privacy_profile(Gaussian(1.0), [1.0], value_discretization_interval=0.0)


def _is_png(path):
    with open(path, "rb") as fh:
        return fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_writes_png(tmp_path):
    out = plot_privacy_profile(PureEpsilon(1.0), tmp_path / "p.png", delta=1e-5)
    assert _is_png(out)


def test_cli_account_plot(tmp_path):
    target = tmp_path / "profile.png"
    res = CliRunner().invoke(
        app,
        [
            "account",
            "--noise-multiplier",
            "1.1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "100",
            "--accountant",
            "pld",
            "--json",
            "--plot",
            str(target),
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["plot"] == str(target) and _is_png(target)
