#!/usr/bin/env bash
# Create (idempotently) a separate venv with ExecuTorch 1.5.1 for cross-checks.
#
# ExecuTorch is never installed into the project's own environment: it is only
# an interop target. We install its wheel without dependencies and add the few
# packages that `executorch.exir` needs at import time, so the venv stays small
# and its torch is the pinned CPU build (an unpinned torch pulls CUDA wheels).
#
# Usage: scripts/executorch_venv.sh [--cortex-m] [--ethos-u]
#   --cortex-m  also install what ExecuTorch's Cortex-M export flow imports
#               (torchao, tosa-tools and friends).
#   --ethos-u   also what its Ethos-U flow needs (the --cortex-m set plus Vela,
#               pinned to the version torchmcu uses so cycle estimates compare).
# Prints the venv's python path on the last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
VENV="${TORCHMCU_ET_VENV:-$ROOT/.venv-executorch}"
PY="${PYTHON:-python3}"

WITH_CORTEX_M=0
WITH_ETHOS_U=0
for arg in "$@"; do
  case "$arg" in
    --cortex-m) WITH_CORTEX_M=1 ;;
    --ethos-u) WITH_CORTEX_M=1; WITH_ETHOS_U=1 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

# Serialise concurrent callers (tests may run this from several workers).
exec 9>"$VENV.lock"
flock 9

BASE_STAMP="$VENV/.torchmcu-base-ok"
CM_STAMP="$VENV/.torchmcu-cortex-m-ok"
EU_STAMP="$VENV/.torchmcu-ethos-u-ok"

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" >&2
fi
VPY="$VENV/bin/python"

if [ ! -f "$BASE_STAMP" ]; then
  # torch pinned to the CPU build (found on disk through pip's find-links),
  # then the minimal set `executorch.exir` imports (measured: without any of
  # ruamel.yaml, flatbuffers, tabulate the import fails; numpy only silences
  # torch's warning). Dependencies first, so pip's resolver has nothing to say
  # about the wheel installed without its (large) declared dependency list.
  "$VPY" -m pip install -q "torch==2.13.0" "flatbuffers==25.2.10" "ruamel.yaml" \
    "tabulate" "numpy" >&2
  "$VPY" -m pip install -q --no-deps "executorch==1.5.1" >&2
  "$VPY" -c "from executorch.exir._serialize._program import deserialize_pte_binary" >&2
  touch "$BASE_STAMP"
fi

# ExecuTorch's selective-build tools (codegen/tools gen_oplist, gen_all_oplist,
# gen_selected_op_variants; codegen/gen.py through torchgen, which ships in the
# torch wheel) import PyYAML, which the base set above does not bring. Kept
# separate from the base stamp so venvs built before this step get it too.
TOOLS_REQS="pyyaml"
TOOLS_STAMP="$VENV/.torchmcu-tools-ok"
if [ "$(cat "$TOOLS_STAMP" 2>/dev/null)" != "$TOOLS_REQS" ]; then
  # shellcheck disable=SC2086
  "$VPY" -m pip install -q $TOOLS_REQS >&2
  "$VPY" -c "import executorch.codegen.gen, executorch.codegen.tools.gen_oplist, \
executorch.codegen.tools.gen_all_oplist, executorch.codegen.tools.gen_selected_op_variants" >&2
  echo "$TOOLS_REQS" > "$TOOLS_STAMP"
fi

# ExecuTorch's Cortex-M flow (CortexMQuantizer, CortexMPassManager) imports
# torchao and, through the Arm backend's passes, tosa_serializer (measured:
# packaging (its TOSA spec module); ethos-u-vela is only needed for its Ethos-U flow).
CM_REQS="torchao==0.18.0 tosa-tools==2026.8.0 packaging"
if [ "$WITH_CORTEX_M" = 1 ] && [ "$(cat "$CM_STAMP" 2>/dev/null)" != "$CM_REQS" ]; then
  # shellcheck disable=SC2086
  "$VPY" -m pip install -q $CM_REQS >&2
  "$VPY" -c "from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer; \
from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager" >&2
  echo "$CM_REQS" > "$CM_STAMP"
fi

# ExecuTorch's Ethos-U flow (EthosUQuantizer, EthosUPartitioner) runs Vela in-process.
EU_REQS="ethos-u-vela==5.2.0"
if [ "$WITH_ETHOS_U" = 1 ] && [ "$(cat "$EU_STAMP" 2>/dev/null)" != "$EU_REQS" ]; then
  # shellcheck disable=SC2086
  "$VPY" -m pip install -q $EU_REQS >&2
  "$VPY" -c "from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner; \
from executorch.backends.arm.quantizer import EthosUQuantizer; from ethosu.vela import vela" >&2
  echo "$EU_REQS" > "$EU_STAMP"
fi

echo "$VPY"
