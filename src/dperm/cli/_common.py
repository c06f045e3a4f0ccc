"""What every ``dperm`` command shares: one-line errors, common options, output helpers.

Errors raised by dperm (bad ε, unknown dataset, missing file, …) print one line on stderr
and exit with status 2, without a traceback (:func:`one_line_errors`); warnings become one
stderr line each (:func:`show_warning_one_line`); a slow step reports itself on stderr
(:func:`step`).  Nothing here imports more than typer and :mod:`dperm.exceptions`, so
``dperm --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from ..exceptions import DpermError

__all__ = [
    "AccountantOption",
    "JsonOption",
    "SamplingOption",
    "SamplingRateOption",
    "StepsOption",
    "fail",
    "json_safe",
    "one_line_errors",
    "show_warning_one_line",
    "step",
]


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


# options that several commands share
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
SamplingRateOption = Annotated[float, typer.Option("--sampling-rate", help="q in (0, 1].")]
StepsOption = Annotated[int, typer.Option("--steps", help="Number of releases.")]
AccountantOption = Annotated[str, typer.Option("--accountant", help="rdp | pld | …")]
SamplingOption = Annotated[str, typer.Option("--sampling", help="poisson | without_replacement")]


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
