"""Typed results that cross layers: what a verb notes beside its work, and what state a patched file is in.

Each carries its own JSON form; the command line prints ``text`` as the line and ``to_json()`` as the record.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class NoteKind(enum.StrEnum):
    RECOVERY = "recovery"      # an interrupted run rolled back first
    REPLACED = "replaced"      # a record an upgrade or a reinstall made stale, dropped
    WARNING = "warning"        # applied all the same: a forced release, a file changed after install
    NOTE = "note"              # anything else worth a line
    # what ``check`` finds wrong beside its rows
    EDITED = "edited"          # an installed snippet differs from what apply wrote
    RECORD = "record"          # the spec is applied from another spec version or release
    BINDING = "binding"        # a name the snippets or the inserted code use does not bind
    PARTIAL = "partial"        # a file carries the marker that the state record does not list
    CONFLICT = "conflict"      # two transforms cannot both apply


@dataclass(frozen=True)
class Note:
    kind: NoteKind
    text: str
    file: str | None = None    # the file it is about, when one

    def to_json(self) -> dict:
        return {"type": str(self.kind), **({"file": self.file} if self.file else {}), "detail": self.text}


def notes_of(kind: NoteKind, texts: list[str]) -> list[Note]:
    return [Note(kind, text) for text in texts]


class Verdict(enum.StrEnum):
    """What ``check`` says of a transform beyond how it resolved (the compiler's ``Status``): the row status
    of a spec that holds, or is applied, on the root."""

    APPLIED = "applied"            # the state record says it was written, and its file still is
    WOULD_APPLY = "would-apply"    # it resolves; apply would write it
    EDITED = "edited"              # applied, but the file differs from what apply wrote


class FileState(enum.StrEnum):
    """A patched or installed file against the state record (``status``, ``unapply``)."""

    AS_WRITTEN = "as-written"
    EDITED = "edited"
    REPLACED = "replaced"       # by the installed release's own bytes (an upgrade, a reinstall)
    REMOVED = "removed"         # with its package
    MISSING = "missing"
