"""Back end of the ``dperm audit`` command.

The typer wiring lives in :mod:`dperm.cli`; :func:`audit_command` does the work
and returns a plain, JSON-serializable dictionary, :func:`render` formats it.

Examples (shell)::

    dperm audit --mechanism objective --epsilon 1 --runs 2000
    dperm audit --mechanism dp-sgd --epsilon 2 --delta 1e-5 --runs 1000 --json
"""

from __future__ import annotations

import json
from typing import Any

from ._validation import check_count

__all__ = ["audit_command", "render"]


def audit_command(
    mechanism: str,
    epsilon: float,
    delta: float | None = None,
    runs: int = 1000,
    seed: int | None = None,
    n_jobs: int | None = None,
    json_output: bool = False,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Audit a registered mechanism and return the result as a dict.

    Parameters
    ----------
    mechanism : str
        A runner name of :func:`dperm.audit.runner_names` ("objective",
        "output", "dp-gd", "dp-sgd", "amp", "amp-nt", "bolt-on", …).
    epsilon : float > 0
        The claimed ε.
    delta : float, optional
        The claimed δ (default: the runner's, 0 for pure-DP mechanisms).
    runs : int ≥ 10
        Runs per neighbouring dataset.
    seed : int, optional
        Seed of every run (None = OS entropy).
    n_jobs : int, optional
        Worker processes (default: all cores).
    json_output : bool
        Accepted for symmetry with the other commands; the dict is always
        JSON-safe (non-finite floats become strings).
    confidence : float in (0, 1)

    Returns
    -------
    dict
        :meth:`dperm.audit.AuditResult.to_dict` plus ``available`` (the runner
        names whose algorithm is installed).

    Raises
    ------
    UnknownNameError, InvalidPrivacyParameter, DpermError
    """
    from .audit import audit, available_runners

    runs = check_count(runs, "runs", minimum=10)
    res = audit(
        mechanism,
        epsilon=epsilon,
        delta=delta,
        runs=runs,
        confidence=confidence,
        n_jobs=n_jobs,
        random_state=seed,
    )
    out = res.to_dict()
    out["seed"] = seed
    out["available"] = available_runners()
    return out


def render(result: dict[str, Any], json_output: bool = False) -> str:
    """Format :func:`audit_command` output as one JSON object or a short report."""
    if json_output:
        return json.dumps(
            {k: v for k, v in result.items() if k != "available"}, sort_keys=True, default=str
        )
    eps_lb = result["epsilon_lower_bound"]
    conf = result["confidence"]
    lines = [
        f"mechanism            {result['mechanism']} ({result['neighbouring']})",
        f"claimed              ε = {result['epsilon']:g}, δ = {result['delta']:g}",
        f"empirical ε_LB       {eps_lb:.4f}  (at {conf:.0%} confidence; ε_LB/ε = "
        f"{result['ratio']:.3f})",
        f"test                 {result['test']}: FPR = {result['fpr']:.4f}, "
        f"FNR = {result['fnr']:.4f} on {result['evaluation_runs']} runs per dataset",
        f"runs                 {result['runs']} per dataset ({2 * result['runs']} in total), "
        f"{result['n_jobs']} process(es), {result['seconds']:.1f} s",
    ]
    if result["violated"]:
        lines.append(
            f"VERDICT              claim REFUTED: ε_LB = {eps_lb:.3f} > ε = {result['epsilon']:g}"
        )
    else:
        lines.append(
            "VERDICT              not refuted (ε_LB ≤ ε; a lower bound, not a proof of privacy)"
        )
    return "\n".join(lines)
