"""Long, tight privacy audits: ε_LB / ε per algorithm, and the mutants' ε_LB.

Run:  python benchmarks/bench_audit.py [--runs N] [--epsilon 1] [--n-jobs N]
                                       [--mechanisms objective output ...] [--mutants]
                                       [--json results.json]

For every registered audit runner whose algorithm module is installed (or the
ones named with ``--mechanisms``) it runs :func:`dperm.audit.audit` with
``--runs`` runs per neighbouring dataset and prints

    mechanism  relation  ε  δ  method  ε_LB  CP  GDP  μ_LB  runs  seconds  runs/s

ε_LB is the 95% lower bound of the runner's method on the ε the implementation
really spends on a worst-case canary: the assumption-free Clopper–Pearson bound
(CP) or, for Gaussian-noise runners, the μ-GDP estimate (GDP; see
docs/auditing.md).  A ratio ε_LB/ε close to 1 means the audit is tight, above 1
refutes the claim.  ``--mutants`` also audits dperm's mutants (dperm.audit.mutants, the default
paths with one bug injected) and the deliberately broken variants of
tests/test_audit_suite.py and tests/test_audit_relations.py (they must come out
above 1; their controls below).  The white-box runners of the default DP-SGD
paths use the Gaussian fit ("GDPfit", docs/auditing.md).  The CI runs the same
audits with ≈ 1000 runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from dperm.audit import audit, available_runners, get_runner, make_canary_pair


def _mutants():
    """The broken variants of the CI mutation tests (imported from the test module)."""
    tests = Path(__file__).resolve().parents[1] / "tests"
    sys.path.insert(0, str(tests))
    import test_audit_suite as T  # optional, only with --mutants

    out = []
    if get_runner("output").available():
        base = get_runner("output")
        out += [
            (dataclasses.replace(base, name="output[noise ×¼]", fn=T._output_noise_quartered), {}),
            (
                dataclasses.replace(
                    base, name="output[sensitivity ½]", fn=T._output_sensitivity_without_factor_two
                ),
                {},
            ),
        ]
    if get_runner("dp-sgd").available():
        base = get_runner("dp-sgd")
        out.append(
            (
                dataclasses.replace(
                    base, name="dp-sgd[mean noise]", fn=T._dp_sgd_noise_for_the_mean
                ),
                {},
            )
        )
        big = make_canary_pair(20, 2, neighbouring="add-remove", canary_norm=10.0)
        std = make_canary_pair(20, 2, neighbouring="add-remove")
        out += [
            (
                T._sgd_runner(T._dp_sgd_linear, "dp-sgd-linear (control, ‖canary‖=10)"),
                {"data": big, "delta": 1e-5},
            ),
            (
                T._sgd_runner(T._dp_sgd_linear_no_clipping, "dp-sgd-linear[no clipping]"),
                {"data": big, "delta": 1e-5},
            ),
            (
                T._sgd_runner(T._dp_sgd_linear, "dp-sgd-linear (control)"),
                {"data": std, "delta": 1e-5},
            ),
            (
                T._sgd_runner(T._dp_sgd_linear_unsampled, "dp-sgd-linear[unsampled]"),
                {"data": std, "delta": 1e-5},
            ),
        ]
    if get_runner("gaussian").available():
        base = get_runner("gaussian")
        out.append(
            (
                dataclasses.replace(
                    base, name="gaussian[mean sens.]", fn=T._gaussian_sensitivity_of_the_mean
                ),
                {},
            )
        )
    return out + _relation_mutants()


def _relation_mutants():
    """The mutants of dperm issue #10 (tests/test_audit_relations.py) and their
    correct counterparts on the same pairs."""
    import test_audit_relations as R  # optional, only with --mutants

    out = []
    if get_runner("dp-sgd").available():
        base = get_runner("dp-sgd")
        copies = R._copies_pair()
        out += [
            (
                dataclasses.replace(base, name="dp-sgd[|D| read] (a)", fn=R._dp_sgd_size_from_data),
                {"data": copies},
            ),
            (
                dataclasses.replace(
                    base, name="dp-sgd[public N] (a) control", fn=R._dp_sgd_public_size
                ),
                {"data": copies},
            ),
        ]
    if get_runner("dp-sgd-replace-one").available() and get_runner("dp-sgd").available():
        base = get_runner("dp-sgd-replace-one")
        out.append(
            (
                dataclasses.replace(
                    base,
                    name="dp-sgd[RO claim, AR event] (b)",
                    fn=R._dp_sgd_replace_one_accounted_as_add_remove,
                ),
                {},
            )
        )
    pair = R._label_pair()
    out += [
        (R._label_runner(R._labels_read_from_data, "estimator[unique(y)] (c)"), {"data": pair}),
        (
            R._label_runner(R._labels_public, "estimator[public classes] (c) control"),
            {"data": pair},
        ),
    ]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help="runs per neighbouring dataset (default: each runner's default_runs)",
    )
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--n-jobs", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--mechanisms", nargs="*", default=None)
    p.add_argument("--mutants", action="store_true", help="also audit the broken variants")
    p.add_argument("--json", type=Path, default=None, help="write all results as JSON")
    args = p.parse_args(argv)

    names = args.mechanisms or available_runners(kind="honest")
    targets = [(get_runner(m), {}) for m in names]
    if args.mutants:  # dperm's own (dperm.audit.mutants), then the tests' variants
        targets += [(get_runner(m), {}) for m in available_runners(kind="mutant")]
        targets += _mutants()
    header = (
        f"{'mechanism':<38} {'relation':<12} {'ε':>4} {'δ':>6} {'method':<6} {'ε_LB':>7} "
        f"{'CP':>6} {'GDP':>6} {'μ_LB':>6} {'runs':>6} {'s':>6} {'runs/s':>6}"
    )
    print(header)
    print("-" * len(header))
    results = []
    for runner, kw in targets:
        t0 = time.perf_counter()
        res = audit(
            runner,
            epsilon=args.epsilon,
            runs=args.runs,
            n_jobs=args.n_jobs,
            random_state=args.seed,
            **kw,
        )
        secs = time.perf_counter() - t0
        gdp = "—" if res.epsilon_lower_bound_gdp is None else f"{res.epsilon_lower_bound_gdp:.3f}"
        mu = "—" if res.mu_lower_bound is None else f"{res.mu_lower_bound:.3f}"
        method = {"gdp": "GDP", "gdp-fit": "GDPfit"}.get(res.method, "CP")
        print(
            f"{res.mechanism:<38} {res.neighbouring:<12} {res.epsilon:>4g} {res.delta:>6.0e} "
            f"{method:<6} {res.epsilon_lower_bound:>7.3f} {res.epsilon_lower_bound_cp:>6.3f} "
            f"{gdp:>6} {mu:>6} {res.runs:>6d} {secs:>6.1f} {2 * res.runs / secs:>6.0f}"
            + ("" if res.verdict == "not refuted" else f"   {res.verdict.upper()}"),
            flush=True,
        )
        results.append(res.to_dict())
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
