#!/usr/bin/env bash
# `torchmcu doctor` before anything is installed: the checks use only Python's standard
# library, so they run with the system python3 when the venv does not exist yet.
# Exits 1 when a required component is missing or has the wrong version.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TORCHMCU_VENV:-.venv}"
py=python3
[ -x "$venv/bin/python" ] && py="$venv/bin/python"
PYTHONPATH="$(pwd)/host${PYTHONPATH:+:$PYTHONPATH}" exec "$py" -m torchmcu.doctor "$@"
