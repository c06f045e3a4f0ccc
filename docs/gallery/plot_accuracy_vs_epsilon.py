"""Gallery: test accuracy against ε on the built-in breast-cancer data.

Each private mechanism is fitted through ``DPLogisticRegression`` at every ε of a
grid, with several seeds; the plot shows the median and the inter-quartile range,
and the non-private logistic regression (scikit-learn, C = 1, same features) as a
dashed line.  Every fit uses the dataset's public schema (``data_norm`` and the
label set), δ = 1/n² where a mechanism needs one, and replace-one neighbours.

Run from the repository root (about 30 s on one core)::

    python docs/gallery/plot_accuracy_vs_epsilon.py
    python docs/gallery/plot_accuracy_vs_epsilon.py --dataset adult --data-home DIR

The first writes ``docs/gallery/accuracy_vs_epsilon.png``; the second (UCI Adult,
30,162 training rows, read from ``DIR``; under a minute: three mechanisms without
DP-SGD, three ε, three seeds) writes ``docs/gallery/accuracy_vs_epsilon_adult.png``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from _figure import new_figure, save_figure
from sklearn.linear_model import LogisticRegression

from dperm import DPLogisticRegression, datasets
from dperm.exceptions import ClippingWarning

#: dataset -> (ε grid, mechanisms, seeds, output file)
CONFIGS = {
    "breast-cancer": (
        (0.1, 0.3, 1.0, 3.0, 10.0),
        ("objective", "output", "amp-nt", "dp-sgd"),
        range(10),
        "accuracy_vs_epsilon.png",
    ),
    "adult": (
        (0.1, 1.0, 10.0),
        ("objective", "output", "amp-nt"),
        range(3),
        "accuracy_vs_epsilon_adult.png",
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(CONFIGS), default="breast-cancer")
    parser.add_argument("--data-home", default=None)
    args = parser.parse_args()
    EPSILONS, MECHANISMS, SEEDS, name = CONFIGS[args.dataset]
    OUT = Path(__file__).with_name(name)
    ds = datasets.load(args.dataset, data_home=args.data_home)
    nonprivate = (
        LogisticRegression(C=1.0, max_iter=1000)
        .fit(ds.X_train, ds.y_train)
        .score(ds.X_test, ds.y_test)
    )
    fig, ax = new_figure()
    t0 = time.perf_counter()
    for mechanism in MECHANISMS:
        acc = np.empty((len(EPSILONS), len(SEEDS)))
        for i, eps in enumerate(EPSILONS):
            for j, seed in enumerate(SEEDS):
                clf = DPLogisticRegression(
                    epsilon=eps,
                    mechanism=mechanism,
                    data_norm=ds.row_norm_bound,
                    classes=ds.classes,
                    random_state=seed,
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ClippingWarning)
                    clf.fit(ds.X_train, ds.y_train)
                acc[i, j] = clf.score(ds.X_test, ds.y_test)
        q25, med, q75 = np.percentile(acc, [25, 50, 75], axis=1)
        line = ax.plot(EPSILONS, med, marker="o", label=mechanism)[0]
        ax.fill_between(EPSILONS, q25, q75, color=line.get_color(), alpha=0.15)
        print(f"{mechanism:>10}: median accuracy {np.round(med, 3).tolist()}")
    ax.axhline(nonprivate, color="black", linestyle="--", label="non-private")
    ax.set_xscale("log")
    ax.set_xlabel("ε (replace-one; δ = 1/n² where needed)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{args.dataset} (n_train = {ds.X_train.shape[0]}), {len(SEEDS)} seeds")
    save_figure(fig, ax, OUT, legend_loc="lower right")
    print(f"non-private accuracy {nonprivate:.3f}; {time.perf_counter() - t0:.1f} s; wrote {OUT}")


if __name__ == "__main__":
    main()
