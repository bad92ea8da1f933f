"""Selective build: which operators a firmware image registers and compiles.

Export writes `selected_operators.yaml` (ExecuTorch's selective-build layout) beside the .pte;
`merge` joins the lists of several models with the operators the board always needs, so one
image can run all of them; CMake turns the merged list into the image's kernel registry
(`-DTORCHMCU_OPS_YAML=...`, cmake/selective.cmake) and compiles only those kernels; the
delegate backends a program needs are listed too (build_features 'delegate:<id>') and the
image registers only the selected ones. The runtime's optional features (delegates, control
flow, String/TensorList values) are compiled in only when the list selects them
(`runtime_features`; build_features 'runtime:<feature>'), and so are the kernels' own code paths
(kernel variants, `variants`; build_features 'kernel:<operator>/<variant>').
"""

from torchmcu.selective.merge import MergeConflict, board_operators, merge, merge_files
from torchmcu.selective.oplist import (
    OpListError,
    delegate_ids,
    from_program,
    operator_names,
    program_delegates,
    program_operators,
    program_runtime_features,
    read_yaml,
    runtime_features,
    write_yaml,
)
from torchmcu.selective.table import (
    KernelTable,
    load_table,
    missing_delegates,
    missing_operators,
    select_delegates,
)

__all__ = [
    "KernelTable",
    "MergeConflict",
    "OpListError",
    "board_operators",
    "delegate_ids",
    "from_program",
    "load_table",
    "merge",
    "merge_files",
    "missing_delegates",
    "program_runtime_features",
    "runtime_features",
    "missing_operators",
    "operator_names",
    "program_delegates",
    "program_operators",
    "read_yaml",
    "select_delegates",
    "write_yaml",
]
