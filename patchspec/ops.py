"""The verbs as functions: compile, apply, unapply, check, diff. Only apply and unapply write.

Several specs may patch one root, even one file. The pristine bytes of every patched file are kept, and
a file's patched text is always computed from its pristine text with all the specs applied to it, so
specs can be applied and unapplied in any order and the root still comes back byte for byte.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from patchspec import proof, snippets
from patchspec.compiler import encoding, gcpause
from patchspec.compiler.edits import ConflictError, Status
from patchspec.compiler.plan import Resolved, emit, resolve
from patchspec.errors import Exit, PatchspecError
from patchspec.install import bytecode, interpreter, txn
from patchspec.install.installed import AS_WRITTEN, EDITED, MISSING, REMOVED, REPLACED, PipRecords
from patchspec.install.root import Root
from patchspec.install.state import (
    STATE_FILE,
    Proof,
    SpecRecord,
    State,
    load_state,
    locked,
    pristine_path,
    sha256,
    writer_active,
)
from patchspec.model import MARKER
from patchspec.prepare import (
    Prepared,
    applied_specs,
    binding_problems,
    compile_spec,
    patched_texts,
    prepare,
    pristine_reader,
    raise_if_upstream,
    raise_plan_errors,
)
from patchspec.results import FileState, Liveness, Note, NoteKind, Record, Row, Verdict, notes_of
from patchspec.spec import load_spec, spec_text


@dataclass
class ApplyResult:
    changed: bool
    files: list[str]
    skipped: list[Resolved] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)   # recovery, dropped stale records, RECORD warnings
    proof: proof.Proof | None = None                 # the run-time proof, when it ran


def _drop_stale(root: Root, state: State, records: PipRecords, names: list[str],
                writes: dict[str, bytes | None]) -> list[str]:
    """Forget what a reinstall, an upgrade or an uninstall made stale in the records of ``names``: a file
    replaced by the installed release's own bytes (or removed with its package) leaves the record, the file
    stays as it is, and its stale pristine copy goes. A spec left with no file leaves the record too."""
    notes = []
    for name in names:
        rec = state.specs.get(name)
        if rec is None:
            continue
        for rel in list(rec.files):
            status = records.file_status(state, rel)
            if status in (REPLACED, REMOVED):
                state.drop_file(rel)
                writes[pristine_path(rel)] = None
                how = f"replaced by {records.where(rel)}" if status == REPLACED else "removed with its package"
                notes.append(f"dropped: {rel}: {how}; the record of {name} ({rec.release}) for it is gone, "
                             "the file is left as it is")
        if not rec.files:
            _, _, unused = state.drop_spec(name)
            for rel in unused:
                writes[rel] = None
                writes.update(bytecode.removed(root, rel))
            notes.append(f"dropped: the record of {name} ({rec.release}): none of its files is as it wrote them")
    return notes


@gcpause.paused
def apply(spec_path: str, release: str, root_path: str, only: set[str] | None = None,
          lock_timeout: float = 30.0, verify: bool = True, python: str | None = None,
          timeout: float = interpreter.TIMEOUT) -> ApplyResult:
    """Patch the root; then, where the root's interpreter is known, prove every transform live in it
    (``proof``), and undo the change as unapply would when one is not. ``verify=False`` skips the proof."""
    root = Root.open(root_path)
    txn.check_writable(root.path)
    runs = interpreter.find(root.path, python)
    with locked(root, lock_timeout):
        notes = notes_of(NoteKind.RECOVERY, txn.recover(root))
        state = load_state(root)
        records = PipRecords(root)
        writes: dict[str, bytes | None] = {}
        base = load_spec(spec_path)
        notes += notes_of(NoteKind.REPLACED, _drop_stale(root, state, records, [base.name], writes))
        prepared = prepare(spec_path, release, root, only, state, base)   # the root and the spec opened once
        spec = prepared.spec
        skipped = [r for r in prepared.plan.resolved if r.status == Status.SKIPPED]
        if spec.name in state.specs:
            rec = state.specs[spec.name]
            if rec.spec_sha256 != spec.sha256 or rec.release != prepared.release:
                raise PatchspecError(f"spec {spec.name} is applied from another version of the spec or "
                                     f"release ({rec.release}); unapply it first", file=spec_path)
            _verify_unchanged(root, state, spec.name)
            notes += [Note(NoteKind.WARNING, f"warning: {w}") for w in prepared.warnings]
            shown = None
            if verify and runs is not None and rec.proof not in (Proof.LIVE, Proof.STATIC):
                shown = _prove_or_undo(root, spec.name, runs, timeout)
            return ApplyResult(False, rec.files, skipped, notes, shown)
        raise_plan_errors(prepared.plan)
        files = set(prepared.plan.files)
        if not files:
            raise_if_upstream(spec, prepared.plan)
            raise PatchspecError(f"nothing to apply: every target of {spec.name} was skipped", file=spec_path)
        for rel in files & set(state.files):
            _verify_file(root, state, rel)
        pristine = {rel: root.read_bytes(rel) for rel in sorted(files - set(state.files))}
        warnings = [f"warning: {w}" for w in prepared.warnings]
        for rel, data in pristine.items():
            if data is not None and MARKER.encode() in data:
                raise PatchspecError("carries a patchspec marker but no state record lists it: it is not the "
                                     "pristine file, and storing it as one would lose the original; restore "
                                     "it (reinstall the package, e.g. pip install --force-reinstall --no-deps "
                                     "NAME==VERSION), then apply; nothing was written", file=str(root.path / rel))
            want = records.hash(rel)
            if want is not None and want != sha256(data):
                warnings.append(f"warning: {rel} differs from what {records.where(rel)} installed (its RECORD "
                                "sha256): changed after install; kept as the pristine copy all the same")
        sharing = [s for n, s in applied_specs(state, root).items() if n in state.touching(files)]
        texts = compile_spec(prepared)  # the spec alone holds on this release, its bindings included
        if sharing:
            texts = patched_texts([*sharing, spec], files, root, state)
        patched = {rel: encoding.encode(texts[rel], root.read_bytes(rel)) for rel in sorted(files)}
        snippets.check_imports(spec, root, interpreter.finder(runs, root.path), prepared.plan.sources)
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
        rec = SpecRecord(
            spec_path=str(Path(spec_path).resolve()), spec_sha256=spec.sha256,
            spec_text=spec_text(prepared.raw_spec, spec_path), release=prepared.release,
            profile_path=prepared.profile.path, profile_text=prepared.profile.text,
            files=sorted(files), snippets=sorted(runtime), packages=records.packages(files), warnings=warnings,
            proof=(Proof.SKIPPED if not verify else Proof.NO_INTERPRETER if runs is None
                   else Proof.PENDING))
        writes.update(state.add_spec(spec.name, rec, pristine, patched, runtime,
                                     {rel: records.hash(rel) for rel in pristine}))
        writes.update(patched)
        writes.update(bytecode.rewrites(root, patched, runs))
        writes.update(runtime)
        writes[STATE_FILE] = state.dump()
        txn.commit(root, writes)
        written = Root(root.path)   # what the files are now (``record`` reads an edited file as pristine)
        shown = _prove_or_undo(written, spec.name, runs, timeout) if rec.proof == Proof.PENDING else None
        return ApplyResult(True, sorted(files), skipped, notes + notes_of(NoteKind.WARNING, warnings), shown)


def _prove_or_undo(root: Root, name: str, runs: interpreter.Interpreter, timeout: float) -> proof.Proof:
    """The proof as apply's last step, the files committed: record it, or undo the spec when a transform
    is not live (or the proof cannot run). A kill before it ends leaves the record saying ``pending``."""
    state = load_state(root)
    try:
        shown = _prove(root, state, name, runs, timeout)
    except interpreter.ProbeError as exc:
        shown, why = None, f"the run-time proof did not run: {exc}"
    else:
        first = shown.failed[0] if shown.failed else None
        why = first and (f"not live: {first.spec} {first.target}#{first.index} {first.kind} {first.function} in "
                         f"{first.file}: {first.detail}")
    if why:
        _unapply_locked(root, name, False, runs)
        raise PatchspecError(f"{why}; the change was undone (`--no-verify` applies it without the proof)",
                             file=str(root.path))
    state.specs[name].proof = Proof.STATIC if any(r.status == Liveness.STATIC for r in shown.rows) \
        else Proof.LIVE
    txn.commit(root, {STATE_FILE: state.dump()})
    return shown


def _prove(root: Root, state: State, name: str, runs: interpreter.Interpreter,
           timeout: float) -> proof.Proof:
    spec = applied_specs(state, root)[name]
    plan = resolve([spec], pristine_reader(root, state), root.has_package)
    return proof.prove(root, spec, plan, state, runs, timeout)


def check_snippet_imports(prepared: Prepared, python: str | None = None) -> None:
    """Writes nothing: every module the snippet package imports resolves in the root or its interpreter."""
    root = prepared.root
    snippets.check_imports(prepared.spec, root, interpreter.finder(interpreter.find(root.path, python), root.path),
                           prepared.plan.sources)


def verify(spec_name_or_path: str, root_path: str, python: str | None = None,
           timeout: float = interpreter.TIMEOUT) -> proof.Proof:
    """Writes nothing: prove every transform of an applied spec live in the root's interpreter."""
    root = Root.open(root_path)
    if txn.journal_left(root):
        if writer_active(root):
            raise PatchspecError("another patchspec is applying or unapplying on this root (it holds the lock): "
                                 "the files are not as committed; verify when it is done", file=str(root.path))
        raise PatchspecError("an interrupted run left a journal: the files are not as committed; "
                             f"`patchspec recover --root {root.path}` first", file=str(root.path))
    state = load_state(root)
    name = _spec_name(spec_name_or_path)
    if name not in state.specs:
        raise PatchspecError(f"spec {name} is not applied to this root: nothing to verify", file=str(root.path))
    runs = interpreter.find(root.path, python)
    if runs is None:
        raise PatchspecError("no interpreter runs this root (it is no site-packages of a venv or prefix): "
                             "name it with --python", file=str(root.path))
    try:
        return _prove(root, state, name, runs, timeout)
    except interpreter.ProbeError as exc:
        raise PatchspecError(f"the run-time proof did not run: {exc}", file=str(root.path)) from None


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
    actions: list[tuple[str, str]]   # (path, what was done to it)
    notes: list[Note] = field(default_factory=list)


