"""The parameters of dperm's estimators: one table that declares them, one way to store them.

scikit-learn's contract (``get_params``, ``clone``, ``parametrize_with_checks``)
reads the parameters off the signature of each ``__init__``, and ``__init__`` must
store them unchanged and do nothing else.

The linear estimators share most of their parameters (ε, δ, the mechanism, the public
bounds, the penalty, the solver and gradient-perturbation settings).  Each parameter is
declared once: its default, its type hint, what it accepts (the
constraints that :func:`dperm._parameters.validate_params` checks at the top of
``fit``) and its description.  :func:`estimator_parameters` gives a class the
parameters it names, in that order: an ``__init__`` with that explicit keyword-only
signature (``inspect.signature``, ``get_params`` and ``help()`` read it; the defaults
and hints come from the table) that stores them with
:func:`dperm._parameters.store_params`, the table
``_parameter_constraints``, and the ``Parameters`` and ``Attributes`` sections of the
class docstring (:func:`estimator_doc`: names in signature order, defaults read off
the signature, so the text cannot drift from the code).  ``help()``, the doctests and
the API reference show the composed text.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .._parameters import (
    RANDOM_STATE,
    Count,
    Names,
    nonnegative,
    positive,
    store_params,
    unit_interval,
)
from .._validation import MAX_DATA_NORM
from ..accounting.registry import ACCOUNTANT_NAMES
from ..constraints import Constraint
from ..norms import Norm
from . import _types
from ._mechanisms import available_mechanisms

__all__ = [
    "CLASSIFIER_ATTRIBUTES",
    "CONSTRAINTS",
    "GRADIENT",
    "INTERCEPT",
    "LINEAR",
    "PARAMETER_DOCS",
    "PARAMETER_SPECS",
    "PENALTIES",
    "PRIVACY",
    "REGRESSOR_ATTRIBUTES",
    "SOLVER",
    "Param",
    "ParamDoc",
    "Spec",
    "estimator_doc",
    "estimator_parameters",
    "parameters_section",
]


@dataclass(frozen=True)
class ParamDoc:
    """The documentation of one parameter (or of a group sharing one entry):
    its type (``""`` for none) and its description (may be empty; indented
    freely, it is cleaned with :func:`inspect.cleandoc`)."""

    type: str
    text: str = ""


@dataclass(frozen=True)
class Spec:
    """What a parameter is: its default, its type hint (the signature's annotation, as
    source text in the names of :mod:`dperm.estimators._types`) and what it accepts
    (scikit-learn-style constraints, checked by
    :func:`dperm._parameters.validate_params` at the top of ``fit``)."""

    default: object
    hint: str
    constraints: list | str


@dataclass(frozen=True)
class Param:
    """A parameter proper to a class: its :class:`Spec` and its description."""

    spec: Spec
    doc: ParamDoc


#: hyperparameters of the gradient-perturbation mechanisms: one shared entry, so
#: consecutive ones are documented together
_GRADIENT = ParamDoc(
    "",
    """Hyperparameters of the gradient-perturbation mechanisms (dp-gd, dp-sgd,
        amp, bolt-on); None means the mechanism's own default.  Ignored by
        "objective" and "output".""",
)

#: the descriptions of the shared parameters (a class passes its own ones, or its own
#: description of a shared one, to :func:`estimator_parameters`)
PARAMETER_DOCS: dict[str, ParamDoc] = {
    "label_bound": ParamDoc("float > 0", "Public bound B on |y|."),
    "epsilon": ParamDoc(
        "float > 0",
        """Total privacy budget ε of the fit (split evenly over the k one-vs-rest
        problems when there are k > 2 classes: basic composition).""",
    ),
    "delta": ParamDoc(
        "float in [0, 1/n) or None",
        """Total δ.  None → δ = min(1/n², 10⁻⁵) (n = number of training rows, public).  0 →
        pure ε-DP (Gamma-norm noise for "objective" / "output").  δ ≥ 1/n is refused
        by ``fit`` (InvalidPrivacyParameter): such a δ guarantees nothing.""",
    ),
    "mechanism": ParamDoc(
        "str",
        """"auto" (default): the public rule :func:`dperm.estimators._auto.auto_choice`
        picks the mechanism and its hyperparameters from n, d, k, ε, δ and the loss
        (the choice is kept in ``mechanism_`` and ``auto_``).  Or a name registered
        in :mod:`dperm.estimators._mechanisms`: "objective"
        (objective perturbation: Chaudhuri et al. 2011 Alg. 2 for δ = 0, Kifer
        et al. 2012 Alg. 1 for δ > 0), "output" (output perturbation,
        Chaudhuri et al. 2011 Alg. 1 / analytic Gaussian), and those other
        modules register ("dp-gd", "dp-sgd", "amp", …).""",
    ),
    "data_norm": ParamDoc(
        "float > 0",
        """Public bound R on ‖x‖₂ of a feature row; rows above it are clipped to it
        (``n_clipped_`` counts them).  Never read from the data.""",
    ),
    "alpha": ParamDoc(
        'float ≥ 0 or "auto"',
        """Regularization strength Λ: the objective is
        (1/n)Σ ℓ + (Λ/2)‖θ‖² (penalty="l2").  "auto" is a public rule of
        (n, d, ε, R) registered with the mechanism (R = ``data_norm_``, the
        effective row bound): for "objective" and "output" the minimizer of
        the mechanism's excess-risk bound at this ε (it grows as ε shrinks),
        floored at R²/n; constants chosen on training splits only.  See
        :func:`dperm.estimators._alpha_rules.objective_alpha_rule` and
        :func:`~dperm.estimators._alpha_rules.output_alpha_rule`.  The value
        used is ``alpha_``.""",
    ),
    "fit_intercept": ParamDoc(
        "bool",
        """Append a constant feature ``intercept_scaling``; the effective row bound
        becomes √(data_norm² + intercept_scaling²).  The intercept is
        regularized like the other coefficients (by the ℓ2 and ℓ1 terms; a
        Norm penalty leaves it unpenalized).""",
    ),
    "intercept_scaling": ParamDoc(
        "float > 0",
        """Value of the constant feature of the intercept column (see
        :mod:`dperm.estimators._base`).""",
    ),
    "noise": ParamDoc(
        '{"auto", "gamma", "gaussian"}',
        """Noise family of "objective"/"output": Gamma-norm (pure ε) when δ = 0,
        Gaussian otherwise.""",
    ),
    "penalty": ParamDoc(
        '{"l2", "l1", "elasticnet", "none"} or a dperm.norms.Norm',
        """"l1": r = Λ‖θ‖₁ (no ℓ2 term); "elasticnet": (Λ(1−l1_ratio)/2)‖θ‖² +
        Λ l1_ratio ‖θ‖₁.  Output perturbation needs an ℓ2 part (strong convexity).
        A :class:`~dperm.norms.Norm` Ω on the n_features coordinates (e.g.
        ``GroupLinfNorm(groups, d)``, ``SubmodularNorm(F, d)``, ``ChainTVNorm(d)``)
        is the elastic-net form with ℓ1 replaced by Ω: (Λ(1−l1_ratio)/2)‖θ‖² +
        Λ l1_ratio Ω(θ), the intercept not penalized by Ω; used by "objective",
        "output", "structured-output", "dual-frank-wolfe" and the prox of
        "dp-gd"/"dp-sgd" (InvalidDataError if Ω.d ≠ n_features).""",
    ),
    "l1_ratio": ParamDoc("float in [0, 1]", 'Used with penalty="elasticnet" or a Norm penalty.'),
    "constraint": ParamDoc(
        'None, "l2", "l1", "box" or a Constraint',
        "Convex set C for θ (augmented with the intercept coordinate).",
    ),
    "constraint_radius": ParamDoc(
        "float > 0 or None",
        "Radius of the named constraint (a radius alone means an ℓ2 ball).",
    ),
    "tol": ParamDoc(
        "float > 0", "Optimality residual the perturbation solvers must reach (fail closed)."
    ),
    "max_iter": ParamDoc(
        "int",
        """Solver iteration cap (for "frank-wolfe": the step cap, at most 1000
        steps).""",
    ),
    "epochs": _GRADIENT,
    "batch_size": _GRADIENT,
    "learning_rate": _GRADIENT,
    "clipping_norm": _GRADIENT,
    "noise_multiplier": _GRADIENT,
    "accountant": _GRADIENT,
    "warm_start": ParamDoc(
        "bool",
        """Start the next ``fit`` from the previous fit's released ``coef_`` and
        ``intercept_`` (post-processing of that release).  Only for the
        gradient-perturbation mechanisms ("dp-gd", "dp-gd-avg", "dp-sgd",
        "dp-sgd-single"); InvalidPrivacyParameter with any other mechanism, whose
        release the start point does not change.  The new fit spends its own
        (ε, δ) and the model depends on both fits: ``dp_event_`` is their
        composition and ``epsilon_``/``delta_`` the sums (see
        ``docs/gradient_perturbation.md``, "Warm start").""",
    ),
    "classes": ParamDoc(
        "array-like of shape (n_classes,) or None",
        """The public label set (classifiers only).  Pass it: e.g. ``[0, 1]``,
        ``[-1, 1]``, ``range(10)``; labels outside it raise LabelError, and
        classes absent from the data still get a (private) one-vs-rest model.
        None reads the set off ``y`` as scikit-learn does, with a
        :class:`~dperm.exceptions.PrivacyLeakWarning` on every fit: *which*
        labels occur in the private data is then not protected (a class present
        in D but absent from a neighbour D′ changes ``classes_``, the shape of
        ``coef_`` and the budget split) — for two classes and for k > 2 alike.
        None stays allowed (with the warning) so that scikit-learn tooling that
        fits on arbitrary labels keeps working.""",
    ),
    "verbose": ParamDoc(
        "bool",
        """Show a progress bar during the iterations of the gradient-perturbation
        mechanisms ("dp-gd", "dp-sgd", "dp-sgd-single").""",
    ),
    "random_state": ParamDoc(
        "None, int, SeedSequence or Generator",
        "Source of the privacy noise (None = fresh OS entropy).",
    ),
}

#: the names of ``penalty=`` (or a :class:`~dperm.norms.Norm`)
PENALTIES = ("l2", "l1", "elasticnet", "none")
#: the names of ``constraint=`` (or a :class:`~dperm.constraints.Constraint`)
CONSTRAINTS = ("l2", "l1", "box", "none")
#: ``mechanism=``: "auto" or a registered name, read when checked (the registry grows)
_MECHANISMS = [Names(("auto",)), Names(available_mechanisms, what="registered mechanisms")]
_OPTIONAL = [None, positive()]

#: the default, the type hint and what each shared parameter accepts (checked at the top
#: of ``fit`` for every mechanism; what only one mechanism needs, it checks itself)
PARAMETER_SPECS: dict[str, Spec] = {
    "label_bound": Spec(1.0, "float", [positive()]),
    "epsilon": Spec(1.0, "float", [positive()]),
    "delta": Spec(None, "float | None", [None, unit_interval("left")]),
    "mechanism": Spec("auto", "str", _MECHANISMS),
    "data_norm": Spec(1.0, "float", [positive(MAX_DATA_NORM, closed="right")]),
    "alpha": Spec("auto", "float | Literal['auto']", [nonnegative(), Names(("auto",))]),
    "fit_intercept": Spec(True, "bool", ["boolean"]),
    "intercept_scaling": Spec(0.5, "float", [positive()]),
    "noise": Spec("auto", "NoiseFamily", [Names(("auto", "gamma", "gaussian"))]),
    "penalty": Spec("l2", "PenaltySpec", [Names(PENALTIES), Norm]),
    "l1_ratio": Spec(0.5, "float", [unit_interval()]),
    "constraint": Spec(None, "ConstraintSpec", [None, Names(CONSTRAINTS), Constraint]),
    "constraint_radius": Spec(None, "float | None", _OPTIONAL),
    "tol": Spec(1e-10, "float", [positive()]),
    "max_iter": Spec(10_000, "int", [Count(1)]),
    "epochs": Spec(None, "int | None", _OPTIONAL),
    "batch_size": Spec(None, "int | None", [None, Count(1)]),
    "learning_rate": Spec(None, "float | None", _OPTIONAL),
    "clipping_norm": Spec(None, "float | None", _OPTIONAL),
    "noise_multiplier": Spec(None, "float | None", _OPTIONAL),
    "accountant": Spec(None, "AccountantName", [None, Names(ACCOUNTANT_NAMES, casefold=True)]),
    "warm_start": Spec(False, "bool", ["boolean"]),
    "classes": Spec(None, "ArrayLike | None", [None, "array-like"]),
    "verbose": Spec(False, "bool", ["verbose"]),
    "random_state": Spec(None, "RandomState", RANDOM_STATE),
}  # fmt: skip

CLASSIFIER_ATTRIBUTES = """
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
        The public ``classes`` when given; otherwise read off ``y`` and then
        *outside* the privacy guarantee (PrivacyLeakWarning).
    epsilon_, delta_ : float
        The (ε, δ) certified for the whole fit (δ_ = 0 for pure-ε mechanisms),
        for the relation ``neighbouring_``.
    neighbouring_ : str
        The neighbouring relation of that guarantee: "replace-one" (D and D′
        of the same, public size n differ in one record) for every mechanism;
        read from ``dp_event_`` so it always agrees with what the accountants
        see.  See ``docs/neighbouring.md``.
    dp_event_ : DpEvent
        What the fit spent, for the accountants / a Ledger (one event per
        one-vs-rest problem, composed); after a warm start, composed with the
        ``dp_event_`` of the model it started from.
    n_fits_ : int
        The number of fits the model depends on (1, or more after warm starts).
    n_clipped_ : int
        Rows whose norm exceeded ``data_norm`` and were clipped (data-dependent,
        not privatized: for the data owner).
    n_features_in_ : int
    alpha_ : float
        Λ used.
    data_norm_ : float
        Effective row bound of the augmented design.
    diagnostics_ : dict or list of dict
        The mechanism's diagnostics (calibration constants, solver report);
        the data-dependent entries (solver iterations and residual,
        ``n_clipped``, …) are outside the privacy guarantee, as is ``n_iter_``.
