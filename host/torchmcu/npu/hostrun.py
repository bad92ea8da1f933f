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

    graph: Any  # tosa_lower.TosaGraph
    inputs: list[dict[str, Any]]  # {"sizes": [...], "dim_order": [...], "dtype": "int8"}
    outputs: list[dict[str, Any]]


def _meta(t: pm.Tensor) -> dict[str, Any]:
    from torchmcu.reference.interpreter import _DTYPES

    return {"sizes": list(t.sizes), "dim_order": list(t.dim_order),
            "dtype": str(np.dtype(_DTYPES[pm.ScalarType(t.scalar_type)]))}


def delegate_io(sub: pm.Program) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Input and output tensor metadata of a sub-Program (its method's I/O order)."""
    plan = sub.execution_plan[0]
    ts = plan.values
    return ([_meta(ts[i]) for i in plan.inputs],  # type: ignore[arg-type]
            [_meta(ts[i]) for i in plan.outputs])  # type: ignore[arg-type]


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
    from torchmcu.npu.tosa_lower import run_tosa_reference

    if len(inputs) != len(d.inputs):
        raise ValueError(f"the TOSA subgraph takes {len(d.inputs)} inputs, got {len(inputs)}")
    physical = [_physical(np.asarray(x, dtype=m["dtype"]), m["dim_order"])
                for x, m in zip(inputs, d.inputs)]
    outs = run_tosa_reference(d.graph, physical)
    return [_logical(o, m) for o, m in zip(outs, d.outputs)]


def _physical_shape(meta: dict[str, Any]) -> list[int]:
    return [meta["sizes"][d] for d in meta["dim_order"]]


def tosa_native_fn(delegates: Sequence[SavedDelegate]) -> DelegateFn:
    """For native.run_program(delegate_fn=...): the C runtime hands each DelegateCall's inputs
    in physical memory layout and takes the outputs back the same way; the TOSA reference model
    works in that layout too (NHWC), so only shapes are normalised here."""
    from torchmcu.npu.tosa_lower import run_tosa_reference

    def run(index: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
        d = delegates[index]
        if len(inputs) != len(d.inputs):
            raise ValueError(f"delegate {index}: the runtime passed {len(inputs)} inputs, the saved "
                             f"TOSA subgraph takes {len(d.inputs)}")
        ins = [np.ascontiguousarray(np.asarray(x).reshape(_physical_shape(m)), dtype=m["dtype"])
               for x, m in zip(inputs, d.inputs)]
        outs = run_tosa_reference(d.graph, ins)
        return [np.ascontiguousarray(np.asarray(o).reshape(_physical_shape(m)), dtype=m["dtype"])
                for o, m in zip(outs, d.outputs)]

    return run


def tosa_delegate_fn(delegates: Sequence[SavedDelegate]) -> DelegateFn:
    """Delegate k runs delegates[k]'s TOSA graph through the TOSA reference model."""

    def run(index: int, args: list[np.ndarray]) -> list[np.ndarray]:
        d = delegates[index]
        return run_saved(d, list(args[: len(d.inputs)]))

    return run


def save_delegates(out: Path, graphs: Sequence[Any], subprograms: Sequence[pm.Program],
                   write: Callable[[Path, bytes], None]) -> None:
    """Write delegate<k>.tosa and delegate<k>.json for every subgraph into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for k, (graph, sub) in enumerate(zip(graphs, subprograms)):
        ins, outs = delegate_io(sub)
        write(out / f"delegate{k}.tosa", bytes(graph.flatbuffer))
        meta = {"delegate": k, "backend": "EthosUBackend", "tosa": f"delegate{k}.tosa",
                "inputs": ins, "outputs": outs,
                "tosa_inputs": list(graph.inputs), "tosa_outputs": list(graph.outputs)}
        write(out / f"delegate{k}.json", json.dumps(meta, indent=2).encode() + b"\n")


def load_delegates(npu_dir: str | Path, count: int) -> list[SavedDelegate]:
    """The `count` subgraphs saved in npu_dir, in delegate order."""
    from torchmcu.npu.tosa_lower import TosaGraph

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
        graph = TosaGraph(flatbuffer=(root / meta["tosa"]).read_bytes(),
                          inputs=list(meta["tosa_inputs"]), outputs=list(meta["tosa_outputs"]))
        result.append(SavedDelegate(graph, meta["inputs"], meta["outputs"]))
    return result
