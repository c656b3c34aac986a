"""All-or-none writes under a root: temporary files, renames, and a way back if any step fails."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from patchspec.errors import PatchspecError

TMP_SUFFIX = ".patchspec-tmp"
BACKUP_SUFFIX = ".patchspec-bak"


def check_writable(directory: Path) -> None:
    """Refuse a read-only directory up front. Root ignores mode bits, so they are honoured here too."""
    probe = directory
    while not probe.exists():
        probe = probe.parent
    mode = probe.stat().st_mode
    if not os.access(probe, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise PatchspecError("directory is read-only: nothing was written", file=str(probe))


def commit(writes: dict[Path, bytes | None], root: Path) -> None:
    """Write every file (``None`` deletes it) or none: all temporaries first, then the renames; a failure
    at any point puts back every file already replaced."""
    for path in writes:
        check_writable(path.parent)
    staged: list[tuple[Path, Path | None]] = []
    try:
        for path, data in writes.items():
            if data is None:
                staged.append((path, None))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + TMP_SUFFIX)
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if path.exists():
                os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
            staged.append((path, tmp))
    except OSError as exc:
        _discard(staged)
        raise PatchspecError(f"cannot write: {exc.strerror}: nothing was written",
                             file=str(exc.filename or path)) from None
    done: list[tuple[Path, Path | None]] = []
    try:
        for path, tmp in staged:
            backup = path.with_name(path.name + BACKUP_SUFFIX)
            had = path.exists()
            if had:
                os.replace(path, backup)
            done.append((path, backup if had else None))
            if tmp is not None:
                os.replace(tmp, path)
    except OSError as exc:
        _roll_back(done)
        _discard(staged)
        raise PatchspecError(f"cannot replace: {exc.strerror}: every file was put back",
                             file=str(exc.filename or path)) from None
    for _, backup in done:
        if backup is not None:
            backup.unlink()
    _prune_empty_dirs((path for path, data in writes.items() if data is None), root)


def _discard(staged) -> None:
    for _, tmp in staged:
        if tmp is not None and tmp.exists():
            tmp.unlink()


def _roll_back(done) -> None:
    for path, backup in reversed(done):
        if backup is not None:
            os.replace(backup, path)
        elif path.exists():
            path.unlink()


def _prune_empty_dirs(deleted, root: Path) -> None:
    """Remove directories that deleting files left empty, never the root or above it."""
    for path in deleted:
        parent = path.parent
        while parent != root and root in parent.parents and parent.exists() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
