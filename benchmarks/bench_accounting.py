"""Benchmark of dperm's privacy accountants against their goals and dp-accounting.

Run:  python benchmarks/bench_accounting.py [--repeats 5]

Measures (best of ``--repeats`` runs, caches of dperm cleared before every run):

* ε of 10⁶ steps of a Poisson-subsampled Gaussian under RDP (goal < 50 ms), and
  the same with dp-accounting's RdpAccountant;
* calibration of σ for (ε, δ) = (2, 1e-5), 10⁶ steps, under RDP (goal < 0.5 s),
  and the same with dp-accounting's ``mechanism_calibration`` + RdpAccountant;
* the PLD accountant (dperm's wrapper and dp-accounting directly) for 10⁵ steps.

Prints a table of seconds, ratio to the goal, and ratio to dp-accounting.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable

from dperm.accounting import (
    Gaussian,
    PoissonSampled,
    RdpAccountant,
    SelfComposed,
    calibrate_gaussian,
    get_accountant,
)
from dperm.accounting import rdp as dperm_rdp

SIGMA, Q, DELTA = 1.1, 0.001, 1e-5
STEPS_RDP = 1_000_000
STEPS_PLD = 100_000
TARGET_EPS = 2.0


def _clear_caches() -> None:
    dperm_rdp._sgm_rdp_cached.cache_clear()
    dperm_rdp._wor_rdp_cached.cache_clear()


def best_of(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeats):
        _clear_caches()
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)

    from dp_accounting import dp_event as de
    from dp_accounting import mechanism_calibration
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    ours_event = SelfComposed(
        PoissonSampled(Q, Gaussian(SIGMA, neighbouring="add-remove")), STEPS_RDP
    )

    def ours_rdp_eps() -> float:
        return RdpAccountant(neighbouring="add-remove").compose(ours_event).get_epsilon(DELTA)

    def theirs_rdp_eps() -> float:
        acc = rdp_privacy_accountant.RdpAccountant()
        acc.compose(de.PoissonSampledDpEvent(Q, de.GaussianDpEvent(SIGMA)), STEPS_RDP)
        return acc.get_epsilon(DELTA)

    def ours_calibrate() -> float:
        return calibrate_gaussian(TARGET_EPS, DELTA, steps=STEPS_RDP, sampling_rate=Q)

    def theirs_calibrate() -> float:
        def make(sigma: float):
            return de.SelfComposedDpEvent(
                de.PoissonSampledDpEvent(Q, de.GaussianDpEvent(sigma)), STEPS_RDP
            )

        return mechanism_calibration.calibrate_dp_mechanism(
            rdp_privacy_accountant.RdpAccountant,
            make,
            TARGET_EPS,
            DELTA,
            mechanism_calibration.ExplicitBracketInterval(0.1, 50.0),
            tol=1e-4,
        )

    pld_event = SelfComposed(
        PoissonSampled(0.01, Gaussian(SIGMA, neighbouring="add-remove")), STEPS_PLD
    )

    def ours_pld() -> float:
        return (
            get_accountant("pld", neighbouring="add-remove").compose(pld_event).get_epsilon(DELTA)
        )

    def theirs_pld() -> float:
        acc = pld_privacy_accountant.PLDAccountant()
        acc.compose(de.PoissonSampledDpEvent(0.01, de.GaussianDpEvent(SIGMA)), STEPS_PLD)
        return acc.get_epsilon(DELTA)

    rows = [
        ("RDP ε, 1e6 steps", ours_rdp_eps, theirs_rdp_eps, 0.05),
        ("RDP calibrate σ, 1e6 steps", ours_calibrate, theirs_calibrate, 0.5),
        ("PLD ε, 1e5 steps", ours_pld, theirs_pld, None),
    ]
    print(f"q={Q}, σ={SIGMA}, δ={DELTA}; best of {args.repeats} runs\n")
    header = f"{'task':<28} {'dperm s':>9} {'value':>10} {'goal s':>7} {'÷goal':>6}"
    header += f" {'dp-acc s':>9} {'value':>10} {'dperm÷dp-acc':>12}"
    print(header)
    print("-" * len(header))
    for name, ours, theirs, goal in rows:
        reps = args.repeats if goal is not None else max(1, args.repeats // 2)
        t_ours, v_ours = best_of(ours, reps)
        t_theirs, v_theirs = best_of(theirs, reps)
        goal_s = f"{goal:7.3f}" if goal else f"{'-':>7}"
        ratio_goal = f"{t_ours / goal:6.2f}" if goal else f"{'-':>6}"
        print(
            f"{name:<28} {t_ours:9.4f} {v_ours:10.5f} {goal_s} {ratio_goal}"
            f" {t_theirs:9.4f} {v_theirs:10.5f} {t_ours / t_theirs:12.3f}"
        )


if __name__ == "__main__":
    main()
