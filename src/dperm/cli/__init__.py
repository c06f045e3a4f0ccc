"""The ``dperm`` command line: ``dperm fit | predict | budget | account | calibrate | bench``
and ``dperm audit``.

Examples (shell)::

    dperm fit --dataset adult --data-home ../shared/data --epsilon 1 --json
    dperm predict --model m.dperm --csv new.csv --out preds.csv
    dperm budget show budget.db
    dperm account --noise-multiplier 1.1 --sampling-rate 0.004 --steps 15000 --delta 1e-5
    dperm calibrate --epsilon 2 --delta 1e-5 --sampling-rate 0.004 --steps 15000
    dperm audit --mechanism dp-sgd --epsilon 1
    dperm bench --datasets synthetic-l --epsilons 0.1,1

Errors raised by dperm (bad ε, unknown dataset, missing file, …) and usage
errors print one line on stderr and exit with status 2, without a traceback.

One module per command (:mod:`dperm.cli.fit`, :mod:`~dperm.cli.predict`,
:mod:`~dperm.cli.budget`, :mod:`~dperm.cli.account`,
:mod:`~dperm.cli.calibrate`, :mod:`~dperm.cli.bench`, :mod:`~dperm.cli.audit`), each with
its typer function and the back end that does the work; ``dperm.cli._common`` holds the
error handling, options and output helpers they share.  Importing a command module loads
typer only: the library behind a command is imported when it runs, so ``dperm --help``
stays fast.  ``python -m dperm`` runs :func:`main` too.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..exceptions import DpermError
from ._common import fail, new_app
from .account import account_cmd
from .audit import audit_cmd
from .bench import bench_cmd
from .budget import budget_app
from .calibrate import calibrate_cmd
from .fit import FIT_KEYS, NON_PRIVATE_KEYS, fit_command, run_fit
from .predict import predict_cmd

__all__ = [
    "FIT_KEYS",
    "NON_PRIVATE_KEYS",
    "account_cmd",
    "app",
    "audit_cmd",
    "bench_cmd",
    "budget_app",
    "calibrate_cmd",
    "fit_command",
    "main",
    "predict_cmd",
    "run_fit",
]

app = new_app(
    "dperm", "Differentially private empirical risk minimization.", pretty_exceptions_enable=False
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", help="Print the dperm version and exit.", is_eager=True)
    ] = False,
) -> None:
    """Differentially private empirical risk minimization."""
    if version:
        from .._version import __version__

        typer.echo(f"dperm {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:  # `dperm` alone: show the commands
        typer.echo(ctx.get_help())


# the commands, in the order `dperm --help` lists them
app.command("fit")(fit_command)
app.command("predict")(predict_cmd)
app.add_typer(budget_app, name="budget")
app.command("account")(account_cmd)
app.command("calibrate")(calibrate_cmd)
app.command("bench")(bench_cmd)
app.command("audit")(audit_cmd)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point (``dperm = "dperm.cli:main"``).

    Usage errors and dperm errors print one line on stderr and exit 2.
    """
    try:
        rv = app(args=argv, prog_name="dperm", standalone_mode=False)
    except DpermError as exc:  # pragma: no cover - commands catch their own
        raise SystemExit(fail(exc).exit_code) from None
    except Exception as exc:
        # Click / Typer usage errors (bad option, bad value, missing argument):
        # duck-typed, so it works whether typer bundles click or depends on it
        fmt = getattr(exc, "format_message", None)
        code = getattr(exc, "exit_code", None)
        if callable(fmt) and isinstance(code, int):
            msg = " ".join(str(fmt()).split())
            typer.echo(f"dperm: error: {msg}", err=True)
            raise SystemExit(code) from None
        if type(exc).__name__ == "Abort":  # Ctrl-C / EOF at a prompt
            typer.echo("dperm: aborted", err=True)
            raise SystemExit(1) from None
        raise
    if isinstance(rv, int) and not isinstance(rv, bool) and rv:
        raise SystemExit(rv)
    return 0
