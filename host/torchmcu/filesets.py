"""Write a set of files all or none: every file goes to a hidden `.NAME.partial` beside its
destination first; only when all of them are written (and synced) are they renamed into place.
Any failure, a full disk or a Ctrl-C (KeyboardInterrupt) included, removes the partial files
and the files already renamed, so a reader never sees a program without its report."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path


def partial_path(path: Path) -> Path:
    """Where `path` is written before it is renamed into place."""
    return path.with_name(f".{path.name}.partial")


def write_all(files: Mapping[Path, bytes], stale: Iterable[Path] = ()) -> None:
    """Write every `files` entry, or (on any exception, re-raised) none of them.

    stale: files of an earlier write that the new set replaces without overwriting them
    (e.g. a delegate subgraph an earlier export had); removed only after the set is in place.
    """
    written: list[Path] = []
    renamed: list[Path] = []
    try:
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = partial_path(path)
            written.append(tmp)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for path in files:
            os.replace(partial_path(path), path)
            renamed.append(path)
    except BaseException:
        for path in [*written, *renamed]:
            path.unlink(missing_ok=True)
        raise
    keep = set(files)
    for path in stale:
        if path not in keep:
            path.unlink(missing_ok=True)
