#!/usr/bin/env bash
# The main job end to end on a fresh machine: set-up, then train a small CNN on
# scikit-learn's bundled 8x8 digits, quantize and export it for Corstone-300,
# build the firmware, run it on QEMU and print fp32 / host int8 / device accuracy.
# Options go to examples/digits/demo.py (e.g. --images 300).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${TORCHMCU_VENV:-.venv}/bin/python" examples/digits/demo.py "$@"
