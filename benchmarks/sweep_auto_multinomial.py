"""The sweep behind the multinomial branch of ``mechanism="auto"`` (issue #20), on TRAINING rows.

    python benchmarks/sweep_auto_multinomial.py --data-home DATA_HOME \
        [--cells mnist:1,synthetic-multi:0.1,...] [--seeds 0,1] [--only rule,amp] [--grid]
        [--output-grid]

Every cell splits the loader's *training* rows once, with a public permutation (seed
20 2026), into fit / validation parts (MNIST: 50 000 / 10 000; otherwise 80 % / 20 %)
and scores each candidate on the validation part (mean over the noise seeds).  The test
split is never read.  Synthetic cells ``synthetic-multi-<n>-<d>-<k>`` are drawn fresh
(``make_classification``, ``random_state=12345``).
Candidates, all through ``DPLogisticRegression(classes=...)`` (multinomial), replace-one,
δ = 1/n² (n = the fit part):

* ``auto`` (the rule as it stands), ``amp``, ``dp-sgd (library)`` (batch √n, 2 + 2ε
  epochs, C = L, η = 1/β);
* ``rule``: :func:`dperm.estimators._auto.multi_dp_sgd_schedule` spelled out through
  ``clipping_norm`` / ``learning_rate`` (batch min(n/5, 160/√ε), 15 epochs, C = 0.15·L,
  η = 3/C, L = √2·R the softmax Lipschitz bound over the augmented row bound R);
* with ``--grid``: clipped DP-SGD with C/L, η·C, batch and epochs from ``GRID``, plus
  any ``--points b:E:C/L:ηC;...``; ``--only`` keeps the labels containing one of its
  comma-separated substrings;
* ``output``: output perturbation named at its defaults (rows clipped to
  :func:`dperm.estimators._auto.output_clip_fraction` of their bound, the Λ rule there);
  with ``--output-grid`` also numeric Λ (multiples of the unclipped rule, no clipping)
  and other clipping fractions, with and without the smaller intercept column
  (``_scale``: ``OUTPUT_INTERCEPT_SCALE``; issue #30: ``--only output --output-grid``).

The numbers of the run that fixed the rule are in ``docs/choosing_a_mechanism.md``.
"""

from __future__ import annotations

import math

import numpy as np
from _sweep import load_average, public_split, score_candidate, sgd_candidate, sweep_parser

CELLS = ",".join(
    [f"mnist:{eps}" for eps in (0.1, 1, 8)]
    + [f"synthetic-multi-20000-40-5:{eps}" for eps in (0.1, 1, 8)]
    + [f"synthetic-multi-5000-100-10:{eps}" for eps in (1, 8)]
    + [f"synthetic-multi-2000-20-3:{eps}" for eps in (0.1, 1)]
    + [f"synthetic-multi-100000-20-3:{eps}" for eps in (1, 8)]
)


