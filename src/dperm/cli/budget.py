"""``dperm budget create | show | history | verify | export | import``: privacy budgets
kept in a store (a SQLite file, a JSON store or a ``postgresql://`` URL; docs/budgets.md).

Examples (shell)::

    dperm budget create budget.db --epsilon 3 --delta 1e-5          # the "default" budget
    dperm budget create budget.db --name adult --epsilon 1 --delta 1e-6
    dperm fit --dataset adult --ledger budget.db --ledger-budget adult --epsilon 0.5
    dperm budget show budget.db                                      # spent, remaining, reserved
    dperm budget history budget.db --name adult --json
    dperm budget verify budget.db                                    # every hash, every budget
    dperm budget export budget.db backup.json
    dperm budget import backup.json restored.db

The functions behind the commands (:func:`create_budget`, :func:`show_budgets`,
:func:`budget_history`, :func:`verify_budgets`, :func:`export_budgets`,
:func:`import_budgets`) return the dicts that ``--json`` prints.  Errors (a missing
store, a tampered one, a bad ε) print one line and exit 2.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import json_safe, new_app, one_line_errors

__all__ = [
    "budget_app",
    "budget_history",
    "create_budget",
    "export_budgets",
    "import_budgets",
    "show_budgets",
    "verify_budgets",
]

budget_app = new_app(
    "budget",
    "Privacy budgets kept in a store: create, show, history, verify, export, import.",
    no_args_is_help=True,
)

_LOCATION = "A SQLite file (budget.db), a JSON store (*.json) or a postgresql:// URL."
Location = Annotated[str, typer.Argument(help=_LOCATION, metavar="LOCATION")]
Name = Annotated[
    str | None, typer.Option("--name", help="The budget (default: every budget; create: default).")
]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _names(location: str, name: str | None) -> tuple[Any, list[str]]:
    from ..stores import check_budget_name, open_store

    if name is not None:  # one name rule for every command
        check_budget_name(name, "--name")
    store = open_store(location)
    names = store.budgets() if name is None else [name]
    return store, names


def _open(store, name: str, key=None):
    from ..accounting import Ledger

    return Ledger.open(store, name, key=key)


def _reservation_state(entry) -> str:
    """ "running (pid N)" when its process is alive on this machine, otherwise
    "reserved, outcome unknown" (a process that died: it stays charged)."""
    if entry.host == socket.gethostname() and isinstance(entry.pid, int):
        try:
            os.kill(entry.pid, 0)
        except ProcessLookupError:
            pass
        except OSError:  # exists, owned by someone else
            return f"running? (pid {entry.pid}, another user's)"
        else:
            return f"running? (pid {entry.pid})"
    return "reserved, outcome unknown"


def _event_text(event) -> str:
    from ..accounting.events import EpsilonDelta

    if isinstance(event, EpsilonDelta):
        return f"(ε={event.epsilon:g}, δ={event.delta:g})"
    text = repr(event)
    return text if len(text) <= 70 else text[:67] + "…"


def create_budget(
    location: str,
    epsilon: float,
    delta: float = 1e-5,
    name: str | None = None,
    neighbouring: str | None = None,
    accountant: str | None = None,
    key: str | Path | None = None,
) -> dict[str, Any]:
    """Create a budget (refused when one of that name exists, or existed and was
    deleted).  With ``key`` (a key file; written, mode 0600, when it does not exist)
    the budget is signed (:mod:`dperm.stores.signing`)."""
    from .._validation import check_delta, check_epsilon
    from ..accounting import Ledger
    from ..stores import LedgerKey, check_budget_name

    name = "default" if name is None else check_budget_name(name, "--name")
    check_epsilon(epsilon, "--epsilon")  # before a key or a store file is written
    check_delta(delta, "--delta")
    new_key = key is not None and not Path(key).exists()
    signer = None if key is None else LedgerKey.create(key) if new_key else LedgerKey.load(key)
    try:
        book = Ledger.create(
            location,
            name,
            epsilon=epsilon,
            delta=delta,
            accountant=accountant,
            neighbouring=neighbouring,
            key=signer,
        )
    except BaseException:
        if new_key:  # nothing was signed with it
            Path(key).unlink(missing_ok=True)
        raise
    out = {"created": name, **_summary(book)}
    if signer is not None:
        out["key"] = {"path": str(key), "key_id": signer.key_id, "written": new_key}
    return out


def _summary(book) -> dict[str, Any]:
    entries = book.entries
    eps, _ = book.spent()
    reserved = [e for e in entries if e.status == "reserved"]
    return {
        "budget": book.name,
        "location": book.location,
        "epsilon": book.epsilon,
        "delta": book.delta,
        "neighbouring": book.neighbouring,
        "accountant": book.accountant.name,
        "spent_epsilon": eps,
        "spent_by_accountant": book.epsilons(),
        "certified_by": book.certified_by if entries else None,
        "remaining_epsilon": max(0.0, book.epsilon - eps),
        "delta_spent": book.delta_spent(),
        "committed_epsilon": book.spent(reserved=False)[0],
        "signed": (book.records[0].body.get("signed") or {}).get("key_id"),
        "fits": sum(e.status == "committed" for e in entries),
        "reserved": [
            {
                "entry": e.id,
                "label": e.label,
                "event": e.event.to_dict(),
                "time": e.time,
                "pid": e.pid,
                "host": e.host,
                "state": _reservation_state(e),
            }
            for e in reserved
        ],
        "head": list(book.verify()),
    }


def show_budgets(location: str, name: str | None = None) -> dict[str, Any]:
    """Budget, spent (under each accountant that accepts the history), remaining and
    reservations of one budget or of every budget in the store."""
    store, names = _names(location, name)
    return {"location": store.location, "budgets": [_summary(_open(store, n)) for n in names]}


def budget_history(location: str, name: str | None = None) -> dict[str, Any]:
    """Every record of one budget (or of each), in order."""
    store, names = _names(location, name)
    out = {}
    for n in names:
        book = _open(store, n)
        out[n] = [{"entry": r.seq, "kind": r.kind, **r.body, "hash": r.hash} for r in book.records]
    return {"location": store.location, "history": out}


def _head_prefix(head: str) -> str:
    """The hash (or the ≥ 16-hex-digit prefix of one, as ``budget show`` prints it) a
    user kept, normalised."""
    from ..exceptions import InvalidPrivacyParameter

    text = head.strip().removeprefix("#").rstrip("…").rstrip(".").lower()
    text = text.split()[-1] if text.split() else text  # "#12 abcd…" → "abcd"
    if not 16 <= len(text) <= 64 or any(c not in "0123456789abcdef" for c in text):
        raise InvalidPrivacyParameter(
            f"--head must be a record's hash, or its first 16+ hex digits as `dperm budget "
            f"show` prints it, got {head!r}"
        )
    return text


def verify_budgets(
    location: str, name: str | None = None, head: str | None = None, key=None
) -> dict[str, Any]:
    """Check every record's hash, the chains and the heads, and replay each history;
    with ``head`` (a hash, or its first 16+ hex digits, that an earlier ``verify`` or
    ``show`` printed and that was kept elsewhere), also that the history still holds
    that record — a store rewritten since, hashes recomputed, fails.  Without ``name``
    the whole store is checked too: every budget its chain registered is still there
    (:func:`dperm.stores.registry.check_store`), and it holds at least one.

    With ``key`` (a key file) every budget checked must be signed by it: each record's
    MAC is checked, and each head must extend the key's witness (then records it).

    Raises
    ------
    LedgerIntegrityError
        Naming the budget and the first entry found wrong, or the missing ``head``,
        or a registered budget that is gone.
    LedgerStoreError
        A store holding no budget; with ``key``, a budget not signed by it.
    """
    from ..exceptions import LedgerIntegrityError
    from ..stores import as_key
    from ..stores.registry import check_store

    wanted = None if head is None else _head_prefix(head)
    signer = as_key(key)
    store, names = _names(location, name)
    notes: list[str] = []
    if name is None:
        check = check_store(store, signer)
        notes = check.notes
    out = {}
    found_anywhere = None
    for n in names:
        book = _open(store, n, signer)
        seq, digest = book.verify()
        out[n] = {"records": seq + 1, "head": digest, "signed": signer is not None}
        if wanted is not None:
            found = [r.seq for r in book.records if r.hash.startswith(wanted)]
            if found:
                out[n]["head_found_at"] = found[0]
                found_anywhere = n
            elif name is not None:
                raise LedgerIntegrityError(
                    f"budget {n!r} in {store.location}: no record has the hash {wanted[:16]}… "
                    "you kept: its history was rewritten since (or it is another budget)",
                    budget=n,
                )
    if wanted is not None and found_anywhere is None and name is None:
        raise LedgerIntegrityError(
            f"{store.location}: no record of any budget has the hash {wanted[:16]}… you kept: "
            "a history was rewritten since (or it is another store)"
        )
    result = {"location": store.location, "verified": out}
    if notes:
        result["notes"] = notes
    return result


def export_budgets(location: str, out: str | Path, name: str | None = None) -> dict[str, Any]:
    """Write the verified records of one budget (or of all) to a JSON store, atomically."""
    from ..stores.jsonfile import atomic_write_text, store_json
    from ..stores.records import read_chain

    store, names = _names(location, name)
    budgets = {}
    for n in names:
        _open(store, n)  # checks the chain and replays the history
        recs = read_chain(store, n)
        budgets[n] = ((recs[-1].seq, recs[-1].hash), recs)
    text = json.dumps(store_json(budgets), indent=1, sort_keys=True, allow_nan=False)
    atomic_write_text(out, text + "\n")
    return {"exported": {n: len(r) for n, (_, r) in budgets.items()}, "to": str(out)}


def import_budgets(source: str | Path, location: str, name: str | None = None) -> dict[str, Any]:
    """Copy the budgets of a JSON export (or of a ledger written by ``Ledger.save``, as
    budget ``name``) into the store at ``location``; records it already holds are kept,
    a history that differs is refused."""
    from ..accounting import Ledger
    from ..accounting.ledger_persist import read_snapshot
    from ..exceptions import DataFileNotFoundError, LedgerStoreError
    from ..stores import MemoryStore, check_budget_name, open_store
    from ..stores.jsonfile import read_store_json
    from ..stores.records import is_budget_name
    from ..stores.registry import copy_chain

    path = Path(source)
    if not path.is_file():
        raise DataFileNotFoundError(f"no file at {str(path)!r}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise LedgerStoreError(f"{str(path)!r} is not JSON: {exc}") from None
    if name is not None:
        check_budget_name(name, "--name")
    if isinstance(data, dict) and data.get("format") == "dperm.Ledger":  # a snapshot
        budget, acc, entries = read_snapshot(data)
        name = "default" if name is None else name
        spec = {
            "epsilon": budget["epsilon"],
            "delta": budget["delta"],
            "accountant": acc.name,
            "neighbouring": acc.neighbouring,
        }
        try:
            book = Ledger.create(location, name, **spec)
        except LedgerStoreError as exc:
            if "already holds" not in str(exc):
                raise
            book = Ledger.open(location, name, **spec)
        if book.records[1:]:
            raise LedgerStoreError(
                f"budget {name!r} of {location} already has entries; import a snapshot into a "
                "new budget (--name)"
            )
        for event, label in entries:
            book._append_history(event, label, imported=str(path.name))
        return {"imported": {name: len(entries)}, "into": book.location}
    chains = {n: c for n, c in read_store_json(data, repr(str(path))).items() if is_budget_name(n)}
    chosen = chains if name is None else {name: chains[name]} if name in chains else None
    if not chosen:
        raise LedgerStoreError(f"{str(path)!r} holds no budget named {name!r}")
    for n, (_, recs) in chosen.items():  # replay first: a history dperm cannot read is refused
        scratch = MemoryStore()
        copy_chain(scratch, n, recs)
        _open(scratch, n).verify()
    store = open_store(location, create=True)
    done = {n: copy_chain(store, n, recs) for n, (_, recs) in chosen.items()}
    return {"imported": done, "into": store.location}


# ------------------------------------------------------------------- rendering
def _print_show(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not result["budgets"]:
        console.print(f"{result['location']}: no budgets (dperm budget create)")
    for b in result["budgets"]:
        table = Table(title=f"budget {b['budget']!r} in {b['location']}", title_justify="left")
        table.add_column("")
        table.add_column("value")
        table.add_row("budget", f"ε = {b['epsilon']:g}, δ = {b['delta']:g} ({b['neighbouring']})")
        table.add_row("accountant", b["accountant"])
        for method, eps in b["spent_by_accountant"].items():
            best = " (certified)" if method == b["certified_by"] else ""
            table.add_row(f"spent under {method}", f"ε = {eps:.6g}{best}")
        table.add_row(
            "spent", f"ε = {b['spent_epsilon']:.6g}, Σδ of (ε, δ) fits = {b['delta_spent']:.3g}"
        )
        table.add_row("remaining", f"ε = {b['remaining_epsilon']:.6g}")
        table.add_row("fits committed", str(b["fits"]))
        table.add_row("reservations", str(len(b["reserved"])))
        for r in b["reserved"]:
            table.add_row(f"  entry #{r['entry']}", f"{r['label'] or ''} {r['time']}: {r['state']}")
        table.add_row("head", f"#{b['head'][0]} {b['head'][1][:16]}…")
        console.print(table)


def _print_history(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..accounting.events import event_from_dict

    console = Console(highlight=False)
    for n, rows in result["history"].items():
        table = Table(title=f"budget {n!r} in {result['location']}", title_justify="left")
        for col in ("#", "time", "kind", "what", "label"):
            table.add_column(col)
        for r in rows:
            if r["kind"] == "create":
                what = f"budget ε = {r['epsilon']:g}, δ = {r['delta']:g} ({r['neighbouring']})"
            elif r["kind"] in ("reserve", "spend"):
                what = _event_text(event_from_dict(r["event"]))
            elif r["kind"] == "commit":
                what = f"entry #{r['reservation']}" + (f" → {r['model']}" if r.get("model") else "")
            else:
                what = f"entry #{r['reservation']}: {r.get('reason')}"
            table.add_row(
                str(r["entry"]), str(r.get("time", "")), r["kind"], what, r.get("label") or ""
            )
        console.print(table)


def _emit(result: dict[str, Any], json_output: bool, text: str | None = None, printer=None) -> None:
    if json_output:
        typer.echo(json.dumps(_clean(result), sort_keys=True))
    elif printer is not None:
        printer(result)
    else:
        typer.echo(text)


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return json_safe(v)


# -------------------------------------------------------------------- commands
@budget_app.command("create")
def create_cmd(
    location: Location,
    epsilon: Annotated[float, typer.Option("--epsilon", help="Total ε of the budget.")],
    delta: Annotated[float, typer.Option("--delta", help="Total δ of the budget.")] = 1e-5,
    name: Annotated[str, typer.Option("--name", help="The budget's name.")] = "default",
    neighbouring: Annotated[
        str, typer.Option("--neighbouring", help="replace-one | add-remove")
    ] = "replace-one",
    accountant: Annotated[str, typer.Option("--accountant", help="auto | pld | rdp | …")] = "auto",
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="Sign the budget with the key in this file (written, mode 0600, if it does "
            "not exist): keep it apart from the store.",
        ),
    ] = None,
    json_output: Json = False,
) -> None:
    """Create a budget (ε, δ and relation fixed for good)."""
    with one_line_errors():
        result = create_budget(location, epsilon, delta, name, neighbouring, accountant, key)
    text = (f"created budget {result['created']!r} in {result['location']}: "
            f"ε = {epsilon:g}, δ = {delta:g} ({result['neighbouring']})")  # fmt: skip
    if "key" in result:
        k = result["key"]
        text += (
            f"\nsigned with key {k['key_id']} ({'written to' if k['written'] else 'from'} "
            f"{k['path']}: keep it apart from the store; give it to every fit that spends "
            "this budget, --ledger-key)"
        )
    _emit(result, json_output, text)


@budget_app.command("show")
def show_cmd(location: Location, name: Name = None, json_output: Json = False) -> None:
    """What each budget has spent, what remains, and the reservations still open."""
    with one_line_errors():
        result = show_budgets(location, name)
    _emit(result, json_output, printer=_print_show)


@budget_app.command("history")
def history_cmd(location: Location, name: Name = None, json_output: Json = False) -> None:
    """Every record of a budget: creation, reservations, commits, cancellations."""
    with one_line_errors():
        result = budget_history(location, name)
    _emit(result, json_output, printer=_print_history)


@budget_app.command("verify")
def verify_cmd(
    location: Location,
    name: Name = None,
    head: Annotated[
        str | None,
        typer.Option(
            "--head",
            help="A head hash (or its first 16+ hex digits) printed by an earlier verify or "
            "show: must still be there.",
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="The key file of signed budgets: check every record's MAC and the key's "
            "witness of the heads (detects rewriting, truncation, emptying).",
        ),
    ] = None,
    json_output: Json = False,
) -> None:
    """Check the hash chain of every record (exit 2 naming the first bad entry)."""
    with one_line_errors():
        result = verify_budgets(location, name, head, key)
    lines = [
        f"ok: budget {n!r}, {v['records']} records, head {v['head']}"
        + (" (signed: every MAC checked)" if v["signed"] else "")
        for n, v in result["verified"].items()
    ]
    lines += [f"note: {note}" for note in result.get("notes", [])]
    _emit(result, json_output, "\n".join(lines))


@budget_app.command("export")
def export_cmd(
    location: Location,
    out: Annotated[str, typer.Argument(help="The JSON file to write.", metavar="OUT")],
    name: Name = None,
    json_output: Json = False,
) -> None:
    """Write the hash-chained records to a JSON file (atomically)."""
    with one_line_errors():
        result = export_budgets(location, out, name)
    _emit(result, json_output, f"exported {result['exported']} to {out}")


@budget_app.command("import")
def import_cmd(
    source: Annotated[str, typer.Argument(help="A JSON export or a saved Ledger.", metavar="FILE")],
    location: Location,
    name: Name = None,
    json_output: Json = False,
) -> None:
    """Copy the budgets of a JSON export (or a Ledger.save file) into a store."""
    with one_line_errors():
        result = import_budgets(source, location, name)
    _emit(result, json_output, f"imported {result['imported']} into {result['into']}")
