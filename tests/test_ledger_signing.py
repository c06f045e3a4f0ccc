"""Signed budgets (issue #37): a budget created with a key kept apart from the store is
tamper-proof for whoever holds the key — a history rewritten with every hash recomputed,
a store truncated to an earlier signed head, a budget or a whole store deleted — while
the unsigned store stays tamper-evident only (those edits pass its `verify`, as
docs/budgets.md says).  The attacks are made as someone who can write the store but has
no key: triggers dropped, rows rewritten, on SQLite, JSON and PostgreSQL."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import uuid

import pytest
from typer.testing import CliRunner

from dperm.accounting import EpsilonDelta, Ledger
from dperm.cli import app
from dperm.exceptions import (
    DataFileNotFoundError,
    LedgerIntegrityError,
    LedgerStoreError,
    PrivacyLeakWarning,
)
from dperm.stores import LedgerKey
from dperm.stores.records import GENESIS, Record, canonical_json, record_hash

STORES = ["budget.db", "budget.json", "postgres"]


def _cli(*argv):
    return CliRunner().invoke(app, list(map(str, argv)))


@pytest.fixture
def where(request, tmp_path):
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url"), f"s-{uuid.uuid4().hex[:10]}"
    return str(tmp_path / request.param), "default"


# ------------------------------------------------------------- the attacker's tools
def _write_history(location, name, records):
    """Replace ``name``'s records and head by ``records`` (no key needed to do this)."""
    head = (records[-1].seq, records[-1].hash) if records else None
    if location.endswith(".json"):
        with open(location, encoding="utf-8") as fh:
            data = json.load(fh)
        if head is None:
            del data["budgets"][name]
        else:
            data["budgets"][name] = {"head": list(head), "records": [r.to_dict() for r in records]}
        with open(location, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        return
    rows = [(name, r.seq, r.kind, canonical_json(r.body), r.prev_hash, r.hash) for r in records]
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn, conn.transaction():
            conn.execute("ALTER TABLE dperm_records DISABLE TRIGGER dperm_records_append_only")
            conn.execute("DELETE FROM dperm_records WHERE budget = %s", (name,))
            if head is None:
                conn.execute("DELETE FROM dperm_budgets WHERE name = %s", (name,))
            else:
                conn.execute(
                    "INSERT INTO dperm_budgets VALUES (%s, %s, %s) ON CONFLICT (name) DO UPDATE "
                    "SET head_seq = EXCLUDED.head_seq, head_hash = EXCLUDED.head_hash",
                    (name, *head),
                )
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO dperm_records VALUES (%s, %s, %s, %s, %s, %s)", rows)
            conn.execute("ALTER TABLE dperm_records ENABLE TRIGGER dperm_records_append_only")
        return
    conn = sqlite3.connect(location)
    conn.execute("DROP TRIGGER IF EXISTS dperm_records_no_delete")
    conn.execute("DELETE FROM dperm_records WHERE budget = ?", (name,))
    conn.executemany("INSERT INTO dperm_records VALUES (?, ?, ?, ?, ?, ?)", rows)
    if head is None:
        conn.execute("DELETE FROM dperm_budgets WHERE name = ?", (name,))
    else:
        conn.execute("INSERT OR REPLACE INTO dperm_budgets VALUES (?, ?, ?)", (name, *head))
    conn.commit()
    conn.close()


def _rehashed(name, records, edit=lambda rec: rec.body):
    """``records`` with ``edit`` applied to each body and every hash recomputed."""
    out, prev = [], GENESIS
    for rec in records:
        body = edit(rec)
        digest = record_hash(name, rec.seq, rec.kind, body, prev)
        out.append(Record(name, rec.seq, rec.kind, body, prev, digest))
        prev = digest
    return out


def _lower_first_spend(rec):
    """The naive "lower that ε" edit, MAC left as it was."""
    if rec.kind != "spend":
        return rec.body
    return {**rec.body, "event": EpsilonDelta(0.01, 0.0).to_dict()}


def _verify(location, name, key=None):
    argv = ["budget", "verify", location, "--name", name]
    return _cli(*argv, *(["--key", key] if key else []))


def _failed(res, *words):
    line = res.stderr.strip()
    assert res.exit_code == 2 and line.startswith("dperm: error:"), res.output
    for w in words:
        assert w in line, line
    return line


# ------------------------------------------------------------------------- attacks
@pytest.mark.parametrize("where", STORES, indirect=True)
def test_a_signed_budget_catches_what_the_hash_chain_cannot(tmp_path, where):
    location, name = where
    key = tmp_path / "team.key"
    created = _cli("budget", "create", location, "--name", name, "--epsilon", "3", "--key", key)
    assert created.exit_code == 0 and "signed with key" in created.stdout, created.output
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    fit = _cli("fit", "--epsilon", "0.3", "--no-reference", "--quiet", "--seed", "0",
               "--ledger", location, "--ledger-budget", name, "--ledger-key", key)  # fmt: skip
    assert fit.exit_code == 0, fit.output
    book = Ledger.open(location, name, key=key)
    for i in range(3):
        book.spend(EpsilonDelta(0.5, 0.0), f"spend {i}")
    records = list(book.records)
    assert all("mac" in r.body for r in records) and records[0].body["signed"]["key_id"]
    ok = _verify(location, name, key)
    assert ok.exit_code == 0 and "signed: every MAC checked" in ok.stdout, ok.output

    # 1. rewritten, every hash recomputed: the unsigned check passes, the key does not
    _write_history(location, name, _rehashed(name, records, _lower_first_spend))
    assert _verify(location, name).exit_code == 0  # tamper-evident only
    _failed(_verify(location, name, key), "entry #", "MAC")
    with pytest.raises(LedgerIntegrityError, match="MAC"):
        Ledger.open(location, name, key=key)

    # 2. cut back to an earlier, genuinely signed head: every MAC checks — the witness
    _write_history(location, name, records[:-2])
    assert _verify(location, name).exit_code == 0
    _failed(_verify(location, name, key), "truncated", f"#{records[-1].seq}")

    # 3. a forged record appended, hashes right, no MAC: caught by the key
    forged = _rehashed(name, [*records, Record(name, len(records), "cancel", {}, "", "")])
    _write_history(location, name, forged)
    _failed(_verify(location, name, key), f"entry #{len(records)}", "MAC")

    # 4. the budget deleted whole
    _write_history(location, name, [])
    _failed(_verify(location, name, key), "emptied")
    _failed(_verify(location, name), "no budget named")

    # the genuine history back: it verifies, and the witness moved on with it
    _write_history(location, name, records)
    assert _verify(location, name, key).exit_code == 0


def test_an_emptied_store_is_caught_with_the_key_and_without(tmp_path):
    db, key = str(tmp_path / "b.db"), tmp_path / "k.key"
    Ledger.create(db, epsilon=2.0, key=LedgerKey.create(key)).spend(EpsilonDelta(1.5, 0.0))
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER dperm_records_no_delete")
    conn.execute("DELETE FROM dperm_records")
    conn.execute("DELETE FROM dperm_budgets")
    conn.commit()
    conn.close()
    _failed(_cli("budget", "verify", db, "--key", key), "'default'", "gone", "emptied")
    _failed(_cli("budget", "verify", db), "holds no budget")
    with pytest.raises(LedgerIntegrityError, match="emptied"):
        Ledger.open(db, key=key)


# ---------------------------------------------------------------------- key rules
def test_who_may_write_a_signed_budget(tmp_path):
    db = str(tmp_path / "b.db")
    key = LedgerKey.create(tmp_path / "k.key")
    Ledger.create(db, epsilon=1.0, key=key)
    Ledger.create(db, "plain", epsilon=1.0)
    reader = Ledger.open(db)  # no key: it reads …
    assert reader.spent() == (0.0, 0.0)
    with pytest.raises(LedgerStoreError, match=r"is signed .* needs its key"):
        reader.spend(EpsilonDelta(0.1, 0.0))  # … and cannot write
    line = _failed(
        _cli("fit", "--epsilon", "0.3", "--no-reference", "--quiet", "--ledger", db), "signed"
    )
    assert "--ledger-key" in line
    other = LedgerKey.create(tmp_path / "other.key")
    with pytest.raises(LedgerStoreError, match=f"signed with the key '{key.key_id}'"):
        Ledger.open(db, key=other)
    with pytest.raises(LedgerStoreError, match="created without a key"):
        Ledger.open(db, "plain", key=key)
    _failed(_cli("budget", "verify", db, "--key", tmp_path / "k.key"), "'plain'", "without a key")
    assert (
        _cli("budget", "verify", db, "--name", "default", "--key", tmp_path / "k.key").exit_code
        == 0
    )
    assert len(Ledger.open(db).entries) == 0  # nothing was written by the refusals


def test_key_files(tmp_path):
    path = tmp_path / "k.key"
    key = LedgerKey.create(path)
    assert LedgerKey.load(path).key_id == key.key_id and len(key.key_id) == 16
    assert key._secret.hex() not in repr(key) and key.key_id in repr(key)
    with pytest.raises(LedgerStoreError, match="never overwritten"):
        LedgerKey.create(path)
    with pytest.raises(DataFileNotFoundError):
        LedgerKey.load(tmp_path / "none.key")
    for text in ("", "{}", '{"format": "dperm.LedgerKey", "version": 1, "algorithm": '
                 '"hmac-sha256", "key": "00"}', "not json"):  # fmt: skip
        bad = tmp_path / "bad.key"
        bad.write_text(text)
        with pytest.raises(LedgerStoreError, match="not a dperm ledger key"):
            LedgerKey.load(bad)
    # `budget create --key` writes a missing key; a refused create leaves no key behind
    db = tmp_path / "b.db"
    res = _cli("budget", "create", db, "--epsilon", "-1", "--key", tmp_path / "new.key")
    assert res.exit_code == 2 and not (tmp_path / "new.key").exists()
    res = _cli("budget", "create", db, "--epsilon", "1", "--key", tmp_path / "new.key", "--json")
    info = json.loads(res.stdout)["key"]
    assert info["written"] and info["key_id"] == LedgerKey.load(tmp_path / "new.key").key_id
    again = _cli("budget", "create", db, "--name", "b2", "--epsilon", "1", "--key",
                 tmp_path / "new.key", "--json")  # fmt: skip
    assert json.loads(again.stdout)["key"]["written"] is False


def test_a_key_others_can_read_is_loaded_with_a_warning(tmp_path):
    path = tmp_path / "k.key"
    key = LedgerKey.create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    os.chmod(path, 0o644)  # copied or chmod-ed after it was written
    with pytest.warns(PrivacyLeakWarning, match="mode 644"):
        assert LedgerKey.load(path).key_id == key.key_id
    os.chmod(path, 0o600)
    assert LedgerKey.load(path).key_id == key.key_id  # no warning (an error in the tests)


def test_the_witness_never_moves_back(tmp_path):
    key = LedgerKey.create(tmp_path / "k.key")
    assert key.witness("store", "b", (5, "e" * 64), "t") is True
    key.witness("store", "b", (3, "c" * 64), "t")
    assert key.witnessed("store") == {"b": (5, "e" * 64)}
    key.witness("store", "b", (7, "f" * 64), "t")
    assert key.witnessed("store") == {"b": (7, "f" * 64)} and key.witnessed("other") == {}
    assert LedgerKey(b"x" * 32).witness("store", "b", (1, "a"), "t") is False  # no file
    assert LedgerKey(b"x" * 32).witnessed("store") == {}
