"""``dperm audit``: an empirical lower bound ε_LB on the ε a mechanism really spends.

:func:`audit_command` does the work (:func:`dperm.audit.audit`) and returns a plain,
JSON-serializable dictionary, :func:`render` formats it.

Examples (shell)::

    dperm audit --mechanism objective --epsilon 1 --runs 2000
    dperm audit --mechanism dp-sgd --epsilon 1 --json
    dperm audit --mechanism dp-gd --epsilon 1 --method clopper-pearson
"""

from __future__ import annotations

import json
from typing import Any

import typer

from ..exceptions import InvalidPrivacyParameter
from ._common import JSON, QUIET, Opt, one_line_errors, step, with_options
from ._fit_inputs import public_data_norm
from .fit import make_estimator

__all__ = [
    "audit_cmd",
    "audit_command",
    "list_runners",
    "one_run_command",
    "render",
    "render_list",
    "render_one_run",
]


def audit_command(
    mechanism: str,
    epsilon: float,
    delta: float | None = None,
    runs: int | None = None,
    seed: int | None = None,
    n_jobs: int | None = None,
    json_output: bool = False,
    confidence: float = 0.95,
    method: str | None = None,
) -> dict[str, Any]:
    """Audit a registered mechanism and return the result as a dict.

    Parameters
    ----------
    mechanism : str
        A runner name of :func:`dperm.audit.runner_names` ("objective",
        "output", "dp-gd", "dp-sgd", "dp-sgd-replace-one", "estimator-dp-sgd",
        "amp", "amp-nt", "bolt-on", …).
    epsilon : float > 0
        The claimed ε.
    delta : float, optional
        The claimed δ (default: the runner's, 0 for pure-DP mechanisms).
    runs : int ≥ 2, optional
        Runs per neighbouring dataset (default: the runner's ``default_runs``,
        20 000 for the gradient methods).
    seed : int, optional
        Seed of every run (None = OS entropy).
    n_jobs : int, optional
        Worker processes (default: all cores).
    json_output : bool
        Accepted for symmetry with the other commands; the dict is always
        JSON-safe (non-finite floats become strings).
    confidence : float in (0, 1)
    method : {"gdp", "clopper-pearson"}, optional
        The bound the verdict uses; default "gdp" for the Gaussian-noise
        mechanisms (δ > 0), else "clopper-pearson" (see
        :func:`dperm.audit.audit`).

    Returns
    -------
    dict
        :meth:`dperm.audit.AuditResult.to_dict` (keys ``epsilon_lower_bound``
        — the verdict's bound —, ``epsilon_lower_bound_gdp``,
        ``epsilon_lower_bound_cp``, ``mu_lower_bound``, ``method``,
        ``assumption``, ``neighbouring``, ``verdict``, …) plus ``seed`` and
        ``available`` (the runner names whose algorithm is installed).

    Raises
    ------
    UnknownNameError, InvalidPrivacyParameter, DpermError
    """
    from .._validation import check_count
    from ..audit import audit, available_runners

    if runs is not None:
        runs = check_count(runs, "runs", minimum=2)
    res = audit(
        mechanism,
        epsilon=epsilon,
        delta=delta,
        runs=runs,
        confidence=confidence,
        n_jobs=n_jobs,
        random_state=seed,
        method=method,
    )
    out = res.to_dict()
    out["seed"] = seed
    out["available"] = available_runners()
    return out