"""

REGRESSOR_ATTRIBUTES = """
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    epsilon_, delta_, neighbouring_, dp_event_, n_fits_, n_features_in_
        The certified (ε, δ), the relation ("replace-one") and the event; as for
        :class:`~dperm.estimators.DPLogisticRegression`.
    n_clipped_, alpha_, data_norm_, diagnostics_
        As for :class:`~dperm.estimators.DPLogisticRegression` (``n_clipped_`` and
        the data-dependent diagnostics are outside the privacy guarantee).
"""


def _default(value) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def parameters_section(
    init: Callable, specific: Mapping[str, ParamDoc] | None = None, *, exclude=()
) -> str:
    """The numpydoc entries of the parameters of ``init`` (an ``__init__``), in
    signature order with the signature's defaults, each described by
    ``specific`` or else by :data:`PARAMETER_DOCS`.  Consecutive parameters that
    share one entry and one default are documented together; the names in
    ``exclude`` are left out.

    Raises
    ------
    KeyError
        A parameter has no description (every parameter must be documented).
    """
    specific = dict(specific or {})
    params = [
        p
        for p in inspect.signature(init).parameters.values()
        if p.name != "self" and p.name not in exclude
    ]
    groups: list[tuple[list[str], ParamDoc, object]] = []
    for p in params:
        doc = specific[p.name] if p.name in specific else PARAMETER_DOCS[p.name]
        if groups and groups[-1][1] is doc and groups[-1][2] == p.default:
            groups[-1][0].append(p.name)
        else:
            groups.append(([p.name], doc, p.default))
    lines = []
    for names, doc, default in groups:
        kind = f"{doc.type}, " if doc.type else ""
        lines.append(f"    {', '.join(names)} : {kind}default={_default(default)}")
        if doc.text:
            lines.append(textwrap.indent(inspect.cleandoc(doc.text), " " * 8))
    return "\n" + "\n".join(lines) + "\n"


def estimator_doc(*, attributes: str, **specific: ParamDoc) -> Callable[[type], type]:
    """Class decorator: insert into the class docstring, after its summary and
    description and before its ``Examples`` section if any, the ``Parameters``
    section of :func:`parameters_section` (``specific`` describes the
    parameters proper to the class or overrides a shared entry) and the
    ``Attributes`` section ``attributes``."""

    def decorate(cls: type) -> type:
        head, marker, examples = (cls.__doc__ or "").partition("\n    Examples\n")
        cls.__doc__ = (
            f"{head.rstrip()}\n\n    Parameters\n    ----------"
            f"{parameters_section(cls.__init__, specific)}\n"
            f"    Attributes\n    ----------{attributes}{marker}{examples}"
        )
        return cls

    return decorate


#: groups of parameters in signature order; LINEAR: those every linear estimator of the
#: full interface takes (the classifiers and :class:`~dperm.estimators.DPLinearRegression`)
PRIVACY = ("epsilon", "delta", "mechanism", "data_norm")
INTERCEPT = ("fit_intercept", "intercept_scaling")
SOLVER = ("tol", "max_iter")
GRADIENT = ("epochs", "batch_size", "learning_rate", "clipping_norm", "noise_multiplier")
LINEAR = (
    *(*PRIVACY, "alpha", *INTERCEPT, "noise", "penalty", "l1_ratio", "constraint"),
    *("constraint_radius", *SOLVER, *GRADIENT, "accountant", "warm_start"),
)


def _param(name: str, given: Param | ParamDoc | None) -> Param:
    """``given`` (a parameter proper to the class), or the shared parameter with the
    description ``given`` (a ParamDoc) or its shared description."""
    if isinstance(given, Param):
        return given
    return Param(PARAMETER_SPECS[name], PARAMETER_DOCS[name] if given is None else given)


def _make_init(params: Mapping[str, Param]) -> Callable[..., None]:
    """An ``__init__`` whose signature is the keyword-only ``params`` (defaults and
    hints from the table) and that stores every argument unchanged."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(name, keyword, default=p.spec.default, annotation=p.spec.hint)
            for name, p in params.items()
        ],
        return_annotation="None",
    )

    def __init__(self, **arguments) -> None:
        bound = signature.bind(self, **arguments)  # TypeError for a name not in params
        bound.apply_defaults()
        store_params(self, bound.arguments)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    # the hints as objects, for typing.get_type_hints (the signature shows their text)
    hints = {name: eval(p.spec.hint, vars(_types)) for name, p in params.items()}
    __init__.__annotations__ = {**hints, "return": None}
    return __init__


