"""DPMLPClassifier's training recipe (issue #31, item 5): the quadratic feature map
(exact per-example clipping through it, numpy = torch), the default rule as pure
functions of public inputs, and weight decay as post-processing of the same privatized
gradients (the privacy event and the noise draws unchanged)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dperm.estimators.mlp import (  # noqa: E402
    DPMLPClassifier,
    default_hidden_layer_sizes,
    default_pca_components,
    default_quadratic_features,
)
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter  # noqa: E402
from dperm.networks import default_hyperparameters  # noqa: E402
from dperm.networks import fit as net_fit  # noqa: E402
from dperm.networks.mlp import (  # noqa: E402
    build_module,
    forward_numpy,
    init_parameters,
    quadratic_features,
    quadratic_width,
)
from dperm.networks.per_example import (  # noqa: E402
    clipped_gradient_sum,
    per_example_gradients,
)

torch.set_num_threads(1)


def _net(sizes, quadratic, activation="tanh", seed=0):
    co, ic = init_parameters(list(sizes), np.random.default_rng(seed))
    return build_module(co, ic, activation, dtype=torch.float64, quadratic=quadratic), co, ic


def test_quadratic_features_are_the_pairwise_products():
    Z = np.random.default_rng(0).normal(size=(7, 5))
    Q = quadratic_features(Z, 3)
    assert Q.shape == (7, quadratic_width(5, 3)) == (7, 11)
    np.testing.assert_array_equal(Q[:, :5], Z)
    expected = [Z[:, i] * Z[:, j] for i in range(3) for j in range(i, 3)]
    np.testing.assert_allclose(Q[:, 5:], np.stack(expected, axis=1), rtol=0, atol=0)
    assert quadratic_features(Z, 0) is Z


@pytest.mark.parametrize("hidden", [(), (4,)])
def test_clipping_through_the_quadratic_map_is_exact_on_both_paths(hidden):
    """The ghost identity holds with the row-wise quadratic layer in front: clipped
    sums equal those of one autograd call per example (the sensitivity C per record)."""
    net, co, ic = _net([quadratic_width(4, 3), *hidden, 3], quadratic=3)
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(9, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (9,), generator=gen)
    rows = []
    for i in range(9):
        loss = torch.nn.functional.cross_entropy(net(X[i : i + 1]), y[i : i + 1])
        grads = torch.autograd.grad(loss, list(net.parameters()))
        rows.append(torch.cat([g.reshape(-1) for g in grads]))
    G = torch.stack(rows)
    torch.testing.assert_close(per_example_gradients(net, "cross_entropy", X, y), G)
    norms = G.norm(dim=1)
    for C in (float(norms.min()) / 2, float(norms.median())):
        expected = (G * torch.clamp(C / norms, max=1.0)[:, None]).sum(0)
        for method in ("auto", "ghost", "vmap"):
            got = clipped_gradient_sum(net, "cross_entropy", X, y, C, method)
            torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)
    # the numpy forward pass (prediction without torch) is the same function
    with torch.no_grad():
        ref = net(X).numpy()
    np.testing.assert_allclose(forward_numpy(X.numpy(), co, ic, "tanh", quadratic=3), ref,
                               rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("n", [1_000, 60_000, 10**6])
def test_default_rule_is_a_function_of_public_inputs_monotone_in_epsilon(n):
    """The rule reads (n, d, k, ε) only; as ε grows the run gets no shorter, and the
    architecture stays (a quadratic classifier on every PCA component)."""
    k = default_pca_components(784, quadratic=True)
    assert k == 80 and default_pca_components(784) == 60 and default_pca_components(99) is None
    epsilons = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 1e3]
    epochs = [default_hyperparameters(n, e)["epochs"] for e in epsilons]
    assert epochs == sorted(epochs)
    assert all(default_hyperparameters(n, e)["batch_size"] == default_hyperparameters(n, 1.0)[
        "batch_size"] for e in epsilons)  # fmt: skip
    for e in epsilons:
        m = default_quadratic_features(k, e)
        assert m == k and default_hidden_layer_sizes(m) == ()
    assert default_quadratic_features(None, 2.0) == 0  # no PCA: raw features, no products
    assert default_hidden_layer_sizes(0) == (1000,)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        default_quadratic_features(60, -1.0)


def test_weight_decay_and_momentum_post_process_the_same_privatized_gradients():
    """Weight decay and momentum act after the noise: the same calibrated event, and the
    same noise draws (recovered from the plain run's iterates) predict the decayed run
    exactly — the data enter through the privatized sum only."""
    X = np.zeros((400, 1), np.float32)  # zero inputs: the data gradient of w is 0
    y = np.zeros(400, np.int64)
    kw = dict(loss="mse", noise_multiplier=1.5, batch_size=40, steps=25, learning_rate=0.3,
              averaging="last", random_state=7)  # fmt: skip

    def run(**extra):
        net = torch.nn.Sequential(torch.nn.Linear(1, 1, bias=False)).double()
        with torch.no_grad():
            net[0].weight.fill_(2.0)
        path = []
        res = net_fit(net, X, y[:, None].astype(np.float64), callback=lambda t, T, th: path.append(
            float(np.asarray(th)[0])), **kw, **extra)  # fmt: skip
        return res, np.array(path)

    plain, path = run()
    decayed, path_wd = run(weight_decay=0.1)
    assert decayed.event == plain.event
    assert decayed.diagnostics["noise_multiplier"] == plain.diagnostics["noise_multiplier"]
    steps = -np.diff(np.concatenate([[2.0], path])) / 0.3  # the noisy average gradients ĝ_t
    theta, expected = 2.0, []
    for g in steps:
        theta = theta - 0.3 * (g + 0.1 * theta)
        expected.append(theta)
    np.testing.assert_allclose(path_wd, expected, rtol=1e-10)
    heavy, path_m = run(momentum=0.5)
    assert heavy.event == plain.event
    v, theta, expected = 0.0, 2.0, []
    for g in steps:
        v = 0.5 * v + g
        theta -= 0.3 * v
        expected.append(theta)
    np.testing.assert_allclose(path_m, expected, rtol=1e-10)
    with pytest.raises(InvalidPrivacyParameter, match="weight_decay"):
        run(weight_decay=-1.0)


@pytest.fixture(scope="module")
def wide():
    """1 200 rows, 120 features, 3 classes shifted along the first 3 axes (PCA path)."""
    gen = np.random.default_rng(3)
    labels = gen.integers(0, 3, 1200)
    shift = np.zeros((1200, 120))
    shift[:, :3] = 3.0 * np.eye(3)[labels]
    return 0.3 * gen.normal(size=(1200, 120)) + shift, labels


def test_estimator_default_is_a_quadratic_classifier_and_options_apply(wide, tmp_path):
    import dperm

    X, y = wide
    kw = dict(epsilon=2.0, delta=1e-5, classes=[0, 1, 2], batch_size=60, epochs=3,
              random_state=0)  # fmt: skip
    clf = DPMLPClassifier(**kw).fit(X, y)
    assert clf.n_components_ == 80 and clf.quadratic_features_ == 80 and len(clf.coefs_) == 1
    assert clf.coefs_[0].shape == (quadratic_width(80, 80), 3)
    assert clf.score(X, y) > 0.9 and "quadratic feature map" in clf.privacy_statement()
    loaded = dperm.load(dperm.save(clf, tmp_path / "q.dperm"))
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    small = DPMLPClassifier(hidden_layer_sizes=(5,), quadratic_features=4, **kw).fit(X, y)
    assert [W.shape for W in small.coefs_] == [(quadratic_width(80, 4), 5), (5, 3)]
    assert small.dp_event_ == clf.dp_event_  # the features are post-processing
    plain = DPMLPClassifier(quadratic_features=None, **kw).fit(X, y)
    assert plain.quadratic_features_ == 0 and plain.coefs_[0].shape == (60, 1000)
    for bad in (-1, 81, 2.5, "x", True):
        with pytest.raises(InvalidPrivacyParameter, match="quadratic_features"):
            DPMLPClassifier(quadratic_features=bad, **kw).fit(X, y)
    with pytest.raises(InvalidPrivacyParameter, match="hidden_layer_sizes"):
        DPMLPClassifier(hidden_layer_sizes="big", **kw).fit(X, y)
    clf.quadratic_features_ = 7  # a tampered file: shapes no longer match
    with pytest.raises(InvalidDataError):
        clf._rebuild_from_file()
    assert math.isfinite(clf.noise_multiplier_)
