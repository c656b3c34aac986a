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
import typing
from dataclasses import dataclass, field
from typing import ClassVar

from patchspec.compiler.edits import Status
from patchspec.compiler.plan import Resolved

IS_TYPE = {"is_type": True}       # field metadata: this field's value is the record's ``type``
OPTIONAL = {"optional": True}     # field metadata: left out of the JSON while it is None
NOT_JSON = {"not_json": True}     # field metadata: no JSON key of its own (another key's value reads it)


class Record:
    """A JSON record of a verb's results (a frozen dataclass): ``TYPE`` is its ``type``, unless a field
    declared with ``IS_TYPE`` metadata carries it; ``key`` metadata renames a field's JSON key."""

    TYPE: ClassVar[str] = ""
    if typing.TYPE_CHECKING:   # every record is a dataclass (``dataclasses.fields`` takes it)
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[typing.Any]]]

    @property
    def type(self) -> str:
        return str(next((getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("is_type")),
                        self.TYPE))

    @classmethod
    def json_fields(cls) -> list[dataclasses.Field]:
        """The fields that are JSON keys beside ``type`` (the output schema's properties)."""
        return [f for f in dataclasses.fields(cls) if not f.metadata.get("is_type") and not f.metadata.get("not_json")]

    @classmethod
    def json_hints(cls) -> dict:
        """Those fields' annotations, resolved (the output schema's types)."""
        return typing.get_type_hints(cls)

    def to_json(self) -> dict:
        out = {"type": self.type}
        for f in self.json_fields():
            value = getattr(self, f.name)
            if not (value is None and f.metadata.get("optional")):
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
    """One transform of one target: the compiler's row (``Resolved``: how it resolved, its ``Status``) and,
    where a verb has its own word on it, that word (``check``'s ``Verdict``, the proof's ``Liveness``) and its
    detail. Its JSON keys (``KEYS``) read through to the resolved row."""

    TYPE: ClassVar[str] = "transform"
    KEYS: ClassVar[tuple[str, ...]] = ("spec", "target", "index", "kind", "file", "function", "status", "line",
                                       "detail")
    resolved: Resolved
    verdict: Verdict | Liveness | None = None
    why: str | None = None        # the verdict's detail, in place of the resolved row's

    @property
    def status(self) -> Status | Verdict | Liveness:
        return self.resolved.status if self.verdict is None else self.verdict

    @property
    def detail(self) -> str:
        return self.resolved.detail if self.why is None else self.why

    def __getattr__(self, name: str):
        if name in self.KEYS:
            return getattr(self.resolved, name)
        raise AttributeError(name)

    @classmethod
    def json_fields(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(Resolved) if f.name in cls.KEYS]

    @classmethod
    def json_hints(cls) -> dict:
        return {**typing.get_type_hints(Resolved), "status": Status | Verdict | Liveness}

    def to_json(self) -> dict:
        return {"type": self.TYPE, **{key: getattr(self, key) for key in self.KEYS}}


class FileState(enum.StrEnum):
    """A patched or installed file against the state record (``status``, ``unapply``)."""

    AS_WRITTEN = "as-written"
    EDITED = "edited"
    REPLACED = "replaced"       # by the installed release's own bytes (an upgrade, a reinstall)
    REMOVED = "removed"         # with its package
    MISSING = "missing"


class FileDone(enum.StrEnum):
    """What a verb did to a file (``FileAction``); ``{}`` takes the action's detail."""

    PATCHED = "patched"
    UNCHANGED = "unchanged"                          # apply: the spec is applied already
    WRITTEN = "written"                              # compile -o, init, record, profile new
    RESTORED = "restored"                            # unapply: the pristine bytes back
    RESTORED_UNDER = "restored under {}"             # unapply: the text of the specs still on it (named)
    LEFT = "left as it is; record dropped"           # forget
    LEFT_STALE = "left as it is ({}); record dropped"    # unapply: replaced or removed since (how)
    SNIPPET_REMOVED = "removed (a snippet file patchspec wrote)"
    SNIPPET_LEFT = "left as it is (not as patchspec wrote it)"
    EDIT_APPLIED = "replaced by the spec applied"    # record: the hand-edited file is the spec applied now


@dataclass(frozen=True)
class FileAction(Record):
    """What a verb did to a file (``done``, ``under`` a directory given); its JSON ``action`` is ``done``
    with its ``detail`` (the specs still on it, why it was left)."""

    TYPE: ClassVar[str] = "file"
    path: str
    done: FileDone = field(metadata={"key": "action"})
    under: str | None = field(default=None, metadata=OPTIONAL)
    detail: str = field(default="", kw_only=True, metadata=NOT_JSON)

    @property
    def action(self) -> str:
        return self.done.format(self.detail) if "{}" in self.done else str(self.done)

    @classmethod
    def json_hints(cls) -> dict:
        return {**super().json_hints(), "done": str}   # a phrase: ``done`` with its detail

    def to_json(self) -> dict:
        return {**super().to_json(), "action": self.action}


@dataclass(frozen=True)
class Diff(Record):
    """One file's part of ``diff``: a unified diff that ``patch -p1`` and ``git apply`` take."""

    TYPE: ClassVar[str] = "diff"
    path: str
    diff: str


@dataclass(frozen=True)
class SpecSummary(Record):
    """A valid spec (``validate``): how many targets and transforms it holds."""

    TYPE: ClassVar[str] = "spec"
    spec: str
    targets: int
    transforms: int