def unapply(spec_name_or_path: str, root_path: str, force: bool = False,
            lock_timeout: float = 30.0, python: str | None = None) -> UnapplyResult:
    """Restore every file the spec patched, byte for byte. A file a reinstall or an upgrade replaced is
    left as it is and its record dropped: bytes of one release are never written into another."""
    root = Root.open(root_path)
    txn.check_writable(root.path)
    runs = interpreter.find(root.path, python)
    with locked(root, lock_timeout):
        notes = notes_of(NoteKind.RECOVERY, txn.recover(root))
        actions = _unapply_locked(root, _spec_name(spec_name_or_path), force, runs)
        return UnapplyResult(actions, notes)


def _unapply_locked(root: Root, name: str, force: bool, runs: interpreter.Interpreter | None,
                    ) -> list[tuple[str, str]]:
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
            how = f"replaced by {records.where(rel)}" if status == REPLACED else "removed with its package"
            actions.append((rel, f"left as it is ({how}); record dropped"))
    others = applied_specs(state, root, exclude=name)
    expected = {rel: state.files[rel].pristine_sha256 for rel in state.specs[name].files}
    rec, released, unused = state.drop_spec(name)
    for rel in rec.files:
        if rel in released:
            pristine = root.read_bytes(pristine_path(rel))
            if sha256(pristine) != expected[rel]:
                raise PatchspecError("pristine copy is missing or altered: the original cannot be restored; "
                                     "nothing was written", file=str(root.path / pristine_path(rel)))
            writes[rel] = pristine
            writes[pristine_path(rel)] = None
            actions.append((rel, "restored"))
        else:
            remaining = [others[n] for n in state.files[rel].specs]
            data = encoding.encode(patched_texts(remaining, {rel}, root, state)[rel],
                                   root.read_bytes(pristine_path(rel)))
            state.files[rel].patched_sha256 = sha256(data)
            writes[rel] = data
            actions.append((rel, f"restored under {', '.join(state.files[rel].specs)}"))
    writes.update(bytecode.rewrites(root, {rel: writes[rel] for rel, _ in actions if rel in writes}, runs))
    for rel in unused:
        writes[rel] = None
        writes.update(bytecode.removed(root, rel))
    writes[STATE_FILE] = state.dump()
    txn.commit(root, writes)
    return actions


