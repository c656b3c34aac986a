"""Typed results that cross layers: the JSON records verbs print, what a verb notes beside its work, and the
enums their fields take.

A record (``Record``) is a frozen dataclass whose fields are its JSON keys: ``to_json()`` is ``type`` and
then each field in declaration order, and the output schema (``patchspec/schema/output.schema.json``) is
generated from the same fields and annotations (``patchspec.cli.output_schema``). The command line prints
a verb's records with ``--json`` and its lines otherwise.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import ClassVar

from patchspec.compiler.edits import Status

IS_TYPE = {"is_type": True}       # field metadata: this field's value is the record's ``type``
OPTIONAL = {"optional": True}     # field metadata: left out of the JSON while it is None


class Record:
    """A JSON record of a verb's results (a frozen dataclass): ``TYPE`` is its ``type``, unless a field
    declared with ``IS_TYPE`` metadata carries it; ``key`` metadata renames a field's JSON key."""

    TYPE: ClassVar[str] = ""

    @property
    def type(self) -> str:
        return str(next((getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("is_type")),
                        self.TYPE))

    def to_json(self) -> dict:
        out = {"type": self.type}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not f.metadata.get("is_type") and not (value is None and f.metadata.get("optional")):
                out[f.metadata.get("key", f.name)] = value
        return out


class NoteKind(enum.StrEnum):
    RECOVERY = "recovery"      # an interrupted run rolled back first
    REPLACED = "replaced"      # a record an upgrade or a reinstall made stale, dropped
    WARNING = "warning"        # applied all the same: a forced release, a file changed after install
    NOTE = "note"              # anything else worth a line
    NEEDS_HUMAN = "needs-human"  # profile new: a transform that does not hold on the new release
    # what ``check`` finds wrong beside its rows
    EDITED = "edited"          # an installed snippet differs from what apply wrote
    RECORD = "record"          # the spec is applied from another spec version or release
    BINDING = "binding"        # a name the snippets or the inserted code use does not bind
    PARTIAL = "partial"        # a file carries the marker that the state record does not list
    CONFLICT = "conflict"      # two transforms cannot both apply


@dataclass(frozen=True)
class Note(Record):
    kind: NoteKind = field(metadata=IS_TYPE)
    file: str | None = field(default=None, kw_only=True, metadata=OPTIONAL)  # the file it is about, when one
    text: str = field(metadata={"key": "detail"})


def notes_of(kind: NoteKind, texts: list[str]) -> list[Note]:
    return [Note(kind, text) for text in texts]


class Verdict(enum.StrEnum):
    """What ``check`` says of a transform beyond how it resolved (the compiler's ``Status``): the row status
    of a spec that holds, or is applied, on the root."""

    APPLIED = "applied"            # the state record says it was written, and its file still is
    WOULD_APPLY = "would-apply"    # it resolves; apply would write it
    EDITED = "edited"              # applied, but the file differs from what apply wrote


class Liveness(enum.StrEnum):
    """What the run-time proof (``patchspec.proof``) shows of a transform in the root's interpreter."""

    LIVE = "live"
    NOT_LIVE = "not-live"
    STATIC = "static"              # its module cannot be imported here; shown statically, and why


@dataclass(frozen=True)
class Row(Record):
    """One transform of one target: how it resolved (the compiler's ``Status``), or what ``check`` says of it
    (``Verdict``), or what the proof shows (``Liveness``)."""

    TYPE: ClassVar[str] = "transform"
    spec: str
    target: str
    index: int
    kind: str
    file: str
    function: str
    status: Status | Verdict | Liveness
    line: int | None = None
    detail: str = ""

    @classmethod
    def of(cls, resolved, status: Status | Verdict | Liveness | None = None, detail: str | None = None) -> Row:
        """The row of a compiler's ``Resolved``, with another status (and detail) when given."""
        r = resolved
        return cls(r.spec, r.target, r.index, r.kind, r.file, r.function, r.status if status is None else status,
                   r.line, r.detail if detail is None else detail)


class FileState(enum.StrEnum):
    """A patched or installed file against the state record (``status``, ``unapply``)."""

    AS_WRITTEN = "as-written"
    EDITED = "edited"
    REPLACED = "replaced"       # by the installed release's own bytes (an upgrade, a reinstall)
    REMOVED = "removed"         # with its package
    MISSING = "missing"
