"""Audit of the network DP-SGD path (runner ``network-dp-sgd``): the default
``dperm.networks.fit`` with a canary gradient is not refuted at its claim, and the
likeliest bug — per-example clipping skipped — is caught (mutation test).

The runner trains a linear torch module on the canary pair with the loss
−50·y·⟨w, x⟩ (fits._canary_loss): every per-example gradient has norm 50·‖x‖ ≫ C = 1,
so with clipping the canary moves each lot's sum by exactly ±C·e_d, and without it by
±50·e_d.  The mutant patches the clip factors of :mod:`dperm.networks.per_example` to 1
for the duration of each run (the pattern of tests/test_audit_suite.py).  Runs are kept
in-process (``n_jobs=1``: no torch import per worker); the full-power honest audit is
``dperm audit network-dp-sgd`` (measured values in docs/neural_networks.md).
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dperm.audit import audit, get_runner  # noqa: E402
from dperm.networks import per_example  # noqa: E402

EPSILON, DELTA = 1.0, 1e-5
torch.set_num_threads(1)


def _no_clipping(sq_norms, clipping_norm):
    return torch.ones_like(sq_norms), torch.isfinite(sq_norms)


def _network_dp_sgd_without_clipping(X, y, epsilon, delta, rng):
    """Bug: per-example gradients are summed unclipped (sensitivity 50 instead of 1)."""
    with mock.patch.object(per_example, "_clip_factors", _no_clipping):
        return get_runner("network-dp-sgd").fn(X, y, epsilon, delta, rng)


def test_network_runner_is_the_default_path_with_a_canary_gradient():
    r = get_runner("network-dp-sgd")
    assert r.available() and r.neighbouring == "replace-one" and r.noise == "gaussian"
    pair = r.make_pair()
    a = r.fn(pair.X_prime, pair.y_prime, EPSILON, DELTA, np.random.default_rng(0))
    b = _network_dp_sgd_without_clipping(
        pair.X_prime, pair.y_prime, EPSILON, DELTA, np.random.default_rng(0)
    )
    # liveness: the mutation changes the release (the clipped canary moves w_d by ≤ C
    # per lot, the unclipped one by 50)
    assert a.shape == (pair.X.shape[1],) and not np.allclose(a, b)


def test_honest_network_dp_sgd_is_not_refuted():
    # 100 runs per dataset: a smoke test of the default path (a Gaussian release's
    # ε_LB at this size is ≈ 0); the powered audit is the CLI's (module docstring)
    res = audit("network-dp-sgd", epsilon=EPSILON, runs=100, random_state=11, n_jobs=1)
    assert not res.violated and not res.violated_assumption_free, res.summary()


def test_mutation_clipping_skipped_is_caught():
    base = get_runner("network-dp-sgd")
    broken = base.mutate(_network_dp_sgd_without_clipping, "network-dp-sgd[no-clipping]")
    assert broken.mutant
    # the canary's contribution grows 50-fold: the two release distributions barely
    # overlap, refuted with a few dozen runs
    res = audit(broken, epsilon=EPSILON, runs=50, random_state=12, n_jobs=1)
    assert res.violated and res.epsilon_lower_bound > 2.0, res.summary()
