"""What every ``dperm`` command shares: one-line errors, the option tables, output helpers.

Each command declares its options once, as a table of :class:`Opt` rows in ``--help``
order, and takes them as ``**options`` (:func:`with_options` gives it the typer
signature).  Errors raised by dperm (bad ε, unknown dataset, missing file, …) print one
line on stderr and exit with status 2, without a traceback (:func:`one_line_errors`);
warnings become one stderr line each (:func:`show_warning_one_line`); a slow step
reports itself on stderr (:func:`step`).  Nothing here imports more than typer and
:mod:`dperm.exceptions`, so ``dperm --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from ..exceptions import DpermError

__all__ = [
    "FILE_SCHEMA",
    "JSON",
    "QUIET",
    "REQUIRED",
    "Opt",
    "cli_message",
    "fail",
    "json_safe",
    "new_app",
    "one_line_errors",
    "show_warning_one_line",
    "step",
    "with_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: the default of an option that must be given
REQUIRED = inspect.Parameter.empty


def new_app(name: str, help: str, **settings: Any) -> typer.Typer:
    """A typer app as every dperm command group is built: plain help text (rich markup
    would eat "[lo, hi]" and show flags as "--json <bool>"), no shell-completion
    options; ``settings`` add to or override these."""
    return typer.Typer(
        name=name, help=help, **{"add_completion": False, "rich_markup_mode": None, **settings}
    )


#: the library's Python spellings and what a command-line user types instead: the
#: messages of :mod:`dperm` name keyword arguments; the CLI names its flags
_CLI_SPELLING = (
    (re.compile(r"bounds=\{column: \(lo, hi\)\}"), "--bounds COL=LO:HI (or a JSON file)"),
    (re.compile(r"categories=\{column: \[values\]\}"), "--categories COL=A,B,C (or a JSON file)"),
    (re.compile(r"allow_data_bounds=True"), "--allow-data-bounds"),
    (re.compile(r"\bcategorical="), "--categorical"),
    (re.compile(r"\bcategories="), "--categories"),
    (re.compile(r"\bbounds="), "--bounds"),
    (re.compile(r"\bimpute="), "--impute"),
    (re.compile(r"\bpositive_label=(?=\S)"), "--positive-label "),  # =value: a space
    (re.compile(r"\bpositive_label="), "--positive-label"),
    (re.compile(r"\btask='(\w+)'"), r"--task \1"),
    (re.compile(r"\blabel_bound=([\d.eE+-]+)"), r"--label-bound \1"),
    (re.compile(r"\blabel_bound=?(?![\w-])"), "--label-bound"),
    (re.compile(r"\bdata_norm=([\d.eE+-]+)"), r"--data-norm \1"),
    (re.compile(r"\bclasses=range\((\d+)\)"), lambda m: f"--classes 0,1,…,{int(m[1]) - 1}"),
    (re.compile(r"\bclasses=\[([^\]]*)\]"), lambda m: "--classes " + _list_item(m[1])),
    (re.compile(r"\bclasses=(?!\w)"), "--classes"),
    (re.compile(r"\bmulti_class='(\w+)'"), r"--multi-class \1"),
    (re.compile(r"\bmechanism='([\w-]+)'"), r"--mechanism \1"),
    (re.compile(r"\bmechanism=([\w-]+)\b"), r"--mechanism \1"),
)


def _list_item(inner: str) -> str:
    """``'no', 'yes'`` (a Python list's inside) → ``no,yes``; ``...`` → ``A,B,…``."""
    items = [v.strip().strip("'\"") for v in inner.split(",") if v.strip()]
    if not items or items == ["..."]:
        return "A,B,…"
    return ",".join(items).replace(" ", "_") if len(items) > 1 else "A,B,…"


#: parameter names that are also flags: "name must …" becomes "--name must …"
_FLAG_NAMES = (
    "epsilon",
    "delta",
    "data_norm",
    "label_bound",
    "constraint_radius",
    "alpha",
    "batch_size",
    "epochs",
    "learning_rate",
    "noise_multiplier",
    "sampling_rate",
    "steps",
    "runs",
    "test_size",
    "repeats",
    "task",
    "classes",
)
_FLAG_RULE = re.compile(r"(?<![\w-])(" + "|".join(_FLAG_NAMES) + r")(?= must\b| is not\b)")


def cli_message(msg: str) -> str:
    """``msg`` with the library's keyword-argument spellings replaced by the flags a
    command-line user types (``allow_data_bounds=True`` → ``--allow-data-bounds``)."""
    for pattern, repl in _CLI_SPELLING:
        msg = pattern.sub(repl, msg)
    return _FLAG_RULE.sub(lambda m: "--" + m.group(1).replace("_", "-"), msg)


def fail(exc: BaseException) -> typer.Exit:
    """Print ``exc`` as one line on stderr (in command-line terms: flags, not keyword
    arguments); the caller raises the returned Exit(2)."""
    msg = cli_message(" ".join(str(exc).split()) or type(exc).__name__)
    typer.echo(f"dperm: error: {msg}", err=True)
    return typer.Exit(code=2)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn a :class:`~dperm.exceptions.DpermError` raised inside into one stderr
    line and exit status 2 (:func:`fail`) — the error handling of every command."""
    try:
        yield
    except (DpermError, OSError, ValueError, ArithmeticError) as exc:
        # OSError: unwritable/missing paths; ValueError/ArithmeticError: a value the
        # numerics cannot use (e.g. ε = 1e-300) — bad input, not a crash
        raise fail(exc) from None


@dataclass(frozen=True)
class Opt:
    """One option of a command: its type, its default (:data:`REQUIRED`: none) and its
    help line; the flag is ``--`` and the parameter name with dashes, unless given."""

    kind: Any
    default: Any
    help: str
    flag: str | None = None
    metavar: str | None = None


def with_options(table: dict[str, Opt]) -> Callable[[F], F]:
    """Give a command written as ``def command(**options)`` the typer signature of
    ``table`` (parameter name → :class:`Opt`, in the order of ``--help``)."""

    def decorate(command: F) -> F:
        command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=opt.default,
                    annotation=Annotated[
                        opt.kind,
                        typer.Option(
                            opt.flag or "--" + name.replace("_", "-"),
                            help=opt.help,
                            metavar=opt.metavar or _metavar(opt.kind),
                        ),
                    ],
                )
                for name, opt in table.items()
            ]
        )
        return command

    return decorate


def _metavar(kind: Any) -> str | None:
    """The placeholder ``--help`` shows for an option's value (None for a flag)."""
    text = str(kind)
    if kind is bool:
        return None
    for key, name in (("Path", "PATH"), ("float", "NUMBER"), ("int", "INTEGER"), ("str", "TEXT")):
        if key in text:
            return name
    return None


#: the public schema of a user's file (``--csv``; ``--parquet``/``--csv-dir``), shared by
#: ``dperm fit`` and ``dperm audit --one-run`` (issue #36): nothing of it is read off the
#: data — the task and the labels included
FILE_SCHEMA = {
    "target": Opt(str | None, None, "Label column of --csv (--parquet, --csv-dir)."),
    "bounds": Opt(
        list[str] | None,
        None,
        "Public bounds: a JSON file {col: [lo, hi]} or col=lo:hi (repeat); lo:hi:log "
        "scales a heavy-tailed column on the log1p scale.",
        metavar="COL=LO:HI|FILE",
    ),
    "categories": Opt(
        list[str] | None,
        None,
        "Public category list of a categorical column: a JSON file {col: [a, b]} or "
        "col=a,b,c (repeat); required for every categorical column, like --bounds.",
        metavar="COL=A,B,C|FILE",
    ),
    "categorical": Opt(
        list[str] | None,
        None,
        "A column of numbers to one-hot encode (integer codes) against its --categories "
        "list (repeat); text columns and columns with --categories are categorical anyway.",
        metavar="COL",
    ),
    "classes": Opt(
        str | None,
        None,
        "The public label list: two labels → binary (the second is +1), more → "
        "multiclass; a label outside it is refused. Never read off the data.",
        metavar="A,B,…",
    ),
    "task": Opt(
        str | None,
        None,
        "binary | multiclass | regression; never read off the labels (--classes, "
        "--label-bound or --positive-label decide it too).",
    ),
    "label_bound": Opt(
        float | None, None, "Regression: public bound B on |y| (implies --task regression)."
    ),
    "positive_label": Opt(str | None, None, "Binary: the label mapped to +1 (every other → −1)."),
    "impute": Opt(
        list[str] | None,
        None,
        "Public value of a column's missing cells: col=value or a JSON file (repeat); "
        "default the midpoint of its --bounds (no row is dropped).",
        metavar="COL=VALUE|FILE",
    ),
}

#: ``--json``, an option of every command but bench
JSON = Opt(bool, False, "Print one JSON object.", "--json")


def json_safe(v: Any) -> Any:
    """A non-finite float as the string "inf", "-inf" or "nan" (strict JSON has none)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    return v


def show_warning_one_line(message, category, filename, lineno, file=None, line=None):
    """A warning as one stderr line (the signature of :func:`warnings.showwarning`)."""
    typer.echo(f"dperm: warning: {category.__name__}: {message}", err=True)


#: seconds between two "still running" lines of a long step
HEARTBEAT = 30.0


@contextlib.contextmanager
def step(
    label: str, enabled: bool = True, threshold: float = 1.0, heartbeat: float = HEARTBEAT
) -> Iterator[None]:
    """Report a step on stderr when it runs for more than ``threshold`` seconds.

    Plain lines, on a terminal or not (a pipe, a log file, ``--json``):
    ``dperm: <label> …`` once the step has run ``threshold`` seconds, ``dperm: <label>
    … (t s)`` every ``heartbeat`` seconds after that, and ``dperm: <label> done (t s)``
    at its end; fast steps print nothing.  ``enabled=False`` (``--quiet``) prints
    nothing at all.
    """
    if not enabled:
        yield
        return
    t0 = time.perf_counter()
    stop = threading.Event()

    def report() -> None:
        if stop.wait(threshold):
            return
        print(f"dperm: {label} …", file=sys.stderr, flush=True)
        while not stop.wait(heartbeat):
            dt = time.perf_counter() - t0
            print(f"dperm: {label} … ({dt:.0f} s)", file=sys.stderr, flush=True)

    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    dt = time.perf_counter() - t0
    if dt > threshold:
        print(f"dperm: {label} done ({dt:.1f} s)", file=sys.stderr, flush=True)


#: ``--quiet``, an option of every command that runs long work
QUIET = Opt(bool, False, "No progress lines on stderr (errors and warnings still appear).")