def one_run_command(
    *,
    dataset: str | None = None,
    data_home: str | None = None,
    csv: str | None = None,
    target: str | None = None,
    task: str | None = None,
    label_bound: float | None = None,
    model: str | None = None,
    mechanism: str | None = None,
    epsilon: float = 1.0,
    delta: float | None = None,
    data_norm: float | None = None,
    batch_size: int | None = None,
    epochs: int | None = None,
    learning_rate: float | None = None,
    canaries: int = 1000,
    confidence: float = 0.95,
    seed: int | None = None,
) -> dict[str, Any]:
    """``dperm audit --one-run``: the estimator ``dperm fit`` would build from these
    options, audited from one fit with ``canaries`` canary slots
    (:func:`dperm.audit.one_run.one_run_audit`; a sanity check, not a proof).

    Returns
    -------
    dict
        :meth:`~dperm.audit.one_run.OneRunResult.to_dict` plus ``dataset``, ``model``.

    Raises
    ------
    DpermError
        Bad options or data (as ``dperm fit``).
    """
    from .. import datasets
    from .._validation import check_epsilon
    from ..audit.one_run import one_run_audit

    check_epsilon(epsilon)
    if csv is not None:
        if target is None:
            raise InvalidPrivacyParameter("--csv needs --target COLUMN (the label column)")
        ds = datasets.load_csv(csv, target, task=task, label_bound=label_bound)
    else:
        ds = datasets.load(dataset or datasets.DEFAULT_DATASET, data_home)
    est, model = make_estimator(
        ds,
        model,
        epsilon=epsilon,
        delta=delta,
        data_norm=public_data_norm(ds, data_norm),
        seed=seed,
        mechanism=mechanism,
        batch_size=batch_size,
        epochs=epochs,
        learning_rate=learning_rate,
    )
    res = one_run_audit(
        est, ds.X_train, ds.y_train, canaries=canaries, confidence=confidence, random_state=seed
    )
    return {**res.to_dict(), "dataset": ds.name, "model": model}


def render_one_run(result: dict[str, Any], json_output: bool = False) -> str:
    """Format :func:`one_run_command` output."""
    if json_output:
        return json.dumps(result, sort_keys=True, default=str)
    verdict = (
        f"claim REFUTED: ε_LB = {result['epsilon_lower_bound']:.3f} > ε = {result['epsilon']:g}"
        if result["refuted"]
        else "not refuted (a one-run lower bound is a sanity check, not a proof of privacy)"
    )
    return "\n".join(
        [
            f"one-run audit        {result['dataset']}, {result['model']} ({result['mechanism']}, "
            f"{result['neighbouring']})",
            f"claimed              ε = {result['epsilon']:g}, δ = {result['delta']:g}",
            f"empirical ε_LB       {result['epsilon_lower_bound']:.4f}  (at "
            f"{result['confidence']:.0%} confidence; Steinke, Nasr, Jagielski 2023)",
            f"canaries             {result['canaries']} (coins ±1); {result['correct']} of "
            f"{result['guesses']} guesses right; {result['threat_model']}",
            f"time                 {result['seconds']:.1f} s",
            f"VERDICT              {verdict}",
        ]
    )


def _fmt(v) -> str:
    return "—" if v is None else v if isinstance(v, str) else f"{v:.4f}"