def _synthetic_multi(n, d, k):
    """``make_classification`` with k classes (seed 12345), rows divided by the public
    constant 2·√E‖x‖² of the generator (as ``dperm.datasets.synthetic``) and projected
    onto the unit ball; returns (X, y, classes, row bound 1)."""
    from sklearn.datasets import make_classification

    from dperm.datasets.synthetic import _synthetic_second_moment

    X, y = make_classification(n_samples=n, n_features=d, n_informative=d // 2,
                               n_redundant=2, n_classes=k, class_sep=1.0,
                               random_state=12345)  # fmt: skip
    X /= 2.0 * math.sqrt(_synthetic_second_moment(d, d // 2, 2, 1.0))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    return X, y, list(range(k)), 1.0


def _split(name, data_home):
    """(X_fit, y_fit, X_val, y_val), the classes and the public row bound."""
    from dperm import datasets

    if name.startswith("synthetic-multi"):  # synthetic-multi-<n>-<d>-<k>
        n, d, k = (int(v) for v in name.split("-")[2:])
        X, y, classes, bound = _synthetic_multi(n, d, k)
    else:
        ds = datasets.load(name, data_home=data_home)
        X, y, classes, bound = ds.X_train, ds.y_train, list(ds.classes), ds.row_norm_bound
    return public_split(X, y, 10_000 if name == "mnist" else None), classes, bound


GRID = [  # (batch, epochs, C/L, η·C): the neighbourhood of the rule at MNIST ε = 1
    (160, 15, 0.27, 0.65),  # the binary rule's clipping and step
    *((160, 15, frac, step) for frac in (0.1, 0.15, 0.2, 0.27) for step in (1.3, 2.5, 5.0)),
    (80, 15, 0.27, 2.5),
    (320, 15, 0.27, 2.5),
    (160, 30, 0.27, 2.5),
    (500, 15, 0.1, 1.5),
]


#: multiples of the output-perturbation Λ rule (unclipped rows) tried with ``--output-grid``
OUTPUT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: row-clipping fractions f (rows clipped to f·R, Λ the rule at f·R) of ``--output-grid``
OUTPUT_CLIPS = (1.0, 0.7, 0.5, 0.4, 0.25)


def _output_candidates(n, D, k, eps, R, grid):
    """``output``: the named mechanism at its defaults (row clipping and the Λ rule); with
    ``grid`` the unclipped rule's Λ times each of :data:`OUTPUT_FACTORS` (a numeric Λ:
    no clipping; R the augmented row bound) and the default with each clipping fraction
    of :data:`OUTPUT_CLIPS` (key ``_clip``: ``OUTPUT_CLIP_FRACTION`` for that run), and
    two with the intercept column left at s (``_scale``: ``OUTPUT_INTERCEPT_SCALE``)."""
    from dperm.estimators._alpha_rules import output_alpha_rule

    out = {"output": {"mechanism": "output"}}
    if grid:
        lam = output_alpha_rule(n, D, eps, R, n_classes=k)
        for f in OUTPUT_FACTORS:
            out[f"output Λ={f:g}×rule ({f * lam:.2e})"] = dict(mechanism="output", alpha=f * lam)
        for f in OUTPUT_CLIPS:
            out[f"output clip f={f:g}"] = dict(mechanism="output", _clip=f)
        for f in (0.4, 0.2):  # the intercept column left at intercept_scaling (s′ = s)
            out[f"output clip f={f:g} s′=s"] = dict(mechanism="output", _clip=f, _scale=1e9)
    return out


def _candidates(n, eps, L, grid, only, output=(), output_grid=False):
    from dperm.estimators._auto import multi_dp_sgd_schedule

    out = {
        "auto": {},
        "amp": {"mechanism": "amp"},
        "dp-sgd (library)": {"mechanism": "dp-sgd"},
        **_output_candidates(*output, grid=output_grid),
    }
    r = multi_dp_sgd_schedule(n, eps)
    out["rule"] = sgd_candidate(L, r["batch_size"], r["epochs"], r["clip_fraction"], r["step_clip"])
    if grid:
        for b, epochs, frac, step in GRID:
            out[f"b{b} E{epochs} C={frac}L ηC={step}"] = sgd_candidate(L, b, epochs, frac, step)
    if only:
        out = {k_: v for k_, v in out.items() if any(o in k_ for o in only)}
    return out


def main(argv=None) -> int:
    from dperm import DPLogisticRegression
    from dperm.backends.rows import augmented_bound
    from dperm.estimators import _auto, _output_rows
    from dperm.losses import Softmax

    ap = sweep_parser(__doc__.splitlines()[0], CELLS, "0,1,2")
    ap.add_argument("--only", default="", help="comma-separated substrings of labels")
    ap.add_argument("--output-grid", action="store_true", help="output perturbation's Λ grid")
    ap.add_argument("--points", default="", help="extra b:E:C/L:ηC points, ';'-separated")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    only = [o for o in args.only.split(",") if o]
    for pt in filter(None, args.points.split(";")):
        b, epochs, frac, step = pt.split(":")
        GRID.append((int(b), int(epochs), float(frac), float(step)))
    default_clip, default_scale = _auto.OUTPUT_CLIP_FRACTION, _auto.OUTPUT_INTERCEPT_SCALE
    load_average("start")
    for cell in args.cells.split(","):
        name, eps = cell.split(":")
        eps = float(eps)
        data, classes, bound = _split(name, args.data_home)
        n, d = data[0].shape
        k = len(classes)
        # L over the augmented row (the intercept column), as the estimator computes it
        scaling = DPLogisticRegression().intercept_scaling
        R = augmented_bound(bound, scaling)
        L = Softmax(k).lipschitz(R)
        s = n * eps / math.sqrt((d + 1) * k)
        output = (n, d + 1, k, eps, R)
        cands = _candidates(n, eps, L, args.grid, only, output, args.output_grid)
        for label, kw in cands.items():
            kw = dict(kw)
            _auto.OUTPUT_CLIP_FRACTION = kw.pop("_clip", default_clip)
            _output_rows.OUTPUT_INTERCEPT_SCALE = kw.pop("_scale", default_scale)
            params = dict(epsilon=eps, data_norm=bound, classes=classes, **kw)
            prefix = f"{name:<16} ε={eps:<4g} nε/√(Dk)={s:<7.0f}"
            score_candidate(prefix, label, params, seeds, data)
    load_average("end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
