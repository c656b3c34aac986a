"""The verbs that read, writing nothing: check, status, diff, and the records status prints.

Each answers for one state of the root (``consistent``): the committed one, or with a run under way or
interrupted, the root as it was before it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from patchspec import snippets
from patchspec.compiler import gcpause
from patchspec.compiler.edits import ConflictError, Status
from patchspec.compiler.plan import Resolved, emit
from patchspec.errors import Exit
from patchspec.install import interpreter, txn
from patchspec.install.installed import AS_WRITTEN, EDITED, MISSING, REMOVED, REPLACED, PipRecords
from patchspec.install.pristine import refuse_unrecorded
from patchspec.install.root import Root
from patchspec.install.state import ProofState, State, load_state, sha256, writer_active
from patchspec.prepare import Prepared, applied_specs, compile_spec, prepare
from patchspec.results import FileState, Note, NoteKind, Record, Row, Verdict, notes_of
from patchspec.spec import load_spec
from patchspec.verbs.proving import root_interpreter
from patchspec.verbs.stale import drop_stale
from patchspec.verdict import binding_problems, raise_if_upstream


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
    notes += notes_of(NoteKind.REPLACED, drop_stale(root, state, PipRecords(root), [spec.name], {}))
    rec = state.specs.get(spec.name)
    if rec is not None and rec.spec_sha256 == spec.sha256 and release in ("auto", rec.release):
        # Fast path: the record says what was written; hashes say whether it is still there.
        resolved = applied_specs(state, root)[spec.name]
        edited = {rel for rel in rec.files + rec.snippets if not _matches_record(root, state, rel)}
        rows = [Row(Resolved(spec.name, t.id, x.index, x.kind, t.file, t.function,
                             Status.OK if t.file in rec.files else Status.SKIPPED),
                    Verdict.EDITED if t.file in edited else Verdict.APPLIED if t.file in rec.files else None)
                for t in resolved.targets for x in t.transforms]
        problems = [Note(NoteKind.EDITED, f"{rel} differs from what apply wrote", file=rel)
                    for rel in sorted(edited - set(rec.files))]
        return CheckResult(Exit.BROKEN if edited else Exit.OK, rows, notes + problems)
    if rec is not None:
        return CheckResult(Exit.BROKEN, [], notes + [Note(NoteKind.RECORD, f"{spec.name} is applied from "
                                                          f"another spec version or release ({rec.release})")])
    prepared = prepare(spec_path, release, root, only, state)
    rows = [Row(r, Verdict.WOULD_APPLY if r.ok else None) for r in prepared.plan.resolved]
    bound = [Note(NoteKind.BINDING, str(p))
             for p in binding_problems(prepared.spec, prepared.plan, prepared.read)]
    for rel in sorted({r.file for r in prepared.plan.resolved if r.status != Status.SKIPPED}):
        refuse_unrecorded(root, state, rel, root.read_bytes(rel))   # as apply refuses it
    if prepared.plan.errors:  # the bindings are said too: a release may lack both an anchor and a name
        return CheckResult(Exit.BROKEN, rows, notes + bound)
    raise_if_upstream(prepared.spec, prepared.plan)
    try:
        emit(prepared.plan, [prepared.spec])
    except ConflictError as exc:
        return CheckResult(Exit.BROKEN, rows, notes + [Note(NoteKind.CONFLICT, exc.message)])
    problems = bound + [Note(NoteKind.BINDING, str(p)) for p in prepared.plan.problems]
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
    proof: ProofState | None   # None: a version 1 record, written before the proof existed


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
    root: str        # the root's path, for the commands its lines suggest


def status(root_path: str) -> StatusReport:
    """Writes nothing: per applied spec, the release it was applied to and, per file, whether it is as
    written, edited by hand, or replaced by another version of its package, with what to do."""
    return consistent(root_path, lambda: _status(root_path))


def _status(root_path: str) -> StatusReport:
    root = txn.pending_view(Root.open(root_path))
    pending = txn.pending_note(root)
    state = load_state(root)
    records = PipRecords(root)
    results: list[Note | SpecStatus | FileStatus] = []
    code = Exit.OK
    if pending:
        results.append(Note(NoteKind.RECOVERY, pending))
        code = Exit.OK if writer_active(root) else Exit.PENDING  # under way: the committed state
    todo: dict[str, str | None] = {AS_WRITTEN: None,
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
        if rec.proof == ProofState.PENDING:
            code = max(code, Exit.PENDING)
        for rel in rec.files + rec.snippets:
            state_of = records.file_status(state, rel)
            how = todo[state_of]
            hint = how and how.format(spec=name) + f" --root {root.path}"
            results.append(FileStatus(name, rel, state_of, hint))
            if state_of in (REPLACED, REMOVED):
                code = max(code, Exit.PENDING)
            elif state_of != AS_WRITTEN:
                code = Exit.BROKEN
    return StatusReport(code, results, str(root.path))


def check_snippet_imports(prepared: Prepared, python: str | None = None) -> None:
    """Writes nothing: every module the snippet package imports resolves in the root or its interpreter."""
    root = prepared.root
    snippets.check_imports(prepared.spec, root, interpreter.finder(root_interpreter(root, python), root.path),
                           prepared.plan.sources)


def diff_texts(prepared: Prepared) -> list[tuple[str, str | None, str]]:
    """(path, pristine text or None for a new file, patched text) for every file the spec writes."""
    texts = compile_spec(prepared)
    out = [(rel, prepared.read(rel), texts[rel]) for rel in sorted(texts)]
    for rel, data in snippets.install_files(prepared.spec).items():
        out.append((rel, None, data.decode("utf-8")))
    return out