def _spec_name(spec_name_or_path: str) -> str:
    if spec_name_or_path.endswith((".yaml", ".yml")) or "/" in spec_name_or_path:
        return load_spec(spec_name_or_path).name
    return spec_name_or_path


def recover(root_path: str, lock_timeout: float = 30.0) -> list[Note]:
    """Roll back an interrupted apply or unapply from its journal."""
    root = Root.open(root_path)
    with locked(root, lock_timeout):
        return notes_of(NoteKind.RECOVERY, txn.recover(root)) or [Note(NoteKind.NOTE, "nothing to recover")]


def forget(spec_name_or_path: str, root_path: str, lock_timeout: float = 30.0) -> list[tuple[str, str]]:
    """Drop a spec's record without touching the files it patched (for a root repaired by hand). Snippet
    files no other spec needs go when they are as patchspec wrote them."""
    root = Root.open(root_path)
    txn.check_writable(root.path)
    with locked(root, lock_timeout):
        txn.recover(root)
        state = load_state(root)
        name = _spec_name(spec_name_or_path)
        if name not in state.specs:
            raise PatchspecError(f"spec {name} is not applied to this root", file=str(root.path))
        snippet_sha = {rel: state.snippets[rel].sha256 for rel in state.specs[name].snippets}
        rec, released, unused = state.drop_spec(name)
        writes: dict[str, bytes | None] = {pristine_path(rel): None for rel in released}
        actions = [(rel, "left as it is; record dropped") for rel in rec.files]
        for rel in unused:
            if sha256(root.read_bytes(rel)) == snippet_sha[rel]:
                writes[rel] = None
                writes.update(bytecode.removed(root, rel))
                actions.append((rel, "removed (a snippet file patchspec wrote)"))
            else:
                actions.append((rel, "left as it is (not as patchspec wrote it)"))
        writes[STATE_FILE] = state.dump()
        txn.commit(root, writes)
        return actions


