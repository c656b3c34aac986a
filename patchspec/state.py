"""The state record under a patched root: which specs are applied, and how to get every byte back.

``.patchspec/state.json`` holds, per file, the sha256 of its pristine and of its patched bytes and the
specs that patched it (in order); ``.patchspec/pristine/<path>`` holds the pristine bytes. Per spec it
holds the spec's own sha256, the release, and the snippet files it installed.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from pathlib import Path

from patchspec.errors import PatchspecError
from patchspec.root import STATE_DIR, Root

STATE_FILE = f"{STATE_DIR}/state.json"
PRISTINE_DIR = f"{STATE_DIR}/pristine"
LOCK_FILE = f"{STATE_DIR}/lock"
VERSION = 1


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def empty() -> dict:
    return {"version": VERSION, "specs": {}, "files": {}, "snippets": {}}


def load(root: Root) -> dict:
    path = root.path / STATE_FILE
    if not path.exists():
        return empty()
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PatchspecError(f"state record is unreadable: {exc}", file=str(path)) from None
    if not isinstance(state, dict) or state.get("version") != VERSION or not {"specs", "files", "snippets"} <= set(state):
        raise PatchspecError("state record is not one patchspec wrote (version or keys differ)", file=str(path))
    return state


def dump(state: dict) -> bytes | None:
    """The bytes of the record, or ``None`` when nothing is applied any more (the record goes away)."""
    if not state["specs"]:
        return None
    return (json.dumps(state, indent=1, sort_keys=True) + "\n").encode()


def pristine_path(rel: str) -> str:
    return f"{PRISTINE_DIR}/{rel}"


@contextlib.contextmanager
def locked(root: Root, timeout: float):
    """One writer per root at a time; another waits up to ``timeout`` seconds, then fails clearly."""
    lock_path = root.path / LOCK_FILE
    deadline = time.monotonic() + timeout
    while True:
        lock_path.parent.mkdir(exist_ok=True)
        handle = open(lock_path, "a+")
        try:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise PatchspecError(f"another patchspec holds the lock for {timeout:g}s; "
                                             "nothing was written", file=str(lock_path)) from None
                    time.sleep(0.05)
            try:
                same = os.fstat(handle.fileno()).st_ino == os.stat(lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a lock file that the previous holder removed meanwhile
                break
        except BaseException:
            handle.close()
            raise
        handle.close()
    try:
        yield
    finally:
        _release(root, lock_path, handle)


def _release(root: Root, lock_path: Path, handle) -> None:
    """Leave no trace: with nothing applied, the lock and the state directory go too."""
    try:
        if not (root.path / STATE_FILE).exists():
            lock_path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                lock_path.parent.rmdir()
    finally:
        handle.close()
