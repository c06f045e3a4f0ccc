"""Processes racing on one privacy budget: does the store release more than it certifies,
and does it refuse what fits?

Separate interpreters (``python -m dperm fit``) started together on one store, as users
run them.  Per store (SQLite, JSON, and PostgreSQL with ``--postgres URL``):

* ``overspend`` (issue #28): a budget of ε = 1 created by one ``dperm fit --ledger …
  --ledger-epsilon 1 --epsilon 0.1``, then 8 fits at ε = 0.3 (objective perturbation: each
  event is exactly (0.3, δ)).  Exactly 3 fit; prints the released ε, the ε the store
  certifies, the entries kept and the spends lost (released − kept).
* ``wait`` (issue #37): a budget of ε = 1 (``dperm budget create``), then 6 default fits
  (DP-SGD) at ε = 0.3 with ``--wait 600``.  One after another all six fit (the PLD
  composes them to ≈ 0.75); concurrently each reserves (0.3, δ) at face value until it
  commits its DP-SGD event, so some wait.  Prints how many released, the final ε, the PLD
  of the committed events recomputed by a fresh accountant, the reservations left, and
  the largest ``ledger_spent_epsilon`` a racer reported (never above the final ε).
* ``nowait``: the same 6 without ``--wait``: how many are refused, and how many of the
  refusals name the share the running fits hold.
* ``lock`` (the cost of the accountant inside the store's lock): a budget holding 20
  DP-SGD entries, then 4 processes × 5 reserve/commit of one more DP-SGD event each —
  once with the check computed before the lock and verified inside it (dperm's), once
  with the PLD composed inside the lock (the implementation before issue #37).  Prints
  the mean and largest time a reserve held the lock, and the wall time.

    python benchmarks/bench_ledger_race.py                      # SQLite and JSON
    python benchmarks/bench_ledger_race.py --postgres URL       # and a PostgreSQL server
    python benchmarks/bench_ledger_race.py --scenarios wait,lock
    python benchmarks/bench_ledger_race.py --src OLD/src        # another dperm (overspend)

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

_QUIET = ["--no-reference", "--json", "--quiet"]
_OBJECTIVE = ["-m", "dperm", "fit", "--mechanism", "objective", "--delta", "1e-8", *_QUIET]
_DEFAULT = ["-m", "dperm", "fit", *_QUIET]

#: read back by the dperm under test: (ε certified, entries, reserved, PLD of the entries)
_KEPT = """
import json, sys
from dperm.accounting import Ledger
try:
    b = Ledger.open(sys.argv[1], sys.argv[2])
except (AttributeError, TypeError):  # a dperm without stores: its JSON file
    b = Ledger.load(sys.argv[1])
pld = None
try:
    from dperm.accounting import get_accountant
    acc = get_accountant("pld")
    for e in b.entries:
        acc.compose(e.event)
    pld = acc.get_epsilon(b.delta) if b.entries else 0.0
except Exception:
    pass
print(json.dumps([b.spent()[0], len(b.entries), len(getattr(b, "reservations", ())), pld]))
"""


def _env(src: str) -> dict:
    return dict(os.environ, PYTHONPATH=src, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def _kept(location: str, name: str, src: str) -> tuple:
    out = subprocess.run(
        [sys.executable, "-c", _KEPT, location, name], env=_env(src), capture_output=True, text=True
    )
    if out.returncode != 0:
        return None, -1, -1, None
    return tuple(json.loads(out.stdout))


def _racers(argv: list[str], n: int, src: str) -> tuple[list[int], list[str], list[str], float]:
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            argv, env=_env(src), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(n)
    ]
    outs = [p.communicate() for p in procs]
    seconds = time.perf_counter() - t0
    return [p.returncode for p in procs], [o for o, _ in outs], [e for _, e in outs], seconds


def _budget(name: str) -> list[str]:
    return [] if name == "default" else ["--ledger-budget", name]


def overspend(location: str, src: str, n: int, eps: float, name: str) -> dict:
    first = [sys.executable, *_OBJECTIVE, "--ledger", location, *_budget(name), "--epsilon", "0.1"]
    res = subprocess.run(
        [*first, "--ledger-epsilon", "1", "--ledger-delta", "1e-5"],
        env=_env(src),
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise SystemExit(f"the first fit failed: {res.stderr.strip()}")
    argv = [
        sys.executable,
        *_OBJECTIVE,
        "--ledger",
        location,
        *_budget(name),
        "--epsilon",
        str(eps),
    ]
    codes, _, _, seconds = _racers(argv, n, src)
    released = sum(c == 0 for c in codes)
    certified, kept, _, _ = _kept(location, name, src)
    return {
        "released": released,
        "refused": sum(c == 2 for c in codes),
        "epsilon_released": round(0.1 + eps * released, 6),
        "epsilon_certified": None if certified is None else round(certified, 6),
        "entries_kept": kept,
        "spends_lost": (released + 1) - kept,
        "seconds": round(seconds, 2),
    }


def concurrent_default_fits(location: str, src: str, n: int, eps: float, name: str, wait):
    create = [sys.executable, "-m", "dperm", "budget", "create", location, "--epsilon", "1"]
    res = subprocess.run([*create, "--name", name], env=_env(src), capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"budget create failed: {res.stderr.strip()}")
    argv = [sys.executable, *_DEFAULT, "--ledger", location, *_budget(name), "--epsilon", str(eps)]
    if wait is not None:
        argv += ["--wait", str(wait)]
    codes, stdouts, stderrs, seconds = _racers(argv, n, src)
    certified, kept, reserved, pld = _kept(location, name, src)
    runs = list(zip(codes, stdouts, stderrs, strict=True))
    reported = [json.loads(o)["ledger_spent_epsilon"] for c, o, _ in runs if c == 0]
    refused = [e for c, _, e in runs if c == 2]
    return {
        "released": sum(c == 0 for c in codes),
        "refused": len(refused),
        "refusals_naming_the_held_share": sum("held by" in e for e in refused),
        "epsilon_certified": None if certified is None else round(certified, 6),
        "pld_of_committed_events": None if pld is None else round(pld, 6),
        "entries": kept,
        "reserved_left": reserved,
        "max_reported_ledger_spent_epsilon": round(max(reported), 6) if reported else None,
        "seconds": round(seconds, 2),
    }


# ------------------------------------------------------------------ the lock's cost
_LOCK_WORKER = """
import json, sys, time
from dperm.accounting import Gaussian, Ledger, PoissonSampled, SelfComposed
from dperm.accounting.ledger_admission import LedgerAdmission
from dperm.accounting.ledger_state import now
import os, socket

