#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, then pytest in the venv.
# pytest exits non-zero (5) when it collects nothing, so an empty run fails (with
# pytest-xdist too: the controller exits 5 when the workers collect nothing).
#
# Parallel by default (pytest-xdist): one worker per core, at most 4 (each worker holds torch;
# TORCHMCU_TEST_WORKERS=N overrides), and --dist loadfile, so each test file runs whole on one
# worker and its module fixtures (exports, firmware builds, QEMU runs) are made once.
# Serial: pass -n 0, or -p no:xdist (then no xdist option is added).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TOSA_MODEL_NO_BACKTRACE=1
xdist=(-n "${TORCHMCU_TEST_WORKERS:-$(($(nproc) < 4 ? $(nproc) : 4))}" --dist loadfile)
prev=""
for arg in "$@"; do
  if [[ "$arg" == "-pno:xdist" || ("$prev" == "-p" && "$arg" == "no:xdist") ]]; then xdist=(); fi
  prev="$arg"
done
exec "${TORCHMCU_VENV:-.venv}/bin/python" -m pytest tests -q -p no:cacheprovider "${xdist[@]}" "$@"
