"""Argument checks of the command line, done before any work (no calibration, no build starts
with an argument that fails later), and the choice lists its --help shows."""

from __future__ import annotations

import argparse
import difflib
from typing import Any

from torchmcu.cli_errors import CliError


def positive_float(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def board_names() -> list[str]:
    """The boards of boards/ ([] when the descriptions are missing: the command that needs
    one then names the problem, not --help)."""
    from torchmcu.boards import BoardError, available_boards

    try:
        return available_boards()
    except BoardError:
        return []


def npu_help() -> str:
    """'corstone-300: ethos-u55-128 (default), ...; corstone-320: ...' from the board files."""
    from torchmcu.boards import get_board

    parts = []
    for name in board_names():
        cfg = get_board(name).config.get("npu")
        if cfg:
            choices = [c + (" (default)" if c == cfg["default"] else "") for c in cfg["choices"]]
            parts.append(f"{name}: {', '.join(choices)}")
    return "; ".join(parts) or "no board has an NPU"


def npu_target(args: argparse.Namespace) -> Any:
    """The checked NPU target of `export --npu/--system-config/--memory-mode`, or None."""
    from torchmcu.api import resolve_npu_target

    return resolve_npu_target(args.board, args.npu, args.system_config, args.memory_mode)


def check_export_args(args: argparse.Namespace) -> Any:
    """Every export argument that can be checked without the model; returns the float
    quantizer of --float-op/--float-module (None without them)."""
    from torchmcu.api import check_output_name

    check_output_name(args.name)
    if args.bundle is not None and args.bundle < 1:
        raise CliError(f"--bundle {args.bundle}: need at least one test case")
    if args.bundle is not None and args.bundle_inputs:
        raise CliError("--bundle N and --bundle-inputs FILE: give one of them")
    npu_target(args)
    return float_quantizer(args)


def float_quantizer(args: argparse.Namespace) -> Any:
    """A TorchmcuQuantizer keeping --float-module/--float-op parts in float32, or None."""
    if not args.float_module and not args.float_op:
        return None
    import torch

    from torchmcu.quantize import TorchmcuQuantizer

    q = TorchmcuQuantizer(per_channel=not args.per_tensor, observer=args.observer)
    for name in args.float_module:
        q.set_module_name(name, None)
    for spec in args.float_op:  # "gelu" or "gelu.default": an aten operator (packet)
        packet, _, overload = spec.removeprefix("aten.").partition(".")
        op = getattr(torch.ops.aten, packet, None)
        if op is None or (overload and not hasattr(op, overload)):
            raise CliError(f"--float-op {spec}: no aten operator of that name")
        q.set_operator(getattr(op, overload) if overload else op, None)
    return q


def check_float_modules(model: Any, names: list[str], spec: str) -> None:
    """Every --float-module NAME is a submodule of the model; close matches otherwise."""
    modules = [n for n, _ in model.named_modules() if n]
    for name in names:
        if name not in modules:
            close = difflib.get_close_matches(name, modules, n=5)
            hint = f"; close matches: {', '.join(close)}" if close else ""
            shown = ", ".join(modules[:12]) + (", ..." if len(modules) > 12 else "")
            raise CliError(
                f"--float-module {name}: the model of {spec} has no submodule of that name"
                f"{hint} (its submodules: {shown or 'none'})"
            )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """-q/--quiet on every command (the leaves of the subcommand tree): no progress reports."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        parser.add_argument(
            "-q", "--quiet", action="store_true",
            help="no progress reports (on stderr: one updating line on a terminal, else lines)",
        )  # fmt: skip
    for action in subs:
        for child in dict.fromkeys(action.choices.values()):
            add_quiet(child)
