"""Spec(s) + one release's sources → a plan: every transform resolved to a line and its edits.

Nothing here reads or writes the filesystem: sources come from a ``read`` callable (``None`` for a
missing file), and ``has_package`` says which top-level packages the root holds, so that the targets of
an absent package are skipped and reported, never silently dropped.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import libcst as cst

from patchspec.compiler import gcpause, lint, pattern, rewrite, scope
from patchspec.compiler.context import Definition, TargetContext
from patchspec.compiler.edits import ConflictError, LineEdit, NodeEdit, Place, ResolveError, Status, marked_line
from patchspec.compiler.edits import Resolved as Resolved  # the resolver's row: built here, read below (lint, kinds)
from patchspec.compiler.emit import render_fragment, splice
from patchspec.compiler.source import (
    STAND_IN_PREFIX,
    Located,
    SourceError,
    SourceFile,
    TargetAmbiguous,
    TargetNotLive,
    split_lines,
)
from patchspec.compiler.transforms import KINDS
from patchspec.model import Loc, Spec, Target, Transform

RUNTIME_PACKAGE = "_patchspec_runtime"


@dataclass
class Plan:
    resolved: list[Resolved]
    sources: dict[str, SourceFile]
    definitions: dict[tuple[str, str], Definition]
    rendered: dict[tuple[str, str], str] = field(default_factory=dict)  # by emit: patched definitions
    problems: list[lint.Problem] = field(default_factory=list)           # by emit: what lint refuses

    @property
    def errors(self) -> list[Resolved]:
        return [r for r in self.resolved if r.status not in (Status.OK, Status.SKIPPED)]

    @property
    def files(self) -> list[str]:
        """The files the plan changes (a transform with nothing to do, such as an import the file has,
        does not make one)."""
        return sorted({r.file for r in self.resolved if r.ok and r.edits})


@gcpause.paused
def resolve(specs: Iterable[Spec], read: Callable[[str], str | None],
            has_package: Callable[[str], bool], only: set[str] | None = None,
            sources: dict[str, SourceFile] | None = None) -> Plan:
    """``sources`` seeds the files already read and parsed, so that resolving again costs no re-parse.

    Every target is located first, so that the transforms on one definition share it whatever name
    reaches it (an alias, ``defaultName = default_name``, is the definition it holds): its edits are
    rendered together and checked against each other, never one rendering in place of another."""
    specs = list(specs)
    plan = Plan([], dict(sources or {}), {})
    found = {(spec.name, target.id): _locate(plan, spec, target, read, has_package, only)
             for spec in specs for target in spec.targets}
    keys = _definition_keys(specs, found)
    needs = _needs(specs, keys)
    for spec in specs:
        rows = []
        for target in spec.targets:
            located = found[(spec.name, target.id)]
            rows += located if isinstance(located, list) else \
                _resolve_transforms(plan, spec, target, located, keys[(spec.name, target.id)], needs)
        _refuse_unbound(plan, spec, rows)
        plan.resolved += rows
    return plan


def _definition_keys(specs: list[Spec], found: dict[tuple[str, str], Located | list[Resolved]]
                     ) -> dict[tuple[str, str], tuple[str, str]]:
    """By (spec, target id), the key of the target's definition in ``Plan.definitions``: one key per
    definition, however many targets and names reach it. The first name to reach a definition keys it,
    ``(file, name)``, or ``(file, name@line)`` when that name keys another definition already (another
    branch, a singledispatch ``_``)."""
    by_node: dict[int, tuple[str, str]] = {}
    taken: set[tuple[str, str]] = set()
    out = {}
    for spec in specs:
        for target in spec.targets:
            located = found[(spec.name, target.id)]
            if isinstance(located, list):
                continue
            key = by_node.get(id(located.node))
            if key is None:
                key = (target.file, target.function)
                if key in taken:
                    key = (target.file, f"{target.function}@{located.node.lineno}")
                by_node[id(located.node)] = key
                taken.add(key)
            out[(spec.name, target.id)] = key
    return out


def _needs(specs: list[Spec], keys: dict[tuple[str, str], tuple[str, str]]
           ) -> dict[tuple[str, str], tuple[frozenset[str], ...] | None]:
    """By definition key, the names each pattern of the transforms on it needs (see ``Definition``);
    None when one of those transforms is not ``local``, has a pattern that needs no name, or a text that
    holds a stand-in's name (an anchor would match the stand-in, inserted code would be taken for one)."""
    found: dict[tuple[str, str], tuple[frozenset[str], ...] | None] = {}
    for spec in specs:
        for target in spec.targets:
            key = keys.get((spec.name, target.id))
            if key is None:
                continue
            for transform in target.transforms:
                kind = KINDS[transform.kind]
                try:
                    names = [pattern.names_needed(transform.params[key_], form)
                             for key_, form in kind.pattern_keys.items() if key_ in transform.params]
                except pattern.PatternError:   # resolving reports it, where it did before
                    names = [None]
                so_far = found.get(key, ())
                if not kind.local or None in names or so_far is None \
                        or any(STAND_IN_PREFIX in str(value) for value in transform.params.values()):
                    found[key] = None
                else:
                    found[key] = (*so_far, *(sets for each in names for sets in each or ()))
    return found


