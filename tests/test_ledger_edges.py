"""The ledger store tried as a new user would (issue #37): every case gives a specific,
correct message — URL schemes, another application's SQLite file, read-only stores, one
name rule, `verify --head` with the prefix `show` prints, options named as typed, the δ
label of `dperm fit --ledger`, an emptied store and a deleted budget."""

from __future__ import annotations

import json
import os
import re
import sqlite3

import pytest
from typer.testing import CliRunner

from dperm.accounting import EpsilonDelta, Ledger
from dperm.cli import app
from dperm.exceptions import (
    DataFileNotFoundError,
    InvalidPrivacyParameter,
    LedgerIntegrityError,
    LedgerStoreError,
)
from dperm.stores import open_store


def _cli(*argv):
    return CliRunner().invoke(app, list(map(str, argv)))


def _error_line(res) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert len(lines) == 1 and lines[0].startswith("dperm: error:"), lines
    return lines[0]


_FIT = ["fit", "--epsilon", "0.3", "--no-reference", "--quiet", "--seed", "0"]


# ----------------------------------------------------------------------- locations
@pytest.mark.parametrize(
    ("location", "scheme"),
    [
        ("mysql://u:secret@h/db", "mysql"),
        ("s3://bucket/budget.db", "s3"),
        ("sqlite:///tmp/budget.db", "sqlite"),
        ("https://example.org/b.json", "https"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
    ],
)
def test_unsupported_url_schemes_are_refused_by_name(tmp_path, monkeypatch, location, scheme):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerStoreError, match=re.escape(f"location scheme '{scheme}://'")):
        open_store(location, create=True)
    line = _error_line(_cli(*_FIT, "--ledger", location, "--ledger-epsilon", "1"))
    assert f"'{scheme}://'" in line and "secret" not in line  # the password is not printed
    assert _error_line(_cli("budget", "show", location)).startswith("dperm: error: unsupported")
    assert list(tmp_path.iterdir()) == []  # no folder "mysql:" was made


def test_file_urls_are_paths_on_this_machine(tmp_path):
    url = (tmp_path / "budget db.db").as_uri()  # file:///…/budget%20db.db
    assert url.startswith("file:///") and "%20" in url
    Ledger.create(url, epsilon=1.0).spend(EpsilonDelta(0.1, 0.0))
    assert Ledger.open(tmp_path / "budget db.db").spent()[0] == pytest.approx(0.1, abs=1e-3)
    assert Ledger.open("file://localhost" + url[len("file://") :]).name == "default"
    for bad in ("file://server/share/b.db", url + "?mode=ro"):
        with pytest.raises(LedgerStoreError, match="file:///absolute/path"):
            open_store(bad)


def test_another_applications_sqlite_file_is_refused_untouched(tmp_path):
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    for attempt in (
        lambda: Ledger.open(path, epsilon=1.0),
        lambda: Ledger.create(path, epsilon=1.0),
        lambda: Ledger.open(path),
    ):
        with pytest.raises(LedgerStoreError, match="another application's SQLite database"):
            attempt()
    line = _error_line(_cli("budget", "create", path, "--epsilon", "1"))
    assert "tables: users" in line and "adds no tables" in line
    assert path.read_bytes() == before
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("users",)]
    # an empty SQLite file (no tables) is a new store, as a missing one
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    assert Ledger.open(empty, epsilon=1.0).epsilon == 1.0


def _as_nobody(fn):
    """Run ``fn`` in a forked child that cannot write what root owns (root: setuid to
    nobody; others: themselves, after a chmod), returning what it returns (or raises)."""
    import multiprocessing as mp
    import pickle

    read, write = os.pipe()
    pid = os.fork() if "fork" in mp.get_all_start_methods() else None
    if pid is None:
        pytest.skip("needs fork")
    if pid == 0:
        os.close(read)
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            try:
                out = ("ok", fn())
            except Exception as exc:
                out = ("raised", f"{type(exc).__name__}: {exc}")
            os.write(write, pickle.dumps(out))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


