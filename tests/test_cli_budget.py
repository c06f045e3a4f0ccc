"""``dperm budget create | show | history | verify | export | import``: --json keys,
the rich table, one-line errors (exit 2), and what a crashed fit looks like."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from typer.testing import CliRunner

from dperm.accounting import EpsilonDelta, Ledger
from dperm.cli import app


def _run(*argv):
    return CliRunner().invoke(app, ["budget", *map(str, argv)])


def _json(res):
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _one_line_error(res, *words):
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert len(lines) == 1 and lines[0].startswith("dperm: error:"), lines
    for w in words:
        assert w in lines[0], lines[0]


def test_create_show_history_verify(tmp_path, monkeypatch):
    db = tmp_path / "budget.db"
    out = _json(_run("create", db, "--epsilon", "2", "--delta", "1e-6", "--json"))
    assert out["created"] == "default" and out["epsilon"] == 2.0 and out["delta"] == 1e-6
    _json(_run("create", db, "--name", "adult", "--epsilon", "1", "--json"))
    _one_line_error(_run("create", db, "--epsilon", "5"), "already holds", "'default'")
    book = Ledger.open(db)
    book.spend(EpsilonDelta(0.5, 1e-8), "a fit")
    book.reserve(EpsilonDelta(0.25, 1e-8), "a fit running")  # this process: alive
    with monkeypatch.context() as m:  # a fit killed after its reservation: its pid is gone
        m.setattr(os, "getpid", lambda: 2**22 + 12345)
        Ledger.open(db).reserve(EpsilonDelta(0.25, 1e-8), "a fit that died")
    shown = _json(_run("show", db, "--json"))
    default = next(b for b in shown["budgets"] if b["budget"] == "default")
    assert default["fits"] == 1 and len(default["reserved"]) == 2
    states = [r["state"] for r in default["reserved"]]
    assert states[0].startswith("running") and states[1] == "reserved, outcome unknown"
    assert default["spent_epsilon"] == pytest.approx(1.0, abs=1e-3)  # reservations charged
    assert set(default["spent_by_accountant"]) >= {"basic", "pld"}
    assert default["remaining_epsilon"] == pytest.approx(1.0, abs=1e-3)
    table = _run("show", db, "--name", "default")
    assert table.exit_code == 0
    for words in ("spent under pld", "remaining", "reserved, outcome unknown", "a fit that died"):
        assert words in table.stdout
    history = _json(_run("history", db, "--name", "default", "--json"))["history"]["default"]
    assert [h["kind"] for h in history] == ["create", "spend", "reserve", "reserve"]
    assert "reserve" in _run("history", db).stdout
    verified = _json(_run("verify", db, "--json"))["verified"]
    assert verified["default"]["records"] == 4 and verified["adult"]["records"] == 1
    assert "ok: budget 'default', 4 records" in _run("verify", db).stdout
    head = verified["default"]["head"]
    Ledger.open(db).spend(EpsilonDelta(0.1, 0), "later")
    later = _json(_run("verify", db, "--name", "default", "--head", head, "--json"))
    assert later["verified"]["default"]["head_found_at"] == 3
    _one_line_error(_run("verify", db, "--name", "default", "--head", "ab" * 32), "rewritten")


def test_a_tampered_store_is_one_line_naming_the_entry(tmp_path):
    db = tmp_path / "budget.db"
    book = Ledger.open(db, epsilon=3.0, delta=1e-5)
    for i in range(3):
        book.spend(EpsilonDelta(0.5, 1e-7), f"fit {i}")
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER dperm_records_no_update")
    conn.execute("UPDATE dperm_records SET body = replace(body, '0.5', '0.1') WHERE seq = 3")
    conn.commit()
    conn.close()
    for cmd in ("verify", "show", "history"):
        _one_line_error(_run(cmd, db), "entry #3", "edited", "refuses")
    res = CliRunner().invoke(
        app, ["fit", "--ledger", str(db), "--epsilon", "0.1", "--no-reference", "--json"]
    )
    _one_line_error(res, "entry #3")


def test_errors_are_one_line(tmp_path):
    _one_line_error(_run("show", tmp_path / "none.db"), "no ledger store")
    assert not (tmp_path / "none.db").exists()
    _one_line_error(_run("create", tmp_path / "b.db", "--epsilon", "-1"), "--epsilon")
    assert not (tmp_path / "b.db").exists()  # a refused create writes no file
    _json(_run("create", tmp_path / "b.db", "--epsilon", "1", "--json"))
    _one_line_error(_run("show", tmp_path / "b.db", "--name", "nope"), "no budget named")
    _one_line_error(_run("import", tmp_path / "none.json", tmp_path / "b.db"), "no file")
    _one_line_error(
        _run("show", "postgresql://nobody@127.0.0.1:1/none"), "ledger store", "postgresql://"
    )


def test_export_import_json(tmp_path):
    db = tmp_path / "budget.db"
    _json(_run("create", db, "--epsilon", "1", "--json"))
    Ledger.open(db).spend(EpsilonDelta(0.3, 1e-8), "fit")
    out = _json(_run("export", db, tmp_path / "backup.json", "--json"))
    assert out["exported"] == {"default": 2}
    data = json.loads((tmp_path / "backup.json").read_text())
    assert data["format"] == "dperm.LedgerStore" and len(data["budgets"]["default"]["records"]) == 2
    got = _json(_run("import", tmp_path / "backup.json", tmp_path / "copy.db", "--json"))
    assert got["imported"] == {"default": 2}
    assert Ledger.open(tmp_path / "copy.db").spent() == Ledger.open(db).spent()
    # the JSON export is itself a store: readable by every command
    assert _json(_run("verify", tmp_path / "backup.json", "--json"))["verified"]["default"]
