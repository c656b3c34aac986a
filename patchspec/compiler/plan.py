"""Spec(s) + one release's sources → a plan: every transform resolved to a line and its edits.

Nothing here reads or writes the filesystem: sources come from a ``read`` callable (``None`` for a
missing file), and ``has_package`` says which top-level packages the root holds, so that the targets of
an absent package are skipped and reported, never silently dropped.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from patchspec.compiler.edits import LineEdit, NodeEdit, ResolveError, marked_line
from patchspec.compiler.emit import render_fragment, splice
from patchspec.compiler.source import SourceError, SourceFile
from patchspec.compiler.transforms import TRANSFORMS
from patchspec.compiler.transforms.context import Definition, TargetContext
from patchspec.model import Spec, Target

RUNTIME_PACKAGE = "_patchspec_runtime"

OK = "ok"
SKIPPED = "skipped"


@dataclass
class Resolved:
    """One transform of one target, as it resolved on these sources."""

    spec: str
    target: str
    index: int
    kind: str
    file: str
    function: str
    status: str                      # ok | skipped | missing | ambiguous | target-missing | ...
    line: int | None = None
    detail: str = ""
    lines: list[int] = field(default_factory=list)
    edits: list = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == OK


@dataclass
class Plan:
    resolved: list[Resolved]
    sources: dict[str, SourceFile]
    definitions: dict[tuple[str, str], Definition]
    rendered: dict[tuple[str, str], str] = field(default_factory=dict)  # by emit: patched definitions

    @property
    def errors(self) -> list[Resolved]:
        return [r for r in self.resolved if r.status not in (OK, SKIPPED)]

    @property
    def files(self) -> list[str]:
        return sorted({r.file for r in self.resolved if r.ok})


def resolve(specs: Iterable[Spec], read: Callable[[str], str | None],
            has_package: Callable[[str], bool], only: set[str] | None = None,
            sources: dict[str, SourceFile] | None = None) -> Plan:
    """``sources`` seeds the files already read and parsed, so that resolving again costs no re-parse."""
    plan = Plan([], dict(sources or {}), {})
    for spec in specs:
        for target in spec.targets:
            plan.resolved += _resolve_target(plan, spec, target, read, has_package, only)
    return plan


def _resolve_target(plan: Plan, spec: Spec, target: Target, read, has_package, only) -> list[Resolved]:
    def each(status: str, detail: str = "", line: int | None = None) -> list[Resolved]:
        return [Resolved(spec.name, target.id, t.index, t.kind, target.file, target.function, status, line,
                         detail) for t in target.transforms]

    if only is not None and target.package not in only:
        return each(SKIPPED, f"package {target.package} not selected by --only")
    if not has_package(target.package):
        return each(SKIPPED, f"package {target.package} is not under the root")
    source = plan.sources.get(target.file)
    if source is None:
        text = read(target.file)
        if text is None:
            return each("target-missing", f"file {target.file} does not exist")
        source = plan.sources[target.file] = SourceFile(target.file, text)
    try:
        definition = source.find(target.function)
    except SourceError as exc:
        return each("unparsable", str(exc))
    if definition is None:
        return each("target-missing", f"{target.function} is not defined in {target.file}")
    key = (target.file, target.function)
    shared = plan.definitions.setdefault(key, Definition(source, definition, target.function))
    ctx = TargetContext(shared, spec.alias, spec.marker, spec.name)
    out = []
    for transform in target.transforms:
        row = Resolved(spec.name, target.id, transform.index, transform.kind, target.file, target.function, OK)
        try:
            row.line, row.edits = TRANSFORMS[transform.kind](ctx, transform.params)
        except ResolveError as exc:
            row.status, row.detail, row.lines = exc.reason, str(exc), exc.lines
        except SourceError as exc:
            row.status, row.detail = "unparsable", str(exc)
        out.append(row)
    return out


class ConflictError(ValueError):
    pass


def emit(plan: Plan, specs: Iterable[Spec]) -> dict[str, str]:
    """The patched text of every file the plan changes. The plan must have no errors."""
    if plan.errors:
        raise ValueError("cannot emit a plan with unresolved transforms")
    by_name = {spec.name: spec for spec in specs}
    _check_conflicts(plan)
    out: dict[str, str] = {}
    for path in plan.files:
        source = plan.sources[path]
        rows = [r for r in plan.resolved if r.ok and r.file == path]
        line_edits: list[LineEdit] = []
        for owner in dict.fromkeys(r.spec for r in rows):
            spec = by_name[owner]
            text = f"from {RUNTIME_PACKAGE} import {spec.snippet_package} as {spec.alias}"
            line_edits.append(LineEdit(source.import_line(), marked_line(text, spec.marker, "", source.newline),
                                       owner))
        node_edits: dict[tuple[str, str], list[NodeEdit]] = {}
        for row in rows:
            for edit in row.edits:
                if isinstance(edit, LineEdit):
                    line_edits.append(edit)
                else:
                    node_edits.setdefault((row.file, row.function), []).append(edit)
        fragments = {}
        for key, edits in node_edits.items():
            fragment = plan.definitions[key].fragment
            plan.rendered[key] = render_fragment(fragment, edits)
            fragments[fragment.start] = (fragment.end, plan.rendered[key])
        out[path] = splice(source, fragments, line_edits)
    return out


def _check_conflicts(plan: Plan) -> None:
    """Two specs editing the same node would depend on each other's order: refuse before writing."""
    owners: dict[int, tuple[Resolved, NodeEdit]] = {}
    for row in plan.resolved:
        for edit in row.edits:
            if not isinstance(edit, NodeEdit):
                continue
            seen = owners.setdefault(id(edit.node), (row, edit))
            if seen[0].spec != row.spec:
                raise ConflictError(
                    f"{row.file}:{row.line}: specs {seen[0].spec} ({seen[0].target}#{seen[0].index}) and "
                    f"{row.spec} ({row.target}#{row.index}) both edit the same anchor")
