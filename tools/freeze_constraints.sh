#!/usr/bin/env bash
# Regenerate constraints.txt (the pins CI and the README install with) from a
# virtual environment that has dperm installed editable with its test and docs extras
# (pip install -e ".[test,docs]"):
#
#     bash tools/freeze_constraints.sh [/path/to/venv]     # default: $VIRTUAL_ENV or /work/venv
#
# Every direct, test, docs and transitive dependency is pinned; dperm itself is left out
# (it is installed from the checkout).  Run it after changing dependencies in
# pyproject.toml, then commit constraints.txt.
set -euo pipefail
VENV="${1:-${VIRTUAL_ENV:-/work/venv}}"
cd "$(dirname "$0")/.."
{
    echo "# Pinned dependencies of dperm (direct, test, docs and transitive), used by .ci/run and"
    echo "# the README as pip's -c constraints file.  Regenerate: bash tools/freeze_constraints.sh"
    "$VENV/bin/python" -m pip freeze --exclude-editable | grep -viE '^dperm([=@ ]|$)'
} > constraints.txt.new
for pkg in ruff import-linter pytest pytest-xdist hypothesis mpmath numpy scipy scikit-learn pandas typer \
    rich matplotlib dp-accounting threadpoolctl mkdocs mkdocs-material mkdocstrings \
    mkdocstrings-python; do
    if ! grep -qi "^${pkg}==" constraints.txt.new; then
        echo "freeze_constraints: ${pkg} is not installed in $VENV; install dperm[test,docs] first" >&2
        rm -f constraints.txt.new
        exit 1
    fi
done
mv constraints.txt.new constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) pins)"
