"""Running NPU programs on the host: each delegate through our reference or the TOSA model.

The .pte holds only Vela blobs, which nothing here can execute. export keeps two runnable
forms of every subgraph: the carved sub-Program (run by the reference interpreter: our integer
semantics) and its TOSA flatbuffer, saved beside the .pte as ``<name>.npu/delegate<k>.tosa``
with ``delegate<k>.json`` (I/O order, sizes and dim orders), run by the TOSA reference model.
For the reference interpreter both are offered as delegate functions
``fn(delegate_index, args) -> outputs`` taking every argument of the DelegateCall in logical
order ([inputs..., outputs..., scratch]) and returning the outputs in logical order; for the C
runtime (native.run_program) `tosa_native_fn` takes the call's inputs in physical layout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from torchmcu.pte import program as pm

DelegateFn = Callable[[int, list[np.ndarray]], list[np.ndarray]]


@dataclass
class SavedDelegate:
    """One subgraph as saved beside the .pte: its TOSA graph and I/O tensor metadata."""

    graph: Any  # tosa.lower.TosaGraph
    inputs: list[dict[str, Any]]  # {"sizes": [...], "dim_order": [...], "dtype": "int8"}
    outputs: list[dict[str, Any]]


def _meta(t: pm.Tensor) -> dict[str, Any]:
    from torchmcu.reference.interpreter import _DTYPES

    return {
        "sizes": list(t.sizes),
        "dim_order": list(t.dim_order),
        "dtype": str(np.dtype(_DTYPES[pm.ScalarType(t.scalar_type)])),
    }


def delegate_io(sub: pm.Program) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Input and output tensor metadata of a sub-Program (its method's I/O order)."""
    plan = sub.execution_plan[0]
    ts = plan.values
    return (
        [_meta(ts[i]) for i in plan.inputs],  # type: ignore[arg-type]
        [_meta(ts[i]) for i in plan.outputs],
    )  # type: ignore[arg-type]


def subprogram_delegate_fn(subprograms: Sequence[pm.Program]) -> DelegateFn:
    """Delegate k runs subprograms[k] through the reference interpreter."""
    from torchmcu.reference.interpreter import run_program

    def run(index: int, args: list[np.ndarray]) -> list[np.ndarray]:
        sub = subprograms[index]
        n_in = len(sub.execution_plan[0].inputs)
        return run_program(sub, list(args[:n_in]))

    return run


def _physical(x: np.ndarray, dim_order: Sequence[int]) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x, tuple(dim_order))) if x.ndim else x


def _logical(x: np.ndarray, meta: dict[str, Any]) -> np.ndarray:
    order = meta["dim_order"]
    physical = np.asarray(x).reshape([meta["sizes"][d] for d in order])
    return np.ascontiguousarray(np.transpose(physical, np.argsort(order)))


