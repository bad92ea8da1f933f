#!/usr/bin/env bash
# The main job end to end on a fresh machine: set-up, then export a shipped
# example model (DS-CNN keyword spotting) to out/model.pte and run it on the C runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${TORCHMCU_VENV:-.venv}/bin/python" -m torchmcu.examples.host_demo "$@"