def estimator_parameters(
    *names: str, attributes: str, **specific: Param | ParamDoc
) -> Callable[[type], type]:
    """Class decorator: give the class the parameters ``names``, in this order.

    Each is the shared parameter (:data:`PARAMETER_SPECS`, :data:`PARAMETER_DOCS`),
    or ``specific[name]``: a :class:`Param` (a parameter proper to the class, or a
    shared one with another default or other constraints) or a :class:`ParamDoc` (the
    shared parameter with the class's own description).  The class gets

    * ``__init__`` with the explicit keyword-only signature of those parameters,
      storing them unchanged (scikit-learn's contract: ``get_params``, ``clone``);
    * ``_parameter_constraints``, the table :func:`dperm._parameters.validate_params`
      checks at the top of ``fit``;
    * the ``Parameters`` and ``Attributes`` sections of its docstring
      (:func:`estimator_doc`).
    """

    def decorate(cls: type) -> type:
        params = {name: _param(name, specific.get(name)) for name in names}
        init = _make_init(params)
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        init.__module__ = cls.__module__
        cls.__init__ = init
        cls._parameter_constraints = {name: p.spec.constraints for name, p in params.items()}
        docs = {name: p.doc for name, p in params.items()}
        return estimator_doc(attributes=attributes, **docs)(cls)

    return decorate
