"""What a person reads: one line per fact for each verb's results."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from patchspec.compiler.drift import USES, Drift
from patchspec.compiler.plan import Resolved
from patchspec.errors import severity_exit
from patchspec.install.state import ProofState
from patchspec.releases.matrix import Matrix
from patchspec.releases.report import DriftResult, row_line
from patchspec.results import FileAction, Liveness, Note, NoteKind, Row, SpecSummary, Verdict

if TYPE_CHECKING:
    from patchspec.proof import Proof
    from patchspec.record import Recorded
    from patchspec.releases.new_profile import ProfileDraft
    from patchspec.verbs.reading import StatusReport
    from patchspec.verbs.writing import ApplyResult


# the words before a note's text on its line (a note's text never repeats its kind)
NOTE_PREFIX = {NoteKind.WARNING: "warning: ", NoteKind.NEEDS_HUMAN: "needs a human: ", NoteKind.EDITED: "edited: ",
               NoteKind.BINDING: "binding: "}


def note_line(note: Note) -> str:
    return NOTE_PREFIX.get(note.kind, "") + note.text


def check_line(r: Row) -> str:
    where = f"{r.file}:{r.line}" if r.line else r.file
    detail = f" ({r.detail})" if r.detail and r.verdict is None else ""
    if r.verdict == Verdict.WOULD_APPLY and r.resolved.ok and not r.resolved.edits and r.resolved.note:
        detail = f" ({r.resolved.note}: nothing to write)"   # what drift calls obsolete
    return f"{r.status}: {r.spec} {r.target}#{r.index} {r.kind} {r.function} in {where}{detail}"


def plan_line(r: Resolved) -> str:
    where = f"{r.file}:{r.line}" if r.line else r.file
    detail = f" ({r.detail})" if r.detail and not r.ok else f" ({r.note})" if r.note else ""
    state = "would apply" if r.ok else r.status
    return f"{state}: {r.spec} {r.target}#{r.index} {r.kind} {r.function} at {where}{detail}"


def report_lines(result: DriftResult) -> list[str]:
    counts: dict[str, int] = {}
    for r in result.rows:
        counts[r.drift] = counts.get(r.drift, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    firsts = {r.target: r.index for r in reversed(result.rows)}
    hint = ""
    if result.baseline is None and any(r.drift in (Drift.CHANGED, Drift.TARGET_MISSING)
                                       for r in result.rows):
        hint = "; --baseline DIR (or pypi) shows what changed, where anchors moved, and ranks renamed targets"
    return [row_line(r, firsts[r.target] == r.index) for r in result.rows] + [
        f"drift of {result.spec.name} against release {result.release} ({result.note}): {summary}; "
        f"exit {severity_exit(result.code)}{hint}"]


def _transform(index: int, kind: str) -> str:
    return kind if kind == USES else f"{index} {kind}"


def matrix_markdown(m: Matrix) -> list[str]:
    head = ["target", "transform"] + [f"{Path(root).name} ({release})" for root, release in m.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for target, index, kind in m.rows:
        lines.append("| " + " | ".join([target, _transform(index, kind), *m.cells[(target, index)]]) + " |")
    return lines


def matrix_text(m: Matrix) -> list[str]:
    table = [["target", "transform"] + [Path(root).name for root, _ in m.columns]]
    table += [[target, _transform(index, kind), *m.cells[(target, index)]] for target, index, kind in m.rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]



def file_line(done: FileAction) -> str:
    return f"{done.action}: {done.path}"


def proof_lines(shown: Proof) -> list[str]:
    """The modules the proof could not import, its rows, and a last line counting them."""
    from patchspec.proof import Imported

    lines = [f"{m.status}: {m.module} ({m.detail})" for m in shown.modules if m.status != Imported.IMPORTED]
    lines += [_proof_row(r, str(r.status)) for r in shown.rows]
    count = {s: sum(r.status == s for r in shown.rows) for s in Liveness}
    some = f" ({len(shown.bypassed)} of them not for every caller)" if shown.bypassed else ""
    return lines + [f"{count[Liveness.LIVE]} live{some}, {count[Liveness.STATIC]} shown statically, "
                    f"{count[Liveness.NOT_LIVE]} not live, in {shown.interpreter}"]


def _proof_row(r: Row, status: str) -> str:
    return f"{status}: {r.spec} {r.target}#{r.index} {r.kind} {r.function} in {r.file} ({r.detail})"


def apply_lines(result: ApplyResult, no_verify: bool) -> list[str]:
    """After apply's notes: what it skipped, each file, and its proof (what is not live, the count) or why
    there was none."""
    lines = [f"skipped: {r.target}#{r.index} {r.kind} ({r.detail})" for r in result.skipped]
    lines += [f"{'patched' if result.changed else 'already applied, unchanged'}: {rel}" for rel in result.files]
    if result.proof is not None:
        shown = proof_lines(result.proof)
        lines += [line for line in shown[:-1] if not line.startswith("live: ")]
        lines += [_proof_row(r, "live for some callers") for r in result.proof.bypassed]
        lines.append(f"verified: {shown[-1]}")
    elif result.changed:
        lines.append("unverified: " + ("--no-verify" if no_verify else "no interpreter is known to run "
                                       "the root; `patchspec verify SPEC --root R --python P` proves it"))
    return lines


UNVERIFIED: dict[ProofState | None, str] = {   # None: a version 1 record, from before the proof: no line
    ProofState.PENDING: "apply stopped before its run-time proof ended",
    ProofState.SKIPPED: "applied with --no-verify",
    ProofState.NO_INTERPRETER: "no interpreter was known to run the root at apply (--python)"}


def status_lines(report: StatusReport) -> list[str]:
    """A pending run's note, then per applied spec its release, its warnings, whether its proof ran, and
    each of its files' state with what to do."""
    from patchspec.verbs.reading import FileStatus, SpecStatus

    lines = []
    for record in report.results:
        if isinstance(record, SpecStatus):
            lines.append(f"{record.spec}: applied for {record.release} ({record.applied_to}); installed now: "
                         f"{record.installed}")
            lines += [f"  {w}" for w in record.warnings]
            unverified = UNVERIFIED.get(record.proof)
            if unverified:
                python = " --python PYTHON" if record.proof == ProofState.NO_INTERPRETER else ""   # none to keep
                lines.append(f"  unverified: {unverified}; `patchspec verify {record.spec} --root {report.root}"
                             f"{python}` shows whether it runs")
        elif isinstance(record, FileStatus):
            lines.append(f"  {record.status}: {record.path}" + (f" ({record.todo})" if record.todo else ""))
        else:
            lines.append(note_line(record))
    if not any(isinstance(record, SpecStatus) for record in report.results):
        lines.append("nothing applied")
    return lines