def _refuse_unbound(plan: Plan, spec: Spec, rows: list[Resolved]) -> None:
    """Rows whose inserted code would fail where it lands become ``unbound-name`` (see ``lint``)."""
    params = {(t.id, x.index): x.params for t in spec.targets for x in t.transforms}
    paired = [(r, KINDS[r.kind].binds(params[(r.target, r.index)])) for r in rows]
    for row, text in lint.unbound_problems(paired, plan.definitions, plan.sources, spec.alias):
        if row.ok:
            row.status, row.detail, row.lines = Status.UNBOUND, text, [row.line] if row.line else []


def _row(spec: Spec, target: Target, transform: Transform, status: Status, detail: str = "",
         lines: list[int] | None = None) -> Resolved:
    return Resolved(spec.name, target.id, transform.index, transform.kind, target.file, target.function,
                    status, None, detail, lines or [], spec_loc=transform.loc)


def _locate(plan: Plan, spec: Spec, target: Target, read: Callable[[str], str | None],
            has_package: Callable[[str], bool], only: set[str] | None) -> Located | list[Resolved]:
    """The target's live definition, or a row per transform saying why there is none."""
    def each(status: Status, detail: str = "", lines: list[int] | None = None) -> list[Resolved]:
        return [_row(spec, target, t, status, detail, lines) for t in target.transforms]

    if only is not None and target.package not in only:
        return each(Status.SKIPPED, f"package {target.package} not selected by --only")
    if not has_package(target.package):
        return each(Status.SKIPPED, f"package {target.package} is not under the root")
    source = plan.sources.get(target.file)
    if source is None:
        text = read(target.file)
        if text is None:
            return each(Status.TARGET_MISSING, f"file {target.file} does not exist{became(target.file, read)}")
        source = plan.sources[target.file] = SourceFile(target.file, text)
    try:
        located = source.locate(target.function, target.branch,
                                assignments=any(KINDS[t.kind].any_definition for t in target.transforms))
    except TargetAmbiguous as exc:
        return each(Status.TARGET_AMBIGUOUS, str(exc), exc.lines)
    except TargetNotLive as exc:
        return each(Status.NOT_LIVE, str(exc), exc.lines)
    except SourceError as exc:
        return each(Status.UNPARSABLE, str(exc))
    if located is None:
        return each(Status.TARGET_MISSING, f"{target.function} is not defined in {target.file}"
                    f"{_did_you_mean(target.function, source)}")
    return located


