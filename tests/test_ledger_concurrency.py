"""Concurrent fits on one budget (issue #37): the open reservations of every process are
composed by the budget's own accountant exactly as committed entries, a refusal says what
they hold, and ``Ledger.reserve(…, wait=)`` / ``dperm fit --wait`` waits for them to
settle.  Real processes (forked, each with its own connection) on SQLite, JSON and a
PostgreSQL server.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import run_cli_child
from dperm.accounting import (
    EpsilonDelta,
    Gaussian,
    Ledger,
    PoissonSampled,
    SelfComposed,
    get_accountant,
)
from dperm.exceptions import BudgetExceededError, InvalidPrivacyParameter

pytestmark = pytest.mark.skipif(
    "fork" not in mp.get_all_start_methods(), reason="needs fork (POSIX)"
)
_FORK = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
#: the event `dperm fit --epsilon 0.3` releases on breast-cancer (DP-SGD, the default):
#: ε ≈ 0.284 alone at δ = 1e-5; six compose to ≈ 0.755 under the PLD, three at face
#: value — EpsilonDelta(0.3, ·) — already to 0.9
_SGD = SelfComposed(PoissonSampled(0.2, Gaussian(20.458547822946006)), 75)
STORES = ["budget.db", "budget.json", "postgres"]


@pytest.fixture(scope="module", autouse=True)
def _warm():
    """One default fit here first: the forked children start with every module imported."""
    from dperm.cli.fit import run_fit

    run_fit(epsilon=0.3, seed=0, reference=False)


@pytest.fixture
def where(request, tmp_path):
    """(location, budget name) of a fresh budget of ε = 1, δ = 1e-5 in store ``param``."""
    if request.param == "postgres":
        location, name = request.getfixturevalue("postgres_url"), f"c-{uuid.uuid4().hex[:10]}"
    else:
        location, name = str(tmp_path / request.param), "default"
    Ledger.create(location, name, epsilon=1.0, delta=1e-5).close()
    return location, name


def _fresh_pld(events) -> float:
    """ε at δ = 1e-5 of ``events`` composed by a new PLD accountant (not the ledger's)."""
    acc = get_accountant("pld")
    for event in events:
        acc.compose(event)
    return acc.get_epsilon(1e-5)


def _reserve_and_hold(where, name, event, start, attempted, release, out):
    """Child: reserve ``event`` when all start, report, hold until released, commit."""
    book = Ledger.open(where, name)
    start.wait(timeout=60)
    try:
        reservation = book.reserve(event, "racer")
        Path(out).write_text("reserved")
    except BudgetExceededError as exc:
        reservation = None
        Path(out).write_text(f"refused: {exc}")
    attempted.wait(timeout=60)
    release.wait(timeout=60)
    if reservation is not None:
        reservation.commit()
    os._exit(0)


def _hold_race(tmp_path, where, name, event, n=6):
    """n processes reserve ``event`` at once and hold; returns (their outcomes, the
    ledger as the parent sees it while they hold, the procs and the release event)."""
    start, attempted, release = _FORK.Barrier(n), _FORK.Barrier(n + 1), _FORK.Event()
    outs = [tmp_path / f"hold{i}.txt" for i in range(n)]
    procs = [
        _FORK.Process(
            target=_reserve_and_hold, args=(where, name, event, start, attempted, release, o)
        )
        for o in outs
    ]
    for p in procs:
        p.start()
    attempted.wait(timeout=120)
    return [o.read_text() for o in outs], procs, release


def _finish(procs, release):
    release.set()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * len(procs)


@pytest.mark.parametrize("where", STORES, indirect=True)
def test_open_reservations_of_exact_events_compose_like_commits(tmp_path, where):
    """Six processes reserve the exact DP-SGD event at once and hold it: all six fit
    (the PLD composes six to ≈ 0.755 ≤ 1) — what the same six do one after another."""
    location, name = where
    outcomes, procs, release = _hold_race(tmp_path, location, name, _SGD)
    try:
        assert outcomes == ["reserved"] * 6
        book = Ledger.open(location, name)
        assert len(book.reservations) == 6
        assert book.spent()[0] == pytest.approx(_fresh_pld([_SGD] * 6), rel=1e-9)
        assert book.spent(reserved=False) == (0.0, 0.0)  # nothing committed yet
        held = book.held()
        assert held.reservations == 6 and held.epsilon == pytest.approx(book.spent()[0])
    finally:
        _finish(procs, release)
    book = Ledger.open(location, name)
    assert book.reservations == () and len(book.entries) == 6
    assert book.spent()[0] == pytest.approx(_fresh_pld([_SGD] * 6), rel=1e-9)
    assert book.spent(reserved=False) == book.spent()


@pytest.mark.parametrize("where", ["budget.db"], indirect=True)
def test_reservations_at_face_value_refuse_and_say_what_they_hold(tmp_path, where):
    """The same six reserving EpsilonDelta(0.3, δ) — an upper bound, not the exact event:
    three fit (0.9), every other one is refused naming the share the three hold."""
    location, name = where
    outcomes, procs, release = _hold_race(tmp_path, location, name, EpsilonDelta(0.3, 1e-8))
    try:
        assert outcomes.count("reserved") == 3
        for text in outcomes:
            if text != "reserved":
                assert "would exhaust the budget's EPSILON" in text
                assert "0.9 (and delta 3e-08) of it is held by 3 running fit(s)" in text
                assert "without them it fits" in text and "--wait" in text
    finally:
        _finish(procs, release)


@pytest.mark.parametrize("where", ["budget.db", "budget.json"], indirect=True)
def test_wait_succeeds_once_a_running_fit_settles(where):
    location, name = where
    running = Ledger.open(location, name).reserve(EpsilonDelta(0.8, 0.0), "running fit")
    other = Ledger.open(location, name)  # another connection, as another process has
    with pytest.raises(BudgetExceededError, match=r"0\.8 of it is held by 1 running fit"):
        other.reserve(EpsilonDelta(0.5, 0.0))
    # the running fit finishes: it reports an event tighter than the one it reserved
    timer = threading.Timer(0.3, running.commit, args=(EpsilonDelta(0.4, 0.0),))
    timer.start()
    t0 = time.monotonic()
    try:
        reservation = other.reserve(EpsilonDelta(0.5, 0.0), "waited", wait=30)
    finally:
        timer.join()
    assert 0.25 <= time.monotonic() - t0 < 20
    reservation.commit()
    book = Ledger.open(location, name)
    assert [e.event for e in book.entries] == [EpsilonDelta(0.4, 0.0), EpsilonDelta(0.5, 0.0)]
    assert book.spent()[0] == pytest.approx(0.9, abs=1e-3)  # ≤ 0.4 + 0.5 (the PLD at δ)


@pytest.mark.parametrize("where", ["budget.db"], indirect=True)
def test_wait_fails_closed(where):
    """A reservation that never settles (its process died) keeps a waiting fit out until
    the time is up, and says so; a fit that does not fit even without the open
    reservations is refused at once, whatever the wait."""
    location, name = where
    Ledger.open(location, name).reserve(EpsilonDelta(0.8, 0.0), "a fit killed with -9")
    book = Ledger.open(location, name)
    t0 = time.monotonic()
    with pytest.raises(BudgetExceededError, match=r"still held after waiting 0\.4 s"):
        book.reserve(EpsilonDelta(0.5, 0.0), wait=0.4)
    assert time.monotonic() - t0 >= 0.4
    t0 = time.monotonic()
    with pytest.raises(BudgetExceededError) as info:
        book.reserve(EpsilonDelta(1.5, 0.0), wait=30)
    assert time.monotonic() - t0 < 10 and "without them it fits" not in str(info.value)
    for bad in (-1, float("nan"), float("inf"), "5", True):
        with pytest.raises(InvalidPrivacyParameter, match="wait"):
            book.reserve(EpsilonDelta(0.01, 0.0), wait=bad)
    assert len(book.entries) == 1  # nothing recorded by the refusals


def _share_child(where, name, start, out):
    book = Ledger.open(where, name)
    start.wait(timeout=60)
    reservation = book.reserve(lambda remaining: EpsilonDelta(0.01, 0.5 * remaining), "share")
    Path(out).write_text(repr(reservation.event.delta))
    reservation.commit()
    os._exit(0)


@pytest.mark.parametrize("where", ["budget.db", "postgres"], indirect=True)
def test_a_delta_share_is_taken_inside_the_reservation(tmp_path, where):
    """Six processes each take half of the remaining δ at once: the shares are computed
    inside each reservation's transaction, so they halve — never the same half twice,
    never the whole δ."""
    location, name = where
    start = _FORK.Barrier(6)
    outs = [tmp_path / f"share{i}.txt" for i in range(6)]
    procs = [_FORK.Process(target=_share_child, args=(location, name, start, o)) for o in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 6
    deltas = sorted((float(o.read_text()) for o in outs), reverse=True)
    assert deltas == pytest.approx([1e-5 / 2 ** (k + 1) for k in range(6)], rel=1e-9)
    assert Ledger.open(location, name).remaining_delta() == pytest.approx(1e-5 / 64)


# --------------------------------------------------------------------- the CLI race
_FIT = ["fit", "--epsilon", "0.3", "--no-reference", "--json", "--quiet", "--seed", "0"]


def _cli_race(tmp_path, location, name, extra, n=6):
    start = _FORK.Barrier(n)
    outs = [tmp_path / f"fit{i}.json" for i in range(n)]
    argv = [*_FIT, "--ledger", location, "--ledger-budget", name, *extra]
    procs = [_FORK.Process(target=run_cli_child, args=(argv, o, start)) for o in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    return [p.exitcode for p in procs], outs


@pytest.mark.parametrize("where", STORES, indirect=True)
def test_six_concurrent_cli_fits_with_wait_all_succeed(tmp_path, where):
    """Issue #37's target: six `dperm fit --ledger … --epsilon 0.3 --wait` started together
    on a budget of 1 all release a model — as the same six run one after another do —
    the store's final spend is the PLD of the committed events, nothing is left reserved,
    and each fit's `ledger_spent_epsilon` is the committed spend it saw (never above the
    final total)."""
    location, name = where
    codes, outs = _cli_race(tmp_path, location, name, ["--wait", "120"])
    assert codes == [0] * 6, [Path(f"{o}.err").read_text() for o in outs]
    book = Ledger.open(location, name)
    book.verify()
    assert book.reservations == () and len(book.entries) == 6
    assert all(e.status == "committed" for e in book.entries)
    total = book.spent()[0]
    assert total == pytest.approx(_fresh_pld(e.event for e in book.entries), rel=1e-9)
    assert total <= 1.0
    results = [json.loads(o.read_text()) for o in outs]
    assert sorted(r["ledger_entry"] for r in results) == sorted(e.id for e in book.entries)
    for r in results:
        assert 0.0 < r["ledger_spent_epsilon"] <= total + 1e-12
        assert r["ledger_held_epsilon"] >= 0.0 and r["delta_source"].startswith("default")


@pytest.mark.parametrize("where", ["budget.db"], indirect=True)
def test_six_concurrent_cli_fits_without_wait_name_the_held_share(tmp_path, where):
    location, name = where
    codes, outs = _cli_race(tmp_path, location, name, [])
    assert set(codes) <= {0, 2} and 0 in codes
    for o, code in zip(outs, codes, strict=True):
        if code == 2:
            (line,) = [ln for ln in Path(f"{o}.err").read_text().splitlines() if ln.strip()]
            assert line.startswith("dperm: error: --ledger: a fit at epsilon=0.3")
            assert "held by" in line and "running fit(s)" in line and "--wait" in line
    book = Ledger.open(location, name)
    assert book.reservations == () and len(book.entries) == codes.count(0)
