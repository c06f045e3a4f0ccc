"""Screen of the regression audit's pair: how many pushers m maximise the expected
Clopper–Pearson bound of ``dperm audit --mechanism estimator-auto-regression``.

For each m the pair is ``pushed_pair(5(m + 1))``; σ and Λ + Δ are those of a real
``DPLinearRegression()`` fit on it (the default calibration), and the exact law of one
block (``block_privacy_profile``) stands in for the runner's scores: each replicate draws
``runs × 5`` scores per dataset from it and applies the auditor's own procedure
(``select_threshold`` on one half at the stricter selection level, ``evaluate_test`` on
the other, 95 %, δ = 10⁻⁵).  Seconds per m instead of an audit's ten minutes.

    python benchmarks/sweep_regression_pair.py [EPSILON] [RUNS] [PUSHERS,...] [REPLICATES]

defaults 1.0, 30000, 10,14,20,30, 8.  Prints per m: ε_J, the pair's exact ε(10⁻⁵)
(``profile_epsilon``), and the mean and sd of the simulated audit bound.
"""

from __future__ import annotations

import sys

import numpy as np

from dperm.audit.auditor import _SELECTION_STRICTNESS
from dperm.audit.objective_llr import (
    BLOCKS,
    block_privacy_profile,
    profile_epsilon,
    pushed_pair,
)
from dperm.audit.stats import evaluate_test, select_threshold
from dperm.estimators import DPLinearRegression

DELTA = 1e-5
CONFIDENCE = 0.95


def block_law(epsilon: float, pushers: int):
    """(ε_J, llr, w_D, w_D′) of one block of the pair with ``pushers`` pushers."""
    n = BLOCKS * (pushers + 1)
    p = pushed_pair(n)
    dg = DPLinearRegression(epsilon=epsilon, delta=DELTA, random_state=0).fit(p.X, p.y)
    dg = dg.diagnostics_
    llr, w_d, w_p = block_privacy_profile(
        data_norm=dg["data_norm"],
        lipschitz=dg["lipschitz"],
        l2_total=dg["l2_total"],
        noise_scale=dg["noise_scale"],
        n=n,
        pushers=pushers,
    )
    return dg["epsilon_jacobian"], llr, w_d / w_d.sum(), w_p / w_p.sum()


def simulated_audit(llr, w_d, w_p, runs: int, rng) -> float:
    """One audit's Clopper–Pearson bound on ``runs × BLOCKS`` scores per dataset."""
    size = runs * BLOCKS
    jitter = 1e-9  # break the grid's ties as continuous scores would
    s0 = llr[rng.choice(llr.size, size, p=w_d)] + rng.uniform(-jitter, jitter, size)
    s1 = llr[rng.choice(llr.size, size, p=w_p)] + rng.uniform(-jitter, jitter, size)
    half = size // 2
    sel_conf = 1.0 - (1.0 - CONFIDENCE) / _SELECTION_STRICTNESS
    test, _ = select_threshold(s0[:half], s1[:half], delta=DELTA, confidence=sel_conf)
    ev = evaluate_test(test, s0[half:], s1[half:], delta=DELTA, confidence=CONFIDENCE)
    return float(ev["epsilon_lower_bound"])


def main(argv: list[str]) -> None:
    epsilon = float(argv[0]) if argv else 1.0
    runs = int(argv[1]) if len(argv) > 1 else 30_000
    ms = [int(m) for m in argv[2].split(",")] if len(argv) > 2 else [10, 14, 20, 30]
    reps = int(argv[3]) if len(argv) > 3 else 8
    rng = np.random.default_rng(0)
    print(f"ε = {epsilon}, {runs} runs per dataset, {reps} replicates")
    for m in ms:
        eps_j, llr, w_d, w_p = block_law(epsilon, m)
        exact = profile_epsilon(llr, w_d, w_p, DELTA)
        bounds = [simulated_audit(llr, w_d, w_p, runs, rng) for _ in range(reps)]
        print(
            f"m = {m:3d} (n = {BLOCKS * (m + 1)}): ε_J = {eps_j:.3f}, exact ε = {exact:.3f}, "
            f"audit bound {np.mean(bounds):.3f} ± {np.std(bounds):.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
