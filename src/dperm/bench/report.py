"""Outputs of ``dperm bench``: CSV, JSON, a markdown table, plots, and the
comparison with the published numbers of Iyengar et al. (IEEE S&P 2019).

The published numbers are the test accuracies (%) of logistic regression in
Fig. 1 of B. Iyengar, J. P. Near, D. Song, O. Thakkar, A. Thakurta, L. Wang,
*Towards Practical Differentially Private Convex Optimization*, IEEE S&P 2019:
ε = 0.1 for the binary sets and ε = 1 for MNIST (one-vs-rest), δ = 1/n², the
best hyperparameters chosen **on the test set** from a grid.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "ALGORITHM_LABELS",
    "PUBLISHED",
    "PUBLISHED_EPSILON",
    "RESULT_COLUMNS",
    "comparison_frame",
    "comparison_markdown",
    "defaults_frame",
    "defaults_markdown",
    "plot_accuracy",
    "results_markdown",
    "write_outputs",
]

#: Iyengar et al. 2019, Fig. 1 (logistic regression, test accuracy in %).
PUBLISHED: dict[str, dict[str, float]] = {
    "adult": {
        "non-private": 84.8,
        "amp": 79.1,
        "amp-nt": 78.7,
        "dp-sgd": 78.5,
        "bolt-on": 77.4,
        "bolt-on-sc": 77.2,
        "frank-wolfe": 76.9,
    },
    "kddcup99": {
        "non-private": 99.1,
        "amp": 97.5,
        "amp-nt": 97.4,
        "dp-sgd": 98.0,
        "bolt-on": 98.1,
        "bolt-on-sc": 95.8,
        "frank-wolfe": 96.8,
    },
    "mnist": {
        "non-private": 91.5,
        "amp": 71.9,
        "amp-nt": 70.5,
        "dp-sgd": 68.6,
        "bolt-on": 68.0,
        "bolt-on-sc": 63.2,
        "frank-wolfe": 65.0,
    },
    "synthetic-l": {
        "non-private": 94.9,
        "amp": 83.1,
        "amp-nt": 80.6,
        "dp-sgd": 81.6,
        "bolt-on": 81.7,
        "bolt-on-sc": 76.4,
        "frank-wolfe": 81.8,
    },
    "synthetic-h": {
        "non-private": 95.8,
        "amp": 53.2,
        "amp-nt": 51.4,
        "dp-sgd": 52.8,
        "bolt-on": 53.5,
        "bolt-on-sc": 52.0,
        "frank-wolfe": 57.6,
    },
}

#: The ε at which each published number was measured.
PUBLISHED_EPSILON: dict[str, float] = {
    "adult": 0.1,
    "kddcup99": 0.1,
    "mnist": 1.0,
    "synthetic-l": 0.1,
    "synthetic-h": 0.1,
}

#: Display names (the paper's names for the published algorithms).
ALGORITHM_LABELS: dict[str, str] = {
    "non-private": "non-private",
    "auto": "dperm defaults (auto)",
    "amp": "AMP",
    "amp-nt": "AMP-NT",
    "dp-sgd": "DP-SGD",
    "dp-gd": "DP-GD",
    "bolt-on": "bolt-on PSGD",
    "bolt-on-sc": "strongly-convex bolt-on",
    "frank-wolfe": "private Frank-Wolfe",
    "objective": "objective perturbation",
    "output": "output perturbation",
    "diffprivlib": "diffprivlib LR (peer)",
    "opacus": "Opacus DP-SGD (peer)",
    "objective+tuned": "objective perturbation (tuned privately)",
    "output+tuned": "output perturbation (tuned privately)",
    "dp-sgd+tuned": "DP-SGD (tuned privately)",
}

#: Columns of results.csv, in order.
RESULT_COLUMNS = [
    "dataset",
    "algorithm",
    "source",
    "protocol",
    "tuning",
    "epsilon",
    "delta",
    "neighbouring",
    "n_train",
    "n_test",
    "n_features",
    "repeats",
    "accuracy_mean",
    "accuracy_sd",
    "excess_risk_mean",
    "excess_risk_sd",
    "theoretical_bound",
    "fit_seconds_mean",
    "hyperparameters",
    "note",
]


def _label(alg: str) -> str:
    return ALGORITHM_LABELS.get(alg, alg)


def _fmt(x: Any, digits: int = 1, scale: float = 1.0) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{scale * float(x):.{digits}f}"


def results_markdown(df: pd.DataFrame, meta: Mapping[str, Any]) -> str:
    """A markdown report of ``df`` (one table per dataset: algorithms × ε).

    Cells are ``mean ± sd`` test accuracy in %.  The header states the protocol
    and, for ``paper``, the words "non-private tuning".
    """
    lines = [f"# dperm bench — protocol `{meta.get('protocol', '?')}`", ""]
    lines.append(f"**Tuning:** {meta.get('tuning', '')}")
    lines.append("")
    for key in ("command", "started", "machine", "total_seconds"):
        if key in meta:
            lines.append(f"- {key}: `{meta[key]}`")
    notes = meta.get("notes") or []
    for n in notes:
        lines.append(f"- note: {n}")
    lines.append("")
    if df.empty:
        lines.append("_no results_")
        return "\n".join(lines) + "\n"
    for ds, part in df.groupby("dataset", sort=False):
        eps = sorted(part["epsilon"].dropna().unique())
        first = part.iloc[0]
        lines.append(
            f"## {ds}  (n_train={int(first['n_train'])}, n_test={int(first['n_test'])}, "
            f"d={int(first['n_features'])}, δ={first['delta']:.3g})"
        )
        lines.append("")
        header = "| algorithm | source | neighbouring | " + " | ".join(f"ε={e:g}" for e in eps)
        header += " | fit s (mean) |"
        lines.append(header)
        lines.append("|" + "---|" * (len(eps) + 4))
        for (alg, src), rows in part.groupby(["algorithm", "source"], sort=False):
            relation = " / ".join(dict.fromkeys(str(v) for v in rows["neighbouring"].fillna("–")))
            cells = []
            for e in eps:
                r = rows[np.isclose(rows["epsilon"], e)]
                if r.empty:
                    cells.append("–")
                elif not math.isfinite(float(r.iloc[0]["accuracy_mean"])):
                    cells.append("failed (see note)")
                else:
                    r = r.iloc[0]
                    cells.append(
                        f"{_fmt(r['accuracy_mean'], 1, 100)} ± {_fmt(r['accuracy_sd'], 1, 100)}"
                    )
            t = rows["fit_seconds_mean"].mean()
            lines.append(
                f"| {_label(alg)} | {src} | {relation} | "
                + " | ".join(cells)
                + f" | {_fmt(t, 2)} |"
            )
        lines.append("")
    lines.append(
        "Accuracy: mean ± sd over repeats, in %. Non-private rows do not depend on ε "
        "(repeated in every column). `neighbouring`: the relation each ε is stated for "
        "(replace-one: D, D′ of the same public size differ in one record; add-remove: "
        "one record added or removed; see docs/neighbouring.md)."
    )
    return "\n".join(lines) + "\n"


def comparison_frame(df: pd.DataFrame) -> pd.DataFrame:
    """dperm's accuracy (%) next to Iyengar et al.'s Fig. 1 at the published ε.

    Columns: dataset, epsilon, algorithm, published, dperm, dperm_sd, difference,
    tuned, tuned_sd.  Rows exist for every (dataset, algorithm) of
    :data:`PUBLISHED` whose dataset was run; ``dperm`` is NaN when the algorithm
    (or ε) was not run; ``tuned`` is the ``"<algorithm>+tuned"`` row (private
    random search, its budget included in ε), NaN when not run.
    """

    def cell(part, alg, eps):
        r = part[(part["algorithm"] == alg) & np.isclose(part["epsilon"], eps)]
        r = r[r["source"].isin(["dperm", "scikit-learn"])] if not r.empty else r
        if r.empty:
            return math.nan, math.nan
        return float(r["accuracy_mean"].iloc[0]) * 100, float(r["accuracy_sd"].iloc[0]) * 100

    rows = []
    for ds, pub in PUBLISHED.items():
        part = df[df["dataset"] == ds] if not df.empty else df
        if part.empty:
            continue
        eps = PUBLISHED_EPSILON[ds]
        for alg, value in pub.items():
            mine, sd = cell(part, alg, eps)
            tuned, tuned_sd = cell(part, alg + "+tuned", eps)
            rows.append(
                {
                    "dataset": ds,
                    "epsilon": eps,
                    "algorithm": alg,
                    "published": value,
                    "dperm": mine,
                    "dperm_sd": sd,
                    "difference": mine - value,
                    "tuned": tuned,
                    "tuned_sd": tuned_sd,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "dataset", "epsilon", "algorithm", "published", "dperm", "dperm_sd",
            "difference", "tuned", "tuned_sd",
        ],
    )  # fmt: skip


def comparison_markdown(df: pd.DataFrame) -> str:
    """The comparison of :func:`comparison_frame` as one markdown table per dataset."""
    comp = comparison_frame(df)
    if comp.empty:
        return "_no dataset of the published comparison was run_\n"
    lines = []
    for ds, part in comp.groupby("dataset", sort=False):
        lines.append(f"### {ds} (ε = {PUBLISHED_EPSILON[ds]:g})")
        lines.append("")
        lines.append(
            "| algorithm | published (test-set tuned) | dperm honest defaults | "
            "dperm − published | dperm tuned privately (search in ε) |"
        )
        lines.append("|---|---|---|---|---|")
        for _, r in part.iterrows():
            ok = math.isfinite(r["dperm"])
            mine = f"{r['dperm']:.1f} ± {r['dperm_sd']:.1f}" if ok else "not run / failed"
            diff = f"{r['difference']:+.1f}" if math.isfinite(r["difference"]) else "–"
            tuned = f"{r['tuned']:.1f} ± {r['tuned_sd']:.1f}" if math.isfinite(r["tuned"]) else "–"
            lines.append(
                f"| {_label(r['algorithm'])} | {r['published']:.1f} | {mine} | {diff} | {tuned} |"
            )
        extra = _dperm_only_rows(df, ds, PUBLISHED_EPSILON[ds])
        lines.extend(extra)
        lines.append("")
    return "\n".join(lines)


def _dperm_only_rows(df: pd.DataFrame, ds: str, eps: float) -> list[str]:
    """Rows of the comparison table for the dperm algorithms the paper did not run
    (objective / output perturbation, DP-GD, …) and their tuned variants."""
    if df.empty:
        return []
    part = df[(df["dataset"] == ds) & np.isclose(df["epsilon"], eps) & (df["source"] == "dperm")]
    published = set(PUBLISHED.get(ds, {}))
    out = []
    for alg in dict.fromkeys(part["algorithm"]):
        base = alg.removesuffix("+tuned")
        if base in published or alg.endswith("+tuned"):
            continue
        r = part[part["algorithm"] == alg].iloc[0]
        t = part[part["algorithm"] == alg + "+tuned"]
        tuned = (
            f"{100 * t['accuracy_mean'].iloc[0]:.1f} ± {100 * t['accuracy_sd'].iloc[0]:.1f}"
            if not t.empty
            else "–"
        )
        mine = f"{100 * r['accuracy_mean']:.1f} ± {100 * r['accuracy_sd']:.1f}"
        out.append(f"| {_label(alg)} | – | {mine} | – | {tuned} |")
    return out


#: the peers of the defaults table, in its column order
DEFAULTS_PEERS = ("diffprivlib", "opacus")


def defaults_frame(df: pd.DataFrame) -> pd.DataFrame:
    """dperm's defaults (``auto``) next to the best dperm mechanism and the peers, per cell.

    One row per (dataset, ε) where the ``auto`` row ran.  Columns: dataset, epsilon,
    nonprivate, auto, auto_sd, auto_choice (the mechanism the public rule picked,
    ``hyperparameters["mechanism_"]``), best (the dperm mechanism with the highest mean
    accuracy in the cell at its defaults: ``auto`` and the tuned-privately rows
    excluded), best_mean, best_sd, gap (auto − best, points), and one column per peer
    of :data:`DEFAULTS_PEERS` (NaN when it did not run).  Accuracies in %.
    """
    columns = ["dataset", "epsilon", "nonprivate", "auto", "auto_sd", "auto_choice", "best"]
    columns += ["best_mean", "best_sd", "gap", *DEFAULTS_PEERS]
    rows = []
    if df.empty:
        return pd.DataFrame(rows, columns=columns)
    ok = df[np.isfinite(df["accuracy_mean"].astype(float))]
    for (ds, eps), part in ok.groupby(["dataset", "epsilon"], sort=False):
        auto = part[(part["algorithm"] == "auto") & (part["source"] == "dperm")]
        if auto.empty:
            continue
        a = auto.iloc[0]
        mechs = part[
            (part["source"] == "dperm")
            & (part["algorithm"] != "auto")
            & ~part["algorithm"].astype(str).str.endswith("+tuned")
        ]
        best = mechs.loc[mechs["accuracy_mean"].idxmax()] if not mechs.empty else None
        nonpriv = part[part["algorithm"] == "non-private"]["accuracy_mean"]

        def pct(v):
            return 100.0 * float(v)

        row = {
            "dataset": ds,
            "epsilon": float(eps),
            "nonprivate": pct(nonpriv.iloc[0]) if not nonpriv.empty else math.nan,
            "auto": pct(a["accuracy_mean"]),
            "auto_sd": pct(a["accuracy_sd"]),
            "auto_choice": _auto_choice(a.get("hyperparameters")),
            "best": None if best is None else str(best["algorithm"]),
            "best_mean": math.nan if best is None else pct(best["accuracy_mean"]),
            "best_sd": math.nan if best is None else pct(best["accuracy_sd"]),
        }
        row["gap"] = row["auto"] - row["best_mean"]
        for peer in DEFAULTS_PEERS:
            r = part[part["algorithm"] == peer]["accuracy_mean"]
            row[peer] = pct(r.iloc[0]) if not r.empty else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _auto_choice(hp) -> str:
    if isinstance(hp, str) and hp:
        try:
            hp = json.loads(hp)
        except json.JSONDecodeError:
            return "?"
    return str(hp.get("mechanism_", "?")) if isinstance(hp, Mapping) else "?"


def defaults_markdown(df: pd.DataFrame) -> str:
    """The table of :func:`defaults_frame`: one row per (dataset, ε)."""
    comp = defaults_frame(df)
    if comp.empty:
        return "_the defaults (algorithm `auto`) were not run_\n"
    peers = " | ".join(_label(p) for p in DEFAULTS_PEERS)
    lines = [
        f"| dataset | ε | non-private | dperm defaults (auto) | auto chose | best dperm "
        f"mechanism | auto − best | {peers} |",
        "|---|---|---|---|---|---|---|" + "---|" * len(DEFAULTS_PEERS),
    ]

    def num(v, sd=None):
        if not math.isfinite(v):
            return "not run"
        return f"{v:.1f}" + ("" if sd is None or not math.isfinite(sd) else f" ± {sd:.1f}")

    for _, r in comp.iterrows():
        best = (
            "–" if r["best"] is None else f"{_label(r['best'])} {num(r['best_mean'], r['best_sd'])}"
        )
        gap = f"{r['gap']:+.1f}" if math.isfinite(r["gap"]) else "–"
        cells = [
            r["dataset"], f"{r['epsilon']:g}", num(r["nonprivate"]), num(r["auto"], r["auto_sd"]),
            r["auto_choice"], best, gap, *(num(r[p]) for p in DEFAULTS_PEERS),
        ]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")
    lines.append(
        "Test accuracy in % (mean ± sd over repeats). *auto*: `DPLogisticRegression` with no "
        "mechanism or hyperparameter given (the public rule of `dperm.estimators._auto`); "
        "*best dperm mechanism*: the highest mean of the cell among the dperm mechanisms at "
        "their defaults (tuned-privately rows excluded), so it is selected on the test split "
        "— an optimistic reference, not a private result."
    )
    return "\n".join(lines) + "\n"


def plot_accuracy(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """One PNG per dataset: test accuracy (%) against ε (log axis), one line per
    algorithm, error bars = sd; the non-private reference as a dashed line and
    the published numbers (when the dataset is one of them) as crosses."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    paths = []
    out_dir = Path(out_dir)
    for ds, part in df.groupby("dataset", sort=False):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for (alg, src), rows in part.groupby(["algorithm", "source"], sort=False):
            rows = rows.sort_values("epsilon")
            label = _label(alg) if src == "dperm" else f"{_label(alg)}"
            if alg == "non-private":
                ax.axhline(
                    100 * rows["accuracy_mean"].iloc[0], color="k", ls="--", lw=1, label=label
                )
                continue
            ax.errorbar(
                rows["epsilon"],
                100 * rows["accuracy_mean"],
                yerr=100 * rows["accuracy_sd"].fillna(0.0),
                marker="o",
                ms=4,
                capsize=3,
                label=label,
            )
        if ds in PUBLISHED:
            eps = PUBLISHED_EPSILON[ds]
            vals = [v for a, v in PUBLISHED[ds].items() if a != "non-private"]
            ax.scatter(
                [eps] * len(vals), vals, marker="x", color="grey", zorder=5,
                label="published (Iyengar et al. 2019, test-set tuned)",
            )  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{ds}: accuracy vs ε")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        path = out_dir / f"accuracy_vs_epsilon_{ds}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, np.floating):
        return _json_safe(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


def write_outputs(df: pd.DataFrame, out_dir, meta: Mapping[str, Any]) -> dict[str, Path]:
    """Write ``results.csv``, ``results.json``, ``results.md``, ``comparison.md``,
    ``defaults.md`` (:func:`defaults_markdown`) and one
    ``accuracy_vs_epsilon_<dataset>.png`` per dataset into ``out_dir``.

    Returns
    -------
    dict
        Name → path of every file written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    df = df.reindex(columns=RESULT_COLUMNS)
    paths["csv"] = out / "results.csv"
    df.to_csv(paths["csv"], index=False)
    records = [{k: _json_safe(v) for k, v in r.items()} for r in df.to_dict(orient="records")]
    for r in records:
        hp = r.get("hyperparameters")
        if isinstance(hp, str) and hp:
            try:
                r["hyperparameters"] = json.loads(hp)
            except json.JSONDecodeError:
                pass
    paths["json"] = out / "results.json"
    paths["json"].write_text(
        json.dumps({"meta": dict(meta), "results": records}, indent=2, default=str) + "\n"
    )
    paths["md"] = out / "results.md"
    paths["md"].write_text(results_markdown(df, meta))
    paths["comparison"] = out / "comparison.md"
    paths["comparison"].write_text(
        f"# Comparison with Iyengar et al. (2019), Fig. 1 — dperm protocol "
        f"`{meta.get('protocol', '?')}` ({meta.get('tuning', '')})\n\n" + comparison_markdown(df)
    )
    paths["defaults"] = out / "defaults.md"
    paths["defaults"].write_text(
        "# dperm defaults (auto) next to the best mechanism and the peers\n\n"
        + defaults_markdown(df)
    )
    for i, p in enumerate(plot_accuracy(df, out)):
        paths[f"plot{i}"] = p
    return paths
