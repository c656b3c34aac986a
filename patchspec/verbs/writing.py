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
from patchspec.compiler.edits import Status
from patchspec.compiler.plan import Resolved
from patchspec.errors import PatchspecError
from patchspec.install import bytecode, interpreter, txn
from patchspec.install.installed import EDITED, MISSING, REMOVED, REPLACED, PipRecords
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
from patchspec.prepare import Prepared, applied_specs, compile_spec, patched_texts, prepare
from patchspec.results import FileAction, Liveness, Note, NoteKind, notes_of
from patchspec.spec import load_spec, spec_name, spec_text
from patchspec.verbs.proving import prove_applied, root_interpreter
from patchspec.verbs.stale import drop_stale, refuse_unrecorded
from patchspec.verdict import raise_if_upstream, raise_plan_errors


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
        notes += notes_of(NoteKind.REPLACED, drop_stale(root, state, records, [base.name], writes))
        prepared = prepare(spec_path, release, root, only, state, base)   # the root and the spec opened once
        spec = prepared.spec
        skipped = [r for r in prepared.plan.resolved if r.status == Status.SKIPPED]
        if spec.name in state.specs:
            notes += [Note(NoteKind.WARNING, f"warning: {w}") for w in prepared.warnings]
            shown = _applied_already(root, state, prepared, spec_path, verify, runs, timeout)
            return ApplyResult(False, state.specs[spec.name].files, skipped, notes, shown)
        raise_plan_errors(prepared.plan)
        files = set(prepared.plan.files)
        if not files:
            raise_if_upstream(spec, prepared.plan)
            raise PatchspecError(f"nothing to apply: every target of {spec.name} was skipped", file=spec_path)
        for rel in files & set(state.files):
            _verify_file(root, state, rel)
        warnings = [f"warning: {w}" for w in prepared.warnings]
        pristine = _pristine_copies(root, state, records, sorted(files - set(state.files)), warnings)
        sharing = [s for n, s in applied_specs(state, root).items() if n in state.touching(files)]
        texts = compile_spec(prepared)  # the spec alone holds on this release, its bindings included
        if sharing:
            texts = patched_texts([*sharing, spec], files, root, state)
        patched = {rel: encoding.encode(texts[rel], root.read_bytes(rel)) for rel in sorted(files)}
        snippets.check_imports(spec, root, interpreter.finder(runs, root.path), prepared.plan.sources)
        runtime = _snippet_files(root, state, spec, writes)
        rec = SpecRecord(
            spec_path=str(Path(spec_path).resolve()), spec_sha256=spec.sha256,
            spec_text=spec_text(prepared.raw_spec, spec_path), release=prepared.release,
            profile_path=prepared.profile.path, profile_text=prepared.profile.text,
            files=sorted(files), snippets=sorted(runtime), packages=records.packages(files), warnings=warnings,
            proof=(ProofState.SKIPPED if not verify else ProofState.NO_INTERPRETER if runs is None
                   else ProofState.PENDING),
            python=str(runs.path) if runs is not None and runs.how in ("--python", interpreter.KEPT) else None)
        writes.update(state.add_spec(spec.name, rec, pristine, patched, runtime,
                                     {rel: records.hash(rel) for rel in pristine}))
        writes.update(patched)
        for rel in pristine:
            writes.update(bytecode.keep(root, rel))
        writes.update(bytecode.rewrites(root, patched, runs))
        writes.update(runtime)
        writes[STATE_FILE] = state.dump()
        txn.commit(root, writes)
        written = Root(root.path)   # what the files are now (``record`` reads an edited file as pristine)
        shown = _prove_or_undo(written, spec.name, runs, timeout) if rec.proof == ProofState.PENDING else None
        return ApplyResult(True, sorted(files), skipped, notes + notes_of(NoteKind.WARNING, warnings), shown)


def _applied_already(root: Root, state: State, prepared: Prepared, spec_path: str, verify: bool,
                     runs: interpreter.Interpreter | None, timeout: float) -> proof.Proof | None:
    """The spec is applied: nothing to write when it is the same spec on the same release and its files
    are as written; its proof, when an earlier apply did not finish or skipped it and it can run now."""
    spec = prepared.spec
    rec = state.specs[spec.name]
    if rec.spec_sha256 != spec.sha256 or rec.release != prepared.release:
        raise PatchspecError(f"spec {spec.name} is applied from another version of the spec or "
                             f"release ({rec.release}); unapply it first", file=spec_path)
    _verify_unchanged(root, state, spec.name)
    if verify and runs is not None and rec.proof not in (ProofState.LIVE, ProofState.STATIC):
        return _prove_or_undo(root, spec.name, runs, timeout)
    return None