def in_lock(self, kind, event, label):
    # the check as before issue #37: the accountant composed inside the write lock
    with self._write() as tx:
        self._sync(tx)
        plan = self._plan(event)
        if not self._within_budget(plan.eps):
            return plan
        body = {"event": plan.event.to_dict(), "label": label, "time": now(),
                "pid": os.getpid(), "host": socket.gethostname()}
        rec = self._chain.append(tx, kind, body)
        self._state.apply(rec.seq, kind, body)
        self._acc, self._conv[rec.seq] = plan.trial, plan.conv
        self._total = (rec.seq, plan.eps)
    return plan.eps, rec.seq, plan.event

location, name, mode, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if mode == "in-lock":
    LedgerAdmission._try_charge = in_lock
event = SelfComposed(PoissonSampled(0.2, Gaussian(20.458547822946006)), 75)
held = []
for _ in range(rounds):
    book = Ledger.open(location, name)  # a new process's view: the whole history replayed
    r = book.reserve(event, "lock bench")
    held.append(book._lock_seconds)
    r.commit()
print(json.dumps(held))
"""


def lock_cost(location: str, src: str, name: str, history: int, workers: int, rounds: int):
    sys.path.insert(0, src)
    from dperm.accounting import Gaussian, Ledger, PoissonSampled, SelfComposed

    event = SelfComposed(PoissonSampled(0.2, Gaussian(20.458547822946006)), 75)
    out = {}
    for mode in ("verified-retry", "in-lock"):
        budget = f"{name}-{mode}"
        book = Ledger.create(location, budget, epsilon=1000.0, delta=1e-5)
        for _ in range(history):
            book._append_history(event, "history")
        t0 = time.perf_counter()
        fresh = Ledger.open(location, budget)
        fresh._would_spend(event)
        compose = time.perf_counter() - t0
        argv = [sys.executable, "-c", _LOCK_WORKER, location, budget, mode, str(rounds)]
        procs = [
            subprocess.Popen(argv, env=_env(src), stdout=subprocess.PIPE, text=True)
            for _ in range(workers)
        ]
        t0 = time.perf_counter()
        held = [x for p in procs for x in json.loads(p.communicate()[0])]
        wall = time.perf_counter() - t0
        out[mode] = {
            "lock_mean_ms": round(1000 * sum(held) / len(held), 1),
            "lock_max_ms": round(1000 * max(held), 1),
            "wall_seconds": round(wall, 2),
        }
        out["pld_compose_ms"] = round(1000 * compose, 1)  # open + compose, one process
    return {"history": history, "reserves": workers * rounds, **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--racers", type=int, default=8, help="overspend racers")
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--postgres", help="a postgresql:// URL to race on too")
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--stores", default="budget.db,budget.json")
    parser.add_argument("--scenarios", default="overspend,wait,nowait,lock")
    args = parser.parse_args()
    scenarios = args.scenarios.split(",")
    print(f"# load: {os.getloadavg()[0]:.2f} (1-min average, {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        targets = [(s, "default") for s in args.stores.split(",") if s]
        if args.postgres:
            targets.append((args.postgres, None))
        for store, name in targets:
            shown = "postgresql" if store.startswith("postgres") else Path(store).name
            for scenario in scenarios:
                budget = name or f"race-{uuid.uuid4().hex[:8]}"
                location = store if name is None else str(Path(tmp) / f"{scenario}-{store}")
                if scenario == "overspend":
                    out = overspend(location, args.src, args.racers, args.epsilon, budget)
                elif scenario in ("wait", "nowait"):
                    wait = 600 if scenario == "wait" else None
                    out = concurrent_default_fits(location, args.src, 6, 0.3, budget, wait)
                elif scenario == "lock":
                    out = lock_cost(location, args.src, budget, 20, 4, 5)
                else:
                    raise SystemExit(f"unknown scenario {scenario!r}")
                print(json.dumps({"store": shown, "scenario": scenario, **out}), flush=True)
            print(f"# load: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
