#!/usr/bin/env bash
# Build the separate environment in which the benchmarks run the peers that cannot
# coexist with dperm's pinned scikit-learn (docs/bench.md, "Peers").
#
#   bash benchmarks/peer_env.sh            # → ${DPERM_PEER_ENV:-~/.cache/dperm/peer_env}
#
# diffprivlib 0.6.6 (its latest release) imports `DOUBLE` from sklearn.tree._tree, which
# scikit-learn 1.9 (dperm's pin) no longer has; it works with scikit-learn 1.5.  The
# benchmarks call this environment's python as a subprocess on .npy files
# (benchmarks/_peers.py) and skip the peer, with a message, when it is absent.
set -euo pipefail
ENV_DIR="${DPERM_PEER_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dperm/peer_env}"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m venv "$ENV_DIR"
"$ENV_DIR/bin/python" -m pip install --quiet --upgrade pip
"$ENV_DIR/bin/python" -m pip install --quiet \
    "diffprivlib==0.6.6" "scikit-learn==1.5.2" "numpy>=1.26,<2.1" "scipy>=1.11,<1.15"
"$ENV_DIR/bin/python" -c "import diffprivlib, sklearn; print('peer env ready:', '$ENV_DIR', 'diffprivlib', diffprivlib.__version__, 'scikit-learn', sklearn.__version__)"