def _resolve_transforms(plan: Plan, spec: Spec, target: Target, located: Located, key: tuple[str, str],
                        needs: dict[tuple[str, str], tuple[frozenset[str], ...] | None]) -> list[Resolved]:
    source = plan.sources[target.file]
    shared = plan.definitions.setdefault(key, Definition(source, located.node, target.function, needs.get(key)))
    at = None if key == (target.file, target.function) else key
    out = []
    for transform in target.transforms:
        ctx = TargetContext(shared, spec.alias, spec.marker, spec.name, acknowledged=transform.acknowledge)
        resolved = _row(spec, target, transform, Status.OK)
        resolved.at = at
        try:
            resolved.line, resolved.edits = KINDS[transform.kind].resolve(ctx, transform.params)
        except ResolveError as exc:
            resolved.status, resolved.detail, resolved.lines = exc.reason, str(exc), exc.lines
            pattern_keys = list(KINDS[transform.kind].pattern_keys)
            if exc.reason in (Status.MISSING, Status.AMBIGUOUS) and pattern_keys:
                resolved.spec_loc = transform.at(pattern_keys[0])   # the anchor itself, in the spec
        except SourceError as exc:
            resolved.status, resolved.detail = Status.UNPARSABLE, str(exc)
        own = [e for e in resolved.edits if isinstance(e, NodeEdit) and e.node is shared.fragment.node
               and e.action.rewrites]   # the target's own statement rewritten: a definition replaced keeps its name
        resolved.own = bool(own)
        resolved.binding = bool(own) and (not isinstance(located.node, scope.SCOPES)
                                          or not any(isinstance(e.new, cst.BaseStatement) for e in own))
        resolved.note = "; ".join(filter(None, [located.note, *ctx.notes]))
        out.append(resolved)
    return out


def became(rel: str, read: Callable[[str], str | None]) -> str:
    """A module that became a package (``m.py`` -> ``m/__init__.py``) or the reverse: where it is now."""
    if not rel.endswith(".py"):
        return ""
    other = rel.removesuffix("/__init__.py") + ".py" if rel.endswith("/__init__.py") else \
        rel.removesuffix(".py") + "/__init__.py"
    if read(other) is None:
        return ""
    became = "a package" if other.endswith("/__init__.py") else "a module"
    return (f"; the module is {other} here (it became {became}): give the target `file: {other}` (a release "
            f"profile's override, for this release only)")


def _did_you_mean(qualname: str, source: SourceFile) -> str:
    close = close_names(qualname, source)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def close_names(qualname: str, source: SourceFile) -> list[str]:
    """The definitions of ``source`` whose names are nearest ``qualname`` (a missing target's "did you
    mean"), nearest first."""
    try:
        names = [name for name, _node in source.definitions()]
    except SourceError:
        return []
    return difflib.get_close_matches(qualname, names, n=3, cutoff=0.6)


