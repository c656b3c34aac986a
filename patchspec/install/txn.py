"""The only code that writes under a root: journaled, all-or-none replacement of files.

``commit`` first writes ``.patchspec/journal.json`` (fsynced): every path it will replace or delete, the
temporary file that will replace it, where the old file is kept, and every directory it creates. Then it
writes each new file in full to a temporary file beside its target (``O_EXCL|O_NOFOLLOW``, the owner and
mode of the file it replaces, fsynced), keeps the old file as a hard link under ``.patchspec/txn/``, and
only then replaces each target with one ``rename`` (there is no moment a target is missing). Unlinking the
journal is the commit point. A run that stops before it, killed or failing, is rolled back from the
journal: by ``commit`` itself when it can, else by ``recover``, which every writing verb calls first
under the lock. Read-only verbs see the root through ``pending_view``: as it was before the run.

``PATCHSPEC_FAULT=N:ACTION`` (tests only) stops the N-th write point (``mkdir``, ``create``, ``write``,
``fsync``, ``link``, ``rename``, ``unlink``, ``journal``, ``commit``) with SIGKILL (``kill``), SIGINT
(``int``), ENOSPC (``enospc``) or EPERM (``eperm``); ``PATCHSPEC_FAULT_TRACE=FILE`` lists the points.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from patchspec.errors import Exit, PatchspecError
from patchspec.install.root import STATE_DIR, Root, inside, os_reason
from patchspec.install.state import RECORD_LIMIT, STATE_FILE, check_record, parse_record, sha256, writer_active

JOURNAL = f"{STATE_DIR}/journal.json"
# a journal without "version" (written before it had one) is version 1; version 2 names the kept old file of
# op N ``txn/N`` (version 1 numbered it by its place among all writes, so gaps are allowed there)
JOURNAL_VERSION = 2
SAVED_DIR = f"{STATE_DIR}/txn"
TMP_SUFFIX = ".patchspec-tmp"
FAULT_ENV, TRACE_ENV = "PATCHSPEC_FAULT", "PATCHSPEC_FAULT_TRACE"


def check_writable(directory: Path) -> None:
    """Refuse a read-only directory up front. Root ignores mode bits, so they are honoured here too."""
    probe = directory
    while not probe.exists():
        probe = probe.parent
    mode = probe.stat().st_mode
    if not os.access(probe, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise PatchspecError("directory is read-only: nothing was written", file=str(probe))


class _Faults:
    """The test hook: numbers every write point of one ``commit`` and stops the chosen one."""

    def __init__(self) -> None:
        spec = os.environ.get(FAULT_ENV, "")
        number, _, self.action = spec.partition(":")
        self.target = int(number) if number.isdigit() else None
        self.trace = os.environ.get(TRACE_ENV)
        self.count = 0

    def __call__(self, kind: str, path: Path) -> None:
        if self.target is None and not self.trace:
            return
        self.count += 1
        if self.trace:
            with open(self.trace, "a") as handle:
                handle.write(f"{self.count} {kind} {path}\n")
        if self.count != self.target:
            return
        if self.action in ("kill", "int"):
            os.kill(os.getpid(), signal.SIGKILL if self.action == "kill" else signal.SIGINT)
        else:
            code = errno.ENOSPC if self.action == "enospc" else errno.EPERM
            raise OSError(code, os.strerror(code), str(path))


@dataclass
class _Op:
    path: str             # root-relative
    tmp: str | None       # the temporary file that replaces it; None: the path is deleted
    saved: str | None     # where the old file is kept (a hard link); None: the path did not exist
    new_sha256: str | None


def commit(root: Root, writes: Mapping[str, bytes | None]) -> None:
    """Write every file (``None`` deletes it) or none. ``writes`` maps canonical root-relative paths to
    bytes; a failure or an interrupt at any point puts back every byte and removes what it created."""
    fault = _Faults()
    base = root.path
    writes = {root.canonical(rel): data for rel, data in writes.items()}
    ops, dirs = _plan(base, writes)
    journal = base / JOURNAL
    for path in [journal.with_name(journal.name + TMP_SUFFIX)] + [base / op.tmp for op in ops if op.tmp]:
        if os.path.lexists(path):
            raise PatchspecError("a file is in the way of patchspec's temporary file (patchspec never writes "
                                 "through it); remove it; nothing was written", file=str(path))
    try:
        (base / STATE_DIR).mkdir(exist_ok=True)
        _write_journal(journal, ops, dirs, fault)
        for rel in dirs:
            fault("mkdir", base / rel)
            (base / rel).mkdir(exist_ok=True)
        (base / SAVED_DIR).mkdir(exist_ok=True)
        touched = set()
        for op in ops:
            path = base / op.path
            old = path.lstat() if op.saved else None
            if op.tmp is not None:
                _write_new(base / op.tmp, cast(bytes, writes[op.path]), old, fault)   # a tmp: bytes to write
            if op.saved is not None:
                _keep(path, base / op.saved, fault)
            touched.add(path.parent)
        _fsync_dir(base / SAVED_DIR)  # the kept old files are on disk before any target is replaced
        for op in ops:
            if op.tmp is not None:
                fault("rename", base / op.path)
                os.rename(base / op.tmp, base / op.path)
            else:
                fault("unlink", base / op.path)
                os.unlink(base / op.path)
        for directory in touched:
            _fsync_dir(directory)
        fault("commit", journal)
        journal.unlink()
        _fsync_dir(journal.parent)
    except BaseException as exc:
        _undo_now(root, exc)
        raise
    _clean_up(root, ops)


def _plan(base: Path, writes: dict[str, bytes | None]) -> tuple[list[_Op], list[str]]:
    """What ``commit`` will journal before it writes: one op per file it replaces, creates or deletes (a
    deletion of a missing file is none), and the directories it creates, outermost first; a directory it
    cannot write to is refused here, before anything is written."""
    ops: list[_Op] = []
    dirs: list[str] = []
    for rel, data in writes.items():
        path = base / rel
        exists = _regular(path)
        if data is None and not exists:
            continue
        if data is not None:
            parent = path.parent
            missing = []
            while not parent.exists():
                missing.append(parent.relative_to(base).as_posix())
                parent = parent.parent
            dirs += [d for d in reversed(missing) if d not in dirs]
            check_writable(parent)
        ops.append(_Op(rel, f"{rel}{TMP_SUFFIX}" if data is not None else None,
                       f"{SAVED_DIR}/{len(ops)}" if exists else None, sha256(data)))
    return ops, dirs


def _regular(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        raise PatchspecError("not a regular file: patchspec replaces only regular files; nothing was written",
                             file=str(path))
    return True


def _write_journal(journal: Path, ops: list[_Op], dirs: list[str], fault: _Faults) -> None:
    data = json.dumps({"version": JOURNAL_VERSION, "ops": [op.__dict__ for op in ops], "dirs": dirs},
                      indent=1).encode()
    tmp = journal.with_name(journal.name + TMP_SUFFIX)
    _write_new(tmp, data, None, fault)
    fault("journal", journal)
    os.rename(tmp, journal)
    _fsync_dir(journal.parent)


def _write_new(path: Path, data: bytes, like: os.stat_result | None, fault: _Faults) -> None:
    """A new file, never through a link and never over an existing file, with the owner and mode of the
    file it will replace, its bytes on disk before it is renamed anywhere."""
    fault("create", path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        if like is not None:
            os.fchmod(fd, stat.S_IMODE(like.st_mode))
            if (like.st_uid, like.st_gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, like.st_uid, like.st_gid)
        view = memoryview(data)
        while view:
            fault("write", path)
            view = view[os.write(fd, view):]
        fault("fsync", path)
        os.fsync(fd)
    except OSError as exc:
        exc.filename = exc.filename or str(path)  # os.write and os.fsync name no file
        raise
    finally:
        os.close(fd)


def _keep(path: Path, saved: Path, fault: _Faults) -> None:
    """The old file stays reachable under the state directory until the run commits: a hard link, or on
    another file system a full copy renamed into place once written."""
    fault("link", saved)
    try:
        os.link(path, saved, follow_symlinks=False)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        part = saved.with_name(saved.name + TMP_SUFFIX)
        _write_new(part, path.read_bytes(), path.lstat(), fault)
        os.rename(part, saved)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _undo_now(root: Root, exc: BaseException) -> None:
    """Roll back in the failing process, with SIGINT held off so a second Ctrl-C cannot cut it short;
    an ``OSError`` becomes the one-line error of the file that failed."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        _roll_back(root)
    except OSError as again:
        raise PatchspecError(f"interrupted, and rolling back failed too ({os_reason(again)}); "
                             f"`patchspec recover --root {root.path}` finishes it", file=again.filename,
                             exit_code=Exit.INTERNAL) from None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if isinstance(exc, OSError):
        raise PatchspecError(f"cannot write: {os_reason(exc)}; every file was put back, nothing was "
                             "written", file=str(exc.filename or root.path)) from None


