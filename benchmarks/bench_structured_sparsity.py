"""Benchmark: structured sparsity the private way (issue #11 §6).

Usage::

    python benchmarks/bench_structured_sparsity.py [--n-samples 10000] [--seeds 5]
        [--epsilons 0.5 1 2 4] [--plot docs/gallery/structured_sparsity.png] [--markdown]

Data: ``dperm.datasets.load("group-sparse", random_state=seed)`` — d = 50 features in
10 disjoint groups of 5, groups 1 and 6 active, logistic labels, rows in the unit ball;
``--n-samples`` rows split half/half (default 5 000 training and 5 000 test rows).
Every seed draws new coefficients, rows, labels, split and noise.  δ = 1/n_train².

Methods (all with dperm's documented defaults; nothing is tuned on the test set):

* ``non-private`` — argmin of the mean logistic loss + (λ/n)·Ω + 10⁻⁴/2·‖θ‖², Ω the
  group norm Σ_g ‖θ_g‖∞, λ = K–D's rule L·R·√n/G (``kd_lambda``);
* ``structured-output`` — output perturbation of logistic + (λ/n)Ω + (Λ/2)‖θ‖²
  (K–D Thm 1, Λ = dperm's output-perturbation rule), released denoised:
  θ̂ + b kept on the support of prox_{τΩ}(θ̂ + b), zero elsewhere, with the public
  τ = q₀.₉(Ω*(b)) (the default, "hard" denoising);
* ``structured-output-raw`` — the same without denoising (K–D's release θ̂ + b);
* ``dual-fw`` — private Frank-Wolfe on the dual (K–D Alg. 2), T = 10, the defaults
  (release fraction 0.8, joint PLD calibration of the release, denoised);
* ``primal-fw`` — private Frank-Wolfe over the ℓ1 ball of radius 20 (Talwar,
  Thakurta, Zhang 2015), its default number of steps;
* ``objective-l1`` — objective perturbation with an ℓ1 penalty of the same
  mean-form weight λ/n (Kifer, Smith, Thakurta 2012), Λ by dperm's rule.

Metrics: test accuracy; group F1 — a group is called active when
‖θ_g‖₂ ≥ 0.25·max_h ‖θ_h‖₂ (a relative threshold fixed before any run, the same for
every method); support F1 — the groups with any non-zero coefficient (the support
a sparse estimate selects; 2/6 ≈ 0.33 for a dense release); the active energy
Σ_{g active}‖θ_g‖²/‖θ‖² (threshold-free); the excess empirical risk L̂(θ) − L̂(θ_ref)
of the plain mean logistic loss against the non-private solution.  Each cell is the
mean ± sd over the seeds.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import numpy as np

from dperm.algorithms import dual_frank_wolfe, frank_wolfe, objective_perturbation
from dperm.algorithms import structured_output_perturbation as sop
from dperm.constraints import L1Ball
from dperm.datasets import load
from dperm.datasets.group_sparse import ACTIVE_GROUPS, group_sparse_groups
from dperm.estimators._alpha_rules import objective_alpha_rule, output_alpha_rule
from dperm.exceptions import ClippingWarning
from dperm.losses import Logistic
from dperm.norms import GroupLinfNorm
from dperm.regularizers import L1
from dperm.solvers import minimize

METHODS = (
    "non-private",
    "structured-output",
    "structured-output-raw",
    "dual-fw",
    "primal-fw",
    "objective-l1",
)
METRICS = ("accuracy", "group_f1", "support_f1", "energy", "excess_risk")


def group_norms(theta, groups) -> np.ndarray:
    return np.array([np.linalg.norm(theta[g]) for g in groups])


def group_f1(theta, groups, active=ACTIVE_GROUPS, rel: float = 0.25) -> float:
    """F1 of the groups with ‖θ_g‖₂ ≥ rel·max_h ‖θ_h‖₂ against the true active groups."""
    norms = group_norms(theta, groups)
    pred = set(np.flatnonzero(norms >= rel * norms.max())) if norms.max() > 0 else set()
    tp = len(pred & set(active))
    return 0.0 if tp == 0 else 2 * tp / (len(pred) + len(active))


def support_f1(theta, groups, active=ACTIVE_GROUPS) -> float:
    """F1 of the groups with any non-zero coefficient (the selected support of a
    sparse estimate; a dense release selects every group)."""
    pred = {k for k, g in enumerate(groups) if np.any(theta[g] != 0)}
    tp = len(pred & set(active))
    return 0.0 if tp == 0 else 2 * tp / (len(pred) + len(active))


def active_energy(theta, groups, active=ACTIVE_GROUPS) -> float:
    """Σ_{g active} ‖θ_g‖² / ‖θ‖² (1 = all weight on the true groups)."""
    sq = group_norms(theta, groups) ** 2
    return float(sq[list(active)].sum() / sq.sum()) if sq.sum() > 0 else 0.0


def run_seed(seed: int, n_samples: int, epsilons) -> list[dict]:
    """Every method at every ε on the data of one seed."""
    ds = load("group-sparse", random_state=seed, n_samples=n_samples)
    X, y, Xt, yt = ds.X_train, ds.y_train, ds.X_test, ds.y_test
    n, d = X.shape
    groups = group_sparse_groups()
    norm = GroupLinfNorm(groups, d)
    loss = Logistic()
    lam = sop.kd_lambda(norm, n, 1.0, 1.0)  # sum form: objective L̂ + (λ/n)Ω
    ref = minimize(loss, X, y, l2=1e-4, regularizer=norm.scaled(lam / n), tol=1e-9).theta
    risk0 = loss.value(ref, X, y)
    rows = []

    def record(name, eps, theta, seconds=0.0):
        rows.append(
            {
                "method": name,
                "epsilon": eps,
                # a score of 0 predicts −1, as the estimators do (a zero model is a coin flip)
                "accuracy": float(np.mean(np.where(Xt @ theta > 0, 1.0, -1.0) == yt)),
                "group_f1": group_f1(theta, groups),
                "support_f1": support_f1(theta, groups),
                "energy": active_energy(theta, groups),
                "excess_risk": loss.value(theta, X, y) - risk0,
                "seconds": seconds,
            }
        )

    record("non-private", math.inf, ref)
    delta = 1.0 / n**2
    for eps in epsilons:
        # noise seed of (data seed, ε), independent of the other ε values of the run
        rs = np.random.SeedSequence([seed, round(1000 * eps)])
        alpha_out = output_alpha_rule(n, d, eps, 1.0)
        common = dict(epsilon=eps, delta=delta, data_norm=1.0, random_state=rs)

        def fit(name, eps=eps, alpha_out=alpha_out, common=common):
            if name == "structured-output":
                return sop.fit(loss, X, y, norm=norm, alpha=alpha_out, lam=lam, **common)
            if name == "structured-output-raw":
                return sop.fit(
                    loss, X, y, norm=norm, alpha=alpha_out, lam=lam, denoise="none", **common
                )
            if name == "dual-fw":
                return dual_frank_wolfe.fit(
                    loss, X, y, norm=norm, alpha=alpha_out, lam=lam / n, n_steps=10, **common
                )
            if name == "primal-fw":
                return frank_wolfe.fit(loss, X, y, constraint=L1Ball(20.0), **common)
            return objective_perturbation.fit(  # objective-l1
                loss,
                X,
                y,
                alpha=objective_alpha_rule(n, d, eps, 1.0),
                regularizer=L1(lam / n),
                **common,
            )

        for name in METHODS[1:]:
            t0 = time.perf_counter()
            theta = fit(name).theta
            record(name, eps, theta, time.perf_counter() - t0)
    return rows


def summarize(rows, epsilons):
    """{(method, ε): {metric: (mean, sd)}}."""
    out = {}
    for m in METHODS:
        for eps in (math.inf, *epsilons):
            sel = [r for r in rows if r["method"] == m and r["epsilon"] == eps]
            if sel:
                out[m, eps] = {
                    k: (
                        float(np.mean([r[k] for r in sel])),
                        float(np.std([r[k] for r in sel], ddof=1)) if len(sel) > 1 else 0.0,
                    )
                    for k in (*METRICS, "seconds")
                }
    return out


def print_table(summary, epsilons, markdown: bool) -> None:
    head = (
        "method",
        "ε",
        "test accuracy",
        "group F1",
        "support F1",
        "active energy",
        "excess risk",
        "s/fit",
    )
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
    else:
        print(f"{head[0]:<22} {head[1]:>4} " + " ".join(f"{h:>15}" for h in head[2:]))
    for m in METHODS:
        for eps in (math.inf, *epsilons):
            if (m, eps) not in summary:
                continue
            s = summary[m, eps]
            cells = [f"{s[k][0]:.3f} ± {s[k][1]:.3f}" for k in METRICS]
            cells.append(f"{s['seconds'][0]:.2f}")
            e = "–" if math.isinf(eps) else f"{eps:g}"
            if markdown:
                print(f"| {m} | {e} | " + " | ".join(cells) + " |")
            else:
                print(f"{m:<22} {e:>4} " + " ".join(f"{c:>15}" for c in cells))


def plot(summary, epsilons, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    styles = {
        "structured-output": ("C0", "o", "-"),
        "structured-output-raw": ("C0", "o", ":"),
        "dual-fw": ("C1", "s", "-"),
        "primal-fw": ("C2", "^", "-"),
        "objective-l1": ("C3", "D", "-"),
    }
    for ax, (metric, label) in zip(
        axes,
        [
            ("accuracy", "test accuracy"),
            ("group_f1", "group F1 (‖θ_g‖ ≥ 0.25 max)"),
            ("support_f1", "support F1 (non-zero groups)"),
            ("excess_risk", "excess empirical risk"),
        ],
        strict=True,
    ):
        for m, (c, mk, ls) in styles.items():
            mean = np.array([summary[m, e][metric][0] for e in epsilons])
            sd = np.array([summary[m, e][metric][1] for e in epsilons])
            ax.errorbar(epsilons, mean, yerr=sd, color=c, marker=mk, ls=ls, capsize=3, label=m)
        ref = summary["non-private", math.inf][metric][0]
        if metric in ("accuracy", "group_f1"):
            ax.axhline(ref, color="k", ls="--", lw=1, label="non-private")
        if metric == "accuracy":
            ax.axhline(0.9 * ref, color="grey", ls=":", lw=1, label="90 % of non-private")
        if metric == "excess_risk":
            ax.set_yscale("log")
        ax.set_xscale("log")
        ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
        ax.set_xticks([], minor=True)
        ax.set_xlabel("ε (δ = 1/n²)")
        ax.set_title(label)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    eps = sorted(args.epsilons)
    t0 = time.perf_counter()
    rows = [r for s in range(args.seeds) for r in run_seed(s, args.n_samples, eps)]
    summary = summarize(rows, eps)
    n_train = args.n_samples - round(0.5 * args.n_samples)
    title = (
        f"group-sparse: n_train = {n_train}, d = 50 (10 groups of 5, 2 active), "
        f"{args.seeds} seeds, mean ± sd"
    )
    print(title)
    print_table(summary, eps, args.markdown)
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.plot is not None:
        plot(summary, eps, args.plot, title)


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)
        main()
