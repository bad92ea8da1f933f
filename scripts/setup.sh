#!/usr/bin/env bash
# Installs everything torchmcu needs on a fresh Debian 12 machine (run as root):
# the Arm cross toolchain, QEMU, clang (sanitizer and fuzz builds), Chromium
# (renders the HTML report in its test), and a Python venv
# (.venv, or $TORCHMCU_VENV) holding the pinned Python packages and torchmcu
# itself in editable mode, then checks the result with torchmcu doctor (exit 1 if
# anything required is still missing). Idempotent: quick when everything is present.
# A venv per checkout keeps two clones (say, CI's and yours) from sharing one
# editable install.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

debian_packages=(gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm clang libclang-rt-14-dev cmake ninja-build python3-venv chromium)
missing=()
for pkg in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  step "Installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

venv="${TORCHMCU_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
  step "Creating the Python venv $venv"
  python3 -m venv "$venv"
fi
py="$venv/bin/python"

stamp="$venv/.torchmcu-requirements"
# One list, read by torchmcu doctor too (torch pinned: an unpinned torch pulls a CUDA build).
requirements=$(sed -e 's/#.*//' host/torchmcu/requirements.txt | xargs)
if [ "$(cat "$stamp" 2>/dev/null)" != "$requirements" ]; then
  step "Installing Python packages (torch pinned: an unpinned torch pulls a CUDA build)"
  # shellcheck disable=SC2086
  "$py" -m pip install -q --disable-pip-version-check $requirements
  echo "$requirements" > "$stamp"
fi

step "Building and installing torchmcu (editable)"
PYTHON="$py" bash scripts/dev_install.sh
"$py" -c "import torchmcu, torchmcu._native; print('torchmcu', torchmcu.__version__, 'installed in $venv')"

step "Checking the machine (torchmcu doctor)"
bash scripts/doctor.sh
