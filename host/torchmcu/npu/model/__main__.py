"""python -m torchmcu.npu.model dump FILE: list a command stream.
python -m torchmcu.npu.model trace BLOB [--macs N]: run a blob on zero inputs, one line per
operation (source -> destination region+address, OFM shape, MACs).

FILE is Vela's raw output (.npz with cmd_data), an EthosUBackend blob, or a driver payload.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchmcu.npu.blob import HEADER_BLOCK, parse_blob
from torchmcu.npu.model.decode import CommandStreamError
from torchmcu.npu.model.dump import dump
from torchmcu.npu.model.memory import BusError
from torchmcu.npu.model.run import run_blob
from torchmcu.npu.model.state import StateError


def _payload(path: Path) -> bytes:
    if path.suffix == ".npz":
        import numpy as np

        with np.load(path, allow_pickle=False) as npz:
            return npz["cmd_data"].tobytes()
    data = path.read_bytes()
    if data[:16].rstrip(b"\0") == HEADER_BLOCK.encode():
        return parse_blob(data).command_stream
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchmcu.npu.model")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="list the commands of a Vela command stream")
    d.add_argument("file", type=Path)
    t = sub.add_parser("trace", help="run an EthosUBackend blob on zero inputs, list its ops")
    t.add_argument("file", type=Path)
    t.add_argument("--macs", type=int, default=128, help="MACs per cycle: 32, 64, 128, 256")
    args = parser.parse_args(argv)
    try:
        if args.command == "dump":
            print(dump(_payload(args.file)))
        else:
            print(_trace(args.file.read_bytes(), args.macs))
    except (CommandStreamError, BusError, StateError, NotImplementedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _trace(blob: bytes, macs_per_cc: int) -> str:
    b = parse_blob(blob)
    result = run_blob(b, [bytes(t.nbytes) for t in b.inputs], macs_per_cc=macs_per_cc)
    lines = [str(e) for e in result.trace]
    lines.append(f"{len(result.trace)} operations, {sum(e.macs for e in result.trace)} MACs")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
