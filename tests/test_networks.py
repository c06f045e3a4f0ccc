"""dperm.networks: per-example gradients from PyTorch, DP-SGD for any module, DP PCA.

The per-example gradients are checked against an independent computation (one
``torch.autograd.grad`` call per example); the noise against its closed-form law; the
calibration against dp-accounting (an independent accountant) on both sides — the run
spends ≥ 99 % of its ε and never more; the public-size rule under add/remove by
running on data of another size.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

from dperm.accounting import Ledger  # noqa: E402
from dperm.accounting.events import Composed, Gaussian, PoissonSampled, SelfComposed  # noqa: E402
from dperm.exceptions import (  # noqa: E402
    InvalidDataError,
    InvalidPrivacyParameter,
    UnknownNameError,
)
from dperm.networks import (  # noqa: E402
    DPPCA,
    analyze_gauss,
    calibrate,
    covariance_sensitivity,
    make_plan,
)
from dperm.networks import fit as net_fit  # noqa: E402
from dperm.networks._torch import flat_parameters  # noqa: E402
from dperm.networks.mlp import build_module, forward_numpy, init_parameters  # noqa: E402
from dperm.networks.per_example import (  # noqa: E402
    clipped_gradient_sum,
    per_example_gradients,
)

torch.set_num_threads(1)


def _mlp(activation="relu", sizes=(5, 7, 3), seed=0):
    co, ic = init_parameters(list(sizes), np.random.default_rng(seed))
    return build_module(co, ic, activation, (2.0, 3.0, 1.0), dtype=torch.float64)


def _loop_grads(module, X, y):
    """Independent per-example gradients: one autograd call per example."""
    rows = []
    for i in range(X.shape[0]):
        out = module(X[i : i + 1])
        loss = torch.nn.functional.cross_entropy(out, y[i : i + 1])
        g = torch.autograd.grad(loss, list(module.parameters()))
        rows.append(torch.cat([t.reshape(-1) for t in g]))
    return torch.stack(rows)


@pytest.mark.parametrize("activation", ["relu", "tanh", "tempered_sigmoid"])
def test_per_example_gradients_match_one_autograd_call_per_example(activation):
    net = _mlp(activation)
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(9, 5, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (9,), generator=gen)
    G = _loop_grads(net, X, y)
    torch.testing.assert_close(per_example_gradients(net, "cross_entropy", X, y), G)
    norms = G.norm(dim=1)
    for C in (float(norms.min()) / 2, float(norms.median()), 10 * float(norms.max())):
        expected = (G * torch.clamp(C / norms, max=1.0)[:, None]).sum(0)
        for method in ("auto", "ghost", "materialise", "vmap"):
            got = clipped_gradient_sum(net, "cross_entropy", X, y, C, method)
            torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)


def test_every_layer_path_agrees_with_vmap_and_frozen_layers_are_not_released():
    torch.manual_seed(0)
    conv = torch.nn.Sequential(
        torch.nn.Conv1d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(6, 2)
    ).double()
    X = torch.randn(4, 1, 5, dtype=torch.float64)
    y0 = torch.zeros(4, dtype=torch.long)
    ref = clipped_gradient_sum(conv, "cross_entropy", X, y0, 0.1, "vmap")
    for method in ("auto", "ghost", "materialise"):
        g = clipped_gradient_sum(conv, "cross_entropy", X, y0, 0.1, method)
        torch.testing.assert_close(g, ref, rtol=1e-9, atol=1e-12)
    assert ref.shape == (sum(p.numel() for p in conv.parameters()),)
    conv[0].weight.requires_grad_(False)  # frozen (public) parameters are not trained
    g = clipped_gradient_sum(conv, "cross_entropy", X, y0, 1.0)
    assert g.shape == (sum(p.numel() for p in conv.parameters() if p.requires_grad),)
    assert float(g.norm()) <= 4.0 + 1e-6
    assert all(p.grad is None for p in conv.parameters())  # no unclipped sum left behind


def test_non_finite_per_example_gradient_contributes_zero():
    net = _mlp(sizes=(2, 3, 2))
    X = torch.tensor([[1.0, 2.0], [float("nan"), 0.0]], dtype=torch.float64)
    y = torch.tensor([0, 1])
    for method in ("auto", "vmap"):
        got = clipped_gradient_sum(net, "cross_entropy", X, y, 1.0, method)
        ref = clipped_gradient_sum(net, "cross_entropy", X[:1], y[:1], 1.0, method)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, ref)


def test_bad_modules_losses_and_methods_raise():
    bn = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    X, y = np.zeros((10, 2), np.float32), np.zeros(10, int)
    with pytest.raises(InvalidPrivacyParameter, match="BatchNorm1d"):
        net_fit(bn, X, y, noise_multiplier=1.0)
    with pytest.raises(InvalidPrivacyParameter, match=r"torch\.nn\.Module"):
        net_fit(lambda x: x, X, y, noise_multiplier=1.0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with pytest.raises(UnknownNameError, match="loss"):
        net_fit(net, X, y, loss="hinge", noise_multiplier=1.0)
    with pytest.raises(InvalidDataError, match="one value per example"):
        net_fit(net, X, y, loss=lambda o, t: o.sum(), noise_multiplier=1.0, steps=1)
    with pytest.raises(UnknownNameError, match="method"):
        clipped_gradient_sum(net, "mse", torch.zeros(2, 2), torch.zeros(2, 2), 1.0, "x")
    with pytest.raises(InvalidDataError, match="NaN"):
        net_fit(net, np.full((10, 2), np.nan, np.float32), y, noise_multiplier=1.0)
    with pytest.raises(InvalidDataError, match="class indices"):
        net_fit(net, X, np.full(10, 0.5), noise_multiplier=1.0)
    with pytest.raises(InvalidPrivacyParameter, match="dataset_size"):
        net_fit(net, X, y, epsilon=1.0, delta=1e-5, neighbouring="add-remove")
    with pytest.raises(InvalidPrivacyParameter, match="clipping_norm"):
        net_fit(net, X, y, noise_multiplier=1.0, clipping_norm=0.0)
    with pytest.raises(InvalidPrivacyParameter, match="device"):
        net_fit(net, X, y, noise_multiplier=1.0, device=3.5)


def _dp_accounting_epsilon(event, delta: float) -> float:
    """ε of a dperm event by dp-accounting's PLD accountant, built independently:
    dperm's Gaussian(z) of a replace-one lot sum has std z·2C and dp-accounting's
    REPLACE_ONE Gaussian(m) compares shifts ±1 of std m (records differ by 2), so
    m = 2z; a plain replace-one Gaussian(s) is μ = 1/s, i.e. dp-accounting's m = 2s."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import pld_privacy_accountant

    def convert(e):
        if isinstance(e, Composed):
            return dp_event.ComposedDpEvent([convert(x) for x in e.events])
        if isinstance(e, SelfComposed):
            return dp_event.SelfComposedDpEvent(convert(e.event), e.count)
        if isinstance(e, PoissonSampled):
            return dp_event.PoissonSampledDpEvent(e.sampling_rate, convert(e.event))
        assert isinstance(e, Gaussian)
        return dp_event.GaussianDpEvent(2.0 * e.noise_multiplier)

    acc = pld_privacy_accountant.PLDAccountant(NeighboringRelation.REPLACE_ONE)
    acc.compose(convert(event))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("ratio", [None, 2.0])
