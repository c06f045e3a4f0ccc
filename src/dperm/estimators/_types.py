"""The type aliases of the estimators' public signatures (``__init__``, ``fit``, …).

The estimators keep scikit-learn's contract: every ``__init__`` parameter is stored
unchanged, and its name and default never change (``get_params``/``clone`` read the
signature).  The annotations only describe what each parameter accepts, for type
checkers and IDEs (the package ships ``py.typed``); the values are validated at ``fit``
time, with errors that name the parameter and the value.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..constraints import Constraint
from ..norms import Norm

__all__ = [
    "AccountantName",
    "ArrayLike",
    "ConstraintSpec",
    "MatrixLike",
    "MultiClass",
    "NoiseFamily",
    "PenaltySpec",
    "RandomState",
]

#: a feature matrix: anything numpy converts (lists, arrays, memmaps, Dask arrays,
#: DataFrames) or a scipy.sparse matrix (CSR is used without a copy)
MatrixLike: TypeAlias = ArrayLike | sp.spmatrix | sp.sparray
#: a seed, a SeedSequence, a Generator, or None (fresh OS entropy)
RandomState: TypeAlias = int | np.random.SeedSequence | np.random.Generator | None
#: ``penalty=``: a named penalty or a :class:`~dperm.norms.Norm` on the features
PenaltySpec: TypeAlias = Literal["l2", "l1", "elasticnet", "none"] | Norm
#: ``constraint=``: a named convex set (with ``constraint_radius``), a Constraint, or None
ConstraintSpec: TypeAlias = Literal["l2", "l1", "box", "none"] | Constraint | None
#: ``noise=`` of objective / output perturbation
NoiseFamily: TypeAlias = Literal["auto", "gamma", "gaussian"]
#: ``multi_class=``
MultiClass: TypeAlias = Literal["auto", "ovr", "multinomial"]
#: ``accountant=``: the mechanism's accountant or calibration ("pld", "rdp", "advanced",
#: "optimal", …; each mechanism documents the ones it accepts), None for its default
AccountantName: TypeAlias = str | None