def _pristine_copies(root: Root, state: State, records: PipRecords, rels: list[str],
                     warnings: list[str]) -> dict[str, bytes | None]:
    """The bytes of each file the spec is the first to patch, kept as its pristine copy: refused when it
    carries a marker no record explains; a warning (added to ``warnings``) when it is not what pip installed."""
    pristine = {rel: root.read_bytes(rel) for rel in rels}
    for rel, data in pristine.items():
        refuse_unrecorded(root, state, rel, data)
        want = records.hash(rel)
        if want is not None and want != sha256(data):
            warnings.append(f"warning: {rel} differs from what {records.where(rel)} installed (its RECORD "
                            "sha256): changed after install; kept as the pristine copy all the same")
    return pristine


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
        shown, why = None, f"the run-time proof did not run: {exc}"
    else:
        first = shown.failed[0] if shown.failed else None
        why = first and (f"not live: {first.spec} {first.target}#{first.index} {first.kind} {first.function} in "
                         f"{first.file}: {first.detail}")
    if why:
        _unapply_locked(root, name, False, runs)
        way = "" if shown is not None and first in shown.dead else " (`--no-verify` applies it without the proof)"
        raise PatchspecError(f"{why}; the change was undone{way}", file=str(root.path))
    state.specs[name].proof = ProofState.STATIC if any(r.status == Liveness.STATIC for r in shown.rows) \
        else ProofState.LIVE
    txn.commit(root, {STATE_FILE: state.dump()})
    return shown


def _verify_file(root: Root, state: State, rel: str) -> None:
    current = root.read_bytes(rel)
    if sha256(current) != state.files[rel].patched_sha256:
        raise PatchspecError("patched file was edited or removed since apply (use unapply --force to "
                             "restore it anyway); nothing was written", file=str(root.path / rel))


def _verify_unchanged(root: Root, state: State, name: str) -> None:
    for rel in state.specs[name].files:
        _verify_file(root, state, rel)


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
                _verify_file(root, state, rel)
    actions = []
    for rel, status in statuses.items():
        if status in (REPLACED, REMOVED):
            state.drop_file(rel)
            writes[pristine_path(rel)] = None
            writes.update(dict.fromkeys(bytecode.kept(root, rel).values()))
            how = f"replaced by {records.where(rel)}" if status == REPLACED else "removed with its package"
            actions.append(FileAction(rel, f"left as it is ({how}); record dropped"))
    others = applied_specs(state, root, exclude=name)
    expected = {rel: state.files[rel].pristine_sha256 for rel in state.specs[name].files}
    rec, released, unused = state.drop_spec(name)
    kept_pyc: dict[str, bytes | None] = {}
    for rel in rec.files:
        if rel in released:
            pristine = root.read_bytes(pristine_path(rel))
            if sha256(pristine) != expected[rel]:
                raise PatchspecError("pristine copy is missing or altered: the original cannot be restored; "
                                     "nothing was written", file=str(root.path / pristine_path(rel)))
            writes[rel] = pristine
            writes[pristine_path(rel)] = None
            kept_pyc.update(bytecode.restored(root, rel, pristine))
            actions.append(FileAction(rel, "restored"))
        else:
            remaining = [others[n] for n in state.files[rel].specs]
            data = encoding.encode(patched_texts(remaining, {rel}, root, state)[rel],
                                   root.read_bytes(pristine_path(rel)))
            state.files[rel].patched_sha256 = sha256(data)
            writes[rel] = data
            actions.append(FileAction(rel, f"restored under {', '.join(state.files[rel].specs)}"))
    writes.update(bytecode.rewrites(root, {a.path: writes[a.path] for a in actions if a.path in writes}, runs))
    writes.update(kept_pyc)     # the byte code apply kept, back with its pristine text
    for rel in unused:
        writes[rel] = None
        writes.update(bytecode.removed(root, rel))
    writes[STATE_FILE] = state.dump()
    txn.commit(root, writes)
    return actions


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
        actions = [FileAction(rel, "left as it is; record dropped") for rel in rec.files]
        for rel in unused:
            if sha256(root.read_bytes(rel)) == snippet_sha[rel]:
                writes[rel] = None
                writes.update(bytecode.removed(root, rel))
                actions.append(FileAction(rel, "removed (a snippet file patchspec wrote)"))
            else:
                actions.append(FileAction(rel, "left as it is (not as patchspec wrote it)"))
        writes[STATE_FILE] = state.dump()
        txn.commit(root, writes)
        return actions