def render(result: dict[str, Any], json_output: bool = False) -> str:
    """Format :func:`audit_command` output as one JSON object or a short report."""
    if json_output:
        return json.dumps(
            {k: v for k, v in result.items() if k != "available"}, sort_keys=True, default=str
        )
    eps_lb = result["epsilon_lower_bound"]
    conf = result["confidence"]
    gdp = result.get("method") in ("gdp", "gdp-fit")
    lines = [
        f"mechanism            {result['mechanism']}",
        f"neighbouring         {result['neighbouring']} (the relation audited)",
        f"claimed              ε = {result['epsilon']:g}, δ = {result['delta']:g}",
        f"empirical ε_LB       {_fmt(eps_lb)}  (at {conf:.0%} confidence; ε_LB/ε = "
        f"{result['ratio']:.3f}; method {result.get('method', 'clopper-pearson')})",
    ]
    if gdp:
        lines += [
            f"  μ-GDP              μ_LB = {_fmt(result['mu_lower_bound'])} (estimate "
            f"{_fmt(result['mu_estimate'])}) → ε_LB = {_fmt(result['epsilon_lower_bound_gdp'])}"
            f"; test {result['gdp_test']}: FPR = {result['gdp_fpr']:.4f}, "
            f"FNR = {result['gdp_fnr']:.4f}",
            f"  assumption         {result['assumption']}",
        ]
    lines += [
        f"  Clopper–Pearson    ε_LB = {_fmt(result.get('epsilon_lower_bound_cp', eps_lb))} "
        f"(assumption-free); test {result['test']}: FPR = {result['fpr']:.4f}, "
        f"FNR = {result['fnr']:.4f}",
        f"runs                 {result['runs']} per dataset ({2 * result['runs']} in total; "
        f"{result['evaluation_runs']} per dataset evaluate the tests), "
        f"{result['n_jobs']} process(es), {result['seconds']:.1f} s",
    ]
    verdict = result.get("verdict", "refuted" if result["violated"] else "not refuted")
    if verdict == "refuted":
        lines.append(
            f"VERDICT              claim REFUTED (assumption-free): ε_LB = "
            f"{_fmt(result.get('epsilon_lower_bound_cp', eps_lb))} > ε = {result['epsilon']:g}"
        )
    elif result["violated"]:
        lines.append(
            f"VERDICT              claim REFUTED under the μ-GDP assumption: ε_LB = "
            f"{eps_lb:.3f} > ε = {result['epsilon']:g} (the assumption-free bound does not "
            "refute it)"
        )
    else:
        lines.append(
            "VERDICT              not refuted (ε_LB ≤ ε; a lower bound, not a proof of privacy)"
        )
    return "\n".join(lines)


#: the options of ``dperm audit``, in the order of ``--help``
_OPTIONS = {
    "mechanism": Opt(
        str | None,
        None,
        "Audit runner, e.g. objective, output, dp-gd, dp-sgd, estimator-dp-sgd, amp, "
        "adassp, tukey, dual-frank-wolfe (`dperm audit --list` prints every one); with "
        "--one-run the estimator's mechanism (as `dperm fit --mechanism`).",
    ),
    "epsilon": Opt(float | None, None, "Claimed ε."),
    "list_runners": Opt(
        bool,
        False,
        "Print the installed runners (apart from the audit-only targets and mutants) and exit.",
        "--list",
    ),
    "delta": Opt(float | None, None, "Claimed δ (default: the mechanism's)."),
    "runs": Opt(int | None, None, "Runs per neighbouring dataset (default: the mechanism's)."),
    "seed": Opt(int | None, None, "Seed of the runs."),
    "n_jobs": Opt(int | None, None, "Worker processes (default: all cores)."),
    "json_output": JSON,
    "method": Opt(
        str | None,
        None,
        "gdp or clopper-pearson (default: gdp for Gaussian-noise mechanisms).",
    ),
    "one_run": Opt(
        bool,
        False,
        "One-run audit of an estimator configuration (the options of `dperm fit`: "
        "--dataset/--csv, --mechanism, --epsilon, …) with --canaries inserted canaries "
        "(Steinke, Nasr, Jagielski 2023): a sanity check, not a proof.",
        "--one-run",
    ),
    "dataset": Opt(str | None, None, "--one-run: dataset (default breast-cancer)."),
    "data_home": Opt(str | None, None, "--one-run: folder with the data files."),
    "csv": Opt(str | None, None, "--one-run: a CSV file instead of --dataset."),
    "target": Opt(str | None, None, "--one-run: label column of --csv."),
    "task": Opt(str | None, None, "--one-run --csv: binary | multiclass | regression."),
    "label_bound": Opt(float | None, None, "--one-run --csv regression: public bound B on |y|."),
    "model": Opt(str | None, None, "--one-run: logistic | svm | linear (as dperm fit)."),
    "data_norm": Opt(float | None, None, "--one-run: row ℓ2 bound (default the dataset's)."),
    "batch_size": Opt(int | None, None, "--one-run: DP-SGD expected batch size."),
    "epochs": Opt(int | None, None, "--one-run: DP-SGD/DP-GD epochs."),
    "learning_rate": Opt(float | None, None, "--one-run: DP-SGD/DP-GD step size."),
    "canaries": Opt(int, 1000, "--one-run: canary slots (one row and one column each)."),
    "quiet": QUIET,
}

