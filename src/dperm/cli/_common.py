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
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from ..exceptions import DpermError

__all__ = [
    "JSON",
    "REQUIRED",
    "Opt",
    "fail",
    "json_safe",
    "one_line_errors",
    "show_warning_one_line",
    "step",
    "with_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: the default of an option that must be given
REQUIRED = inspect.Parameter.empty


def fail(exc: BaseException) -> typer.Exit:
    """Print ``exc`` as one line on stderr; the caller raises the returned Exit(2)."""
    msg = " ".join(str(exc).split()) or type(exc).__name__
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
                        typer.Option(opt.flag or "--" + name.replace("_", "-"), help=opt.help),
                    ],
                )
                for name, opt in table.items()
            ]
        )
        return command

    return decorate


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


@contextlib.contextmanager
def step(label: str, enabled: bool = True, threshold: float = 1.0) -> Iterator[None]:
    """Report a step on stderr when it runs for more than ``threshold`` seconds.

    ``dperm: <label> …`` appears once the step has run ``threshold`` seconds
    (a timer thread), and ``dperm: <label> done (t s)`` at its end; fast steps
    print nothing.
    """
    if not enabled:
        yield
        return
    t0 = time.perf_counter()
    timer = threading.Timer(
        threshold, lambda: print(f"dperm: {label} …", file=sys.stderr, flush=True)
    )
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
    dt = time.perf_counter() - t0
    if dt > threshold:
        print(f"dperm: {label} done ({dt:.1f} s)", file=sys.stderr, flush=True)
