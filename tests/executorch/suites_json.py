"""What the ExecuTorch-side scripts here and the tests that read their output share: a bundled
program's test suites as JSON and the scripts' `--reserialize-dir DIR` option. Plain Python
(no executorch or torchmcu import), so both venvs can load it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def suites_json(suites: Iterable[Any], value: Callable[[Any], Any]) -> list[dict[str, Any]]:
    """Each method test suite (method_name, test_cases with inputs and expected_outputs) with
    its values described by `value`: ExecuTorch's bundled-program objects and ours alike."""
    return [
        {
            "method_name": s.method_name,
            "test_cases": [
                {
                    "inputs": [value(v) for v in c.inputs],
                    "expected_outputs": [value(v) for v in c.expected_outputs],
                }
                for c in s.test_cases
            ],
        }
        for s in suites
    ]


def reserialize_option(argv: list[str]) -> tuple[list[str], Path | None]:
    """argv without `--reserialize-dir DIR`, and DIR (None when not given)."""
    if "--reserialize-dir" not in argv:
        return argv, None
    i = argv.index("--reserialize-dir")
    return argv[:i] + argv[i + 2 :], Path(argv[i + 1])
