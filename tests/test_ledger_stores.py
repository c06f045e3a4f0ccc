"""The ledger stores (dperm.stores) and the Ledger kept in them: reserve → commit /
cancel, named budgets, the hash chain (edits, deletions, reordering, truncation
detected), JSON export/import, and a Hypothesis model of the check-and-spend.

Every store is a real one: SQLite files, JSON files, a PostgreSQL server (the
``postgres_url`` fixture; CI starts one), and the in-memory store.  The processes that
race on them are in tests/test_ledger_processes.py.
"""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dperm.accounting import EpsilonDelta, Gaussian, Ledger, PureEpsilon
from dperm.exceptions import (
    BudgetExceededError,
    DataFileNotFoundError,
    InvalidPrivacyParameter,
    LedgerIntegrityError,
    LedgerStoreError,
)
from dperm.stores import open_store

STORES = ["sqlite", "json", "postgres"]


@pytest.fixture
def location(request, tmp_path):
    """A fresh location of the store kind ``request.param`` (a new budget name per test
    on the shared PostgreSQL server)."""
    kind = request.param
    if kind == "sqlite":
        return str(tmp_path / "budget.db"), "default"
    if kind == "json":
        return str(tmp_path / "budget.json"), "default"
    return request.getfixturevalue("postgres_url"), f"t-{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("location", STORES, indirect=True)
def test_reserve_commit_cancel_and_reopen(location):
    where, name = location
    book = Ledger.open(where, name, epsilon=1.0, delta=1e-5)
    first = book.reserve(EpsilonDelta(0.4, 1e-7), "fit 1")
    second = book.reserve(EpsilonDelta(0.4, 1e-7), "fit 2")
    with pytest.raises(BudgetExceededError, match="EPSILON"):  # 0.4 + 0.4 + 0.4 > 1
        book.reserve(EpsilonDelta(0.4, 1e-7), "fit 3")
    assert [e.status for e in book.entries] == ["reserved", "reserved"]
    first.commit(label="fit 1 done", model="m.dperm", model_sha256="ab" * 32)
    second.cancel("it raised")
    with pytest.raises(InvalidPrivacyParameter, match="already cancelled"):
        second.commit()
    other = Ledger.open(where, name)  # another process, later: same history
    (entry,) = other.entries
    assert entry.status == "committed" and entry.label == "fit 1 done"
    assert entry.model == "m.dperm" and entry.model_sha256 == "ab" * 32
    assert other.spent()[0] == pytest.approx(0.4, abs=1e-3)
    assert [r.kind for r in other.records] == ["create", "reserve", "reserve", "commit", "cancel"]
    other.spend(EpsilonDelta(0.5, 1e-7), "fits now")  # the cancelled 0.4 came back
    assert book.spent()[0] == pytest.approx(0.9, abs=1e-3)  # `book` reads the new record
    seq, digest = book.verify()
    assert seq == 5 and digest == other.records[-1].hash


@pytest.mark.parametrize("location", STORES, indirect=True)
def test_commit_keeps_the_tighter_of_the_reserved_and_the_actual_event(location):
    """Both events bound the same fit: the budget composes whichever gives the smaller
    total, and records which (replayed identically on open)."""
    where, name = location
    book = Ledger.open(where, name, epsilon=2.0, delta=1e-5)
    gauss = Gaussian(4.0)  # ε ≈ 1.2 at δ = 1e-5 alone, but the PLD composes it tightly
    loose = book.reserve(EpsilonDelta(1.5, 1e-6))
    loose.commit(gauss)
    tight = book.reserve(EpsilonDelta(0.2, 1e-7))
    tight.commit(Gaussian(0.5))  # far worse than (0.2, 1e-7): the reservation is kept
    reopened = Ledger.open(where, name)
    a, b = reopened.entries
    assert a.event == gauss and a.reserved == EpsilonDelta(1.5, 1e-6)
    assert b.event == EpsilonDelta(0.2, 1e-7) and b.actual == Gaussian(0.5)
    assert reopened.spent()[0] == pytest.approx(book.spent()[0])


