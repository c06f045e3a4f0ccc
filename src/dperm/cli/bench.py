"""``dperm bench``: every DP-ERM algorithm against the published comparison.

``bench_command`` parses the comma-separated options, runs
:func:`dperm.bench.run_bench` and returns the markdown summary it wrote.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import typer

from ..exceptions import DataFileNotFoundError, InvalidDataError, InvalidPrivacyParameter
from ._common import QUIET, Opt, one_line_errors, with_options

__all__ = ["bench_cmd", "bench_command", "parse_floats", "parse_list"]


def parse_list(value: str | None) -> list[str] | None:
    """``"a, b,c"`` → ``["a", "b", "c"]``; None/"" → None (the default)."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


def parse_floats(value: str, name: str = "epsilons") -> list[float]:
    """``"0.1,1"`` → ``[0.1, 1.0]``.

    Raises
    ------
    InvalidPrivacyParameter
        If an item is not a number.
    """
    out = []
    for item in parse_list(value) or []:
        try:
            out.append(float(item))
        except ValueError:
            raise InvalidPrivacyParameter(
                f"{name} must be comma-separated numbers, got {item!r} in {value!r}"
            ) from None
    if not out:
        raise InvalidPrivacyParameter(f"{name} must not be empty, got {value!r}")
    return out


#: the file each result is appended to as soon as it is finished (removed at the end)
PARTIAL = "results.partial.csv"


def _check_out_dir(out: Path) -> None:
    """Create ``out`` (and its parents) and check it is a writable folder.

    Raises
    ------
    InvalidDataError
        When ``out`` or a parent is a file, or the folder cannot be written.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".dperm-write-test"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InvalidDataError(f"--out {str(out)!r} is not a writable folder: {reason}") from None


def bench_command(
    datasets: str | None = None,
    epsilons: str = "0.1,1",
    algorithms: str | None = None,
    repeats: int = 3,
    protocol: str = "honest",
    data_home: str | Path | None = None,
    out: str | Path = "bench-out",
    progress: bool = True,
    seed: int = 0,
) -> str:
    """Run ``dperm bench`` and return the text to print (the markdown table).

    Parameters
    ----------
    datasets : str, optional
        Comma-separated dataset names (default: adult, kddcup99, mnist,
        synthetic-l, synthetic-h — those whose files are absent are skipped).
    epsilons : str, default "0.1,1"
    algorithms : str, optional
        Comma-separated names (default: :data:`dperm.bench.runner.DEFAULT_ALGORITHMS`
        — the published comparison, objective/output perturbation, DP-GD, the
        tuned-privately variants ``objective+tuned`` and ``dp-sgd+tuned`` — and the
        installed peers; any registered mechanism may be named).
    repeats : int, default 3
    protocol : {"honest", "paper"}, default "honest"
    data_home : path, optional
    out : path, default "bench-out"
        Output folder; each result is appended to ``results.partial.csv`` there as soon
        as it is finished (the complete outputs replace it at the end).
    progress : bool, default True
        A progress bar on a terminal; plain lines on stderr (one per result) otherwise.
    seed : int, default 0

    Raises
    ------
    DpermError
        Bad options (unknown dataset/algorithm/protocol, bad ε or repeats, an
        ``out`` that is not a writable folder, a ``data_home`` that is not a folder), or
        no fit ran (every dataset's files absent).
    """
    if data_home is not None and not Path(data_home).is_dir():  # before anything else
        raise DataFileNotFoundError(f"--data-home {str(data_home)!r} is not a folder")
    _check_out_dir(Path(out))  # before hours of fitting, not after
    from ..bench import run_bench

    command = "dperm bench " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    partial = Path(out) / PARTIAL
    partial.unlink(missing_ok=True)
    done = [0]

    def on_row(row: dict) -> None:
        """Save each result as it finishes (a crash or Ctrl-C keeps what ran), and say so."""
        import pandas as pd

        pd.DataFrame([row]).to_csv(partial, mode="a", header=not partial.exists(), index=False)
        done[0] += 1
        if progress:
            acc = row.get("accuracy_mean")
            print(
                f"dperm bench: {row['dataset']} {row['algorithm']} ε={row['epsilon']:g}: "
                f"accuracy {acc:.4f} ({row['repeats']} fit(s)) — {done[0]} result(s) in "
                f"{partial}",
                file=sys.stderr,
                flush=True,
            )

    # the rich bar only on a terminal; elsewhere (a pipe, a log) the plain lines above
    df = run_bench(
        datasets=parse_list(datasets),
        epsilons=parse_floats(epsilons),
        algorithms=parse_list(algorithms),
        repeats=repeats,
        protocol=protocol,
        data_home=data_home,
        out_dir=out,
        progress=progress and sys.stderr.isatty(),
        random_state=seed,
        command=command.strip(),
        on_row=on_row,
    )
    if df.empty:
        notes = "; ".join(df.attrs.get("meta", {}).get("notes", [])) or "nothing to run"
        raise DataFileNotFoundError(f"dperm bench ran no fit: {notes}")
    partial.unlink(missing_ok=True)  # the complete results are in results.csv
    return (Path(out) / "results.md").read_text() + f"\nOutputs written to {Path(out)}/\n"


#: the options of ``dperm bench``, in the order of ``--help``
_OPTIONS = {
    "datasets": Opt(
        str | None,
        None,
        "Comma-separated: adult,kddcup99,mnist,synthetic-l,synthetic-h (default: those present).",
    ),
    "epsilons": Opt(str, "0.1,1", "Comma-separated ε values."),
    "algorithms": Opt(
        str | None,
        None,
        "Comma-separated: non-private, registered mechanisms, tuned variants, peers "
        "(default: the published comparison plus dperm's other classifiers).",
    ),
    "repeats": Opt(int, 3, "Private fits per cell."),
    "protocol": Opt(str, "honest", "honest (defaults) | paper (non-private tuning)."),
    "data_home": Opt(Path | None, None, "Folder of the real data."),
    "out": Opt(Path, Path("bench-out"), "Output folder."),
    "no_progress": Opt(bool, False, "No progress bar or lines (same as --quiet)."),
    "quiet": QUIET,
    "seed": Opt(int, 0, "Base seed of the fits."),
}


@with_options(_OPTIONS)
def bench_cmd(**options: Any) -> None:
    """Benchmark every DP-ERM algorithm against the published comparison (Iyengar et al. 2019)."""
    no_progress, quiet = options.pop("no_progress"), options.pop("quiet")  # pop both
    progress = not (no_progress or quiet)
    with one_line_errors():
        text = bench_command(**options, progress=progress)
    typer.echo(text)