def run_saved(d: SavedDelegate, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """One subgraph on logical-order inputs through the TOSA reference model."""
    from torchmcu.npu.tosa.lower import run_tosa_reference

    if len(inputs) != len(d.inputs):
        raise ValueError(f"the TOSA subgraph takes {len(d.inputs)} inputs, got {len(inputs)}")
    physical = [
        _physical(np.asarray(x, dtype=m["dtype"]), m["dim_order"]) for x, m in zip(inputs, d.inputs)
    ]
    outs = run_tosa_reference(d.graph, physical)
    return [_logical(o, m) for o, m in zip(outs, d.outputs)]


def _physical_shape(meta: dict[str, Any]) -> list[int]:
    return [meta["sizes"][d] for d in meta["dim_order"]]


def tosa_native_fn(delegates: Sequence[SavedDelegate]) -> DelegateFn:
    """For native.run_program(delegate_fn=...): the C runtime hands each DelegateCall's inputs
    in physical memory layout and takes the outputs back the same way; the TOSA reference model
    works in that layout too (NHWC), so only shapes are normalised here."""
    from torchmcu.npu.tosa.lower import run_tosa_reference

    def run(index: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
        d = delegates[index]
        if len(inputs) != len(d.inputs):
            raise ValueError(
                f"delegate {index}: the runtime passed {len(inputs)} inputs, the saved "
                f"TOSA subgraph takes {len(d.inputs)}"
            )
        ins = [
            np.ascontiguousarray(np.asarray(x).reshape(_physical_shape(m)), dtype=m["dtype"])
            for x, m in zip(inputs, d.inputs)
        ]
        outs = run_tosa_reference(d.graph, ins)
        return [
            np.ascontiguousarray(np.asarray(o).reshape(_physical_shape(m)), dtype=m["dtype"])
            for o, m in zip(outs, d.outputs)
        ]

    return run


def tosa_delegate_fn(delegates: Sequence[SavedDelegate]) -> DelegateFn:
    """Delegate k runs delegates[k]'s TOSA graph through the TOSA reference model."""

    def run(index: int, args: list[np.ndarray]) -> list[np.ndarray]:
        d = delegates[index]
        return run_saved(d, list(args[: len(d.inputs)]))

    return run


def delegate_files(
    out: Path, graphs: Sequence[Any], subprograms: Sequence[pm.Program]
) -> dict[Path, bytes]:
    """delegate<k>.tosa and delegate<k>.json of every subgraph, as paths in `out` -> bytes
    (written together with the program by ExportedModel.save)."""
    files: dict[Path, bytes] = {}
    for k, (graph, sub) in enumerate(zip(graphs, subprograms)):
        ins, outs = delegate_io(sub)
        files[out / f"delegate{k}.tosa"] = bytes(graph.flatbuffer)
        meta = {
            "delegate": k,
            "backend": "EthosUBackend",
            "tosa": f"delegate{k}.tosa",
            "inputs": ins,
            "outputs": outs,
            "tosa_inputs": list(graph.inputs),
            "tosa_outputs": list(graph.outputs),
        }
        files[out / f"delegate{k}.json"] = json.dumps(meta, indent=2).encode() + b"\n"
    return files


def stale_delegate_files(out: Path) -> list[Path]:
    """The delegate files an earlier export left in `out` (it may have had more subgraphs)."""
    return [*out.glob("delegate*.tosa"), *out.glob("delegate*.json")] if out.is_dir() else []


def load_delegates(npu_dir: str | Path, count: int) -> list[SavedDelegate]:
    """The `count` subgraphs saved in npu_dir, in delegate order."""
    from torchmcu.npu.tosa.lower import TosaGraph

    root = Path(npu_dir)
    result = []
    for k in range(count):
        meta_path = root / f"delegate{k}.json"
        if not meta_path.is_file():
            raise FileNotFoundError(
                f"{meta_path} is missing: an NPU program runs on the host with the TOSA graphs "
                "export saved beside it (<name>.npu/)"
            )
        meta = json.loads(meta_path.read_text())
        graph = TosaGraph(
            flatbuffer=(root / meta["tosa"]).read_bytes(),
            inputs=list(meta["tosa_inputs"]),
            outputs=list(meta["tosa_outputs"]),
        )
        result.append(SavedDelegate(graph, meta["inputs"], meta["outputs"]))
    return result


def reference_outputs(
    cpu_program: pm.Program, sample: Sequence[Any], io_quant: Sequence[dict[str, Any]] | None
) -> list[np.ndarray]:
    """Outputs of the CPU-only program in the reference interpreter for one sample (float
    samples of int8 inputs are quantized with the export report's input qparams)."""
    from torchmcu.pte.bundled import _quantize_input
    from torchmcu.reference.interpreter import _DTYPES, run_program

    plan = cpu_program.execution_plan[0]
    arrays = []
    for i, (x, vi) in enumerate(zip(sample, plan.inputs)):
        arr = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
        t = plan.values[vi]
        assert isinstance(t, pm.Tensor)
        if t.scalar_type == pm.ScalarType.CHAR and arr.dtype.kind == "f":
            if io_quant is None:
                raise ValueError(f"input {i}: float data for an int8 input needs its qparams")
            arr = _quantize_input(arr, io_quant[i])
        arrays.append(arr.astype(_DTYPES[pm.ScalarType(t.scalar_type)], copy=False))
    return run_program(cpu_program, arrays)


def check_bundle(bpte: bytes, npu_dir: str | Path) -> list[str]:
    """Run every test case of a bundled NPU program on the C host runtime, delegates through
    the TOSA reference model on the subgraphs in npu_dir; the mismatches (empty: all pass,
    bit-exact)."""
    from torchmcu import native
    from torchmcu.pte.bundled import parse_bundled
    from torchmcu.pte.reader import parse

    bp = parse_bundled(bpte)
    count = sum(len(p.delegates) for p in parse(bp.program).execution_plan)
    fn = tosa_native_fn(load_delegates(npu_dir, count)) if count else None
    failures = []
    for suite in bp.method_test_suites:
        for c, case in enumerate(suite.test_cases):
            inputs = [v.to_numpy() for v in case.inputs]  # type: ignore[union-attr]
            got = native.run_program(bp.program, inputs, suite.method_name, delegate_fn=fn)
            for k, (g, e) in enumerate(zip(got, case.expected_outputs)):
                want = e.to_numpy()  # type: ignore[union-attr]
                if g.shape != want.shape or not np.array_equal(g, want):
                    diff = int(np.count_nonzero(g != want)) if g.shape == want.shape else -1
                    failures.append(
                        f"{suite.method_name} case {c} output {k}: "
                        f"{diff if diff >= 0 else 'shape'} mismatch"
                    )
    return failures