@pytest.mark.parametrize("location", STORES, indirect=True)
def test_named_budgets_are_fixed_at_creation(location):
    where, name = location
    Ledger.open(where, name, epsilon=1.0, delta=1e-5)
    other = Ledger.open(where, name + "-b", epsilon=3.0, delta=0.0, neighbouring="add-remove")
    assert other.neighbouring == "add-remove" and other.delta == 0.0
    assert {name, name + "-b"} <= set(open_store(where).budgets())
    with pytest.raises(InvalidPrivacyParameter, match="fixed"):
        Ledger.open(where, name, epsilon=2.0)
    with pytest.raises(InvalidPrivacyParameter, match="neighbouring"):
        Ledger.open(where, name, neighbouring="add-remove")
    with pytest.raises(LedgerStoreError, match="no budget named"):
        Ledger.open(where, name + "-missing")
    with pytest.raises(BudgetExceededError):  # replace-one events in an add/remove budget
        other.spend(PureEpsilon(4.0, neighbouring="add-remove"))


def test_missing_and_foreign_locations(tmp_path):
    with pytest.raises(DataFileNotFoundError):
        Ledger.open(tmp_path / "none.db")
    assert not (tmp_path / "none.db").exists()
    bad = tmp_path / "notes.db"
    bad.write_text("hello")
    with pytest.raises(LedgerStoreError, match="not a dperm ledger store"):
        Ledger.open(bad)
    legacy = tmp_path / "spent.json"  # a ledger written by Ledger.save is a snapshot
    Ledger(1.0, 1e-5).save(legacy)
    with pytest.raises(LedgerStoreError, match="dperm budget import"):
        Ledger.open(legacy)
    assert Ledger.load(legacy).epsilon == 1.0  # and still loads as one


# ------------------------------------------------------------------ tampering
def _sqlite_edit(path, *statements):
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER dperm_records_no_update")
    conn.execute("DROP TRIGGER dperm_records_no_delete")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


def _three_fits(path):
    book = Ledger.open(path, epsilon=3.0, delta=1e-5)
    for i in range(3):
        book.spend(EpsilonDelta(0.5, 1e-7), f"fit {i}")
    return book


@pytest.mark.parametrize(
    ("edit", "entry", "words"),
    [
        # lower the ε of entry #2
        (
            "UPDATE dperm_records SET body = replace(body, '0.5', '0.05') WHERE seq = 2",
            2,
            "edited",
        ),
        ("DELETE FROM dperm_records WHERE seq = 2", 2, "missing"),  # a spend deleted
        ("DELETE FROM dperm_records WHERE seq = 3", 3, "truncated"),  # the last one
        ("UPDATE dperm_records SET seq = 9 WHERE seq = 1", 1, "missing"),  # reordered
        ("UPDATE dperm_budgets SET head_seq = 2", 3, "head"),  # head moved back
    ],
)
def test_sqlite_tampering_is_detected_and_refuses_spends(tmp_path, edit, entry, words):
    path = tmp_path / "budget.db"
    _three_fits(path)
    _sqlite_edit(path, edit)
    with pytest.raises(LedgerIntegrityError, match=words) as caught:
        Ledger.open(path)
    assert caught.value.entry == entry and caught.value.budget == "default"
    assert f"entry #{entry}" in str(caught.value)


def test_a_tampered_store_refuses_an_open_ledger_too(tmp_path):
    path = tmp_path / "budget.db"
    book = _three_fits(path)
    # someone appends a forged record by hand (the chain check catches what they wrote)
    forged = "INSERT INTO dperm_records VALUES ('default', 4, 'spend', '{}', 'x', 'y')"
    _sqlite_edit(path, forged, "UPDATE dperm_budgets SET head_seq = 4, head_hash = 'y'")
    with pytest.raises(LedgerIntegrityError, match="entry #4"):
        book.spend(EpsilonDelta(0.1, 0))
    with pytest.raises(LedgerIntegrityError):  # and keeps refusing
        book.spend(EpsilonDelta(0.1, 0))