def test_calibration_spends_its_epsilon_by_an_independent_accountant(ratio):
    """Both sides: dp-accounting certifies the calibrated event at ≤ ε, and ≥ 0.99 ε
    (the noise is not over-calibrated); with the PCA companion the *composed* event
    is the one certified."""
    sampler, steps, _ = make_plan(
        6000, epsilon=1.0, neighbouring="replace-one", dataset_size=None, epochs=2
    )
    z, event, spent = calibrate(
        sampler, steps, epsilon=1.0, delta=1e-5, accountant="pld", companion_ratio=ratio
    )
    if ratio is None:
        assert event == SelfComposed(PoissonSampled(0.02, Gaussian(z)), steps)
    else:
        assert event.events[0] == Gaussian(ratio * z)
    eps = _dp_accounting_epsilon(event, 1e-5)
    assert 0.99 <= eps <= 1.0 + 1e-3, eps
    assert spent <= 1.0 + 1e-9


def test_fit_adds_gaussian_noise_of_the_calibrated_std():
    """With zero gradients (zero inputs, no bias) each step moves θ by −η·ξ/m with
    ξ ~ N(0, (z·2C)² I): the steps' increments are i.i.d. normal of the claimed std
    (KS test, p > 1e-3), and the same test rejects a 10 % scale error (power)."""
    X = np.zeros((400, 20), np.float32)
    y = np.zeros(400, int)
    net = torch.nn.Sequential(torch.nn.Linear(20, 5, bias=False))
    thetas = [flat_parameters(net)]
    r = net_fit(
        net, X, y, epsilon=1.0, delta=1e-5, clipping_norm=0.7, batch_size=40, steps=60,
        learning_rate=0.3, averaging="last", random_state=3,
        callback=lambda t, T, th: thetas.append(np.array(th)),
    )  # fmt: skip
    d = r.diagnostics
    std = 0.3 * d["noise_multiplier"] * 2 * 0.7 / 40.0
    assert math.isclose(d["noise_std"], d["noise_multiplier"] * 1.4 / 40.0)
    inc = np.diff(np.vstack(thetas), axis=0).ravel()
    assert stats.kstest(inc / std, "norm").pvalue > 1e-3
    assert stats.kstest(inc / (1.1 * std), "norm").pvalue < 1e-3
    assert _dp_accounting_epsilon(r.event, 1e-5) <= 1.0 + 1e-3


