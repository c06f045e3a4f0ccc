"""The parameters of dperm's estimators: one way to store them, one place to document them.

scikit-learn's contract (``get_params``, ``clone``, ``parametrize_with_checks``)
reads the parameters off the explicit signature of each ``__init__``, and
``__init__`` must store them unchanged and do nothing else.  Every estimator
does that with one line, ``store_params(self, locals())``.

The estimators share most of their parameters (ε, δ, the mechanism, the public
bounds, the penalty, the solver and gradient-perturbation settings).  Their
descriptions live once, in :data:`PARAMETER_DOCS`; :func:`estimator_doc` appends
to a class docstring the ``Parameters`` section built from the class's own
signature (names in signature order, defaults read off the signature, so the
text cannot drift from the code), the ``Attributes`` section and any further
sections.  ``help()``, the doctests and the API reference show the composed text.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = [
    "CLASSIFIER_ATTRIBUTES",
    "PARAMETER_DOCS",
    "REGRESSOR_ATTRIBUTES",
    "ParamDoc",
    "estimator_doc",
    "parameters_section",
    "store_params",
]


def store_params(estimator, arguments: Mapping[str, object]) -> None:
    """Store every ``__init__`` argument on ``estimator`` under its own name, unchanged.

    Called as ``store_params(self, locals())`` as the only statement of an
    estimator's ``__init__`` (before any other local exists), so that the
    attributes set are exactly the parameters of the explicit signature.
    """
    for name, value in arguments.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


@dataclass(frozen=True)
class ParamDoc:
    """The documentation of one parameter (or of a group sharing one entry):
    its type (``""`` for none) and its description (may be empty; indented
    freely, it is cleaned with :func:`inspect.cleandoc`)."""

    type: str
    text: str = ""


#: hyperparameters of the gradient-perturbation mechanisms: one shared entry, so
#: consecutive ones are documented together
_GRADIENT = ParamDoc(
    "",
    """Hyperparameters of the gradient-perturbation mechanisms (dp-gd, dp-sgd,
        amp, bolt-on); None means the mechanism's own default.  Ignored by
        "objective" and "output".""",
)

#: the shared parameters of the estimators (class-specific ones are passed to
#: :func:`estimator_doc` by their class)
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
        :func:`dperm.estimators._mechanisms.objective_alpha_rule` and
        :func:`~dperm.estimators._mechanisms.output_alpha_rule`.  The value
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
