"""Export a model through ExecuTorch 1.5.1's own Cortex-M flow (for comparisons).

Runs inside the ExecuTorch venv (scripts/executorch_venv.sh --cortex-m). It
follows the stages of ExecuTorch's Cortex-M tests (backends/cortex_m/test/
tester.py): PT2E with CortexMQuantizer, export, to_edge with the Cortex-M
edge config, CortexMPassManager (target Cortex-M55), to_executorch. It saves
the .pte, the outputs on the given inputs and the time each stage took, so
torchmcu's exporter can be compared with it for accuracy, size and speed.

    python export_cortex_m.py --model FILE.py:NAME [--seed 0] [--inputs in.npz]
        [--calibration calib.npz] --out-dir DIR

NAME is a class (built with no arguments after torch.manual_seed(seed)) or a
function taking `seed` and returning a module or a (module, example_inputs)
tuple (the torchmcu example model constructors). Input npz files hold arrays
`arg0`, `arg1`, ... with a leading sample axis; sample 0 is the example input
for export. Without --inputs the constructor's example inputs are used;
without --calibration the inputs calibrate.

Writes DIR/model.pte, DIR/outputs.npz (per output j: `float{j}` from the fp32
model, `fake_quant{j}` from the converted PT2E graph, `cortex_m{j}` from the
lowered program run with ExecuTorch's Python reference of the cortex_m ops;
each with the sample axis first) and DIR/report.json (stage seconds, sizes,
operator counts, and each aten op left in the lowered graph with the innermost module that
called it: what the flow kept in float).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config
from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager
from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
from executorch.backends.cortex_m.target_config import CortexM, CortexMTargetConfig
import executorch.backends.cortex_m.ops.operators  # noqa: F401  (Python impls of cortex_m ops)
from executorch.exir import ExecutorchBackendConfig, to_edge
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


def load_attr(spec: str):
    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise SystemExit(f"--model must be FILE.py:NAME or package.module:NAME, got {spec!r}")
    if path.endswith(".py"):
        # A file inside a package (torchmcu/examples/models.py) imports its siblings by
        # package name: put the directory above the outermost package on the path.
        root = Path(path).resolve().parent
        while (root / "__init__.py").exists():
            root = root.parent
        sys.path.insert(0, str(root))
        mod_spec = importlib.util.spec_from_file_location(Path(path).stem, path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[mod_spec.name] = module
        mod_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(path)
    return getattr(module, name)


def build_model(spec: str, seed: int):
    attr = load_attr(spec)
    torch.manual_seed(seed)
    if inspect.isclass(attr):
        return attr().eval(), None
    made = attr(seed=seed) if "seed" in inspect.signature(attr).parameters else attr()
    if isinstance(made, tuple):
        model, example = made
        return model.eval(), tuple(example)
    return made.eval(), None


def load_samples(path: str) -> list[tuple[torch.Tensor, ...]]:
    with np.load(path) as z:
        arrays = [z[f"arg{i}"] for i in range(len(z.files))]
    n = arrays[0].shape[0]
    return [tuple(torch.from_numpy(np.ascontiguousarray(a[s])) for a in arrays) for s in range(n)]


def channels_last(args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    # The legacy Cortex-M lowering expects NHWC activations (as its tests pass them).
    return tuple(a.to(memory_format=torch.channels_last) if a.dim() == 4 else a for a in args)


def as_outputs(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    return [o for o in out]


def final_dequantize_qparams(gm: torch.fx.GraphModule) -> list[list[float] | None]:
    """(scale, zero_point) of the dequantize feeding each graph output, None where there is none."""
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    results = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    qparams: list[list[float] | None] = []
    for node in results:
        is_dq = isinstance(node, torch.fx.Node) and "dequantize_per_tensor" in str(node.target)
        qparams.append([float(node.args[1]), int(node.args[2])] if is_dq else None)
    return qparams


def op_name(node: torch.fx.Node) -> str:
    return str(node.target.__name__) if hasattr(node.target, "__name__") else str(node.target)


def aten_nodes(gm: torch.fx.GraphModule) -> list[dict[str, str]]:
    """The aten ops of the lowered graph (left in float: the int8 ones are cortex_m::), each
    with the path and class of the innermost module calling it ("" for the model's own
    forward)."""
    found = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or not op_name(n).startswith("aten."):
            continue
        stack = list((n.meta.get("nn_module_stack") or {}).values())
        path, kind = stack[-1] if stack else ("", "")
        found.append({"op": op_name(n), "module": str(path), "module_type": str(kind)})
    return found


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--inputs")
    ap.add_argument("--calibration")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--cpu", default="M55", choices=[c.name for c in CortexM])
    args = ap.parse_args(argv)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    model, example = build_model(args.model, args.seed)
    if args.inputs:
        samples = load_samples(args.inputs)
    elif example is not None:
        samples = [example]
    else:
        raise SystemExit("no inputs: pass --inputs (the constructor gave no example inputs)")
    samples = [channels_last(s) for s in samples]
    calib = samples
    if args.calibration:
        calib = [channels_last(s) for s in load_samples(args.calibration)]
    example = samples[0]
    seconds: dict[str, float] = {}
    cpu_seconds: dict[str, float] = {}

    def stage(name: str, fn):
        # Wall and CPU time: on a busy machine only the CPU time is comparable.
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        seconds[name] = round(time.perf_counter() - t0, 3)
        cpu_seconds[name] = round(time.process_time() - c0, 3)
        return result

    with torch.no_grad():
        float_out = [as_outputs(model(*s)) for s in samples]

        captured = stage(
            "capture", lambda: torch.export.export(model, example).module(check_guards=False)
        )
        prepared = stage("prepare", lambda: prepare_pt2e(captured, CortexMQuantizer()))
        stage("calibrate", lambda: [prepared(*s) for s in calib])
        converted = stage("convert", lambda: convert_pt2e(prepared))
        fq_out = [as_outputs(converted(*s)) for s in samples]
        output_qparams = final_dequantize_qparams(converted)

        exported = stage("export", lambda: torch.export.export(converted, example))
        edge = stage(
            "to_edge", lambda: to_edge(exported, compile_config=cortex_m_edge_compile_config())
        )
        target = CortexMTargetConfig(cpu=CortexM[args.cpu])

        def run_passes():
            pm = CortexMPassManager(edge.exported_program(), target_config=target)
            edge._edge_programs["forward"] = pm.transform()

        stage("cortex_m_passes", run_passes)
        graph = edge.exported_program().graph_module
        ops = Counter(op_name(n) for n in graph.graph.nodes if n.op == "call_function")
        float_nodes = aten_nodes(graph)
        lowered = edge.exported_program().module()
        cm_out = [as_outputs(lowered(*s)) for s in samples]
        et = stage(
            "to_executorch",
            lambda: edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=True)),
        )
        pte = stage("serialize", lambda: bytes(et.buffer))

    (out_dir / "model.pte").write_bytes(pte)
    arrays = {}
    for key, outs in (("float", float_out), ("fake_quant", fq_out), ("cortex_m", cm_out)):
        for j in range(len(outs[0])):
            per_sample = [o[j].detach().float().contiguous().numpy() for o in outs]
            arrays[f"{key}{j}"] = np.stack(per_sample)
    np.savez(out_dir / "outputs.npz", **arrays)

    export_seconds = sum(v for k, v in seconds.items() if k != "calibrate")
    report = {
        "model": args.model,
        "seed": args.seed,
        "cpu": args.cpu,
        "seconds": seconds,
        "seconds_export_excluding_calibration": round(export_seconds, 3),
        "cpu_seconds": cpu_seconds,
        "cpu_seconds_export_excluding_calibration": round(
            sum(v for k, v in cpu_seconds.items() if k != "calibrate"), 3
        ),
        "pte_bytes": len(pte),
        "parameters": sum(p.numel() for p in model.parameters()),
        "edge_ops": dict(sorted(ops.items())),
        "edge_aten_nodes": float_nodes,
        "output_qparams": output_qparams,
        "samples": len(samples),
        "calibration_samples": len(calib),
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