@pytest.mark.parametrize("kind", ["budget.db", "budget.json"])
@pytest.mark.parametrize("folder_writable", [True, False])
def test_a_read_only_store_opens_for_show_verify_history_export(kind, folder_writable):
    import shutil
    import tempfile
    from pathlib import Path

    from dperm.cli.budget import budget_history, export_budgets, show_budgets, verify_budgets

    tmp_path = Path(tempfile.mkdtemp(prefix="dperm-ro-"))  # pytest's is private to its user
    os.chmod(tmp_path, 0o755)
    folder = tmp_path / "store"
    folder.mkdir()
    where = folder / kind
    book = Ledger.create(where, epsilon=1.0)
    book.spend(EpsilonDelta(0.25, 1e-8), "a fit")
    book.close()
    os.chmod(where, 0o444)
    if not folder_writable:
        os.chmod(folder, 0o555)
    out = tmp_path / "out"
    out.mkdir(mode=0o777)
    os.chmod(out, 0o777)
    try:
        shown = _as_nobody(lambda: show_budgets(str(where))["budgets"][0]["spent_epsilon"])
        assert shown[0] == "ok", shown
        assert shown[1] == pytest.approx(0.25, abs=1e-3)
        verified = _as_nobody(lambda: verify_budgets(str(where))["verified"]["default"])
        assert verified == ("ok", verified[1]) and verified[1]["records"] == 2
        history = _as_nobody(lambda: len(budget_history(str(where))["history"]["default"]))
        assert history == ("ok", 2)
        exported = _as_nobody(lambda: export_budgets(str(where), out / "x.json")["exported"])
        assert exported == ("ok", {"default": 2})
        spent = _as_nobody(lambda: Ledger.open(where).spend(EpsilonDelta(0.1, 0.0)))
        assert spent[0] == "raised" and "read-only" in spent[1], spent
        os.chmod(folder, 0o755)
        os.chmod(where, 0o644)
        assert len(Ledger.open(where).entries) == 1  # the refused spend recorded nothing
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(tmp_path)


# ------------------------------------------------------------------- names, options
def test_one_name_rule_for_every_command(tmp_path):
    db = tmp_path / "b.db"
    assert "'default'" in _cli("budget", "create", db, "--epsilon", "1").stdout
    for bad in ("", " padded", "tab\there", "x" * 101):
        line = _error_line(_cli("budget", "create", db, "--name", bad, "--epsilon", "1"))
        assert "--name must be 1 to 100 printable characters" in line
        for cmd in ("show", "history", "verify"):
            assert "--name must be" in _error_line(_cli("budget", cmd, db, "--name", bad))
        line = _error_line(_cli(*_FIT, "--ledger", db, "--ledger-budget", bad))
        assert "--ledger-budget must be 1 to 100" in line
        with pytest.raises(LedgerStoreError, match="budget name must be"):
            Ledger.open(db, bad)
    assert open_store(db).budgets() == ["default"]  # nothing else was created


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--ledger-epsilon", "nan"], "--ledger-epsilon must not be NaN"),
        (["--ledger-epsilon", "-1"], "--ledger-epsilon must be"),
        (["--ledger-delta", "2"], "--ledger-delta must be in [0, 1)"),
        (["--ledger-epsilon", "1", "--wait", "-3"], "--wait must be seconds"),
        (["--ledger-epsilon", "1", "--ledger-key", "nokey.key"], "no ledger key file"),
    ],
)
def test_ledger_options_are_named_as_typed(tmp_path, monkeypatch, options, named):
    monkeypatch.chdir(tmp_path)
    line = _error_line(_cli(*_FIT, "--ledger", "b.db", *options))
    assert named in line, line
    assert not (tmp_path / "b.db").exists()  # refused before a store is created


def test_wait_and_key_need_a_ledger():
    for extra in (["--wait", "5"], ["--ledger-key", "k.key"]):
        assert "give --ledger LOCATION" in _error_line(_cli(*_FIT, *extra))


def test_the_delta_label_says_where_delta_came_from(tmp_path):
    db = tmp_path / "b.db"
    _cli("budget", "create", db, "--epsilon", "1", "--delta", "1e-5")
    res = _cli(*_FIT, "--ledger", db, "--json")
    out = json.loads(res.stdout)
    assert out["delta"] == 5e-6 and out["delta_source"] == "default: ½ of the ledger's remaining δ"
    table = _cli("fit", "--epsilon", "0.3", "--no-reference", "--seed", "0", "--ledger", db)
    flat = re.sub(r"[\s│]+", " ", table.stdout)  # the table wraps its cells
    assert "(default: ½ of the ledger's remaining δ)" in flat and "1/n²)" not in flat
    given = json.loads(_cli(*_FIT, "--ledger", db, "--delta", "1e-8", "--json").stdout)
    assert "delta_source" not in given and given["delta"] == 1e-8
    plain = _cli("fit", "--epsilon", "0.3", "--no-reference", "--seed", "0")
    flat = re.sub(r"[\s│]+", " ", plain.stdout)
    assert "(default min(1/n², 1e-5))" in flat  # no ledger: the estimator's default rule


