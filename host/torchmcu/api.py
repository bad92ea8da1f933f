"""The user-facing API: export a model to a .pte, save it, run it on the host."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from torchmcu import progress
from torchmcu.boards import Board, get_board
from torchmcu.pte.program import Program


@dataclass
class ExportedModel:
    """A lowered, memory-planned program and what export measured about it."""

    program: Program
    pte_bytes: bytes
    board: Board
    report: dict[str, Any] = field(default_factory=dict)
    # The converted PT2E graph (float ops between quantize/dequantize nodes): torchao's
    # fake-quantized model, the float reference the integer program is measured against.
    quantized_model: Any = None
    # export(npu=...): the placement decisions and each delegate's sub-Program, TOSA graph and
    # Vela result (torchmcu.npu.partition.NpuPartition); None for a CPU-only program.
    npu: Any = None

    def reference_delegate_fn(self) -> Any:
        """Runs this program's DelegateCalls in the reference interpreter through the carved
        sub-Programs (torchmcu.reference.interpreter.run_program(..., delegate_fn=...))."""
        from torchmcu.npu.hostrun import subprogram_delegate_fn

        return subprogram_delegate_fn([s.subprogram for s in self.npu.subgraphs] if self.npu else [])

    def tosa_delegate_fn(self) -> Any:
        """Runs this program's DelegateCalls with the TOSA reference model (the NPU's stand-in)."""
        from torchmcu.npu.hostrun import SavedDelegate, delegate_io, tosa_delegate_fn

        saved = []
        for s in self.npu.subgraphs if self.npu else []:
            ins, outs = delegate_io(s.subprogram)
            saved.append(SavedDelegate(s.tosa, ins, outs))
        return tosa_delegate_fn(saved)

    def save(
        self,
        out_dir: str | os.PathLike[str],
        name: str = "model",
        *,
        bundle_samples: Sequence[Sequence[Any]] | None = None,
    ) -> Path:
        """Write `<name>.pte`, `<name>.report.json` and `selected_operators.yaml` (the program's
        operators for a selective firmware build) into out_dir; returns the .pte path.
        bundle_samples: also write `<name>.bpte`, the program with these inputs as test cases.
        An NPU program also gets `<name>.npu/delegate<k>.tosa` + `.json` (each subgraph's TOSA
        graph and I/O order) for host verification; they are never part of the .pte.

        All files or none: they are built in memory first (a bundle whose samples do not fit
        the program fails here, before anything is written), then written to temporary names
        and renamed (torchmcu.filesets.write_all); any failure or interruption removes them.
        """
        from torchmcu.filesets import write_all
        from torchmcu.selective.oplist import dumps, from_program

        check_output_name(name)
        out = Path(out_dir)
        pte_path = out / f"{name}.pte"
        files: dict[Path, bytes] = {}
        stale: list[Path] = []
        if self.npu is not None:
            from torchmcu.npu.hostrun import delegate_files, stale_delegate_files

            subs = self.npu.subgraphs
            npu_dir = out / f"{name}.npu"
            graphs, subprograms = [s.tosa for s in subs], [s.subprogram for s in subs]
            files.update(delegate_files(npu_dir, graphs, subprograms))
            stale = stale_delegate_files(npu_dir)
        files[pte_path] = self.pte_bytes
        if bundle_samples is not None:
            from torchmcu.pte.bundled import serialize_bundled

            files[out / f"{name}.bpte"] = serialize_bundled(self.bundle(bundle_samples))
        files[out / f"{name}.report.json"] = json.dumps(self.report, indent=2).encode() + b"\n"
        files[out / "selected_operators.yaml"] = dumps(from_program(self.program, name)).encode()
        write_all(files, stale)
        return pte_path

    def bundle(self, samples: Sequence[Sequence[Any]]) -> Any:
        """A BundledProgram (torchmcu.pte.bundled): one test case per sample, expected outputs
        from the host runtime (the program's own integer semantics); for an NPU program, from
        the CPU-only lowering of the same graph in the reference interpreter."""
        from torchmcu.pte.bundled import bundle

        expected = None
        if self.npu is not None:
            # No NPU here: the expected outputs are the CPU-only program's, in the reference
            # interpreter (the integer semantics the NPU program must reproduce).
            from torchmcu.npu.hostrun import reference_outputs

            expected = [reference_outputs(self.npu.cpu_program, list(s), self.report.get("inputs"))
                        for s in samples]
        return bundle(self.pte_bytes, samples, expected=expected, io_quant=self.report.get("inputs"))


def check_output_name(name: str) -> None:
    """ValueError unless `name` is a plain file-name stem (the files must land in out_dir)."""
    if not name or "/" in name or "\\" in name or os.sep in name or ".." in name:
        raise ValueError(
            f"output name {name!r}: give a file name stem without path separators or '..' "
            "(the files are written into the output directory)"
        )


def export(
    model: Any,
    example_inputs: tuple[Any, ...],
    *,
    calibration: Iterable[tuple[Any, ...]] | Sequence[tuple[Any, ...]],
    board: str = "corstone-300",
    per_channel: bool = True,
    int8_io: bool = False,
    observer: str = "minmax",
    npu: str | None = None,
    system_config: str | None = None,
    memory_mode: str | None = None,
    quantizer: Any = None,
    strict: bool = False,
) -> ExportedModel:
    """Quantize `model` to int8 with PT2E, lower it to Cortex-M kernels and plan its memory.

    calibration: samples shaped like example_inputs (a list of tuples or any iterable of tuples);
    an empty calibration set is an error. int8_io: program inputs and outputs stay int8 instead of
    being quantized/dequantized inside the program. observer: how activation ranges are
    calibrated, "minmax" (default) or "histogram" (what ExecuTorch's Cortex-M quantizer uses).
    npu: an Ethos-U NPU ("ethos-u55-128", ...; "default" for the board's): quantized operators
    the NPU supports run there as EthosUBackend delegates compiled by Vela, the rest on the
    Cortex-M. system_config/memory_mode override the board's Vela settings (validated).
    quantizer: a configured torchmcu.quantize.TorchmcuQuantizer, e.g. with parts kept in float32
    (`TorchmcuQuantizer().set_module_name("head", None)`); those run the portable fp32 kernels
    with quantize/dequantize at the int8 <-> float boundaries. It replaces per_channel/observer.
    An operator without an int8 kernel runs the same way (the float fallback), with a
    torchmcu.lower.FloatFallbackWarning per operator naming its source lines; the report's
    "float_ops" lists every float32 node. strict=True refuses such an operator instead, naming it
    and its line (the parts the quantizer keeps in float32 are still allowed).
    """
    from torchmcu.quantize import quantize

    target = get_board(board)
    npu_target = resolve_npu_target(board, npu, system_config, memory_mode)  # fail before calibrating
    started = time.perf_counter()
    progress.stage("quantize")
    quantized = quantize(
        model, example_inputs, calibration, per_channel=per_channel, observer=observer,
        quantizer=quantizer,
    )
    calibrated = time.perf_counter()
    return export_quantized(
        quantized, board=target.name, int8_io=int8_io, npu_target=npu_target,
        started=started, calibrated=calibrated, strict=strict,
    )


def resolve_npu_target(board: str, npu: str | None, system_config: str | None,
                       memory_mode: str | None) -> Any:
    """The checked torchmcu.npu.config.NpuTarget of export's npu arguments (None: CPU only)."""
    if npu is None:
        if system_config is not None or memory_mode is not None:
            raise ValueError("system_config and memory_mode need npu=... (they are Vela settings)")
        return None
    from torchmcu.npu.config import resolve_target

    return resolve_target(board, None if npu == "default" else npu, system_config, memory_mode)


def export_quantized(
    quantized: Any,
    *,
    board: str = "corstone-300",
    int8_io: bool = False,
    npu_target: Any = None,
    started: float | None = None,
    calibrated: float | None = None,
    strict: bool = False,
) -> ExportedModel:
    """The second half of export: lower a quantized GraphModule (torchmcu.quantize), partition
    it for npu_target (a torchmcu.npu.config.NpuTarget, or None for CPU only), plan, serialize.
    strict: no float fallback (see export)."""
    from torchmcu.lower.lowering import finish_lowering, lower_graph
    from torchmcu.pte.writer import serialize

    target = get_board(board)
    calibrated = time.perf_counter() if calibrated is None else calibrated
    started = calibrated if started is None else started
    progress.stage("lower")
    ctx = lower_graph(quantized, int8_io=int8_io, strict=strict)
    partition = None
    if npu_target is None:
        progress.stage("plan")
        program, lowering_report = finish_lowering(ctx)
    else:
        from torchmcu.npu.partition import partition as npu_partition

        progress.stage(f"NPU partition, Vela ({npu_target.accelerator}) and plan")
        program, lowering_report, partition = npu_partition(ctx, npu_target)
    progress.stage("serialize")
    pte = serialize(program)
    finished = time.perf_counter()

    report: dict[str, Any] = dict(lowering_report.to_dict())
    if partition is not None:
        from torchmcu.npu.explain import npu_report

        report["npu"] = npu_report(partition)
        report["constant_bytes"] = sum(len(c) for c in program.constants)
        report["delegate_bytes"] = sum(len(s) for s in program.segments_data)
    report.update(
        board=target.name,
        pte_bytes=len(pte),
        seconds_quantize_and_calibrate=round(calibrated - started, 3),
        seconds_lower_and_serialize=round(finished - calibrated, 3),
    )
    target.check_fits(arena_bytes=report["arena_bytes"], program_bytes=len(pte))
    return ExportedModel(
        program=program, pte_bytes=pte, board=target, report=report, quantized_model=quantized,
        npu=partition,
    )


def run_on_host(
    pte: str | os.PathLike[str] | bytes,
    inputs: Sequence[Any],
    *,
    npu_dir: str | os.PathLike[str] | None = None,
    npu_model: bool = False,
    npu_trace: list[Any] | None = None,
) -> list[np.ndarray]:
    """Run a .pte with the C runtime built into torchmcu._native (the firmware's own sources).

    An NPU program's delegates run with the TOSA reference model on the subgraphs export saved
    in npu_dir (default: `<name>.npu` beside a .pte path): the C runtime runs the CPU part for
    real, the TOSA model stands in for the NPU. npu_model=True runs them as the firmware does
    instead: the firmware delegate and our NPU driver on the Ethos-U55/U65 functional model, from
    the .pte alone (Vela's command stream and weights); that is also the default where there is
    no npu_dir and no saved `<name>.npu` folder. npu_trace (a list) implies npu_model and
    collects what the model ran: one torchmcu.npu.model.driver.Job per NPU job."""
    from torchmcu import native

    data = pte if isinstance(pte, bytes) else Path(pte).read_bytes()
    arrays = [np.ascontiguousarray(_to_numpy(x)) for x in inputs]
    delegates = _delegate_count(data)
    npu_model = npu_model or npu_trace is not None
    if npu_dir is None and delegates and not npu_model:
        saved = None if isinstance(pte, bytes) else Path(pte).with_suffix(".npu")
        npu_model = saved is None or not saved.is_dir()
        npu_dir = saved
    if not delegates or npu_model:
        return native.run_program(data, arrays, npu_model=npu_model, npu_trace=npu_trace)
    from torchmcu.npu.hostrun import load_delegates, tosa_native_fn

    assert npu_dir is not None
    fn = tosa_native_fn(load_delegates(npu_dir, delegates))
    return native.run_program(data, arrays, delegate_fn=fn)


def _delegate_count(data: bytes) -> int:
    from torchmcu.pte.reader import parse

    return sum(len(p.delegates) for p in parse(data).execution_plan)


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # a torch.Tensor, without importing torch here
        return x.detach().cpu().numpy()
    return np.asarray(x)
