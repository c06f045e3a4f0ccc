"""Save and load fitted dperm estimators with their privacy metadata — never pickle.

File format (``format_version`` 3: the content digest is mandatory; version-1 and -2
files, which may predate it, still load — without a digest, with a warning).  One zip archive, by
convention with the suffix ``.dperm`` (any name is accepted, e.g. ``.skops``: the content
is dperm's format, not skops'), holding

* ``dperm.json`` — metadata: the estimator class name, its parameters (JSON
  values only), the fitted scalars, the privacy event
  (:meth:`~dperm.accounting.events.DpEvent.to_dict`), ε, δ, the
  neighbouring relation, the mechanism and accountant, the public bounds the
  guarantee assumes, and the dperm version that wrote it;
* ``privacy_statement.txt`` — :func:`privacy_statement` of the model, in plain
  language;
* ``<name>.npy`` — one numpy array per fitted array (``coef_``,
  ``intercept_``, ``classes_``, …), in numpy's ``.npy`` format without
  object dtype, so the archive is also a valid ``.npz`` that
  ``numpy.load(path, allow_pickle=False)`` opens.

A **Pipeline** (``kind: "pipeline"``) of :mod:`dperm.preprocessing` steps ending in a
dperm estimator stores one record per step (class, parameters, allow-listed fitted
arrays as ``step<i>__<name>.npy``, the step's event) and the composed privacy event of
the whole pipeline.  A ``penalty=`` norm of :mod:`dperm.norms` (``L1Norm``,
``LinfNorm``, ``GroupLinfNorm``, ``ChainTVNorm``, ``GraphTVNorm``) is written as plain data
(``{"__dperm_norm__": class, "d": …, "alpha": …, "groups"/"mu": …}``) and rebuilt from
the same allow-list.

Loading executes no code from the file: the class is looked up in an
allow-list (the estimator classes exported by :mod:`dperm.estimators`, the
transformers of :mod:`dperm.preprocessing`, the norms above), the
parameters go through ``set_params`` and every array is read with
``allow_pickle=False``.  Anything else is refused with
:class:`ModelFileError`.

What is *not* saved.  The ``random_state`` (whoever knows the seed of the
noise can subtract it: the file never contains it), and every fitted
attribute outside an allow-list (``_SAVED_ATTRIBUTES``: coefficients, classes,
feature names, the public Λ and row bound, ε, δ, the relation) — in particular
the data-dependent diagnostics that are not privatized (``n_clipped_``,
``diagnostics_``, ``n_iter_``); the metadata lists what was left out under
``not_saved``.  ``classes_`` is saved because ``predict`` needs it; when it
was read off the training labels the statement says so.

Modules: :mod:`dperm.io._format` (the layout, the allow-lists, the plain-data encoding),
``_save``, ``_load`` and ``_statement`` (the allow-list check before the text of
:mod:`dperm.statement`).  :class:`ModelFileError` is defined in :mod:`dperm.exceptions`
and re-exported here.
"""

from __future__ import annotations

from ..exceptions import ModelFileError
from ._format import _SAVED_ATTRIBUTES as _SAVED_ATTRIBUTES  # the allow-list (tests read it)
from ._format import FORMAT_VERSION
from ._format import _allowed_classes as _allowed_classes
from ._load import load, read_metadata
from ._save import save
from ._statement import privacy_statement

__all__ = [
    "FORMAT_VERSION",
    "ModelFileError",
    "load",
    "privacy_statement",
    "read_metadata",
    "save",
]