def test_records_are_append_only_in_sqlite(tmp_path):
    path = tmp_path / "budget.db"
    _three_fits(path)
    conn = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE dperm_records SET body = '{}' WHERE seq = 1")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM dperm_records")
    conn.close()


def test_json_store_edits_and_truncation_are_detected(tmp_path):
    path = tmp_path / "budget.json"
    _three_fits(path)
    text = path.read_text()
    data = json.loads(text)
    data["budgets"]["default"]["records"][1]["body"]["event"]["epsilon"] = 0.05
    path.write_text(json.dumps(data))
    with pytest.raises(LedgerIntegrityError, match="entry #1 was edited"):
        Ledger.open(path)
    path.write_text(text[: len(text) // 2])  # a torn write by hand
    with pytest.raises(LedgerIntegrityError, match="not valid JSON"):
        Ledger.open(path)
    data = json.loads(text)
    del data["budgets"]["default"]["records"][-1]  # the last spend removed
    path.write_text(json.dumps(data))
    with pytest.raises(LedgerIntegrityError, match="truncated"):
        Ledger.open(path)


def test_postgres_tampering_is_detected(postgres_url):
    import psycopg

    name = f"t-{uuid.uuid4().hex[:12]}"
    book = Ledger.open(postgres_url, name, epsilon=3.0, delta=1e-5)
    for i in range(3):
        book.spend(EpsilonDelta(0.5, 1e-7), f"fit {i}")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(psycopg.Error, match="append-only"):
            conn.execute("DELETE FROM dperm_records WHERE budget = %s", (name,))
        conn.execute("ALTER TABLE dperm_records DISABLE TRIGGER dperm_records_append_only")
        try:
            conn.execute(
                "UPDATE dperm_records SET body = replace(body, '0.5', '0.05') "
                "WHERE budget = %s AND seq = 2",
                (name,),
            )
        finally:
            conn.execute("ALTER TABLE dperm_records ENABLE TRIGGER dperm_records_append_only")
    with pytest.raises(LedgerIntegrityError, match="entry #2 was edited"):
        Ledger.open(postgres_url, name)


def test_postgres_a_new_database_takes_a_budget_after_a_first_look(postgres_url):
    """The first connection creates the tables (and the store's genesis): a budget is then
    created implicitly by a later connection — as ``dperm fit --ledger URL
    --ledger-epsilon 1`` does after its first look finds none — while a store emptied by
    hand is still refused."""
    import psycopg

    db = f"fresh_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
    url = postgres_url.rsplit("/", 1)[0] + "/" + db
    try:
        with pytest.raises(LedgerStoreError, match="no budget named 'default'"):
            Ledger.open(url)  # creates the tables
        assert 0 < Ledger.open(url, epsilon=1.0).spend(EpsilonDelta(0.5, 0.0)) <= 0.5
        with psycopg.connect(url, autocommit=True) as conn:  # emptied by hand
            conn.execute("ALTER TABLE dperm_records DISABLE TRIGGER dperm_records_append_only")
            conn.execute("DELETE FROM dperm_records")
            conn.execute("DELETE FROM dperm_budgets")
        with pytest.raises(LedgerStoreError, match="no budget is created in it implicitly"):
            Ledger.open(url, epsilon=1.0)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {db} WITH (FORCE)")


def test_postgres_writers_read_committed_whatever_the_server_default(postgres_url):
    """A writer sees what was committed before each of its statements (READ COMMITTED,
    under the budget's lock) even on a server whose default isolation is SERIALIZABLE,
    where its snapshot would otherwise be taken before the lock is granted; a reader
    keeps one REPEATABLE READ snapshot."""
    import psycopg

    db = f"serial_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
        conn.execute(f"ALTER DATABASE {db} SET default_transaction_isolation TO 'serializable'")
    url = postgres_url.rsplit("/", 1)[0] + "/" + db
    try:
        store = open_store(url)
        with store.transaction("default", write=True) as tx:
            assert tx._run("SHOW transaction_isolation", ()) == [("read committed",)]
        with store.transaction("default", write=False) as tx:
            assert tx._run("SHOW transaction_isolation", ()) == [("repeatable read",)]
        ledger = Ledger.open(url, epsilon=1.0, delta=1e-5)
        assert 0 < ledger.spend(EpsilonDelta(0.1, 0.0)) <= 0.1
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {db} WITH (FORCE)")


# ------------------------------------------------------------- export / import
def test_export_import_round_trip_and_conflicts(tmp_path):
    from dperm.cli.budget import export_budgets, import_budgets

    src = tmp_path / "budget.db"
    book = _three_fits(src)
    Ledger.open(src, "adult", epsilon=1.0, delta=1e-6).spend(EpsilonDelta(0.2, 1e-8))
    out = tmp_path / "backup.json"
    assert export_budgets(str(src), out)["exported"] == {"adult": 2, "default": 4}
    dst = tmp_path / "restored.db"
    assert import_budgets(out, str(dst))["imported"] == {"adult": 2, "default": 4}
    assert Ledger.open(dst).records == book.records  # the same chain, hash for hash
    book.spend(EpsilonDelta(0.1, 0))  # the source moves on; a second export adds one
    export_budgets(str(src), out)
    assert import_budgets(out, str(dst))["imported"] == {"adult": 0, "default": 1}
    Ledger.open(dst).spend(EpsilonDelta(0.1, 0))  # now the two histories split
    book.spend(EpsilonDelta(0.2, 0))
    export_budgets(str(src), out)
    with pytest.raises(LedgerIntegrityError, match="differs"):
        import_budgets(out, str(dst))
    legacy = tmp_path / "spent.json"  # a Ledger.save snapshot becomes a budget
    old = Ledger(2.0, 1e-5)
    old.spend(EpsilonDelta(0.7, 1e-7), "old fit")
    old.save(legacy)
    import_budgets(legacy, str(dst), "legacy")
    imported = Ledger.open(dst, "legacy")
    assert imported.spent() == pytest.approx(old.spent())
    assert imported.entries[0].label == "old fit"


# ------------------------------------------------------ a model of the budget
_EPS = st.sampled_from([0.125, 0.25, 0.375, 0.5, 0.75])  # exact binary fractions
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("reserve"), _EPS),
        st.tuples(st.just("spend"), _EPS),
        st.tuples(st.just("commit"), st.integers(0, 30)),
        st.tuples(st.just("cancel"), st.integers(0, 30)),
        st.tuples(st.just("reopen"), st.just(0)),
    ),
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS, total=st.sampled_from([1.0, 1.5, 2.0]))
def test_check_and_spend_matches_a_model_of_the_budget(tmp_path_factory, ops, total):
    """Against a model (a list of charges, basic composition of pure-ε events): a
    reservation or spend is accepted iff the charges plus it fit in the budget; a
    cancel frees it; a commit keeps it; reopening the store gives the same state."""
    path = tmp_path_factory.mktemp("model") / "budget.db"
    book = Ledger.open(path, epsilon=total, delta=0.0, accountant="basic")
    charges: dict[int, float] = {}  # live charges of the model, by reservation id
    open_ids: list = []  # reservations not settled, in order
    for op, arg in ops:
        if op in ("reserve", "spend"):
            fits = sum(charges.values()) + arg <= total
            try:
                if op == "reserve":
                    res = book.reserve(PureEpsilon(arg))
                    open_ids.append(res)
                    charges[res.id] = arg
                else:
                    book.spend(PureEpsilon(arg))
                    charges[book.entries[-1].id] = arg
                assert fits
            except BudgetExceededError:
                assert not fits
        elif op in ("commit", "cancel") and open_ids:
            res = open_ids.pop(arg % len(open_ids))
            if op == "commit":
                res.commit(PureEpsilon(charges[res.id]))
            else:
                res.cancel()
                del charges[res.id]
        elif op == "reopen":
            book = Ledger.open(path)
            open_ids = [type(r)(book, r.id, r.event, r.label) for r in open_ids]
        assert book.spent()[0] == pytest.approx(sum(charges.values()), abs=1e-12)
        assert sorted(e.id for e in book.entries) == sorted(charges)
        assert sorted(e.id for e in book.reservations) == sorted(r.id for r in open_ids)
    assert Ledger.open(path).spent() == book.spent()


