"""The verbs that write, each under the root's lock: apply, unapply, recover, forget.

Several specs may patch one root, even one file. The pristine bytes of every patched file are kept, and
a file's patched text is always computed from its pristine text with all the specs applied to it, so
specs can be applied and unapplied in any order and the root still comes back byte for byte.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patchspec import proof, snippets
from patchspec.compiler import encoding, gcpause
from patchspec.compiler.plan import Resolved
from patchspec.errors import PatchspecError
from patchspec.install import bytecode, interpreter, txn
from patchspec.install.installed import EDITED, MISSING, REMOVED, REPLACED, PipRecords
from patchspec.install.pristine import refuse_edited
from patchspec.install.root import Root
from patchspec.install.state import (
    STATE_FILE,
    ProofState,
    SpecRecord,
    State,
    load_state,
    locked,
    pristine_path,
    sha256,
)
from patchspec.model import Spec
from patchspec.prepare import Compiled, Prepared, applied_specs, compile_on_root, patched_texts
from patchspec.results import FileAction, FileDone, FileState, Liveness, Note, NoteKind, notes_of
from patchspec.spec import load_spec, spec_name, spec_text
from patchspec.verbs.proving import prove_applied, root_interpreter
from patchspec.verbs.stale import drop_stale


@dataclass
class ApplyResult:
    changed: bool
    files: list[str]
    skipped: list[Resolved] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)   # recovery, dropped stale records, RECORD warnings
    proof: proof.Proof | None = None                 # the run-time proof, when it ran


@gcpause.paused
def apply(spec_path: str, release: str, root_path: str, only: set[str] | None = None,
          lock_timeout: float = 30.0, verify: bool = True, python: str | None = None,
          timeout: float = interpreter.TIMEOUT) -> ApplyResult:
    """Patch the root; then, where the root's interpreter is known, prove every transform live in it
    (``proof``), and undo the change as unapply would when one is not. ``verify=False`` skips the proof."""
    root = Root.open(root_path)
    txn.check_writable(root.path)
    runs = root_interpreter(root, python)
    with locked(root, lock_timeout):
        notes = notes_of(NoteKind.RECOVERY, txn.recover(root))
        state = load_state(root)
        records = PipRecords(root)
        writes: dict[str, bytes | None] = {}
        base = load_spec(spec_path)
        earlier = _unlist_if_stale(state, base.name, root, records, writes, notes)
        compiled = compile_on_root(spec_path, release, root, state, records, only, base)   # the spec opened once
        spec, prepared = compiled.spec, compiled.prepared
        if compiled.applied:
            notes += notes_of(NoteKind.WARNING, prepared.warnings)
            shown = _applied_already(root, state, prepared, spec_path, verify, runs, timeout)
            return ApplyResult(False, state.specs[spec.name].files, compiled.skipped, notes, shown)
        if earlier is not None:
            _refuse_another_version(earlier, prepared, spec_path)
        pristine, warnings = compiled.pristine, compiled.warnings
        patched = {rel: encoding.encode(compiled.texts[rel], root.read_bytes(rel)) for rel in sorted(compiled.files)}
        snippets.check_imports(spec, root, interpreter.finder(runs, root.path), prepared.plan.sources)
        runtime = _snippet_files(root, state, spec, writes)
        rec = _spec_record(spec_path, compiled, runtime, records, warnings, verify, runs)
        writes.update(state.add_spec(spec.name, rec, pristine, patched, runtime,
                                     {rel: records.hash(rel) for rel in pristine}))
        writes.update(_written(root, state, pristine, patched, runtime, runs))
        txn.commit(root, writes)
        written = Root(root.path)   # what the files are now (``record`` reads an edited file as pristine)
        shown = None
        if runs is not None and rec.proof == ProofState.PENDING:   # verify asked, an interpreter known
            shown = _prove_or_undo(written, spec.name, runs, timeout)
        return ApplyResult(True, sorted(compiled.files), compiled.skipped, notes + notes_of(NoteKind.WARNING, warnings),
                           shown)


def _unlist_if_stale(state: State, name: str, root: Root, records: PipRecords, writes: dict[str, bytes | None],
                     notes: list[Note]) -> SpecRecord | None:
    """Drop the records an upgrade or a reinstall made stale (noted in ``notes``); when that took a file
    from the spec being applied and left it others, take the spec out of the record (returned) so this apply
    patches the dropped file again and records the spec anew."""
    before = list(state.specs[name].files) if name in state.specs else None
    notes += notes_of(NoteKind.REPLACED, drop_stale(root, state, records, [name], writes))
    if before is None or name not in state.specs or state.specs[name].files == before:
        return None
    return state.unlist_spec(name)


def _refuse_another_version(earlier: SpecRecord, prepared: Prepared, spec_path: str) -> None:
    spec = prepared.spec
    if earlier.spec_sha256 != spec.sha256 or earlier.release != prepared.release:
        raise PatchspecError(f"spec {spec.name} is applied from another version of the spec or "
                             f"release ({earlier.release}); unapply it first", file=spec_path)


def _spec_record(spec_path: str, compiled: Compiled, runtime: dict[str, bytes], records: PipRecords,
                 warnings: list[str], verify: bool, runs: interpreter.Interpreter | None) -> SpecRecord:
    """The state record of the spec as this apply writes it; its proof ``pending`` until the proof ends."""
    prepared, files = compiled.prepared, compiled.files
    return SpecRecord(
        spec_path=str(Path(spec_path).resolve()), spec_sha256=prepared.spec.sha256,
        spec_text=spec_text(prepared.raw_spec, spec_path), release=prepared.release,
        profile_path=prepared.profile.path, profile_text=prepared.profile.text,
        files=sorted(files), snippets=sorted(runtime), packages=records.packages(files),
        warnings=[f"warning: {w}" for w in warnings],
        proof=(ProofState.SKIPPED if not verify else ProofState.NO_INTERPRETER if runs is None
               else ProofState.PENDING),
        python=str(runs.path) if runs is not None and runs.how in ("--python", interpreter.KEPT) else None)


def _written(root: Root, state: State, pristine: dict[str, bytes | None], patched: dict[str, bytes],
             runtime: dict[str, bytes], runs: interpreter.Interpreter | None) -> dict[str, bytes | None]:
    """The files apply writes beside the state directory's: the patched files, the byte code apply keeps
    of the files it is the first to patch and recompiles of the patched ones, the snippet files, and the
    state record."""
    writes: dict[str, bytes | None] = dict(patched)
    for rel in pristine:
        writes.update(bytecode.keep(root, rel))
    writes.update(bytecode.rewrites(root, patched, runs))
    writes.update(runtime)
    writes[STATE_FILE] = state.dump()
    return writes


def _applied_already(root: Root, state: State, prepared: Prepared, spec_path: str, verify: bool,
                     runs: interpreter.Interpreter | None, timeout: float) -> proof.Proof | None:
    """The spec is applied: nothing to write when it is the same spec on the same release and its files
    are as written; its proof, when an earlier apply did not finish or skipped it and it can run now."""
    rec = state.specs[prepared.spec.name]
    _refuse_another_version(rec, prepared, spec_path)
    _verify_unchanged(root, state, prepared.spec.name)
    if verify and runs is not None and rec.proof not in (ProofState.LIVE, ProofState.STATIC):
        return _prove_or_undo(root, prepared.spec.name, runs, timeout)
    return None


def _snippet_files(root: Root, state: State, spec: Spec, writes: dict[str, bytes | None]) -> dict[str, bytes]:
    """The snippet package's files to install; refused where another spec installed other contents, or a
    file patchspec did not write is in the way."""
    runtime = snippets.install_files(spec)
    for rel, data in runtime.items():
        entry = state.snippets.get(rel)
        if entry is not None and entry.sha256 != sha256(data):
            raise PatchspecError(f"snippet file {rel} is installed with other contents by "
                                 f"{', '.join(entry.specs)}", file=str(root.path / rel))
        if entry is None and rel not in writes and root.read_bytes(rel) is not None:
            raise PatchspecError("a file patchspec did not write is in the way of a snippet file: apply "
                                 "overwrites only its own files; move it away; nothing was written",
                                 file=str(root.path / rel))
    return runtime


def _prove_or_undo(root: Root, name: str, runs: interpreter.Interpreter, timeout: float) -> proof.Proof:
    """The proof as apply's last step, the files committed: record it, or undo the spec when a transform
    is not live (or the proof cannot run). A kill before it ends leaves the record saying ``pending``."""
    state = load_state(root)
    try:
        shown = prove_applied(root, state, name, runs, timeout)
    except interpreter.ProbeError as exc:
        raise _undone(root, name, runs, f"the run-time proof did not run: {exc}", NO_VERIFY) from None
    if shown.failed:
        first = shown.failed[0]
        raise _undone(root, name, runs, f"not live: {first.spec} {first.target}#{first.index} {first.kind} "
                      f"{first.function} in {first.file}: {first.detail}", "" if first in shown.dead else NO_VERIFY)
    state.specs[name].proof = ProofState.STATIC if any(r.status == Liveness.STATIC for r in shown.rows) \
        else ProofState.LIVE
    txn.commit(root, {STATE_FILE: state.dump()})
    return shown


NO_VERIFY = " (`--no-verify` applies it without the proof)"   # how to apply what the proof refused


def _undone(root: Root, name: str, runs: interpreter.Interpreter, why: str, way: str) -> PatchspecError:
    """The spec undone as unapply would, and the error saying why (and ``way``, what applies it anyway)."""
    _unapply_locked(root, name, False, runs)
    return PatchspecError(f"{why}; the change was undone{way}", file=str(root.path))


def _verify_unchanged(root: Root, state: State, name: str) -> None:
    for rel in state.specs[name].files:
        refuse_edited(root, state, rel)


@dataclass
class UnapplyResult:
    actions: list[FileAction]   # what was done to each file
    notes: list[Note] = field(default_factory=list)


def unapply(spec_name_or_path: str, root_path: str, force: bool = False,
            lock_timeout: float = 30.0, python: str | None = None) -> UnapplyResult:
    """Restore every file the spec patched, byte for byte. A file a reinstall or an upgrade replaced is
    left as it is and its record dropped: bytes of one release are never written into another."""
    root = Root.open(root_path)
    txn.check_writable(root.path)
    runs = root_interpreter(root, python)
    with locked(root, lock_timeout):
        notes = notes_of(NoteKind.RECOVERY, txn.recover(root))
        actions = _unapply_locked(root, spec_name(spec_name_or_path), force, runs)
        return UnapplyResult(actions, notes)


def _unapply_locked(root: Root, name: str, force: bool, runs: interpreter.Interpreter | None,
                    ) -> list[FileAction]:
    state = load_state(root)
    if name not in state.specs:
        raise PatchspecError(f"spec {name} is not applied to this root", file=str(root.path))
    records = PipRecords(root)
    writes: dict[str, bytes | None] = {}
    statuses = {rel: records.file_status(state, rel) for rel in state.specs[name].files}
    if not force:
        for rel, status in statuses.items():
            if status in (EDITED, MISSING):
                refuse_edited(root, state, rel)
    actions = _leave_replaced(root, state, records, statuses, writes)
    others = applied_specs(state, root, exclude=name)
    expected = {rel: state.files[rel].pristine_sha256 for rel in state.specs[name].files}
    rec, released, unused = state.drop_spec(name)
    kept_pyc: dict[str, bytes | None] = {}
    for rel in rec.files:
        if rel in released:
            actions.append(_restore_pristine(root, rel, expected[rel], writes, kept_pyc))
        else:
            actions.append(_restore_under_others(root, state, rel, others, writes))
    writes.update(bytecode.rewrites(root, {a.path: writes[a.path] for a in actions if a.path in writes}, runs))
    writes.update(kept_pyc)     # the byte code apply kept, back with its pristine text
    for rel in unused:
        writes[rel] = None
        writes.update(bytecode.removed(root, rel))
    writes[STATE_FILE] = state.dump()
    txn.commit(root, writes)
    return actions


def _leave_replaced(root: Root, state: State, records: PipRecords, statuses: dict[str, FileState],
                    writes: dict[str, bytes | None]) -> list[FileAction]:
    """The files a reinstall or an upgrade replaced (or removed): left as they are, their records dropped,
    since bytes of one release are never written into another."""
    actions = []
    for rel, status in statuses.items():
        if status in (REPLACED, REMOVED):
            state.drop_file(rel)
            writes[pristine_path(rel)] = None
            writes.update(dict.fromkeys(bytecode.kept(root, rel).values()))
            how = f"replaced by {records.where(rel)}" if status == REPLACED else "removed with its package"
            actions.append(FileAction(rel, FileDone.LEFT_STALE, detail=how))
    return actions


def _restore_pristine(root: Root, rel: str, expected: str, writes: dict[str, bytes | None],
                      kept_pyc: dict[str, bytes | None]) -> FileAction:
    """A file no other spec patches: its pristine copy back (refused when the copy is not what was kept),
    the copy gone, and the byte code apply kept of it back with it (into ``kept_pyc``)."""
    pristine = root.read_bytes(pristine_path(rel))
    if pristine is None or sha256(pristine) != expected:
        raise PatchspecError("pristine copy is missing or altered: the original cannot be restored; "
                             "nothing was written", file=str(root.path / pristine_path(rel)))
    writes[rel] = pristine
    writes[pristine_path(rel)] = None
    kept_pyc.update(bytecode.restored(root, rel, pristine))
    return FileAction(rel, FileDone.RESTORED)


def _restore_under_others(root: Root, state: State, rel: str, others: dict[str, Spec],
                          writes: dict[str, bytes | None]) -> FileAction:
    """A file other specs patch too: its text recomputed from the pristine text with those specs."""
    remaining = [others[n] for n in state.files[rel].specs]
    data = encoding.encode(patched_texts(remaining, {rel}, root, state)[rel], root.read_bytes(pristine_path(rel)))
    state.files[rel].patched_sha256 = sha256(data)
    writes[rel] = data
    return FileAction(rel, FileDone.RESTORED_UNDER, detail=", ".join(state.files[rel].specs))


def recover(root_path: str, lock_timeout: float = 30.0) -> list[Note]:
    """Roll back an interrupted apply or unapply from its journal."""
    root = Root.open(root_path)
    with locked(root, lock_timeout):
        return notes_of(NoteKind.RECOVERY, txn.recover(root)) or [Note(NoteKind.NOTE, "nothing to recover")]


def forget(spec_name_or_path: str, root_path: str, lock_timeout: float = 30.0) -> list[FileAction]:
    """Drop a spec's record without touching the files it patched (for a root repaired by hand). Snippet
    files no other spec needs go when they are as patchspec wrote them."""
    root = Root.open(root_path)
    txn.check_writable(root.path)
    with locked(root, lock_timeout):
        txn.recover(root)
        state = load_state(root)
        name = spec_name(spec_name_or_path)
        if name not in state.specs:
            raise PatchspecError(f"spec {name} is not applied to this root", file=str(root.path))
        snippet_sha = {rel: state.snippets[rel].sha256 for rel in state.specs[name].snippets}
        rec, released, unused = state.drop_spec(name)
        writes: dict[str, bytes | None] = {pristine_path(rel): None for rel in released}
        for rel in released:
            writes.update(dict.fromkeys(bytecode.kept(root, rel).values()))
        actions = [FileAction(rel, FileDone.LEFT) for rel in rec.files]
        for rel in unused:
            if sha256(root.read_bytes(rel)) == snippet_sha[rel]:
                writes[rel] = None
                writes.update(bytecode.removed(root, rel))
                actions.append(FileAction(rel, FileDone.SNIPPET_REMOVED))
            else:
                actions.append(FileAction(rel, FileDone.SNIPPET_LEFT))
        writes[STATE_FILE] = state.dump()
        txn.commit(root, writes)
        return actions


