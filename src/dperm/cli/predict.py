"""``dperm predict``: score new raw rows with a saved model.

A model saved by ``dperm fit --csv … --save m.dperm`` is a pipeline of the file's public
schema (:class:`dperm.schema.SchemaEncoder`) and the private model, so it reads the raw
columns — numbers and category values — exactly as the training rows were read::

    dperm fit --csv my.csv --target y --bounds x=0:10 --categories colour=red,blue \\
        --label-bound 5 --save m.dperm
    dperm predict --model m.dperm --csv new.csv --out preds.csv

A model saved from arrays (``dperm.save(estimator, …)``) reads the numeric columns it
was fitted on (by name when it knows them, else all the file's columns, in order).
The predictions are post-processing of the released model: they spend no privacy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..exceptions import InvalidDataError
from ._common import QUIET, REQUIRED, Opt, one_line_errors, step, with_options

__all__ = ["predict_cmd", "predict_command"]


def _read_table(path: Path, text_columns: list[str]):
    """The rows of a CSV (or ``.parquet``) file, the ``text_columns`` read as text."""
    import pandas as pd

    from ..exceptions import DataFileNotFoundError

    if not path.is_file():
        raise DataFileNotFoundError(f"--csv: file not found: {str(path)!r}")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
            return frame.astype(dict.fromkeys([c for c in text_columns if c in frame], str))
        header = pd.read_csv(path, nrows=0).columns
        dtypes = {c: str for c in text_columns if c in header}
        return pd.read_csv(path, dtype=dtypes or None)
    except pd.errors.EmptyDataError:
        raise InvalidDataError(f"--csv {str(path)!r} is empty (no header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ImportError) as exc:
        raise InvalidDataError(
            f"--csv {str(path)!r} cannot be read as a table: {type(exc).__name__}"
        ) from None


def _check_categories(encoder, frame) -> None:
    """Refuse a value outside a categorical column's public category list, naming the
    column and the value (the rows scored are the caller's, not training records).
    Values are compared as exact strings — case counts: ``RED`` is not ``red`` — since
    at fit time an unknown value is encoded as all zeros, which would silently change
    the prediction of the row (issue #32).  A missing cell is not unknown: the encoder
    imputes it by the schema's public rule, as at fit (issue #36)."""
    import numpy as np

    for col in encoder.schema_.columns:
        if not hasattr(col, "categories") or col.name not in frame.columns:
            continue  # a missing column: the encoder's own error names it
        unknown = (col.codes(frame[col.name]) < 0) & frame[col.name].notna().to_numpy()
        if not unknown.any():
            continue
        value = str(frame[col.name].to_numpy(dtype=object)[int(np.argmax(unknown))])
        near = [c for c in col.categories if c.strip().lower() == value.strip().lower()]
        hint = f" (did you mean {near[0]!r}? values are case-sensitive)" if near else ""
        raise InvalidDataError(
            f"column {col.name!r} has the value {value!r}, outside its public category "
            f"list {list(col.categories)}{hint}; {int(unknown.sum())} row(s) affected"
        )


def _model_input(model, frame):
    """What ``model.predict`` takes: the raw frame for a schema pipeline (its category
    values checked), else the numeric feature columns as an array."""
    import numpy as np

    first = model.steps[0][1] if hasattr(model, "steps") else None
    if type(first).__name__ == "SchemaEncoder":
        _check_categories(first, frame)
        return frame
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        missing = [str(c) for c in names if c not in frame.columns]
        if missing:
            raise InvalidDataError(f"--csv lacks the model's feature column(s) {missing}")
        frame = frame[list(names)]
    n_in = getattr(model, "n_features_in_", None)
    if n_in is not None and frame.shape[1] != n_in:
        raise InvalidDataError(
            f"the model takes {n_in} feature columns, --csv has {frame.shape[1]}; save the "
            "model with its schema (dperm fit --csv … --save) to score raw columns"
        )
    import pandas as pd

    # pandas' own test: a text column may have a pandas extension dtype (StringDtype)
    # that numpy cannot interpret (issue #32: a traceback)
    bad = [str(c) for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c].dtype)]
    if bad:
        raise InvalidDataError(
            f"column(s) {bad} are not numeric; a model saved without its schema reads "
            "numeric feature columns only"
        )
    return frame.to_numpy(dtype=np.float64)


def predict_command(
    model: str | Path,
    csv: str | Path,
    out: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Predict the rows of ``csv`` with the model saved at ``model``.

    Parameters
    ----------
    model : path
        A file written by :func:`dperm.save` / ``dperm fit --save``.
    csv : path
        A CSV (or ``.parquet``) file with a header row: the raw columns of the schema (a
        schema pipeline; other columns, e.g. the label, are ignored) or the model's
        numeric feature columns.
    out : path, optional
        Write the predictions there (CSV, one column ``prediction``); default: return
        them only.
    progress : bool, default True
        Progress lines on stderr for a slow read or prediction.

    Returns
    -------
    dict
        ``model``, ``rows``, ``predictions`` (a list), ``out`` (the path written or None).

    Raises
    ------
    ModelFileError, DataFileNotFoundError, InvalidDataError
        A model file refused by :func:`dperm.load`; a missing or unreadable CSV; columns
        missing, not numeric, or with missing values.
    """
    import pandas as pd

    from ..io import load

    model_path, csv_path = Path(model), Path(csv)
    if out is not None and not Path(out).parent.is_dir():
        raise InvalidDataError(f"--out: folder {str(Path(out).parent)!r} does not exist")
    est = load(model_path)
    first = est.steps[0][1] if hasattr(est, "steps") else None
    text = []
    if type(first).__name__ == "SchemaEncoder":
        text = [c.name for c in first.schema_.columns if hasattr(c, "categories")]
    with step(f"reading {csv_path.name}", progress):
        frame = _read_table(csv_path, text)
    if len(frame) == 0:
        raise InvalidDataError(f"--csv {str(csv_path)!r} has no rows")
    with step(f"predicting {len(frame)} rows", progress):
        pred = est.predict(_model_input(est, frame))
    written = None
    if out is not None:
        try:
            pd.DataFrame({"prediction": pred}).to_csv(out, index=False)
        except OSError as exc:
            raise InvalidDataError(f"--out {str(out)!r}: {exc.strerror or exc}") from None
        written = str(out)
    return {
        "model": str(model_path),
        "rows": len(pred),
        "predictions": pred.tolist(),
        "out": written,
    }


#: the options of ``dperm predict``, in the order of ``--help``
_OPTIONS = {
    "model": Opt(Path, REQUIRED, "A model file (dperm fit --save, dperm.save).", metavar="FILE"),
    "csv": Opt(Path, REQUIRED, "Rows to score: a CSV (or .parquet) file.", metavar="FILE"),
    "out": Opt(
        Path | None,
        None,
        "Write the predictions to this CSV (column 'prediction'); default: stdout.",
        metavar="FILE",
    ),
    "quiet": QUIET,
}


@with_options(_OPTIONS)
def predict_cmd(**options: Any) -> None:
    """Score new raw rows with a saved model (its public schema included)."""
    quiet = options.pop("quiet")
    with one_line_errors():
        result = predict_command(**options, progress=not quiet)
    if result["out"] is None:
        typer.echo("prediction")
        typer.echo("\n".join(str(v) for v in result["predictions"]))
    elif not quiet:
        typer.echo(f"dperm: {result['rows']} predictions written to {result['out']}", err=True)