@dataclass
class CheckResult:
    """One row per transform (the same unit before and after apply) and what else stops the spec."""

    code: int                      # Exit.OK applied, Exit.PENDING would apply cleanly, Exit.BROKEN does not hold
    rows: list[Row]
    problems: list[Note] = field(default_factory=list)


def consistent(root_path: str | Root, compute):
    """``compute()`` of a read-only verb, read again when a writer started or committed a run meanwhile
    (``txn.view_token``), so the answer is for one state of the root: the committed one, or with a run
    under way or interrupted, the root as it was before it."""
    root = Root.open(root_path)
    for _attempt in range(3):
        token = txn.view_token(root)
        result = compute()
        if txn.view_token(root) == token:
            break
    return result


@gcpause.paused
def check(spec_path: str, release: str, root_path: str, only: set[str] | None = None) -> CheckResult:
    """Writes nothing. With an interrupted run pending, or another process's run under way, answers for
    the root as it was before it; a record that an upgrade made stale is answered as ``apply`` will see
    it (dropped)."""
    return consistent(root_path, lambda: _check(spec_path, release, root_path, only))


def _check(spec_path: str, release: str, root_path: str, only: set[str] | None) -> CheckResult:
    root = txn.pending_view(Root.open(root_path))
    pending = txn.pending_note(root)
    notes = [Note(NoteKind.RECOVERY, pending)] if pending else []
    state = load_state(root)
    spec = load_spec(spec_path)
    notes += notes_of(NoteKind.REPLACED, _drop_stale(root, state, PipRecords(root), [spec.name], {}))
    rec = state.specs.get(spec.name)
    if rec is not None and rec.spec_sha256 == spec.sha256 and release in ("auto", rec.release):
        # Fast path: the record says what was written; hashes say whether it is still there.
        resolved = applied_specs(state, root)[spec.name]
        edited = {rel for rel in rec.files + rec.snippets if not _matches_record(root, state, rel)}
        rows = [Row(Resolved(spec.name, t.id, x.index, x.kind, t.file, t.function,
                             Status.OK if t.file in rec.files else Status.SKIPPED),
                    Verdict.EDITED if t.file in edited else Verdict.APPLIED if t.file in rec.files else None)
                for t in resolved.targets for x in t.transforms]
        problems = [Note(NoteKind.EDITED, f"edited: {rel} differs from what apply wrote", file=rel)
                    for rel in sorted(edited - set(rec.files))]
        return CheckResult(Exit.BROKEN if edited else Exit.OK, rows, notes + problems)
    if rec is not None:
        return CheckResult(Exit.BROKEN, [], notes + [Note(NoteKind.RECORD, f"{spec.name} is applied from "
                                                          f"another spec version or release ({rec.release})")])
    prepared = prepare(spec_path, release, root, only, state)
    rows = [Row(r, Verdict.WOULD_APPLY if r.ok else None) for r in prepared.plan.resolved]
    bound = [Note(NoteKind.BINDING, f"binding: {p}")
             for p in binding_problems(prepared.spec, prepared.plan, prepared.read)]
    marker = prepared.spec.marker
    touched = sorted({r.file for r in prepared.plan.resolved if r.status != Status.SKIPPED})
    partial = [Note(NoteKind.PARTIAL, f"partial: {rel} carries {marker!r} but the state record does not list it",
                    file=rel) for rel in touched
               if marker in encoding.decode(root.read_bytes(rel) or b"")]
    if prepared.plan.errors:  # the bindings are said too: a release may lack both an anchor and a name
        return CheckResult(Exit.BROKEN, rows, notes + bound + partial)
    raise_if_upstream(prepared.spec, prepared.plan)
    try:
        emit(prepared.plan, [prepared.spec])
    except ConflictError as exc:
        return CheckResult(Exit.BROKEN, rows, notes + [Note(NoteKind.CONFLICT, exc.message)] + partial)
    problems = bound + [Note(NoteKind.BINDING, f"binding: {p}") for p in prepared.plan.problems] + partial
    return CheckResult(Exit.BROKEN if problems else Exit.PENDING, rows, notes + problems)


