"""Audit of the network DP-SGD path (runner ``network-dp-sgd``): the default
``dperm.networks.fit`` observed step by step with Dirac canaries is not refuted at its
claim, reaches a useful fraction of it, and the likeliest bugs — per-example clipping
skipped, the noise of the add/remove sensitivity under replace-one, the accountant's
sampling rate from the wrong n, the DP PCA of ``DPMLPClassifier`` without noise — are
caught (mutation tests).

The runner trains a linear torch module on n = 100 Dirac canaries (row j = e_j) with
the loss −50·y·⟨w, x⟩ (fits._canary_loss): every per-example gradient has norm 50 ≫
C = 1, so with clipping canary j moves each lot's sum by exactly ∓C·e_j, and the
white-box auditor (dperm.audit.whitebox) scores each canary by the exact likelihood
ratio of its coordinate of every step's noisy sum: 100 independent scores per run.
Runs are kept in-process (``n_jobs=1``: no torch import per worker); the full-power
honest audit is ``dperm audit --mechanism network-dp-sgd`` (docs/auditing.md).
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dperm.audit import audit, get_runner  # noqa: E402
from dperm.networks import _clipper  # noqa: E402

EPSILON, DELTA = 1.0, 1e-5
torch.set_num_threads(1)


def _no_clipping(sq_norms, clipping_norm):
    return torch.ones_like(sq_norms), torch.isfinite(sq_norms)


def _network_dp_sgd_without_clipping(X, y, epsilon, delta, rng):
    """Bug: per-example gradients are summed unclipped (sensitivity 50 instead of 1)."""
    with mock.patch.object(_clipper, "clip_factors", _no_clipping):
        return get_runner("network-dp-sgd").fn(X, y, epsilon, delta, rng)


def test_network_runner_is_the_default_path_observed_step_by_step():
    r = get_runner("network-dp-sgd")
    assert r.available() and r.neighbouring == "replace-one" and r.method == "gdp-fit"
    assert "white box" in r.threat_model
    pair = r.make_pair()
    assert pair.X.shape == (100, 100) and np.all(pair.y == -1) and np.all(pair.y_prime == 1)
    a = r.fn(pair.X_prime, pair.y_prime, EPSILON, DELTA, np.random.default_rng(0))
    b = _network_dp_sgd_without_clipping(
        pair.X_prime, pair.y_prime, EPSILON, DELTA, np.random.default_rng(0)
    )
    # one log-likelihood ratio per canary; liveness: the mutation changes them
    assert a.shape == (100,) and np.all(np.isfinite(a)) and not np.allclose(a, b)


def test_honest_network_dp_sgd_is_not_refuted_and_has_power():
    # 6 runs per dataset = 600 scores each: μ_LB ≈ 0.26 − 1.645·0.058 → ε_LB ≈ 0.55 of
    # the claim (0.88 with the CLI's 100 runs, docs/auditing.md); not refuted
    res = audit("network-dp-sgd", epsilon=EPSILON, runs=6, random_state=13, n_jobs=1)
    assert not res.violated and not res.violated_assumption_free, res.summary()
    assert 0.3 <= res.epsilon_lower_bound <= EPSILON and res.evaluation_runs == 300


@pytest.mark.parametrize(
    "name",
    ["network-dp-sgd[add-remove-sensitivity]", "network-dp-sgd[sampling-rate-from-wrong-n]"],
)
def test_network_mutants_are_refuted(name):
    # noise z·C instead of z·2C, or z calibrated for q/2: μ ≈ 0.47 instead of 0.26
    res = audit(name, epsilon=EPSILON, runs=4, random_state=12, n_jobs=1)
    assert get_runner(name).mutant and res.violated, res.summary()


def test_mutation_clipping_skipped_is_caught():
    base = get_runner("network-dp-sgd")
    broken = base.mutate(_network_dp_sgd_without_clipping, "network-dp-sgd[no-clipping]")
    assert broken.mutant
    # the canary's contribution grows 50-fold: refuted with two runs (200 scores)
    res = audit(broken, epsilon=EPSILON, runs=2, random_state=12, n_jobs=1)
    assert res.violated and res.epsilon_lower_bound > 2.0, res.summary()


def test_pca_noise_dropped_is_refuted_assumption_free():
    # without noise the released span contains e₃ on D and e₄ on D′: perfectly separated,
    # refuted by the Clopper–Pearson bound with 30 runs per dataset
    res = audit("dp-mlp-pca[pca-noise-dropped]", epsilon=EPSILON, runs=30, random_state=3, n_jobs=1)
    assert res.method == "clopper-pearson" and res.violated_assumption_free, res.summary()
