"""Gallery: the privacy profile δ(ε) of one DP-SGD run.

DP-SGD (Abadi et al. 2016) is run on the built-in breast-cancer data, calibrated
to (ε, δ) = (1, 10⁻⁵) under replace-one neighbours.  Its privacy event (Poisson-
sampled Gaussian steps) is then composed in dperm's PLD accountant, and δ(ε) is
read off for a grid of ε: the whole curve of (ε, δ) pairs the run satisfies, not
just the one it was calibrated for.  (The RDP accountant refuses this event: it
has no exact RDP bound for a replace-one Poisson-subsampled Gaussian.)

Run from the repository root (a few seconds)::

    python docs/gallery/plot_privacy_profile.py

It writes ``docs/gallery/privacy_profile.png``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _figure import new_figure, save_figure

from dperm import datasets
from dperm.accounting import get_accountant
from dperm.algorithms import dp_sgd
from dperm.losses import Logistic

EPSILON, DELTA = 1.0, 1e-5
OUT = Path(__file__).with_name("privacy_profile.png")


def main() -> None:
    ds = datasets.load("breast-cancer")
    res = dp_sgd.fit(
        Logistic(),
        ds.X_train,
        ds.y_train,
        epsilon=EPSILON,
        delta=DELTA,
        data_norm=ds.row_norm_bound,
        neighbouring="replace-one",
        random_state=0,
    )
    event = res.event
    print("event:", event)
    grid = np.linspace(0.05, 2.0, 79)
    fig, ax = new_figure()
    acc = get_accountant("pld", neighbouring=event.neighbouring).compose(event)
    deltas = np.array([acc.get_delta(float(e)) for e in grid])
    ax.semilogy(grid, deltas, label="δ(ε), PLD accountant")
    print(f"pld: δ({EPSILON}) = {acc.get_delta(EPSILON):.3g}")
    ax.axvline(EPSILON, color="grey", linestyle=":")
    ax.axhline(DELTA, color="grey", linestyle=":")
    ax.plot([EPSILON], [DELTA], "k*", markersize=10, label=f"calibrated: ({EPSILON}, {DELTA:g})")
    d = res.diagnostics
    ax.set_title(
        f"DP-SGD on breast-cancer: σ = {d['noise_multiplier']:.3g}, "
        f"q = {d['sampling_rate']:.3g}, T = {d['steps']}",
        fontsize="medium",
    )
    ax.set_xlabel("ε (replace-one)")
    ax.set_ylabel("δ(ε)")
    ax.set_ylim(1e-12, 1.0)
    save_figure(fig, ax, OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
