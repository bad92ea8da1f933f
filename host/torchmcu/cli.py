"""The `torchmcu` command line.

    torchmcu export examples/models.py:ds_cnn -o out/          # quantize, lower, plan, write out/model.pte
    torchmcu export ... --bundle 4                            # plus out/model.bpte with 4 test cases
    torchmcu export ... --npu ethos-u55-128 --explain         # Ethos-U delegates; where each node runs
    torchmcu run out/model.pte --host [--inputs x.npz]        # run on the host build of the runtime
    torchmcu run out/model.pte --host --npu-model             # NPU delegates: driver + NPU model
                                                              # (the default without out/model.npu/)
    torchmcu run out/model.pte --host --npu-trace             # ... and each NPU operation, MACs
    torchmcu build out/model.pte --board corstone-300         # runner firmware: ELF, .bin, .hex
    torchmcu build a.pte b.pte --ops-yaml merged.yaml         # one image running both programs
    torchmcu run out/model.pte --board qemu-an547             # build, run on QEMU (or an FVP)
    torchmcu run out/model.bpte --board qemu-an547            # check a bundle's test cases on device
    torchmcu info out/model.pte                               # operators, values, memory plan
    torchmcu run out/model.pte --board qemu-an547 --profile   # per-operator table, model.profile.json
    torchmcu report out/model.pte --profile                   # out/model.html: ops, time, memory
    torchmcu ops merge a.yaml b.yaml --board corstone-300 -o merged.yaml   # one image, many models
    torchmcu doctor                                           # is this machine ready? what is missing?
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from torchmcu import progress
from torchmcu.cli_args import add_quiet, board_names, npu_help, positive_float
from torchmcu.cli_errors import CliError


def _cmd_export(args: argparse.Namespace) -> int:
    import torchmcu
    from torchmcu import cli_inputs
    from torchmcu.cli_args import check_export_args, check_float_modules
    from torchmcu.cli_model import calibration_samples, load_model
    from torchmcu.lower.errors import FloatFallbackWarning

    quantizer = check_export_args(args)  # every argument first: nothing runs with a bad one
    calibration = cli_inputs.load_npz(args.calibration) if args.calibration else None
    bundle_arrays = cli_inputs.load_npz(args.bundle_inputs) if args.bundle_inputs else None
    loaded = load_model(args.model)
    check_float_modules(loaded.model, args.float_module, args.model)
    model, example_inputs = loaded.model, loaded.example_inputs
    if model.training:
        print(f"torchmcu export: warning: {args.model} returned a model in training mode; "
              "exporting it in eval mode (dropout off, BatchNorm with its running statistics)",
              file=sys.stderr)
        model.eval()
    if calibration is not None:
        samples, notes = cli_inputs.calibration_samples(args.calibration, calibration, example_inputs)
        for note in notes:
            print(f"torchmcu {args.command}: note: {note}", file=sys.stderr)
    else:
        samples = calibration_samples(loaded)
        if samples is None:
            raise CliError(
                "no calibration data: pass --calibration FILE.npz or define calibration_samples() "
                "beside the model factory"
            )
    bundle_samples = None
    if bundle_arrays is not None:
        bundle_samples = [list(s) for s in cli_inputs.samples_of(bundle_arrays)]
        cli_inputs.check_against_examples(args.bundle_inputs, bundle_samples, example_inputs)
    elif args.bundle is not None:
        bundle_samples = [list(s) for s in samples[: args.bundle]]
    print(f"exporting {args.model} for {args.board} ({len(samples)} calibration samples)...")
    with progress.task("export"), warnings.catch_warnings():  # stages: quantize, lower, plan
        if progress.enabled():  # (or NPU), serialize, save; the fallback's warnings shown once
            warnings.simplefilter("ignore", FloatFallbackWarning)
        exported = torchmcu.export(
            model,
            tuple(example_inputs),
            calibration=samples,
            board=args.board,
            per_channel=not args.per_tensor,
            int8_io=args.int8_io,
            observer=args.observer,
            npu=args.npu,
            system_config=args.system_config,
            memory_mode=args.memory_mode,
            quantizer=quantizer,
            strict=args.strict,
        )
        progress.stage("save")
        path = exported.save(args.output, name=args.name, bundle_samples=bundle_samples)
    if args.explain:
        from torchmcu.lower.report import float_op_lines

        if exported.npu is None:
            print("--explain: CPU only (no --npu): every node runs as a Cortex-M kernel"
                  + (", int8 but for these:" if exported.report["float_ops"] else ""))
        else:
            from torchmcu.npu.explain import explain

            print(explain(exported.npu))
        for line in float_op_lines(exported.report["float_ops"]):
            print(line)
    r = exported.report
    print(f"wrote {path} ({len(exported.pte_bytes):,} bytes)")
    if bundle_samples is not None:
        bpte = path.with_suffix(".bpte")
        print(f"wrote {bpte} ({bpte.stat().st_size:,} bytes, {len(bundle_samples)} test cases)")
    print(f"arena {r['arena_bytes']:,} bytes (lower bound {r['arena_lower_bound']:,})")
    if exported.npu is not None:
        npu = r["npu"]
        print(f"NPU {npu['target']['accelerator']}: {len(npu['delegates'])} delegate(s), "
              f"{npu['operators']['fraction']:.1%} of operators, {npu['macs']['fraction']:.1%} of "
              f"MACs; TOSA subgraphs in {path.with_suffix('.npu')}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    import torchmcu

    if not args.host:
        if args.npu_trace or args.npu_model:
            raise CliError("--npu-model and --npu-trace run on the host: add --host")
        return _run_on_board(args)
    from torchmcu import native

    if args.pte.endswith(".bpte"):
        return _check_bundle_on_host(args)
    data = Path(args.pte).read_bytes()
    info = native.program_info(data)
    if args.inputs:
        from torchmcu.cli_inputs import program_samples

        inputs = program_samples(args.inputs, info)[0]  # the first sample
    else:  # deterministic default input: a fixed pseudo-random pattern
        rng = np.random.default_rng(0)
        inputs = [
            rng.standard_normal(t["sizes"]).astype(t["dtype"])
            if np.dtype(t["dtype"]).kind == "f"
            else rng.integers(-128, 128, t["sizes"]).astype(t["dtype"])
            for t in info["inputs"]
        ]
    # an NPU program finds NAME.npu/ beside it, or runs its driver on the NPU model
    trace: list[Any] | None = [] if args.npu_trace else None
    outputs = torchmcu.run_on_host(
        Path(args.pte), inputs, npu_model=args.npu_model, npu_trace=trace
    )
    for i, out in enumerate(outputs):
        print(_output_line(f"output {i}", out))
    if trace is not None:
        from torchmcu.npu.model.driver import trace_lines

        print("\n".join(trace_lines(trace, _vela_nn_macs(Path(args.pte)))))
    return 0


def _vela_nn_macs(pte: Path) -> dict[int, int]:
    """Vela's nn_macs per delegate from the export's NAME.report.json beside the .pte."""
    import json

    try:
        report = json.loads(pte.with_suffix(".report.json").read_text())
        delegates = (report.get("npu") or {}).get("delegates", [])
        return {int(d["index"]): int(d["estimate"]["nn_macs"]) for d in delegates}
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # no report (or not ours): the trace shows the model's MACs alone


def _output_line(label: str, out: Any) -> str:
    """'LABEL: shape [..] dtype values' of one output (its first 16 values), or its value when
    it is not a tensor (None: the firmware prints tensors only)."""
    if out is None:
        return f"{label}: not a tensor (the runner prints tensor outputs only)"
    if not isinstance(out, np.ndarray):
        return f"{label}: {type(out).__name__} {out!r}"
    flat = out.reshape(-1)
    shown = np.array2string(flat[:16], precision=4, separator=", ")
    return f"{label}: shape {list(out.shape)} {out.dtype} {shown}{' ...' if flat.size > 16 else ''}"


def _check_bundle_on_host(args: argparse.Namespace) -> int:
    """Every test case of a .bpte on the host runtime (NPU delegates: TOSA reference model on
    the NAME.npu/ subgraphs beside it), compared bit for bit with its expected outputs."""
    from torchmcu.npu.hostrun import check_bundle
    from torchmcu.pte.bundled import parse_bundled

    if args.inputs:
        raise CliError("--inputs with a .bpte: the bundle carries its own test inputs")
    path = Path(args.pte)
    data = path.read_bytes()
    cases = sum(len(s.test_cases) for s in parse_bundled(data).method_test_suites)
    failures = check_bundle(data, path.with_suffix(".npu"))
    for line in failures:
        print(f"FAIL {line}")
    print(f"{cases - len({f.split(' output')[0] for f in failures})}/{cases} test cases pass")
    return 1 if failures else 0


def _firmware_samples(info: dict, inputs: str | None) -> list[list[np.ndarray]] | None:
    """All samples of an .npz, checked against the program's inputs as the host checks them
    (count, dtype, shape; never cast), or None."""
    from torchmcu.cli_inputs import program_samples

    return program_samples(inputs, info) if inputs else None


def _cmd_build(args: argparse.Namespace) -> int:
    from torchmcu import device, native

    inputs = args.inputs or []
    if len(args.pte) > 1:
        if any(p.endswith(".bpte") for p in args.pte):
            raise CliError("a .bpte is built into an image of its own: give it alone")
        if inputs and len(inputs) != len(args.pte):
            raise CliError(
                f"{len(inputs)} --inputs for {len(args.pte)} programs (give one per program, in order)"
            )
    elif len(inputs) > 1:
        raise CliError(f"{len(inputs)} --inputs for one program (give one .npz)")
    pte = args.pte[0]
    if pte.endswith(".bpte"):
        if inputs:
            raise CliError("--inputs with a .bpte: the bundle carries its own test inputs")
        build_dir = args.build_dir or _default_build_dir(args)
        print(f"building the runner for {args.board} with the bundle {pte} in {build_dir}...")
        image = device.build(
            None, args.board, build_dir, bundle=pte, ops_yaml=args.ops_yaml, profile=args.profile
        )
        for path in (image.elf, image.bin, image.program_bin, image.hex):
            print(f"wrote {path} ({path.stat().st_size:,} bytes)")
        return 0
    blobs = []
    for i, path in enumerate(args.pte):
        info = native.program_info(Path(path).read_bytes())
        samples = _firmware_samples(info, inputs[i] if inputs else None)
        blobs.append(device.write_io_blob(info, samples) if samples else None)
    build_dir = args.build_dir or _default_build_dir(args)
    print(f"building the runner for {args.board} with {', '.join(args.pte)} in {build_dir}...")
    image = device.build(
        args.pte if len(args.pte) > 1 else pte,
        args.board,
        build_dir,
        inputs=blobs if len(args.pte) > 1 else blobs[0],
        ops_yaml=args.ops_yaml,
        profile=args.profile,
    )
    for path in (image.elf, image.bin, image.program_bin, image.hex):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


def _run_on_board(args: argparse.Namespace) -> int:
    from torchmcu import device, native
    from torchmcu.device.run import FirmwareRunError

    target = Path(args.pte)
    if target.suffix == ".elf":
        if args.inputs:
            raise CliError("--inputs needs a .pte (inputs are embedded when the firmware is built)")
        elf, info, cases = target, None, None
    elif target.suffix == ".bpte":  # the runner checks the bundle's test cases on the device
        if args.inputs:
            raise CliError("--inputs with a .bpte: the bundle carries its own test inputs")
        from torchmcu.pte.bundled import parse_bundled

        bundled = parse_bundled(target.read_bytes())
        cases = sum(len(s.test_cases) for s in bundled.method_test_suites)
        info = native.program_info(bundled.program)
        _check_emulator(args, info)
        build_dir = args.build_dir or _default_build_dir(args)
        elf = device.build(None, args.board, build_dir, bundle=target, profile=args.profile).elf
    else:
        data = target.read_bytes()
        info = native.program_info(data)
        samples = _firmware_samples(info, args.inputs)
        cases = len(samples) if samples else 1
        _check_emulator(args, info)
        blob = device.write_io_blob(info, samples) if samples else None
        build_dir = args.build_dir or _default_build_dir(args)
        elf = device.build(target, args.board, build_dir, inputs=blob, profile=args.profile).elf
    if args.profile:
        return _profile_on_board(args, elf, target)
    # A program with delegates needs the NPU: the FVP, never QEMU (it has no NPU model).
    uses_npu = info is not None and bool(info["delegates"])
    try:
        result = device.run(
            elf, args.board, args.timeout, emulator=args.emulator, uses_npu=uses_npu,
            samples=cases,
        )
    except FirmwareRunError as e:
        raise CliError(str(e)) from None
    for line in result.console.splitlines():
        if not line.startswith("TM_OUTPUT ") or info is None:
            print(line)
    if info is not None:
        for sample in sorted(result.raw_outputs):
            for i, out in enumerate(result.outputs(info, sample)):
                print(_output_line(f"sample {sample} output {i}", out))
    if not result.ok:
        print(f"torchmcu run: firmware exit {result.exit_code}: {result.message}", file=sys.stderr)
        return result.exit_code if result.exit_code > 0 else 124
    return 0


def _check_emulator(args: argparse.Namespace, info: dict) -> None:
    """Before building: this machine can run the program on the board (QEMU, or its FVP)."""
    from torchmcu.device.run import FirmwareRunError, emulator_for

    try:
        emulator_for(args.board, uses_npu=bool(info["delegates"]), prefer=args.emulator)
    except FirmwareRunError as e:
        raise CliError(str(e)) from None


def _default_build_dir(args: argparse.Namespace) -> str:
    return f"build/fw-{args.board}" + ("-profile" if args.profile else "")


def _profile_on_board(args: argparse.Namespace, elf: Path, target: Path) -> int:
    """`run --profile`: the runner's per-operator profile (QEMU: instruction counts and arena
    bytes from the plugin; FVP: cycles) as a table per run and a profile.json."""
    from torchmcu.device import profile as prof

    try:
        profile, console = prof.profile_run(
            elf, args.board, emulator=args.emulator, timeout=args.timeout
        )
    except RuntimeError as e:  # ProfileError, IcountError, FirmwareRunError
        raise CliError(str(e)) from None
    for line in console.splitlines():
        if not line.startswith(("TM_OUTPUT ", "TM_PROF ")):
            print(line)
    for k in range(len(profile["runs"])):
        print(prof.table(profile, k))
    out = Path(args.profile_json) if args.profile_json else target.with_suffix(".profile.json")
    prof.write_json(profile, out)
    print(f"wrote {out} (torchmcu report PTE --profile-json {out})")
    return 0


def _cmd_ops_merge(args: argparse.Namespace) -> int:
    from torchmcu.selective import merge_files, operator_names

    merged = merge_files(args.yaml, board=args.board, output=args.output)
    names = operator_names(merged)
    print(f"wrote {args.output}: {len(names)} operators ({', '.join(names)})")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    import json

    from torchmcu import htmlreport
    from torchmcu.pte.reader import parse

    pte = Path(args.pte)
    data = pte.read_bytes()
    program = parse(data)
    export_json = Path(args.export_report) if args.export_report else pte.with_suffix(".report.json")
    export = json.loads(export_json.read_text()) if export_json.is_file() else None
    profile = None
    if args.profile_json:
        from torchmcu.device.profile import read_json

        profile = read_json(args.profile_json)
    elif args.profile:
        from torchmcu import device
        from torchmcu.device.profile import profile_run

        build_dir = args.build_dir or f"build/fw-{args.board}-profile"
        print(f"building the profiled runner for {args.board} in {build_dir}...", flush=True)
        image = device.build(pte, args.board, build_dir, profile=True)
        print("running it (QEMU: with the instruction-count plugin)...", flush=True)
        profile = dict(profile_run(image.elf, args.board)[0])
    report = htmlreport.collect(program, len(data), export, profile)
    out = Path(args.output) if args.output else pte.with_suffix(".html")
    out.write_text(htmlreport.render(report, title=f"torchmcu report: {pte.name}"))
    print(htmlreport.summary(report))
    print(f"wrote {out}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from torchmcu import native

    info = native.program_info(Path(args.pte).read_bytes())
    for key, value in info.items():
        print(f"{key}: {value}")
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from torchmcu import doctor

    return doctor.run()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchmcu", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    boards = board_names()

    def board_arg(p: argparse.ArgumentParser, default: str, what: str) -> None:
        p.add_argument(
            "--board", default=default, choices=boards or None, help=f"{what} (default: {default})"
        )

    p = sub.add_parser("export", help="quantize and lower a model to a .pte")
    p.add_argument("model", help="FILE.py:FUNCTION or MODULE:FUNCTION returning (model, example_inputs)")
    p.add_argument("-o", "--output", default="out", help="output directory (default: out)")
    p.add_argument("--name", default="model", help="file name stem (default: model)")
    board_arg(p, "corstone-300", "board to export for")
    p.add_argument("--calibration", help=".npz of calibration inputs (leading axis = samples)")
    p.add_argument("--per-tensor", action="store_true", help="per-tensor conv weights")
    p.add_argument("--int8-io", action="store_true", help="int8 program inputs/outputs")
    p.add_argument(
        "--observer", choices=("minmax", "histogram"), default="minmax",
        help="activation range calibration (histogram: as ExecuTorch's Cortex-M quantizer)",
    )
    p.add_argument(
        "--bundle", type=int, nargs="?", const=4, metavar="N",
        help="also write NAME.bpte with the first N calibration samples (default 4) as test "
        "cases, expected outputs from the host runtime",
    )
    p.add_argument("--bundle-inputs", help=".npz of test inputs for NAME.bpte (leading axis = samples)")
    p.add_argument(
        "--npu", help=f"Ethos-U NPU of the board to delegate to ('default': the board's): {npu_help()}",
    )
    p.add_argument("--system-config", help="Vela system config (default: the board's)")
    p.add_argument("--memory-mode", help="Vela memory mode (default: the board's)")
    p.add_argument(
        "--float-module", action="append", default=[], metavar="NAME",
        help="keep submodule NAME (e.g. classifier, head.1) in float32 (portable fp32 kernels); "
        "repeatable",
    )
    p.add_argument(
        "--float-op", action="append", default=[], metavar="OP",
        help="keep every call of aten operator OP (e.g. gelu, layer_norm.default) in float32; "
        "repeatable",
    )
    p.add_argument(
        "--explain", action="store_true",
        help="print each node, where it runs (NPU subgraph / CPU kernel / float) and why",
    )
    p.add_argument(
        "--strict", action="store_true",
        help="refuse an operator without an int8 kernel instead of running it in float32 (the "
        "default, with a warning naming it); --float-op/--float-module parts stay float",
    )
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("build", help="build the runner firmware for a board with a .pte embedded")
    p.add_argument(
        "pte", nargs="+", help=".pte to embed; several: one image running each in turn (or a .bpte)"
    )
    board_arg(p, "corstone-300", "board to build for")
    p.add_argument("--build-dir", help="CMake build directory (default: build/fw-BOARD)")
    p.add_argument(
        "--inputs", action="append",
        help=".npz of inputs to embed (leading axis = samples); with several programs, "
        "repeat once per program, in order",
    )
    p.add_argument(
        "--ops-yaml", help="selected_operators.yaml: compile and register only its kernels"
    )
    p.add_argument(
        "--profile", action="store_true",
        help="per-operator profile built in (TM_PROF lines; default build dir build/fw-BOARD-profile)",
    )
    p.set_defaults(func=_cmd_build)

    p = sub.add_parser("run", help="run a .pte on the host, or a .pte/.elf on a board's emulator")
    p.add_argument("pte", help=".pte (built into firmware first unless --host) or a runner .elf")
    p.add_argument("--host", action="store_true", help="run on the host build of the runtime (a .bpte: check its test cases)")
    board_arg(p, "qemu-an547", "board to build for and emulate")
    p.add_argument("--build-dir", help="CMake build directory (default: build/fw-BOARD)")
    p.add_argument("--emulator", choices=("qemu", "fvp"), help="default: QEMU if it can")
    p.add_argument("--timeout", type=positive_float, default=120.0, help="seconds (default: 120)")
    p.add_argument("--inputs", help=".npz of inputs (--host: first sample; board: all samples)")
    p.add_argument(
        "--npu-model", action="store_true",
        help="--host: run the NPU delegates through the firmware delegate and driver on the "
        "Ethos-U55/U65 functional model, not the TOSA graphs in NAME.npu/ (default without them)",
    )
    p.add_argument(
        "--npu-trace", action="store_true",
        help="--host: as --npu-model, then list each NPU operation (IFM/OFM shapes and "
        "addresses, MACs) per job, with Vela's nn_macs from NAME.report.json",
    )
    p.add_argument(
        "--profile", action="store_true",
        help="build with the profile, print a per-operator table and write a profile.json",
    )
    p.add_argument("--profile-json", help="with --profile: where (default: NAME.profile.json)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("ops", help="selected-operator lists for selective firmware builds")
    ops = p.add_subparsers(dest="ops_command", required=True)
    p = ops.add_parser("merge", help="merge selected_operators.yaml files (+ the board's operators)")
    p.add_argument("yaml", nargs="+", help="selected_operators.yaml files (torchmcu export writes one)")
    board_arg(p, "corstone-300", "adds the operators the board always needs")
    p.add_argument("-o", "--output", required=True, help="merged yaml to write")
    p.set_defaults(func=_cmd_ops_merge)

    p = sub.add_parser("report", help="HTML report: operators, time per kernel, memory plan")
    p.add_argument("pte", help="the .pte to report on")
    p.add_argument("--export-report", help="export's report.json (default: beside the .pte)")
    p.add_argument("--profile", action="store_true", help="build and profile on --board first")
    board_arg(p, "qemu-an547", "board to profile on")
    p.add_argument("--build-dir", help="CMake build directory (default: build/fw-BOARD-profile)")
    p.add_argument("--profile-json", help="a saved profile (torchmcu run --profile) instead")
    p.add_argument("-o", "--output", help="HTML file (default: the .pte name with .html)")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("info", help="describe a .pte")
    p.add_argument("pte", help="the .pte to describe")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser(
        "doctor", help="check the toolchain, emulator and Python packages; exit 1 if one is missing"
    )
    p.set_defaults(func=_cmd_doctor)
    add_quiet(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    progress.configure(enabled=not args.quiet)  # on stderr: a line on a terminal, else lines
    try:
        return int(args.func(args))
    except (CliError, ValueError, OSError, RuntimeError) as e:
        print(f"torchmcu {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's code for SIGINT; no file is left
        print(f"\ntorchmcu {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        progress.configure(enabled=False)


if __name__ == "__main__":
    sys.exit(main())
