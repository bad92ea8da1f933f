"""python -m torchmcu.npu.model dump FILE: list a command stream.

FILE is Vela's raw output (.npz with cmd_data), an EthosUBackend blob, or a driver payload.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchmcu.npu.blob import HEADER_BLOCK, parse_blob
from torchmcu.npu.model.decode import CommandStreamError
from torchmcu.npu.model.dump import dump


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
    args = parser.parse_args(argv)
    try:
        print(dump(_payload(args.file)))
    except CommandStreamError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
