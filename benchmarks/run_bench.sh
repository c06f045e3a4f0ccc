#!/usr/bin/env bash
# Reproduce the main comparison of benchmarks/REPORT.md with one command:
#
#   bash benchmarks/run_bench.sh [DATA_HOME] [OUT]
#
# 1. the default `dperm bench` (honest protocol: documented defaults, no look at
#    the test set; ε ∈ {0.1, 1}, δ = 1/n², 3 repeats, every dataset present, the
#    default algorithms — the published comparison, objective/output perturbation,
#    DP-GD, and the "tuned privately" variants objective+tuned and output+tuned,
#    whose private random search is paid from the same ε — and the installed peers);
# 2. Adult at ε = 5 (objective perturbation against the non-private reference).
# Then prints the comparison with Iyengar et al. (2019) and the wall time.
#
#   pip install -e '.[bench]'           # optional peers: see docs/bench.md
#
# DATA_HOME defaults to ../shared/data; OUT to bench-out/.  On a shared machine run it
# with `nice -n 10`.  The paper protocol (grid search selected on test accuracy:
# non-private tuning) takes hours:
#   dperm bench --protocol paper --epsilons 0.01,0.1,1,10 --repeats 5 --data-home DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data_home="${1:-$here/../../shared/data}"
out="${2:-bench-out}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
start=$(date +%s)
dperm bench --data-home "$data_home" --out "$out" --no-progress
dperm bench --data-home "$data_home" --out "$out/adult-eps5" --datasets adult --epsilons 5 \
    --algorithms non-private,objective,objective+tuned,output,dp-sgd --no-progress
end=$(date +%s)
echo "wall time: $((end - start)) s"
cat "$out/comparison.md"
cat "$out/adult-eps5/results.md"
