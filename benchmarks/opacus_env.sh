#!/usr/bin/env bash
# Build the separate environment in which benchmarks/bench_mlp.py runs Opacus, the peer of
# dperm's network DP-SGD (docs/neural_networks.md, "Opacus").
#
#   bash benchmarks/opacus_env.sh          # → ${DPERM_OPACUS_ENV:-~/.cache/dperm/opacus_env}
#
# Opacus is not a dperm dependency: its wheel pulls torch, and by default a CUDA torch of
# several GB.  This environment pins the CPU build of the same torch as dperm's "torch"
# extra (so both sides of the timing use the same kernels), then Opacus on top of it.
# bench_mlp.py calls this environment's python as a subprocess on .npy files
# (benchmarks/_peer_opacus.py) and skips the peer, with a message, when it is absent.
set -euo pipefail
ENV_DIR="${DPERM_OPACUS_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dperm/opacus_env}"
PYTHON="${PYTHON:-python3}"
TORCH="${DPERM_TORCH_SPEC:-torch==2.13.0}"
"$PYTHON" -m venv "$ENV_DIR"
"$ENV_DIR/bin/python" -m pip install --quiet --upgrade pip
"$ENV_DIR/bin/python" -m pip install --quiet "$TORCH" "numpy>=1.26"
"$ENV_DIR/bin/python" -m pip install --quiet "opacus==1.6.0" "$TORCH"
"$ENV_DIR/bin/python" -c "import opacus, torch; print('opacus env ready:', '$ENV_DIR', 'opacus', opacus.__version__, 'torch', torch.__version__)"
