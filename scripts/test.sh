#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, then pytest in the venv.
# pytest exits non-zero (5) when it collects nothing, so an empty run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TOSA_MODEL_NO_BACKTRACE=1
exec "${TORCHMCU_VENV:-.venv}/bin/python" -m pytest tests -q -p no:cacheprovider "$@"