def _matches_record(root: Root, state: State, rel: str) -> bool:
    want = state.files[rel].patched_sha256 if rel in state.files else state.snippets[rel].sha256
    return sha256(root.read_bytes(rel)) == want


@dataclass(frozen=True)
class SpecStatus(Record):
    """An applied spec (``status``): the release and package versions it was applied to, what is installed
    now, the warnings it was applied with, and where its run-time proof stands."""

    TYPE: ClassVar[str] = "status"
    spec: str
    release: str
    applied_to: str
    installed: str
    warnings: list[str]
    proof: Proof


@dataclass(frozen=True)
class FileStatus(Record):
    """A file an applied spec wrote (``status``): its state against the record, and what to do about it."""

    TYPE: ClassVar[str] = "status"
    spec: str
    path: str
    status: FileState
    todo: str | None


@dataclass
class StatusReport:
    code: int
    results: list[Note | SpecStatus | FileStatus]
    lines: list[str]


UNVERIFIED = {Proof.PENDING: "apply stopped before its run-time proof ended",
              Proof.SKIPPED: "applied with --no-verify",
              Proof.NO_INTERPRETER: "no interpreter was known to run the root at apply (--python)"}


def status(root_path: str) -> StatusReport:
    """Writes nothing: per applied spec, the release it was applied to and, per file, whether it is as
    written, edited by hand, or replaced by another version of its package, with what to do."""
    return consistent(root_path, lambda: _status(root_path))


def _status(root_path: str) -> StatusReport:
    root = txn.pending_view(Root.open(root_path))
    pending = txn.pending_note(root)
    state = load_state(root)
    records = PipRecords(root)
    results, lines, code = [], [], Exit.OK
    if pending:
        results.append(Note(NoteKind.RECOVERY, pending))
        lines.append(pending)
        code = Exit.OK if writer_active(root) else Exit.PENDING  # under way: the committed state
    todo = {AS_WRITTEN: None,
            EDITED: "`patchspec unapply {spec} --force` restores the original, "
                    "`patchspec forget {spec}` keeps the file",
            MISSING: "`patchspec unapply {spec} --force` restores the original",
            REPLACED: "`patchspec apply {spec}` re-applies on the installed release",
            REMOVED: "`patchspec forget {spec}` (or unapply) drops the record"}
    for name, rec in sorted(state.specs.items()):
        then = ", ".join(f"{p} {v.version}" for p, v in sorted(rec.packages.items())) or "unknown versions"
        now = ", ".join(f"{p} {d.version if d else 'not installed'}" for p in sorted(rec.packages)
                        for d in [records.dist(p)]) or "unknown versions"
        results.append(SpecStatus(name, rec.release, then, now, rec.warnings, rec.proof))
        lines.append(f"{name}: applied for {rec.release} ({then}); installed now: {now}")
        lines += [f"  {w}" for w in rec.warnings]
        unverified = UNVERIFIED.get(rec.proof)
        if unverified:
            lines.append(f"  unverified: {unverified}; `patchspec verify {name} --root {root.path}` shows "
                         "whether it runs")
            if rec.proof == Proof.PENDING:
                code = max(code, Exit.PENDING)
        for rel in rec.files + rec.snippets:
            state_of = records.file_status(state, rel)
            hint = todo[state_of] and todo[state_of].format(spec=name) + f" --root {root.path}"
            results.append(FileStatus(name, rel, state_of, hint))
            lines.append(f"  {state_of}: {rel}" + (f" ({hint})" if hint else ""))
            if state_of in (REPLACED, REMOVED):
                code = max(code, Exit.PENDING)
            elif state_of != AS_WRITTEN:
                code = Exit.BROKEN
    if not state.specs:
        lines.append("nothing applied")
    return StatusReport(code, results, lines)


def diff_texts(prepared: Prepared) -> list[tuple[str, str | None, str]]:
    """(path, pristine text or None for a new file, patched text) for every file the spec writes."""
    texts = compile_spec(prepared)
    out = [(rel, prepared.read(rel), texts[rel]) for rel in sorted(texts)]
    for rel, data in snippets.install_files(prepared.spec).items():
        out.append((rel, None, data.decode("utf-8")))
    return out