def written_line(count: int, output: str) -> str:
    return f"wrote {count} file(s) under {output}"


def valid_line(summary: SpecSummary, root: str | None, release: str | None) -> str:
    where = f"; holds on {root} (release {release})" if root else ""
    return f"valid: {summary.spec}: {summary.targets} targets, {summary.transforms} transforms{where}"


def profile_lines(draft: ProfileDraft, notes: list[Note]) -> list[str]:
    """What needs a human and the notes, then the draft written (and how many transforms it lacks) or not."""
    lines = [note_line(n) for n in notes]
    if draft.text is None:
        return lines + [f"nothing written: {draft.path}"]
    broken = f" (with {len(draft.needs)} transform(s) that do not hold)" if draft.needs else ""
    return lines + [f"wrote {draft.path}{broken}"]


def init_lines(written: list[Path], warnings: list[Note]) -> list[str]:
    return [note_line(w) for w in warnings] + [f"wrote {p}" for p in written] + [
        f"next: edit {written[1]}, then: patchspec apply {written[0]} --root SITE-PACKAGES"]


def record_lines(done: Recorded, root: str) -> list[str]:
    """The files written, each recorded step and where it reads, then the edit applied as the spec or what
    to run next, then record's notes."""
    lines = [f"wrote {p}" for p in done.written]
    lines += [f"{t.file}:{t.qualname}#{index} {step.kind}: lines {_span(step.old)} -> {_span(step.new)}"
              for t in done.targets for index, step in enumerate(t.steps)]
    spec = done.written[0]
    if done.applied:
        lines += [f"applied: {rel} is now the pristine release with {spec.stem} applied (unapply gives back "
                  "the release; your edit's own bytes are kept in the .edit directory)" for rel in done.applied]
    else:
        lines.append(f"next: patchspec apply {spec} --root {root}")
    return lines + done.notes


def _span(lines: tuple[int, int] | None) -> str:
    """Where a recorded step reads in the old or the new text (``-``: nothing there)."""
    if lines is None:
        return "-"
    return f"{lines[0]}" if lines[0] == lines[1] else f"{lines[0]}-{lines[1]}"


def colorize(text: str) -> str:
    """A unified diff in a terminal's colours: added lines green, removed red, hunk heads cyan, file heads bold."""
    codes = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
    out = []
    for line in text.splitlines(keepends=True):
        code = codes.get(line[:1]) if not line.startswith(("+++", "---")) else "\033[1m"
        out.append(f"{code}{line.rstrip(chr(10))}\033[0m\n" if code else line)
    return "".join(out)
