"""Your own file with honest bounds: scikit-learn's tables as raw-unit CSV files (issue #36).

    python benchmarks/bench_csv_tables.py [--tables breast_cancer,wine,digits,iris,diabetes,
        covtype_like] [--epsilons 1,8] [--seeds 0,1] [--json] [--no-ablation]

Every table is written as a CSV file of raw units (no scaling), the label column
``target``, and given the bounds a careful person writes from domain knowledge: for every
numeric column lo = 0 (or −nice(1.5·|min|) for a column with negative values) and
hi = nice(1.5 × the column's largest value), nice() rounding up to 1, 2 or 5 × 10^k.  A
seeded permutation holds out 25 % of the rows (seed s for seeds 0–1); the other 75 % are
the user's file.  The fit is **the path of** ``dperm fit --csv FILE --target target
--bounds … --classes … --epsilon ε --seed s --save model.dperm`` (regression: ``--task
regression --label-bound …`` instead of ``--classes``; :func:`dperm.cli.fit.run_fit`,
in-process; ``cli_options`` adds any other option, e.g. ``--feature-scaling``)
and the held-out rows are scored by the saved model as ``dperm predict`` does
(:func:`dperm.load` → ``predict`` on the raw frame).  The columns of the table:

* ``dperm ε=1``, ``dperm ε=8``: held-out accuracy (R² for regression), mean of the seeds;
* ``no adaptation``: the same fit without the private column scaling of issue #36
  (``--feature-scaling public``; the clipping as the DP-SGD default has it, adaptive
  where its count is informative) — what the scaling buys;
* ``scale share``: the share of the fit's privacy budget (of z⁻², i.e. of μ² in GDP
  terms) that the private column scaling used (``diagnostics_["feature_scaling"]``);
* ``sklearn``: ``StandardScaler`` + ``LogisticRegression()`` (``LinearRegression`` for
  regression) on the raw training file, non-private;
* ``non-private, same features``: ``LogisticRegression()`` on the features dperm's schema
  produced (the file's public bounds), non-private.

Tables nobody tuned on: iris (150 × 4, 3 classes), diabetes (442 × 10, regression,
``--task regression --label-bound`` by the same rule) and ``covtype_like``, a synthetic
table shaped like the forest cover data (8 numeric columns in raw units, two categorical
columns with public category lists, binary label), drawn from a fixed seed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

TABLES = ("breast_cancer", "wine", "digits", "iris", "diabetes", "covtype_like")
#: the tables whose task is regression (``--task regression --label-bound``)
REGRESSION = ("diabetes",)
#: the public label list (``--classes``) of every classification table: its documented
#: classes (scikit-learn's ``target_names``, coded 0 … k − 1 in the file; covtype_like's
#: rule is binary) — never read off the file's labels, as ``dperm fit --csv`` requires
CLASSES = {
    "breast_cancer": [0, 1],
    "wine": [0, 1, 2],
    "digits": list(range(10)),
    "iris": [0, 1, 2],
    "covtype_like": [0, 1],
}
#: held-out share of every table
TEST_SHARE = 0.25


def nice_ceil(v: float) -> float:
    """The smallest of 1, 2, 5 × 10^k at or above v (1 for v ≤ 0)."""
    if v <= 0:
        return 1.0
    k = math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        if m * 10.0**k >= v * (1 - 1e-12):
            return float(m * 10.0**k)
    return float(10.0 ** (k + 1))  # pragma: no cover


def bounds_rule(column: pd.Series) -> tuple[float, float]:
    """(lo, hi) a careful person writes: lo = 0 (−nice(1.5·|min|) with negative values),
    hi = nice(1.5·max)."""
    lo = float(column.min())
    return (0.0 if lo >= 0 else -nice_ceil(1.5 * -lo), nice_ceil(1.5 * float(column.max())))


def _covtype_like(seed: int = 20_260_036) -> pd.DataFrame:
    """8 000 rows shaped like the forest cover table: raw-unit numeric columns, two
    categorical columns, a binary label from a fixed nonlinear rule (fixed seed)."""
    rng = np.random.default_rng(seed)
    n = 8000
    wild = rng.choice(["rawah", "neota", "comanche", "cache"], size=n, p=[0.45, 0.05, 0.4, 0.1])
    soil = rng.choice([f"s{k}" for k in range(1, 9)], size=n)
    elev = rng.normal(2950, 280, n).clip(1860, 3850)
    frame = pd.DataFrame(
        {
            "elevation": elev.round(),
            "aspect": rng.uniform(0, 360, n).round(),
            "slope": rng.gamma(3.0, 4.5, n).clip(0, 66).round(),
            "hydrology_h": rng.gamma(1.6, 170, n).clip(0, 1390).round(),
            "hydrology_v": rng.normal(45, 58, n).clip(-170, 600).round(),
            "roadways": rng.gamma(1.8, 1300, n).clip(0, 7100).round(),
            "hillshade_9am": rng.normal(212, 27, n).clip(0, 254).round(),
            "fire_points": rng.gamma(1.7, 1150, n).clip(0, 7200).round(),
            "wilderness": wild,
            "soil": soil,
        }
    )
    z = (
        (frame.elevation - 2950) / 140.0
        - 0.8 * (frame.slope - 13) / 8.0
        + 0.6 * np.cos(np.radians(frame.aspect))
        - 0.5 * (frame.hydrology_v - 45) / 58.0
        + 0.4 * np.log1p(frame.roadways) / 7.0
        + np.select([wild == "rawah", wild == "comanche"], [0.8, -0.6], 0.0)
        + 0.15 * np.array([int(s[1:]) for s in soil])
        - 0.7
    )
    frame["target"] = (z + rng.logistic(size=n) * 0.8 > 0).astype(int)
    return frame


def load_table(name: str) -> tuple[pd.DataFrame, dict]:
    """(raw frame with the label column ``target``, public category lists)."""
    from sklearn import datasets as skd

    if name == "covtype_like":
        frame = _covtype_like()
        cats = {c: sorted(frame[c].unique().tolist()) for c in ("wilderness", "soil")}
        return frame, cats
    if name == "diabetes":
        b = skd.load_diabetes(scaled=False)
        names = list(b.feature_names)
    else:
        b = getattr(skd, f"load_{name}")()
        names = [f"x{j}" for j in range(b.data.shape[1])]
    frame = pd.DataFrame(b.data, columns=names)
    frame["target"] = b.target
    return frame, {}


def split_table(name: str, seed: int):
    """(train frame, test frame, CLI schema options) of ``name`` for ``seed``."""
    frame, cats = load_table(name)
    perm = np.random.default_rng(seed).permutation(len(frame))  # public: the seed
    k = round(TEST_SHARE * len(frame))
    test, train = frame.iloc[perm[:k]], frame.iloc[perm[k:]]
    numeric = [c for c in frame.columns if c != "target" and c not in cats]
    options = {"bounds": {c: bounds_rule(frame[c]) for c in numeric}, "categories": cats}
    if name in REGRESSION:
        options["task"] = "regression"
        options["label_bound"] = nice_ceil(1.5 * float(frame["target"].abs().max()))
    else:
        options["classes"] = CLASSES[name]
    return train, test, options


def csv_dataset(name: str, seed: int = 0, folder: str | Path | None = None):
    """The :class:`~dperm.datasets.Dataset` that ``dperm fit --csv`` builds from the user's
    file of ``name`` (seed ``seed``): :func:`dperm.datasets.load_csv` with the file's
    bounds, categories and task, as :func:`dperm.cli.fit.run_fit` calls it."""
    from dperm import datasets

    train, _, options = split_table(name, seed)
    folder = Path(folder or tempfile.mkdtemp(prefix="dperm-csv-"))
    path = folder / f"{name}-{seed}.csv"
    train.to_csv(path, index=False)
    cats = options["categories"]
    return datasets.load_csv(
        path,
        "target",
        bounds=options["bounds"],
        categories=cats,
        categorical=list(cats) or None,
        task=options.get("task"),
        label_bound=options.get("label_bound"),
        classes=options.get("classes"),
    )


def _score(model, test: pd.DataFrame, regression: bool) -> float:
    X = test.drop(columns="target")
    pred = model.predict(X)
    y = test["target"].to_numpy()
    if regression:
        from sklearn.metrics import r2_score

        return float(r2_score(y, pred))
    return float(np.mean(np.asarray(pred).astype(str) == y.astype(str)))


def dperm_fit(name: str, seed: int, epsilon: float, folder: Path, **cli_options):
    """``dperm fit --csv`` on the user's file, then ``dperm predict`` on the held-out rows:
    (held-out score, the fit's JSON keys)."""
    import dperm
    from dperm.cli.fit import run_fit

    train, test, options = split_table(name, seed)
    path = folder / f"{name}-{seed}.csv"
    train.to_csv(path, index=False)
    model_path = folder / f"{name}-{seed}-{epsilon:g}.dperm"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_fit(
            csv=path, target="target", epsilon=epsilon, seed=seed, save=model_path,
            reference=False, **options, **cli_options,
        )  # fmt: skip
        model = dperm.load(model_path)
    return _score(model, test, name in REGRESSION), out, model


def baselines(name: str, seed: int) -> dict[str, float]:
    """Non-private references: scikit-learn's default on the raw file, and
    ``LogisticRegression()`` on dperm's schema features of the same file."""
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    train, test, options = split_table(name, seed)
    regression = name in REGRESSION
    cats = list(options["categories"])
    numeric = [c for c in train.columns if c != "target" and c not in cats]
    prep = make_column_transformer(
        (StandardScaler(), numeric), (OneHotEncoder(handle_unknown="ignore"), cats)
    )
    model = LinearRegression() if regression else LogisticRegression(max_iter=5000)
    sk = make_pipeline(prep, model).fit(train.drop(columns="target"), train["target"])
    ds = csv_dataset(name, seed)
    same = (LinearRegression() if regression else LogisticRegression(max_iter=5000)).fit(
        ds.X_train, ds.y_train
    )
    Xt = ds.encoder.transform(test.drop(columns="target"))
    yt = test["target"].to_numpy()
    if regression:
        from sklearn.metrics import r2_score

        same_score = float(r2_score(yt, same.predict(Xt)))
    else:
        encoded = np.unique(ds.y_train)  # the encoding of ds.label_names, in order
        names = np.asarray(ds.label_names, dtype=object)
        pred = names[np.searchsorted(encoded, same.predict(Xt))]
        same_score = float(np.mean(pred.astype(str) == yt.astype(str)))
    return {"sklearn": _score(sk, test, regression), "non_private_same_features": same_score}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default=",".join(TABLES))
    ap.add_argument("--epsilons", default="1,8")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-ablation", action="store_true", help="skip the 'no adaptation' fits")
    args = ap.parse_args(argv)
    tables = args.tables.split(",")
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    rows, t0 = [], time.perf_counter()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="dperm-bench-csv-") as tmp:
        folder = Path(tmp)
        for name in tables:
            row: dict = {"table": name}
            frame, _ = load_table(name)
            row["shape"] = f"{len(frame)} × {frame.shape[1] - 1}"
            for eps in epsilons:
                scores, shares, plain = [], [], []
                for seed in seeds:
                    score, out, _ = dperm_fit(name, seed, eps, folder)
                    scores.append(score)
                    shares.append(float(out.get("feature_scaling_share") or 0.0))
                    if not args.no_ablation:
                        off = {"feature_scaling": "public"}
                        plain.append(dperm_fit(name, seed, eps, folder, **off)[0])
                row[f"dperm eps={eps:g}"] = float(np.mean(scores))
                row[f"scale share eps={eps:g}"] = float(np.mean(shares))
                if plain:
                    row[f"no adaptation eps={eps:g}"] = float(np.mean(plain))
            refs = [baselines(name, seed) for seed in seeds]
            for key in refs[0]:
                row[key] = float(np.mean([r[key] for r in refs]))
            rows.append(row)
            if not args.json:
                print(json.dumps(row), flush=True)
    meta = {
        "seconds": round(time.perf_counter() - t0, 1),
        "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "seeds": seeds,
        "metric": "held-out accuracy (R² for regression)",
    }
    if args.json:
        print(json.dumps({"rows": rows, **meta}))
    else:
        print(_markdown(rows, epsilons, not args.no_ablation))
        print(json.dumps(meta))
    return 0


def _markdown(rows, epsilons, ablation: bool) -> str:
    cols = [f"dperm eps={e:g}" for e in epsilons]
    if ablation:
        cols += [f"no adaptation eps={e:g}" for e in epsilons]
    cols += [f"scale share eps={e:g}" for e in epsilons]
    cols += ["sklearn", "non_private_same_features"]
    head = "| table | shape | " + " | ".join(c.replace("eps=", "ε = ") for c in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 2)]
    for r in rows:
        cells = [f"{r[c]:.3f}" if c in r else "" for c in cols]
        lines.append(f"| {r['table']} | {r['shape']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