def _read_journal(root: Root) -> dict[str, Any] | None:
    """The journal of a run under way or interrupted, checked before anything acts on it: its schema
    (``schema/journal.schema.json``), and every path in it one that patchspec writes under the root (no
    ``..``, no absolute path, no link on the way, the temporary file beside its target). Anything else is
    refused in one line, and nothing is touched: ``recover`` never guesses."""
    try:
        raw = root.read_bytes(JOURNAL, RECORD_LIMIT)
        if raw is None:
            return None
        data: dict[str, Any] = parse_record(raw, "the journal of an interrupted run")
        check_record(data, "journal", "the journal of an interrupted run", JOURNAL_VERSION)
        for index, op in enumerate(data["ops"]):
            for key in ("path", "tmp", "saved"):
                _journal_path(root, op[key], f"ops/{index}/{key}")
            if op["tmp"] is not None and op["tmp"] != f"{op['path']}{TMP_SUFFIX}":
                raise PatchspecError(f"journal ops/{index}/tmp {op['tmp']!r} is not the temporary file of "
                                     f"{op['path']!r}")
        _check_names(data)
        for index, rel in enumerate(data["dirs"]):
            _journal_path(root, rel, f"dirs/{index}")
    except (ValueError, PatchspecError) as exc:
        why = exc.message if isinstance(exc, PatchspecError) else str(exc)
        raise PatchspecError(f"{why}: recover does not guess; nothing was touched. The old files the run kept "
                             f"are in {SAVED_DIR}/: put back by hand what the journal names (or reinstall the "
                             f"package), then delete {JOURNAL}", file=str(root.path / JOURNAL)) from None
    return data


