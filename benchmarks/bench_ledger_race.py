"""Processes racing on one privacy budget: does the store release more than it certifies?

Issue #28's experiment, as a user runs it: a budget of ε = 1 created by one
``dperm fit --ledger LOCATION --ledger-epsilon 1 --epsilon 0.1``, then N separate
``python -m dperm fit --ledger LOCATION --epsilon E`` started together (objective
perturbation, so each fit's event is exactly (E, δ)).  Prints, per location, how many
racers released a model, the ε released (0.1 + E per released racer), the ε the store
certifies afterwards, the entries it kept, the spends it lost (released − kept), and the
wall time.

    python benchmarks/bench_ledger_race.py                      # SQLite and JSON, 8 × 0.3
    python benchmarks/bench_ledger_race.py --postgres URL       # and a PostgreSQL server
    python benchmarks/bench_ledger_race.py --src OLD/src        # another dperm (baseline)

``--src`` runs the racers with another source tree on PYTHONPATH (e.g. the release
before stores: ``git archive 265200e src | tar -x -C /tmp/base``); its ledger file is
then read as the JSON it wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

_FIT = ["-m", "dperm", "fit", "--mechanism", "objective", "--delta", "1e-8"]
_FIT += ["--no-reference", "--json", "--quiet"]


def _kept(location: str, name: str, src: str) -> tuple[float | None, int]:
    """(ε the store certifies, entries kept), read by the dperm under test."""
    code = (
        "import json, sys\n"
        "from dperm.accounting import Ledger\n"
        "try:\n"
        "    b = Ledger.open(sys.argv[1], sys.argv[2])\n"
        "except (AttributeError, TypeError):\n"  # a dperm without stores: its JSON file
        "    b = Ledger.load(sys.argv[1])\n"
        "print(json.dumps([b.spent()[0], len(b.entries)]))\n"
    )
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run(
        [sys.executable, "-c", code, location, name], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        return None, -1
    eps, n = json.loads(out.stdout)
    return eps, n


def race(location: str, src: str, n: int, eps: float, name: str) -> dict:
    env = dict(os.environ, PYTHONPATH=src, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    budget = [] if name == "default" else ["--ledger-budget", name]
    first = [sys.executable, *_FIT, "--ledger", location, *budget, "--epsilon", "0.1"]
    res = subprocess.run(
        [*first, "--ledger-epsilon", "1", "--ledger-delta", "1e-5"],
        env=env,
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise SystemExit(f"the first fit failed: {res.stderr.strip()}")
    argv = [sys.executable, *_FIT, "--ledger", location, *budget, "--epsilon", str(eps)]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    codes = [p.wait() for p in procs]
    seconds = time.perf_counter() - t0
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    released = sum(c == 0 for c in codes)
    certified, kept = _kept(location, name, src)
    return {
        "released": released,
        "refused": sum(c == 2 for c in codes),
        "epsilon_released": round(0.1 + eps * released, 6),
        "epsilon_certified": None if certified is None else round(certified, 6),
        "entries_kept": kept,
        "spends_lost": (released + 1) - kept,
        "seconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--racers", type=int, default=8)
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--postgres", help="a postgresql:// URL to race on too")
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--stores", default="budget.db,budget.json")
    args = parser.parse_args()
    print(f"# {args.racers} racers × ε = {args.epsilon} on a budget of 1 (0.1 already spent)")
    print(f"# load: {os.getloadavg()[0]:.2f} (1-min average, {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        targets = [(str(Path(tmp) / s), "default") for s in args.stores.split(",") if s]
        if args.postgres:
            targets.append((args.postgres, f"race-{uuid.uuid4().hex[:8]}"))
        for location, name in targets:
            shown = "postgresql" if location.startswith("postgres") else Path(location).name
            out = race(location, args.src, args.racers, args.epsilon, name)
            print(json.dumps({"store": shown, **out}))


if __name__ == "__main__":
    main()