#: the options only --one-run reads
_ONE_RUN_ONLY = (
    "dataset",
    "data_home",
    "csv",
    "target",
    "task",
    "label_bound",
    "model",
    "data_norm",
    "batch_size",
    "epochs",
    "learning_rate",
    "canaries",
)


#: suffixes of the honest runners that are audit targets, not paths a user runs
_TARGET_SUFFIXES = ("-raw", "-unsafe", "-final-model")


def list_runners() -> dict[str, list[tuple[str, str]]]:
    """The installed runners in three groups, each a list of (name, description):
    ``runners`` (the algorithms as shipped, on their default paths), ``targets``
    (audit-only targets: a release before its public denoising step, or an adversarial
    pair chosen for power — honest, but not what a fit returns) and ``mutants``
    (deliberately broken variants an audit must refute; registered by the tests)."""
    from ..audit import available_runners, get_runner

    groups: dict[str, list[tuple[str, str]]] = {"runners": [], "targets": [], "mutants": []}
    for name in available_runners():
        runner = get_runner(name)
        if runner.kind == "mutant":
            group = "mutants"
        elif name.endswith(_TARGET_SUFFIXES):
            group = "targets"
        else:
            group = "runners"
        groups[group].append((name, " ".join(runner.description.split())))
    return groups


_GROUP_TITLES = {
    "runners": "Runners: the algorithms as shipped, on their default paths (an audit must "
    "not refute them)",
    "targets": "Audit-only targets: honest, but not what a fit returns (the release before "
    "its public denoising step, or an adversarial pair chosen for power)",
    "mutants": "Mutants: deliberately broken variants (an audit must refute them)",
}


def render_list(groups: dict[str, list[tuple[str, str]]], json_output: bool = False) -> str:
    """``dperm audit --list``: the three groups of :func:`list_runners`."""
    if json_output:
        return json.dumps({k: [n for n, _ in v] for k, v in groups.items()}, sort_keys=True)
    width = max((len(n) for v in groups.values() for n, _ in v), default=0)
    lines = []
    for key, title in _GROUP_TITLES.items():
        lines.append(title + ":")
        for name, desc in groups[key]:
            lines.append(f"  {name:<{width}}  {desc}")
        if not groups[key]:
            lines.append("  (none registered)")
    return "\n".join(lines)


@with_options(_OPTIONS)
def audit_cmd(**options: Any) -> None:
    """Empirical lower bound ε_LB on the ε a mechanism really spends (canary audit)."""
    quiet = options.pop("quiet")
    with one_line_errors():
        if options.pop("list_runners"):
            typer.echo(render_list(list_runners(), options["json_output"]))
            return
        one_run = {k: options.pop(k) for k in _ONE_RUN_ONLY}
        if options.pop("one_run"):
            if options["epsilon"] is None:
                raise InvalidPrivacyParameter("dperm audit --one-run needs --epsilon EPS")
            json_output = options["json_output"]
            with step("one-run audit", not quiet):
                result = one_run_command(
                    **one_run,
                    mechanism=options["mechanism"],
                    epsilon=options["epsilon"],
                    delta=options["delta"],
                    confidence=options.get("confidence", 0.95),
                    seed=options["seed"],
                )
            typer.echo(render_one_run(result, json_output))
            return
        given = [k for k, v in one_run.items() if v not in (None, 1000)]
        if given:
            raise InvalidPrivacyParameter(
                f"--{given[0].replace('_', '-')} is an option of --one-run"
            )
        if options["mechanism"] is None or options["epsilon"] is None:
            raise InvalidPrivacyParameter(
                "dperm audit needs --mechanism NAME and --epsilon EPS (or --list)"
            )
        with step(f"audit of {options['mechanism']}", not quiet):
            result = audit_command(**options)
    typer.echo(render(result, json_output=options["json_output"]))