def _check_names(data: dict[str, Any]) -> None:
    """The names ``commit`` gives: one op per path; the kept old file of op N is ``txn/N`` (version 1: N never
    below the op's place and rising with it), since one naming another op's kept file puts that file's bytes
    over this one's and loses them; each directory a parent of a file the run writes, never one it did not
    create."""
    exact, paths, last = data.get("version", 1) >= 2, set(), -1
    for index, op in enumerate(data["ops"]):
        if op["path"] in paths:
            raise PatchspecError(f"journal ops/{index}/path {op['path']!r} is named by an earlier op too")
        paths.add(op["path"])
        if op["saved"] is not None:
            number = int(op["saved"].rpartition("/")[2])
            if (number != index) if exact else (number < index or number <= last):
                raise PatchspecError(f"journal ops/{index}/saved {op['saved']!r} is not the kept file of this "
                                     f"op (it is another op's, or out of order)")
            last = number
    parents = {parent.as_posix() for op in data["ops"] if op["tmp"] is not None
               for parent in Path(op["path"]).parents if parent != Path(".")}
    for index, rel in enumerate(data["dirs"]):
        if rel not in parents:
            raise PatchspecError(f"journal dirs/{index} {rel!r} is not a directory of a file the run writes")


def _journal_path(root: Root, rel: str | None, where: str) -> None:
    """A path of the journal: the one canonical path of a file under the root (the only kind ``commit``
    writes), or refused naming where it is in the journal."""
    if rel is not None and (canonical := inside(root.path, rel, f"journal {where}")) != rel:
        raise PatchspecError(f"journal {where} {rel!r} is not a path patchspec writes (it names {canonical!r} "
                             "through a link or a '..')")


