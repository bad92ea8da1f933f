#!/usr/bin/env bash
# Build the native extension and install torchmcu in editable mode (Python
# sources stay live; rerun after changing C code). Serialised with a lock so
# concurrent callers do not share a half-built tree.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 9>/tmp/torchmcu-dev-install.lock
flock 9
python -m pip install -q --no-build-isolation --no-deps -e . "$@"
