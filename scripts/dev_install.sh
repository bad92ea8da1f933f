#!/usr/bin/env bash
# Build the native extension and install torchmcu in editable mode (Python
# sources stay live; rerun after changing C code). Uses $PYTHON, else the
# checkout's .venv, else `python`. Serialised with a lock so concurrent
# callers do not share a half-built tree.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python; fi
fi
mkdir -p build
exec 9>build/.dev-install.lock
flock 9
"$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . "$@"