# ------------------------------------------------------- the active-budget path
def _xy(n=300):
    import numpy as np

    X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(n, 2))
    return X, np.where(X[:, 0] > 0, 1, -1)


def test_estimator_fits_reserve_then_commit_or_cancel(tmp_path, monkeypatch):
    """Inside ``dperm.budget(LOCATION)`` an estimator reserves its (ε, δ) before it
    reads the data and commits the event it reports; a fit that raises after its
    reservation for a public reason (a parameter) cancels it, for any other reason
    (which may depend on the data, issue #37) commits it."""
    import dperm
    from dperm.estimators import _base

    X, y = _xy()
    path = tmp_path / "budget.db"
    Ledger.open(path, epsilon=1.0, delta=1e-5)
    seen = []

    def spy(name):  # the fit's first read of the data: the reservation is there already
        inner = real(name)

        def adapter(est, loss, Xd, target, *args):
            seen.append([e.status for e in Ledger.open(path).entries])
            return inner(est, loss, Xd, target, *args)

        return adapter

    real = _base.get_mechanism
    monkeypatch.setattr(_base, "get_mechanism", spy)
    with dperm.budget(path) as ledger:
        clf = dperm.DPLogisticRegression(
            epsilon=0.4, delta=1e-7, classes=[-1, 1], mechanism="objective"
        )
        clf.fit(X, y)
    assert seen == [["reserved"]]
    (entry,) = Ledger.open(path).entries
    assert entry.status == "committed" and entry.reserved == EpsilonDelta(0.4, 1e-7)
    assert entry.actual == clf.dp_event_ and entry.label == "DPLogisticRegression"

    def broken(exc):
        def mechanism(name):
            def adapter(*args):
                raise exc

            return adapter

        return mechanism

    monkeypatch.setattr(_base, "get_mechanism", broken(InvalidPrivacyParameter("bad setting")))
    with dperm.budget(path), pytest.raises(InvalidPrivacyParameter, match="bad setting"):
        dperm.DPLogisticRegression(epsilon=0.4, delta=1e-7, classes=[-1, 1]).fit(X, y)
    assert [r.kind for r in ledger.records][-2:] == ["reserve", "cancel"]
    assert len(ledger.entries) == 1
    monkeypatch.setattr(_base, "get_mechanism", broken(RuntimeError("the solver blew up")))
    with dperm.budget(path), pytest.raises(RuntimeError, match="blew up"):
        dperm.DPLogisticRegression(epsilon=0.4, delta=1e-7, classes=[-1, 1]).fit(X, y)
    assert [r.kind for r in ledger.records][-2:] == ["reserve", "commit"]
    assert len(ledger.entries) == 2
    monkeypatch.setattr(_base, "get_mechanism", real)
    with dperm.budget(str(path)), pytest.raises(BudgetExceededError, match="active budget"):
        dperm.DPLogisticRegression(epsilon=0.4, delta=1e-7, classes=[-1, 1]).fit(X, y)
    assert len(Ledger.open(path).entries) == 2


def test_an_in_memory_ledger_copies_into_an_independent_history():
    import copy

    ledger = Ledger(1.0, 1e-5)
    ledger.spend(EpsilonDelta(0.3, 0.0), "first")
    twin = copy.deepcopy(ledger)
    twin.spend(EpsilonDelta(0.3, 0.0), "only in the copy")
    assert [e.label for e in ledger.entries] == ["first"]
    assert [e.label for e in twin.entries] == ["first", "only in the copy"]
    twin.verify()