def test_add_remove_constants_come_from_the_public_dataset_size():
    """Under add/remove, T, q and the normaliser are functions of ``dataset_size``: a
    run on 101 rows with dataset_size=100 has the constants of 100 rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(101, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    outs = []
    for rows in (100, 101):
        net = torch.nn.Sequential(torch.nn.Linear(3, 2))
        r = net_fit(
            net, X[:rows], y[:rows], epsilon=1.0, delta=1e-5, neighbouring="add-remove",
            dataset_size=100, random_state=0,
        )  # fmt: skip
        outs.append(r.diagnostics)
        assert r.event.neighbouring == "add-remove"
    keys = ("steps", "sampling_rate", "normalizer", "noise_multiplier", "learning_rate")
    assert [outs[0][k] for k in keys] == [outs[1][k] for k in keys]
    assert outs[0]["normalizer"] == 16.0 and outs[0]["sensitivity"] == 1.0


def test_fit_trains_a_module_in_place_reproducibly():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4)).astype(np.float32)
    y = (X[:, 0] - X[:, 1] > 0).astype(int)

    def run():
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
        r = net_fit(net, X, y, epsilon=4.0, delta=1e-5, batch_size=150, epochs=10, random_state=5)
        return net, r

    net, r = run()
    with torch.no_grad():
        acc = (net(torch.from_numpy(X)).argmax(1).numpy() == y).mean()
    assert acc > 0.9
    np.testing.assert_array_equal(r.theta, run()[1].theta)
    assert r.diagnostics["layers"] == ("linear", "linear")
    assert r.diagnostics["method"] == "auto" and r.diagnostics["n_parameters"] == 114


# ------------------------------------------------------------------------------ DP PCA
def test_covariance_sensitivity_is_attained_by_the_worst_pair():
    """‖u(xxᵀ − x′x′ᵀ)‖₂ for x = R e₁, x′ = R e₂ is √2 R² (replace-one), and
    ‖u(xxᵀ)‖₂ = R² (add/remove); random pairs never exceed the bounds."""
    R, d = 1.7, 4
    iu = np.triu_indices(d)

    def u(A):
        return A[iu]

    e = np.eye(d) * R
    ro = np.linalg.norm(u(np.outer(e[0], e[0]) - np.outer(e[1], e[1])))
    ar = np.linalg.norm(u(np.outer(e[0], e[0])))
    assert math.isclose(ro, covariance_sensitivity(R, "replace-one"))
    assert math.isclose(ar, covariance_sensitivity(R, "add-remove"))
    rng = np.random.default_rng(0)
    V = rng.normal(size=(2000, 2, d))
    V *= R * rng.uniform(0, 1, (2000, 2, 1)) / np.linalg.norm(V, axis=2, keepdims=True)
    diffs = np.einsum("ni,nj->nij", V[:, 0], V[:, 0]) - np.einsum("ni,nj->nij", V[:, 1], V[:, 1])
    assert np.linalg.norm(diffs[:, iu[0], iu[1]], axis=1).max() <= ro * (1 + 1e-12)


def test_analyze_gauss_noise_has_the_claimed_scale():
    """On X = 0 the released matrix is the noise E: Σλ² = ‖E‖_F², whose mean is
    σ²d² (d diagonal + d(d−1) mirrored off-diagonal N(0, σ²) entries) — a closed form
    tested over 200 releases within 5 standard errors."""
    d, s = 6, 0.8
    sigma = s * covariance_sensitivity(1.0, "replace-one")
    rng = np.random.default_rng(0)
    vals = []
    for _ in range(200):
        _, eig, ev, _ = analyze_gauss(
            np.zeros((3, d)), d, noise_multiplier=s, data_norm=1.0, random_state=rng
        )
        vals.append(np.sum(eig**2) / sigma**2)
    vals = np.array(vals)
    var = 2 * d + 4 * d * (d - 1)  # Var(Σ diag²) + Var(2 Σ_{i<j} off²)
    assert abs(vals.mean() - d * d) <= 5 * math.sqrt(var / vals.size)
    assert ev == Gaussian(s, neighbouring="replace-one")


def test_dppca_finds_the_top_direction_and_accounts_itself():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4000, 5)) * [1.0, 0.2, 0.1, 0.1, 0.1]
    pca = DPPCA(n_components=2, epsilon=1.0, delta=1e-6, data_norm=3.0, random_state=0)
    with pytest.warns(Warning, match="clipped"):
        pca.fit(X)
    assert abs(pca.components_[0, 0]) > 0.99
    assert pca.dp_event_ == Gaussian(pca.noise_multiplier_, neighbouring="replace-one")
    from dperm.accounting.gaussian import gaussian_epsilon

    assert math.isclose(gaussian_epsilon(pca.noise_multiplier_, 1e-6), 1.0, rel_tol=1e-6)
    Z = pca.transform(X)
    assert Z.shape == (4000, 2) and np.linalg.norm(Z, axis=1).max() <= 3.0 + 1e-9
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        DPPCA(neighbouring="add-remove").fit(X)
    with pytest.raises(InvalidPrivacyParameter, match="n_components"):
        DPPCA(n_components=9).fit(X)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_dppca_refuses_non_finite_rows_before_charging_anything(bad):

    X = np.random.default_rng(4).normal(size=(50, 3)) / 10.0  # rows inside data_norm = 1
    X[7, 1] = bad
    ledger = Ledger(epsilon=2.0, delta=1e-5)
    with ledger.active(), pytest.raises(InvalidDataError, match="NaN or infinity"):
        DPPCA(n_components=1, epsilon=1.0, delta=1e-6, random_state=0).fit(X)
    assert ledger.events == () and ledger.reservations == ()
    X[7, 1] = 0.0
    with ledger.active():
        DPPCA(n_components=1, epsilon=1.0, delta=1e-6, random_state=0).fit(X)
    assert len(ledger.events) == 1 and ledger.spent()[0] > 0.0


def test_numpy_forward_matches_the_torch_module():
    co, ic = init_parameters([5, 8, 4, 3], np.random.default_rng(2))
    X = np.random.default_rng(3).normal(size=(7, 5))
    for act in ("relu", "tanh", "sigmoid", "tempered_sigmoid"):
        net = build_module(co, ic, act, (2.0, 4.0, 1.0), dtype=torch.float64)
        with torch.no_grad():
            ref = net(torch.from_numpy(X)).numpy()
        np.testing.assert_allclose(forward_numpy(X, co, ic, act, (2.0, 4.0, 1.0)), ref, rtol=1e-12)