@gcpause.paused
def emit(plan: Plan, specs: Iterable[Spec], check: bool = True) -> dict[str, str]:
    """The patched text of every file the plan changes. The plan must have no errors.

    Edits of several specs at one place go in stacking order (each spec's ``order``, then its name), so
    the text depends only on the set of specs. Edits that cannot coexist raise ``ConflictError``; what
    ``compiler.lint`` finds wrong in the inserted code goes to ``plan.problems``, which the caller must
    refuse on before writing; ``check=False`` leaves out the compile of each file (what is known to compile)."""
    if plan.errors:
        raise ValueError("cannot emit a plan with unresolved transforms")
    by_name = {spec.name: spec for spec in specs}
    order = {id(r): n for n, r in enumerate(plan.resolved)}
    ranked = sorted((r for r in plan.resolved if r.ok), key=lambda r: (by_name[r.spec].rank, order[id(r)]))
    _check_conflicts(ranked)
    _check_rewrites(ranked, plan.definitions)
    out: dict[str, str] = {}
    plan.problems = []
    for path in plan.files:
        source = plan.sources[path]
        rows = [r for r in ranked if r.file == path]
        owners = [by_name[name] for name in dict.fromkeys(r.spec for r in rows if r.edits)]
        plan.problems += lint.check_aliases(source, owners, {s.name: _first_loc(rows, s.name) for s in owners})
        line_edits: list[LineEdit] = []
        for spec in owners:
            if spec.snippet_package is None:
                continue
            text = f"from {RUNTIME_PACKAGE} import {spec.snippet_package} as {spec.alias}"
            line_edits.append(LineEdit(source.import_line(), marked_line(text, spec.marker, "", source.newline),
                                       spec.name))
        node_edits: dict[tuple[str, str], list[NodeEdit]] = {}
        for r in rows:
            for edit in r.edits:
                if isinstance(edit, LineEdit):
                    line_edits.append(edit)
                else:
                    node_edits.setdefault(r.key, []).append(edit)
        fragments = {}
        for key, edits in node_edits.items():
            definition = plan.definitions[key]
            fragment = definition.fragment
            plan.rendered[key] = render_fragment(fragment, edits, definition.enclosing(e.node for e in edits))
            fragments[fragment.start] = (fragment.end, plan.rendered[key])
        out[path] = splice(source, fragments, line_edits)
        broken = lint.compile_problem(path, out[path], rows) if check else None
        plan.problems += [broken] if broken else []
        plan.problems += lint.removed_name_reads(source, out[path], rows) if check and not broken else []
    return out


def _first_loc(rows: list[Resolved], spec: str) -> Loc | None:
    return next((r.spec_loc for r in rows if r.spec == spec), None)


def _check_conflicts(rows: list[Resolved]) -> None:
    """Edits that stacking cannot order: two different values for one keyword of one call, or for one
    member of one class. The same value twice is kept once."""
    seen: dict[tuple[object, ...], tuple[Resolved, str]] = {}
    for r in rows:
        kept = []
        for edit in r.edits:
            what, value = _slot(r, edit)
            if what is None:
                kept.append(edit)
                continue
            first = seen.setdefault(what, (r, value))
            if first[0] is r:
                kept.append(edit)
            elif first[1] != value:
                other = first[0]
                raise ConflictError(
                    f"specs {other.spec} ({other.target}#{other.index}) and {r.spec} ({r.target}#{r.index}) "
                    f"set {what[-1]} differently ({first[1]!r} and {value!r}): they cannot both apply",
                    r.file, r.line, [loc for loc in (other.spec_loc, r.spec_loc) if loc])
        r.edits = kept


def _slot(r: Resolved, edit: NodeEdit | LineEdit) -> tuple[tuple[object, ...] | None, str]:
    """What one edit sets that another spec's edit could set differently, and the value it sets."""
    slot = KINDS[r.kind].slot
    return slot(r, edit) if slot is not None else (None, "")