def _roll_back(root: Root) -> list[str]:
    """Put back, from the journal, every file the interrupted run touched; idempotent, so a recovery that
    is itself interrupted is finished by the next one. Returns the paths put back."""
    base = root.path
    data = _read_journal(root)
    put_back = []
    if data is not None:
        for raw in reversed(data["ops"]):
            op = _Op(**raw)
            path = base / op.path
            if op.saved is not None and os.path.lexists(base / op.saved):
                os.rename(base / op.saved, path)
                with contextlib.suppress(FileNotFoundError):  # it was still the same file: rename kept both
                    os.unlink(base / op.saved)
                put_back.append(op.path)
            elif op.saved is None and op.new_sha256 and sha256(root.read_bytes(op.path)) == op.new_sha256:
                path.unlink()
                put_back.append(op.path)
            if op.tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(base / op.tmp)
        for rel in reversed(data["dirs"]):
            with contextlib.suppress(OSError):
                (base / rel).rmdir()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(base / JOURNAL)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(base / f"{JOURNAL}{TMP_SUFFIX}")
    shutil.rmtree(base / SAVED_DIR, ignore_errors=True)
    return put_back


def recover(root: Root) -> list[str]:
    """Under the lock: roll back a run that was interrupted. Returns one line saying what it did, or
    nothing when there was nothing to do."""
    if not (root.path / JOURNAL).exists():
        _roll_back(root)  # at most a half-written journal, or kept files of a run that committed
        return []
    try:
        put_back = _roll_back(root)
    except OSError as exc:
        raise PatchspecError(f"cannot roll back the interrupted run: {os_reason(exc)}",
                             file=str(exc.filename)) from None
    return [f"recovered: rolled back an interrupted run ({len(put_back)} file(s) put back: "
            f"{', '.join(put_back) or 'none had been replaced yet'})"]


def pending_view(root: Root) -> Root:
    """``root`` as read-only verbs must see it: with an interrupted run pending, every file it touched
    reads as it was before (what ``recover`` will put back); else ``root`` itself."""
    data = _read_journal(root)
    if data is None:
        return root
    overlay: dict[str, bytes | None] = {}
    for raw in data["ops"]:
        op = _Op(**raw)
        if op.saved is None:
            overlay[op.path] = None
        elif (saved := root.read_bytes(op.saved)) is not None:
            overlay[op.path] = saved
    return Root(root.path, overlay)


def journal_left(root: Root) -> bool:
    """Whether a run's journal is there: one under way (see ``writer_active``) or one interrupted."""
    return (root.path / JOURNAL).exists()


def pending_note(root: Root) -> str | None:
    """The line read-only verbs print while another process's run is under way (it holds the lock), or
    while an interrupted run waits for ``recover``."""
    if writer_active(root):
        return ("in progress: another patchspec is applying or unapplying on this root (it holds the lock); "
                "answers are for the committed state, as the root was before that run")
    if not journal_left(root):
        return None
    return (f"pending: an interrupted run left a journal; answers are for the root as it was before it; "
            f"`patchspec recover --root {root.path}` (or the next apply/unapply) rolls it back")


def view_token(root: Root) -> tuple[tuple[int, int, int] | None, ...]:
    """What changes when a writer starts or commits a run (its journal, the state record): a read-only
    verb that read the root while this changed reads it again, so that it never answers from a mix."""
    out: list[tuple[int, int, int] | None] = []
    for rel in (JOURNAL, STATE_FILE):
        try:
            st = os.stat(root.path / rel)
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def _clean_up(root: Root, ops: list[_Op]) -> None:
    """After the commit: drop the kept old files, and directories that deleting files left empty (never
    the root or above it)."""
    shutil.rmtree(root.path / SAVED_DIR, ignore_errors=True)
    for op in ops:
        if op.tmp is not None:
            continue
        parent = (root.path / op.path).parent
        while parent != root.path and root.path in parent.parents and parent.exists() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
