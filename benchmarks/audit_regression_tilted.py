"""Experiment (not an audit): importance-sampled privacy loss of DPLinearRegression()'s
default path on a strongly pushed pair — how far a tilted-noise audit could reach.

The regression audit (``dperm.audit.objective_llr``) is limited by Clopper–Pearson: the
large privacy losses of Huber objective perturbation have probability ≈ 10⁻⁴–10⁻³.  Here
the real default path runs with a ``numpy.random.Generator`` subclass that shifts the
standard normals of the noise by a·u_j along each block's unit row u_j (the only draw of
the path: ``gaussian_noise`` → ``standard_normal``), and each canary's score carries its
exact weight p(ξ_j)/q(ξ_j) = exp(−aξ_j + a²/2), ξ_j = ⟨ξ, u_j⟩, so that
P_D(LLR < l) = E_q[w·1{LLR < l}] is estimated from common events.  The weights are exact
for whatever the code does with the draws; a valid audit would still need a confidence
bound for weighted means (truncated weights plus the exact tail P_p(w > c)), which dperm
does not have yet.

    python benchmarks/audit_regression_tilted.py [RUNS] [PUSHERS]

Prints, per threshold l, the importance-sampled P_D, P_{D′} (± one standard error) next
to their exact values (``block_privacy_profile``) and ln((P_D − δ)/P_{D′}).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from dperm.audit.objective_llr import (
    _orthogonal_rows,
    block_privacy_profile,
    canary_rows,
    huber_objective_llrs,
    profile_epsilon,
    pushed_pair,
)
from dperm.estimators import DPLinearRegression

EPSILON, DELTA, S = 1.0, 1e-5, 0.5


class Tilted(np.random.Generator):
    """A Generator whose draws of ``shift.shape`` standard normals are shifted by ``shift``."""

    def __init__(self, seed, shift):
        super().__init__(np.random.PCG64(seed))
        self.shift = shift
        self.xi = None

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        xi = super().standard_normal(size)
        if np.shape(xi) == self.shift.shape:
            xi = xi + self.shift
            self.xi = xi.copy()
        return xi


def main(runs: int = 4000, pushers: int = 50) -> None:
    n = 5 * (pushers + 1)
    pair = pushed_pair(n)
    dg = DPLinearRegression(epsilon=EPSILON, delta=DELTA, random_state=0).fit(pair.X, pair.y)
    dg = dg.diagnostics_
    R, sigma = dg["data_norm"], dg["noise_scale"]
    a = pushers * dg["lipschitz"] / sigma  # the slab sits at t ≈ m·hR
    U = np.hstack([_orthogonal_rows(), np.full((5, 1), S)]) / R
    shift = a * U.sum(axis=0)
    llr, w_d, w_p = block_privacy_profile(
        data_norm=R,
        lipschitz=dg["lipschitz"],
        l2_total=dg["l2_total"],
        noise_scale=sigma,
        n=n,
        pushers=pushers,
        grid=2_000_001,
    )
    print(f"n = {n}, σ = {sigma:.3f}, tilt a = {a:.3f}, ε_J = {dg['epsilon_jacobian']:.3f}")
    print(f"exact ε({DELTA:g}) of the pair: {profile_epsilon(llr, w_d, w_p, DELTA):.3f}")

    def run(X, y, seed):
        rng = Tilted(seed, shift)
        est = DPLinearRegression(epsilon=EPSILON, delta=DELTA, random_state=rng).fit(X, y)
        theta = np.append(est.coef_.ravel(), est.intercept_ / S)
        scores = huber_objective_llrs(
            theta,
            X,
            y,
            canary_rows(n),
            loss=est.loss_,
            l2_total=est.diagnostics_["l2_total"],
            noise_scale=est.diagnostics_["noise_scale"],
            intercept_scaling=S,
        )
        xi = U @ rng.xi
        return scores, np.exp(-a * xi + a * a / 2.0)

    t0 = time.perf_counter()
    d = [run(pair.X, pair.y, i) for i in range(runs)]
    p = [run(pair.X_prime, pair.y_prime, 10**6 + i) for i in range(runs)]
    print(f"{2 * runs} fits in {time.perf_counter() - t0:.0f} s")
    l0, q0 = np.concatenate([s for s, _ in d]), np.concatenate([w for _, w in d])
    l1, q1 = np.concatenate([s for s, _ in p]), np.concatenate([w for _, w in p])
    for level in (-0.6, -0.7, -0.75, -0.8, -0.85):
        x0, x1 = q0 * (l0 < level), q1 * (l1 < level)
        p0, p1 = x0.mean(), x1.mean()
        se0, se1 = x0.std() / np.sqrt(x0.size), x1.std() / np.sqrt(x1.size)
        ratio = np.log((p0 - DELTA) / p1) if p1 > 0 and p0 > DELTA else float("nan")
        print(
            f"LLR < {level}: P_D {p0:.2e} ± {se0:.1e} (exact {w_d[llr < level].sum():.2e}), "
            f"P_D′ {p1:.2e} ± {se1:.1e} (exact {w_p[llr < level].sum():.2e}), "
            f"ln ratio {ratio:.3f}, {int((l0 < level).sum())} events"
        )


if __name__ == "__main__":
    main(*(int(v) for v in sys.argv[1:3]))
