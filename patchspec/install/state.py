"""The state record under a patched root: which specs are applied, and how to get every byte back.

``.patchspec/state.json`` (shape: ``schema/state.schema.json``) holds, per file, the sha256 of its
pristine and of its patched bytes, the specs that patched it, and the sha256 the package's
``*.dist-info/RECORD`` gave for it at apply; ``.patchspec/pristine/<path>`` holds the pristine bytes. Per
spec it holds the spec's and profile's text, the release, the snippet files it installed, and the version
and RECORD hash of every package it patched (what tells an upgrade from a hand edit). ``State`` owns this
bookkeeping; ``txn`` writes it with the files, in one journaled step.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import errno
import fcntl
import functools
import hashlib
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Any, cast, overload

import jsonschema
from jsonschema.protocols import Validator

from patchspec.errors import PatchspecError
from patchspec.install.root import STATE_DIR, Root, inside, os_reason

STATE_FILE = f"{STATE_DIR}/state.json"
PRISTINE_DIR = f"{STATE_DIR}/pristine"
LOCK_FILE = f"{STATE_DIR}/lock"
RECORD_LIMIT = 64 << 20   # bytes: the most of a state record or journal read back (each spec's text is in it)
VERSION = 3   # 2: each spec's ``proof``; a version 1 record reads as one whose proof never ran
              # 3: each spec's ``python``; an older record reads as one no --python named


class ProofState(enum.StrEnum):
    """Where a spec's run-time proof stands (``patchspec verify``, apply's last step)."""

    PENDING = "pending"                # written, the proof not finished: apply was stopped in between
    LIVE = "live"                      # every transform shown live in the root's interpreter
    STATIC = "static"                  # live where importable; the rest shown statically (named why)
    SKIPPED = "skipped"                # applied with --no-verify
    NO_INTERPRETER = "no-interpreter"  # no interpreter is known to run the root


@overload
def sha256(data: bytes) -> str: ...
@overload
def sha256(data: bytes | None) -> str | None: ...
def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def pristine_path(rel: str) -> str:
    return f"{PRISTINE_DIR}/{rel}"


@dataclass
class FileRecord:
    pristine_sha256: str
    patched_sha256: str
    specs: list[str]
    installed_sha256: str | None = None   # the package RECORD's sha256 of the file when it was applied


@dataclass
class SnippetRecord:
    sha256: str
    specs: list[str]


@dataclass
class PackageRecord:
    version: str | None
    record_sha256: str | None      # sha256 of the whole dist-info RECORD file


@dataclass
class SpecRecord:
    spec_path: str
    spec_sha256: str
    spec_text: str
    release: str
    profile_path: str
    profile_text: str
    files: list[str]
    snippets: list[str]
    packages: dict[str, PackageRecord] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    proof: ProofState | None = None      # None: a version 1 record, written before the proof existed
    python: str | None = None       # the interpreter --python named at apply, kept for later verbs


@functools.cache
def _validator(name: str) -> Validator:
    """``schema/NAME.schema.json``'s validator, built once (``jsonschema.validate`` checks the schema itself on
    every call, the most of a check)."""
    schema = json.loads(resources.files("patchspec").joinpath(f"schema/{name}.schema.json").read_text())
    validator: Validator = jsonschema.validators.validator_for(schema)(schema)
    return validator


def parse_record(raw: bytes, what: str) -> Any:
    """The JSON of a record patchspec reads back (the state, the journal): untrusted input, so any bytes,
    size or nesting gives a ``ValueError`` saying what is wrong, never another error."""
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{what} is nested deeper than any patchspec writes") from None
    except ValueError as exc:   # UnicodeDecodeError is one
        raise ValueError(f"{what} is unreadable: {exc}") from None


def check_record(data: Any, name: str, what: str, current: int) -> None:
    """Raise a ``ValueError`` saying what is wrong unless ``data`` is a record of ``schema/NAME.schema.json``
    in a format up to ``current`` (its ``"version"``): checked before anything acts on it."""
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > current:
        raise ValueError(f"{what} format {version} is newer than this patchspec reads ({current}): it was "
                         "written by a newer patchspec; use that one (or newer) on this root")
    try:
        error = jsonschema.exceptions.best_match(_validator(name).iter_errors(data))
    except RecursionError:
        raise ValueError(f"{what} is nested deeper than any patchspec writes") from None
    if error is not None:
        path = "/".join(str(p) for p in error.absolute_path) or "top level"
        raise ValueError(f"{what} is not one patchspec wrote ({path}: {error.message})")


@dataclass
class State:
    specs: dict[str, SpecRecord] = field(default_factory=dict)
    files: dict[str, FileRecord] = field(default_factory=dict)
    snippets: dict[str, SnippetRecord] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, where: str) -> State:
        """The record in ``data``: every older format reads (a version 1 record as one whose proof never
        ran); the next write is in the current format. A newer one is refused, saying so."""
        try:
            check_record(data, "state", "state record", VERSION)
        except ValueError as exc:
            raise PatchspecError(f"{exc}; nothing was written", file=where) from None
        specs = {name: SpecRecord(**{**rec, "packages": {p: PackageRecord(**v)
                                                          for p, v in rec.get("packages", {}).items()},
                                     "proof": ProofState(rec["proof"]) if rec.get("proof") else None})
                 for name, rec in data["specs"].items()}
        return cls(specs, {rel: FileRecord(**rec) for rel, rec in data["files"].items()},
                   {rel: SnippetRecord(**rec) for rel, rec in data["snippets"].items()})

    def dump(self) -> bytes | None:
        """The bytes of the record, or ``None`` when nothing is applied any more (the record goes away)."""
        if not self.specs:
            return None
        data = {"version": VERSION, **{k: {n: dataclasses.asdict(v) for n, v in getattr(self, k).items()}
                                       for k in ("specs", "files", "snippets")}}
        return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()

    def python(self) -> str | None:
        """The interpreter a ``--python`` named for this root, as the latest spec applied with one kept it."""
        return next((rec.python for rec in reversed(self.specs.values()) if rec.python), None)

    def paths(self) -> Iterator[tuple[str, str]]:
        """(where in the record, path) of every path the record names under the root."""
        for kind in ("files", "snippets"):
            yield from ((f"{kind}/{rel}", rel) for rel in getattr(self, kind))
        for name, rec in self.specs.items():
            for kind in ("files", "snippets"):
                yield from ((f"specs/{name}/{kind}", rel) for rel in getattr(rec, kind))

    def touching(self, files: set[str], exclude: str | None = None) -> list[str]:
        """The applied specs (by name) that patched any of ``files``."""
        return [n for n, rec in sorted(self.specs.items()) if n != exclude and set(rec.files) & files]

    def add_spec(self, name: str, rec: SpecRecord, pristine: dict[str, bytes | None],
                 patched: dict[str, bytes], installed: dict[str, bytes],
                 record_hashes: dict[str, str | None]) -> dict[str, bytes | None]:
        """Record ``name`` as patching ``patched`` (rel -> new bytes) from ``pristine`` (the bytes of files
        no spec patched before) and installing ``installed``; returns the state-directory writes."""
        writes: dict[str, bytes | None] = {}
        for rel, data in patched.items():
            if rel not in self.files:
                # a file a spec patches is there: its pristine bytes are
                self.files[rel] = FileRecord(sha256(cast(bytes, pristine[rel])), "", [], record_hashes.get(rel))
                writes[pristine_path(rel)] = pristine[rel]
            self.files[rel].specs.append(name)
            self.files[rel].patched_sha256 = sha256(data)
        for rel, data in installed.items():
            self.snippets.setdefault(rel, SnippetRecord(sha256(data), [])).specs.append(name)
        self.specs[name] = rec
        return writes

    def drop_spec(self, name: str) -> tuple[SpecRecord, list[str], list[str]]:
        """Forget ``name``: returns its record, the files no spec patches any more (their pristine copies
        are to go) and the snippet files no spec needs any more."""
        rec = self.specs.pop(name)
        return rec, _unlist(self.files, rec.files, name), _unlist(self.snippets, rec.snippets, name)

    def unlist_spec(self, name: str) -> SpecRecord:
        """Take ``name`` out of the record, keeping its files' and snippet files' entries (their pristine
        copies stay): the spec is recorded again as the apply that patches it again writes it."""
        rec = self.specs.pop(name)
        for rel in rec.files:
            self.files[rel].specs.remove(name)
        for rel in rec.snippets:
            self.snippets[rel].specs.remove(name)
        return rec

    def drop_file(self, rel: str) -> list[str]:
        """Forget one file (an upgrade replaced it): no spec lists it any more; returns those specs."""
        record = self.files.pop(rel)
        for name in record.specs:
            self.specs[name].files.remove(rel)
        return record.specs


def load_state(root: Root) -> State:
    """The record, as the root holds it (or, for read-only verbs with an interrupted run pending, as it
    was before that run: ``root`` then reads through the journal)."""
    where = str(root.path / STATE_FILE)
    raw = root.read_bytes(STATE_FILE, RECORD_LIMIT)
    if raw is None:
        return State()
    try:
        data = parse_record(raw, "state record")
    except ValueError as exc:
        raise PatchspecError(f"{exc}; nothing was written", file=where) from None
    state = State.from_json(data, where)
    for field_name, rel in state.paths():   # a path out of the root is refused, naming where in the record
        try:
            root.canonical(rel, f"state record {field_name}")
        except PatchspecError as exc:
            raise PatchspecError(f"{exc.message}; nothing was written", file=where) from None
    return state


def writer_active(root: Root) -> bool:
    """Whether another process holds the root's lock (an apply or unapply under way), found without taking
    the lock for writing and without creating the lock file (a read-only verb writes nothing)."""
    try:
        handle = os.fdopen(os.open(root.path / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            return exc.errno in (errno.EAGAIN, errno.EACCES)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


@contextlib.contextmanager
def locked(root: Root, timeout: float) -> Iterator[None]:
    """One writer per root at a time; another waits up to ``timeout`` seconds, then fails clearly."""
    if not math.isfinite(timeout) or timeout < 0:
        raise PatchspecError(f"lock timeout {timeout!r} is not a finite number of seconds >= 0")
    if inside(root.path, LOCK_FILE, "the lock file") != LOCK_FILE:   # the state directory or its lock a link
        raise PatchspecError(f"{LOCK_FILE} is reached through a symbolic link: patchspec keeps its state only "
                             f"in a directory of the root's own, and never writes through a link; remove the "
                             f"link; nothing was written", file=str(root.path / STATE_DIR))
    lock_path = root.path / LOCK_FILE
    deadline = time.monotonic() + timeout
    while True:
        try:
            lock_path.parent.mkdir(exist_ok=True)
            handle = os.fdopen(os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644),
                               "a+")
        except OSError as exc:
            raise PatchspecError(f"cannot create the lock file: {os_reason(exc)}; nothing was written",
                                 file=str(lock_path)) from None
        try:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise PatchspecError(f"cannot lock: {os_reason(exc)}", file=str(lock_path)) from None
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


def _release(root: Root, lock_path: Path, handle: IO[str]) -> None:
    """Leave no trace: with nothing applied and nothing to recover, the lock and the state directory go."""
    try:
        if not any((root.path / STATE_DIR / name).exists() for name in ("state.json", "journal.json")):
            lock_path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                lock_path.parent.rmdir()
    finally:
        handle.close()


def _unlist(table: dict[str, FileRecord] | dict[str, SnippetRecord], rels: list[str], name: str) -> list[str]:
    """Take spec ``name`` off the entries of ``table`` at ``rels``; those no spec lists any more go, and
    their paths are returned."""
    gone = []
    for rel in rels:
        entry = table.get(rel)
        if entry is None:
            continue
        if name in entry.specs:
            entry.specs.remove(name)
        if not entry.specs:
            del table[rel]
            gone.append(rel)
    return gone
