#!/usr/bin/env bash
# Reproduce benchmarks/REPORT.md: the default `dperm bench` (honest protocol,
# ε ∈ {0.1, 1}, 3 repeats, every dataset present, every registered algorithm and
# the installed peers), then print the comparison with Iyengar et al. (2019).
#
#   pip install -e '.[bench]'           # optional: diffprivlib + opacus peers
#   bash benchmarks/run_bench.sh [DATA_HOME] [OUT]
#
# DATA_HOME defaults to ../shared/data; OUT to bench-out/.  The paper protocol
# (grid search selected on test accuracy: non-private tuning) takes hours:
#   dperm bench --protocol paper --epsilons 0.01,0.1,1,10 --repeats 5 --data-home DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data_home="${1:-$here/../../shared/data}"
out="${2:-bench-out}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
start=$(date +%s)
dperm bench --data-home "$data_home" --out "$out"
end=$(date +%s)
echo "wall time: $((end - start)) s"
cat "$out/comparison.md"