def _check_rewrites(rows: list[Resolved], definitions: dict[tuple[str, str], Definition]) -> None:
    """A rewrite (replace, remove, set) must leave every other spec's edit where it was matched: refused
    when another spec's edit is on the rewritten code, inside it, or on a statement or call holding it (its
    anchor would change); the target definition itself (a wrap, a class member) does not count. Within one
    spec, another transform's edit inside the rewritten code (or a second rewrite of the same code, or an insert
    next to a statement removed) would be lost, as the rewrite puts new code in its place: refused too, naming both
    transforms."""
    placed = [(r, e) for r in rows for e in r.edits if isinstance(e, NodeEdit) and e.action.anchors]
    for r, edit in placed:
        if not edit.action.rewrites:
            continue
        definition = definitions[r.key]
        inside = rewrite.subtree(edit.node)
        around = {id(n) for n in definition.ancestors(edit.node)} - {id(definition.fragment.node)}
        removed = edit.action.place is Place.INSTEAD and not any(   # no statement left in its place
            isinstance(e.new, cst.BaseStatement) for e in r.edits
            if isinstance(e, NodeEdit) and e.node is edit.node and e.action.place is Place.INSTEAD)
        for other, theirs in placed:
            if other is r or id(theirs.node) == id(definition.fragment.node):
                continue
            if other.key != r.key:
                continue
            if other.spec == r.spec:
                same = theirs.node is edit.node
                if same and removed and not theirs.action.rewrites:
                    raise ConflictError(
                        f"spec {r.spec}: {r.target}#{r.index} ({r.kind}, line {r.line}) removes the statement that "
                        f"{other.target}#{other.index} ({other.kind}, line {other.line}) is anchored on, so that edit "
                        f"would be lost: replace that statement by the code instead (a replace whose `by` holds it)",
                        r.file, r.line, [loc for loc in (other.spec_loc, r.spec_loc) if loc])
                if (id(theirs.node) in inside and not same) or (same and theirs.action.rewrites):
                    raise ConflictError(
                        f"spec {r.spec}: {r.target}#{r.index} ({r.kind}, line {r.line}) rewrites the code that "
                        f"{other.target}#{other.index} ({other.kind}, line {other.line}) edits, so that edit would be "
                        f"lost: write it into the replacement of {r.target}#{r.index}, or narrow that pattern",
                        r.file, r.line, [loc for loc in (other.spec_loc, r.spec_loc) if loc])
                continue
            if id(theirs.node) in inside or id(theirs.node) in around:
                raise ConflictError(
                    f"spec {r.spec} ({r.target}#{r.index}, {r.kind}) would change what spec {other.spec} "
                    f"({other.target}#{other.index}, {other.kind}) is anchored on at line {other.line}: they "
                    f"cannot both apply", r.file, r.line, [loc for loc in (other.spec_loc, r.spec_loc) if loc])


def edited_lines(plan: Plan, spec: Spec, texts: dict[str, str]) -> dict[int, set[int]]:
    """By the id of each row of one spec's ``plan`` (resolved on the pristine sources), the lines of
    ``texts`` (the files as patched, other specs' edits among them) that its own edits wrote: what ties a
    transform's expectation to its own edit's position, never to the same text elsewhere in the target. A
    row whose lines cannot be told apart (another spec rewrote them too) is left out."""
    out: dict[int, set[int]] = {}
    for path in plan.files:
        rows = [r for r in plan.resolved if r.file == path and r.ok]
        try:
            full = _emit_rows(plan, rows, spec).get(path)
            if full is None or path not in texts:
                continue
            placed = _same_lines(full, texts[path])
            for r in rows:
                if r.edits:
                    without = _emit_rows(plan, [x for x in rows if x is not r], spec).get(path, plan.sources[path].text)
                    out[id(r)] = {placed[n] for n in _written(without, full) if n in placed}
        except (ConflictError, ValueError):   # the plan does not emit alone: no position to tell
            continue
    return out


def _emit_rows(plan: Plan, rows: list[Resolved], spec: Spec) -> dict[str, str]:
    return emit(Plan(rows, plan.sources, plan.definitions), [spec], check=False)


def _written(before: str, after: str) -> list[int]:
    """The lines of ``after`` (from 1) that are not ``before``'s: the two differ in one transform's edits,
    so the lines both begin and end with are set aside before the rest is compared."""
    old, new = split_lines(before), split_lines(after)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(None, old[head:len(old) - tail], new[head:len(new) - tail], autojunk=False)
    return [head + n + 1 for tag, _i1, _i2, j1, j2 in matcher.get_opcodes() if tag in ("replace", "insert")
            for n in range(j1, j2)]


def _same_lines(one: str, other: str) -> dict[int, int]:
    """Each line of ``one`` (from 1) that ``other`` holds unchanged, by its line there."""
    if one == other:
        return {n: n for n in range(1, len(split_lines(one)) + 1)}
    matcher = difflib.SequenceMatcher(None, split_lines(one), split_lines(other), autojunk=False)
    return {a + k + 1: b + k + 1 for a, b, size in matcher.get_matching_blocks() for k in range(size)}
