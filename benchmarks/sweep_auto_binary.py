"""The sweep behind the binary branch of ``mechanism="auto"`` (issue #20), on TRAINING rows only.

    python benchmarks/sweep_auto_binary.py --data-home DATA_HOME \
        [--cells adult:0.1,kddcup99:0.1,...] [--seeds 0,1,2,3] [--grid]

Every cell splits the loader's *training* rows once, with a public permutation (seed
20 2026), into 80 % fit / 20 % validation, and scores each candidate on the validation
part (mean over the noise seeds).  The test split is never read.  The synthetic sets are
drawn fresh (``random_state=12345``, not the bench's seed).  Candidates, all through
``DPLogisticRegression`` with replace-one, δ = 1/n² (n = the fit part):

* ``auto`` (the rule as it stands), ``amp``, ``objective``, ``dp-sgd`` (the library's
  schedule: batch √n, 2 + 2ε epochs, C = L, η = 1/β);
* ``rule``: :func:`dperm.estimators._auto.binary_dp_sgd_schedule` spelled out (batch
  min(n/5, 160/√ε), 15 epochs, C = 0.27·L, η = 0.65/C);
* with ``--grid``, the neighbourhood of the rule on Adult-sized cells: C/L ∈ {0.18,
  0.27, 0.45}, η·C ∈ {0.5, 0.65, 1.0}, batch 512 / 15 epochs and 1024 / 30 epochs.

The numbers of the run that fixed the rule are in ``docs/choosing_a_mechanism.md``.
"""

from __future__ import annotations

import math

from _sweep import load_average, public_split, score_candidate, sgd_candidate, sweep_parser

CELLS = ",".join(
    f"{name}:{eps}"
    for name in ("adult", "kddcup99", "synthetic-l", "synthetic-h")
    for eps in (0.1, 1)
)


def _split(name, data_home):
    from dperm import datasets

    if name.startswith("synthetic"):
        ds = datasets.load(name, random_state=12345)  # fresh data, not the bench's
    else:
        ds = datasets.load(name, data_home=data_home)
    return ds, public_split(ds.X_train, ds.y_train)


def _candidates(n, eps, L, grid: bool) -> dict[str, dict]:
    b_rule = max(min(16, n), min(n // 5, round(160 / math.sqrt(eps))))
    out = {
        "auto": {},
        "amp": {"mechanism": "amp"},
        "objective": {"mechanism": "objective"},
        "dp-sgd (library)": {"mechanism": "dp-sgd"},
        "rule": sgd_candidate(L, b_rule, 15, 0.27, 0.65),
    }
    if grid:
        for b, epochs in ((512, 15), (1024, 30)):
            for frac in (0.18, 0.27, 0.45):
                for step in (0.5, 0.65, 1.0):
                    out[f"b{b} E{epochs} C={frac}L ηC={step}"] = sgd_candidate(
                        L, b, epochs, frac, step
                    )
    return out


def main(argv=None) -> int:
    args = sweep_parser(__doc__.splitlines()[0], CELLS, "0,1,2,3").parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    load_average("start")
    for cell in args.cells.split(","):
        name, eps = cell.split(":")
        eps = float(eps)
        ds, data = _split(name, args.data_home)
        n, d = data[0].shape
        L = math.hypot(ds.row_norm_bound, 0.5)  # logistic: L = R with the intercept column
        s = n * eps / math.sqrt(d + 1)
        for label, kw in _candidates(n, eps, L, args.grid).items():
            params = dict(epsilon=eps, data_norm=ds.row_norm_bound, classes=list(ds.classes))
            prefix = f"{name:<12} ε={eps:<4g} nε/√D={s:<7.0f}"
            score_candidate(prefix, label, {**params, **kw}, seeds, data)
    load_average("end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
