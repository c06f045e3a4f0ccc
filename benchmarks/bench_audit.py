"""Long, tight privacy audits: ε_LB / ε per algorithm, and the mutants' ε_LB.

Run:  python benchmarks/bench_audit.py [--runs 10000] [--epsilon 1] [--n-jobs N]
                                       [--mechanisms objective output ...] [--mutants]
                                       [--json results.json]

For every registered audit runner whose algorithm module is installed (or the
ones named with ``--mechanisms``) it runs :func:`dperm.audit.audit` with
``--runs`` runs per neighbouring dataset and prints

    mechanism  relation  claimed ε  δ  ε_LB  ε_LB/ε  runs  seconds  runs/s

ε_LB is a 95% Clopper–Pearson lower bound on the ε the implementation really
spends on a worst-case canary; a ratio close to 1 means the audit is tight (the
claim is not loose), a ratio above 1 refutes the claim.  ``--mutants`` also
audits the deliberately broken variants of tests/test_audit_suite.py (they
must come out above 1).  The CI runs the same audits with ≈ 1000 runs.
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
        big = make_canary_pair(20, 2, neighbouring="add-remove-one", canary_norm=10.0)
        std = make_canary_pair(20, 2, neighbouring="add-remove-one")
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
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10_000, help="runs per neighbouring dataset")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--n-jobs", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--mechanisms", nargs="*", default=None)
    p.add_argument("--mutants", action="store_true", help="also audit the broken variants")
    p.add_argument("--json", type=Path, default=None, help="write all results as JSON")
    args = p.parse_args(argv)

    targets = [(get_runner(m), {}) for m in (args.mechanisms or available_runners())]
    if args.mutants:
        targets += _mutants()
    header = (
        f"{'mechanism':<38} {'relation':<15} {'ε':>5} {'δ':>7} {'ε_LB':>7} {'ε_LB/ε':>7} "
        f"{'runs':>7} {'s':>7} {'runs/s':>7}"
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
        print(
            f"{res.mechanism:<38} {res.neighbouring:<15} {res.epsilon:>5g} {res.delta:>7.0e} "
            f"{res.epsilon_lower_bound:>7.3f} {res.ratio:>7.3f} {res.runs:>7d} {secs:>7.1f} "
            f"{2 * res.runs / secs:>7.0f}" + ("   REFUTED" if res.violated else ""),
            flush=True,
        )
        results.append(res.to_dict())
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
