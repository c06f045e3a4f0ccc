"""Audit of DP-SGD in the user's own loop (runner ``network-user-loop``):
``dperm.networks.make_private`` with Adam and a loss averaged over each lot, observed
step by step with Dirac canaries, is not refuted at its claim, reaches a useful fraction
of it, and the likeliest bugs of that path — per-example gradients of the mean loss
clipped before their rescaling by the lot size, the noise of the add/remove sensitivity
under replace-one — are refuted (mutation tests).

The runner trains a linear module on n = 100 Dirac canaries (row j = e_j) with the loss
−50·y·⟨w, x⟩ averaged over each lot: the per-example gradient recovered from the mean has
norm 50 ≫ C = 1, so canary j moves each lot's noisy sum by exactly ∓C·e_j, which the DP
optimizer reports to the white-box observer (dperm.audit.whitebox); each canary is scored
by the exact likelihood ratio of its coordinate over the steps.  The full-power honest
audit is ``dperm audit --mechanism network-user-loop`` (docs/auditing.md).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dperm.audit import audit, get_runner  # noqa: E402

EPSILON = 1.0
torch.set_num_threads(1)


def test_the_runner_is_the_user_loop_observed_step_by_step():
    r = get_runner("network-user-loop")
    assert r.available() and r.neighbouring == "replace-one" and r.method == "gdp-fit"
    assert "white box" in r.threat_model
    pair = r.make_pair()
    a = r.fn(pair.X_prime, pair.y_prime, EPSILON, 1e-5, np.random.default_rng(0))
    b = r.fn(pair.X_prime, pair.y_prime, EPSILON, 1e-5, np.random.default_rng(0))
    assert a.shape == (100,) and np.all(np.isfinite(a)) and np.array_equal(a, b)


def test_honest_user_loop_is_not_refuted_and_has_power():
    # 6 runs per dataset = 600 scores each (0.8–0.9 with the CLI's 100 runs)
    res = audit("network-user-loop", epsilon=EPSILON, runs=6, random_state=13, n_jobs=1)
    assert not res.violated and not res.violated_assumption_free, res.summary()
    assert 0.3 <= res.epsilon_lower_bound <= EPSILON


@pytest.mark.parametrize(
    ("bug", "runs", "floor"),
    [("mean-rescaled-after-clipping", 2, 5.0), ("add-remove-sensitivity", 4, EPSILON)],
)
def test_user_loop_mutants_are_refuted(bug, runs, floor):
    name = f"network-user-loop[{bug}]"
    res = audit(name, epsilon=EPSILON, runs=runs, random_state=12, n_jobs=1)
    assert get_runner(name).mutant and res.violated, res.summary()
    assert res.epsilon_lower_bound > floor
