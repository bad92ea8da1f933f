#!/usr/bin/env bash
# Installs everything torchmcu needs on a fresh Debian 12 machine (run as root):
# the Arm cross toolchain, QEMU, clang (sanitizer builds), the Python packages,
# and torchmcu itself in editable mode. Idempotent: quick when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

debian_packages=(gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm clang cmake ninja-build)
missing=()
for pkg in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  step "Installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

step "Installing Python packages (torch pinned: an unpinned torch pulls a CUDA build)"
python -m pip install -q --disable-pip-version-check \
  torch==2.13.0 torchao==0.18.0 numpy flatbuffers pyyaml \
  scikit-build-core pytest hypothesis tosa-tools==2026.8.0 ethos-u-vela==5.2.0

step "Building and installing torchmcu (editable)"
bash scripts/dev_install.sh
python -c "import torchmcu, torchmcu._native; print('torchmcu', torchmcu.__version__, 'ready')"
