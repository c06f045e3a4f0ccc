"""Real processes on one budget: ``dperm fit --ledger`` racing on SQLite and on a
PostgreSQL server, and fits killed with SIGKILL at random moments.

The processes are forked from this one (dperm already imported, so each starts in
milliseconds) and each runs the whole command line, ``dperm.cli.main([...])``, with its
own connection to the store — exactly what separate ``dperm fit`` invocations do.
benchmarks/bench_ledger_race.py races separate interpreters (``python -m dperm fit``).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import signal
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli_child
from dperm.accounting import Ledger

pytestmark = pytest.mark.skipif(
    "fork" not in mp.get_all_start_methods(), reason="needs fork (POSIX)"
)
_FORK = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
#: a fast fit whose event is exactly (ε, δ): objective perturbation, no reference fit
_FIT = ["fit", "--mechanism", "objective", "--delta", "1e-8", "--no-reference"]
_FIT += ["--json", "--quiet", "--seed", "0"]


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory):
    """One fit (with --save) in this process first: the forked children then start with
    every module imported, as a long-running parent would, and each fit takes ~0.3 s."""
    from dperm.cli.fit import run_fit

    run_fit(
        mechanism="objective",
        delta=1e-8,
        seed=0,
        reference=False,
        save=tmp_path_factory.mktemp("warm") / "m.dperm",
    )


def _ledger_argv(where, name):
    return ["--ledger", where, "--ledger-budget", name]


def _race(tmp_path, where, name, n=8, eps=0.3):
    """n processes released together, each spending ε on a budget of 1 that already
    holds a 0.1 fit; returns (exit codes, JSON outputs of those that released)."""
    first = tmp_path / "first.json"
    argv = [*_FIT, *_ledger_argv(where, name), "--epsilon", "0.1"]
    proc = _FORK.Process(target=run_cli_child, args=([*argv, "--ledger-epsilon", "1"], first))
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0, (tmp_path / "first.json.err").read_text()
    barrier = _FORK.Barrier(n)
    outs = [tmp_path / f"racer{i}.json" for i in range(n)]
    argv = [*_FIT, *_ledger_argv(where, name), "--epsilon", str(eps)]
    procs = [_FORK.Process(target=run_cli_child, args=(argv, o, barrier)) for o in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
    codes = [p.exitcode for p in procs]
    released = [json.loads(o.read_text()) for o, c in zip(outs, codes, strict=True) if c == 0]
    for o, c in zip(outs, codes, strict=True):
        if c != 0:  # refused: one line naming the budget, exit 2
            lines = [ln for ln in Path(f"{o}.err").read_text().splitlines() if ln.strip()]
            assert c == 2 and len(lines) == 1 and "would exhaust the budget" in lines[0]
    return codes, released


def _check_race(where, name, codes, released):
    # 0.1 + 3 × 0.3 = 1.0 fits; a fourth (1.3) never: exactly three racers release a model
    assert sorted(codes) == [0, 0, 0, 2, 2, 2, 2, 2], codes
    book = Ledger.open(where, name)
    entries = book.entries
    assert len(entries) == 4 and all(e.status == "committed" for e in entries)
    assert book.reservations == ()  # nothing left reserved, nothing lost
    assert book.spent()[0] <= 1.0 + 1e-9  # never more than the store certifies
    assert sum(e.event.epsilon for e in entries) == pytest.approx(1.0)
    # every racer that released a model has its own committed entry
    ids = sorted(r["ledger_entry"] for r in released)
    assert len(set(ids)) == 3 and set(ids) <= {e.id for e in entries}
    kinds = [r.kind for r in book.records]
    assert kinds.count("reserve") == 4 and kinds.count("cancel") == 0
    book.verify()


def test_eight_processes_racing_on_sqlite_never_overspend(tmp_path):
    where = str(tmp_path / "budget.db")
    codes, released = _race(tmp_path, where, "default")
    _check_race(where, "default", codes, released)


def test_eight_processes_racing_on_postgres_never_overspend(tmp_path, postgres_url):
    name = f"race-{uuid.uuid4().hex[:10]}"
    codes, released = _race(tmp_path, postgres_url, name)
    _check_race(postgres_url, name, codes, released)


@pytest.mark.parametrize("kind", ["budget.db", "budget.json", "postgres"])
def test_fits_killed_at_random_moments_leave_every_model_charged(tmp_path, kind, request):
    """12 fits with --save, each SIGKILLed at a random moment of its run (four at a
    time): afterwards the store opens and verifies, every model file that loads is
    charged by a committed entry with its SHA-256, and no reservation was lost (a
    killed fit's reservation stays charged: none is cancelled)."""
    import dperm

    name = "default"
    if kind == "postgres":  # a connection killed mid-transaction: the server rolls it back
        where, name = request.getfixturevalue("postgres_url"), f"kill-{uuid.uuid4().hex[:10]}"
    else:
        where = str(tmp_path / kind)
    base = [*_FIT, *_ledger_argv(where, name), "--epsilon", "0.05"]
    # one unkilled fit: creates the budget and measures how long a fit takes
    t0 = time.perf_counter()
    proc = _FORK.Process(
        target=run_cli_child,
        args=([*base, "--ledger-epsilon", "100", "--save", str(tmp_path / "m.dperm")],
              tmp_path / "m.json"),
    )  # fmt: skip
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0
    duration = time.perf_counter() - t0
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    models = [tmp_path / f"m{i}.dperm" for i in range(12)]
    killed = 0
    for wave in range(3):
        procs = []
        for m in models[4 * wave : 4 * wave + 4]:
            p = _FORK.Process(target=run_cli_child, args=([*base, "--save", str(m)], f"{m}.json"))
            p.start()
            procs.append((p, time.perf_counter() + rng.uniform(0.0, 2.5 * duration)))
        for p, when in sorted(procs, key=lambda x: x[1]):
            time.sleep(max(0.0, when - time.perf_counter()))
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                killed += 1
        for p, _ in procs:
            p.join(60)
    book = Ledger.open(where, name)  # opens: nothing torn
    book.verify()
    committed = {e.model: e for e in book.entries if e.status == "committed"}
    loadable = 0
    for m in [tmp_path / "m.dperm", *models]:
        if not m.exists():
            continue
        dperm.load(m)  # a model file in place is whole (written, then renamed)
        loadable += 1
        entry = committed.get(str(m.resolve()))
        assert entry is not None, f"{m.name} is not charged"
        assert entry.model_sha256 == hashlib.sha256(m.read_bytes()).hexdigest()
    kinds = [r.kind for r in book.records]
    assert kinds.count("cancel") == 0  # SIGKILL cancels nothing: fail closed
    assert kinds.count("reserve") == len(book.entries) >= loadable
    assert sum(e.event.epsilon for e in book.entries) == pytest.approx(0.05 * len(book.entries))
    assert book.spent()[0] > 0.0
    assert killed >= 1  # the kills landed (the others finished first)