# ------------------------------------------------------------------- verify --head
def test_verify_head_accepts_the_prefix_that_show_prints(tmp_path):
    db = tmp_path / "b.db"
    _cli("budget", "create", db, "--epsilon", "1")
    Ledger.open(db).spend(EpsilonDelta(0.1, 0.0))
    shown = json.loads(_cli("budget", "show", db, "--json").stdout)["budgets"][0]["head"]
    table = _cli("budget", "show", db).stdout
    prefix = shown[1][:16]
    assert f"#{shown[0]} {prefix}…" in table
    Ledger.open(db).spend(EpsilonDelta(0.1, 0.0))  # later records do not matter
    for kept in (prefix, prefix + "…", f"#{shown[0]} {prefix}…", shown[1], prefix.upper()):
        res = _cli("budget", "verify", db, "--head", kept, "--json")
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["verified"]["default"]["head_found_at"] == shown[0]
    assert "rewritten" in _error_line(_cli("budget", "verify", db, "--head", "0" * 16))
    for bad in ("abc", "zz" * 10, ""):
        assert "--head must be" in _error_line(_cli("budget", "verify", db, "--head", bad))


# ------------------------------------------------------------ emptied and deleted
def _delete_budget(db, name=None):
    """What someone with write access does: drop the triggers, delete rows."""
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER IF EXISTS dperm_records_no_delete")
    where = "" if name is None else " WHERE budget = ?"
    conn.execute("DELETE FROM dperm_records" + where, () if name is None else (name,))
    where = "" if name is None else " WHERE name = ?"
    conn.execute("DELETE FROM dperm_budgets" + where, () if name is None else (name,))
    conn.commit()
    conn.close()


def test_a_deleted_budget_fails_verify_and_is_never_recreated(tmp_path):
    db = tmp_path / "b.db"
    Ledger.create(db, epsilon=1.0).spend(EpsilonDelta(0.9, 0.0), "almost all of it")
    Ledger.create(db, "other", epsilon=1.0)
    _delete_budget(db, "default")
    line = _error_line(_cli("budget", "verify", db))
    assert "'default'" in line and "gone" in line and "emptied" in line
    # the next fit does not create a fresh budget of ε = 1 in its place
    line = _error_line(_cli(*_FIT, "--ledger", db, "--ledger-epsilon", "1"))
    assert "'default' was created in" in line and "records are gone" in line
    for attempt in (lambda: Ledger.open(db, epsilon=1.0), lambda: Ledger.create(db, epsilon=1.0)):
        with pytest.raises(LedgerIntegrityError, match="does not create a budget of that name"):
            attempt()
    assert open_store(db).budgets() == ["other"]
    assert "'other'" in _cli("budget", "verify", db, "--name", "other").stdout  # unharmed


def test_an_emptied_store_fails_verify_and_creates_nothing_implicitly(tmp_path):
    db = tmp_path / "b.db"
    Ledger.create(db, epsilon=1.0).spend(EpsilonDelta(0.9, 0.0))
    _delete_budget(db)  # every record, the store's own chain included
    assert "holds no budget" in _error_line(_cli("budget", "verify", db))
    line = _error_line(_cli(*_FIT, "--ledger", db, "--ledger-epsilon", "1"))
    assert "no budget is created in it implicitly" in line
    with pytest.raises(LedgerStoreError, match="implicitly"):
        Ledger.open(db, epsilon=1.0)
    # explicitly, it is the user's decision
    assert Ledger.create(db, epsilon=1.0).spent() == (0.0, 0.0)


def test_a_store_written_before_the_genesis_record_still_verifies(tmp_path):
    """A store of an earlier dperm (budgets, no store chain) verifies, with a note; its
    next budget gives it a genesis."""
    db = tmp_path / "b.db"
    Ledger.create(db, epsilon=1.0).spend(EpsilonDelta(0.1, 0.0))
    _delete_budget(db, " store")  # as an earlier dperm wrote it
    res = _cli("budget", "verify", db)
    assert res.exit_code == 0 and "no genesis record" in res.stdout
    with pytest.raises(LedgerStoreError, match="implicitly"):
        Ledger.open(db, "new", epsilon=1.0)
    Ledger.create(db, "new", epsilon=1.0)
    assert "no genesis" not in _cli("budget", "verify", db).stdout


def test_missing_store_and_bad_inputs_stay_specific(tmp_path):
    with pytest.raises(DataFileNotFoundError):
        Ledger.open(tmp_path / "none.db")
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        Ledger.open(tmp_path / "new.db", epsilon=float("nan"))
    assert not (tmp_path / "new.db").exists()  # parameters checked before the file
    with pytest.raises(LedgerStoreError, match="already holds a budget named 'default'"):
        Ledger.create(tmp_path / "x.db", epsilon=1.0) and Ledger.create(
            tmp_path / "x.db", epsilon=1.0
        )
