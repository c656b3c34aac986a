"""Drift: how one release's sources stand against a spec, one class per target and transform.

Pure functions over source texts (``read`` callables, ``None`` for a missing file), so every class can be
produced from a string in a test. The work is done file by file (``file_drift``) so that a caller can
cache it by the hashes of the texts it was given.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import enum
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from patchspec.compiler import bindings, fingerprint, pattern
from patchspec.compiler.context import Definition
from patchspec.compiler.edits import Status
from patchspec.compiler.fingerprint import Change
from patchspec.compiler.plan import Plan, Resolved, became, resolve
from patchspec.compiler.source import SourceError, SourceFile, span
from patchspec.compiler.transforms import CLASS_KINDS, KINDS
from patchspec.model import Loc, ObsoleteWhen, Spec, Target, Transform, package_of


class Drift(enum.StrEnum):
    """The drift class of a transform (or a snippet binding) on a release, and its severity."""

    UNCHANGED = "unchanged"            # fingerprint equals the recorded one, every anchor holds
    CHANGED = "changed"                # the body changed, every anchor still matches once: review advised
    UNRECORDED = "unrecorded"          # every anchor holds, but no fingerprint to compare with
    NOT_CHECKED = "not-checked"        # the target's package is not under the root
    ANCHOR_MISSING = "anchor-missing"
    ANCHOR_AMBIGUOUS = "anchor-ambiguous"
    TARGET_MISSING = "target-missing"  # renamed or removed: see the candidates
    TARGET_AMBIGUOUS = "target-ambiguous"
    NOT_LIVE = "not-live"
    UNBOUND = "unbound-name"
    NOT_APPLICABLE = "not-applicable"
    UNPARSABLE = "unparsable"
    OBSOLETE = "obsolete"              # the spec's ``obsolete_when`` holds: the fix is upstream
    BOUND = "bound"                    # a name the snippets use (their ``USES``) is there and their call binds
    BINDING_MISSING = "binding-missing"    # it is not there (file, class, member or name)
    BINDING_MISMATCH = "binding-mismatch"  # it is there, but the snippets' call does not bind to its signature

    @property
    def severity(self) -> int:
        """0 no drift, 1 drift that still applies (review advised), 2 broken."""
        return 0 if self in _CLEAN else 1 if self in _REVIEW else 2


_CLEAN = frozenset({Drift.UNCHANGED, Drift.NOT_CHECKED, Drift.BOUND})
_REVIEW = frozenset({Drift.CHANGED, Drift.UNRECORDED})
USES = "uses"                      # the kind of a binding row; its target is "ENTRY in FILE"

FROM_STATUS = {Status.MISSING: Drift.ANCHOR_MISSING, Status.AMBIGUOUS: Drift.ANCHOR_AMBIGUOUS,
               Status.TARGET_MISSING: Drift.TARGET_MISSING, Status.TARGET_AMBIGUOUS: Drift.TARGET_AMBIGUOUS,
               Status.NOT_LIVE: Drift.NOT_LIVE, Status.UNBOUND: Drift.UNBOUND,
               Status.NOT_APPLICABLE: Drift.NOT_APPLICABLE, Status.UNPARSABLE: Drift.UNPARSABLE}
MAX_CANDIDATES = 3
TRIED_CANDIDATES = 8


@dataclass(frozen=True)
class Candidate:
    """A definition of the same file that may be the missing target under another name."""

    qualname: str
    line: int
    similarity: float    # statement-sequence ratio to the baseline's target, else name ratio
    anchors: int         # how many of the target's anchors (loop and call patterns too) resolve on it


@dataclass
class DriftRow(Resolved):
    """A resolved transform (without its edits) and what drift makes of it."""

    drift: Drift = Drift.UNCHANGED
    fingerprint: str | None = None
    expected: str | None = None
    baseline_line: int | None = None
    changes: list[Change] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    under: Drift | None = None   # for an obsolete row: the class it has apart from that

    @property
    def severity(self) -> int:
        if self.drift == Drift.OBSOLETE:
            return max(1, self.under.severity if self.under is not None else 2)
        return self.drift.severity

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "edits"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DriftRow:
        return cls(**{**data, "drift": Drift(data["drift"]), "under": data["under"] and Drift(data["under"]),
                      "changes": [fingerprint.Change(**c) for c in data["changes"]],
                      "candidates": [Candidate(**c) for c in data["candidates"]],
                      "spec_loc": Loc(**data["spec_loc"]) if data.get("spec_loc") else None})


FileDrift = Callable[[Spec, str, "str | None", "str | None", bool, dict[str, str]], list[DriftRow]]
ObsoleteLine = Callable[[ObsoleteWhen, "str | None"], "int | None"]


def report(spec: Spec, read: Callable[[str], str | None], has_package: Callable[[str], bool],
           fingerprints: dict[str, str], baseline_read: Callable[[str], str | None] | None = None,
           per_file: FileDrift | None = None, obsolete: ObsoleteLine | None = None,
           modules: Callable[[str], list[str]] | None = None) -> list[DriftRow]:
    """Every target and transform of ``spec`` classified; ``per_file`` and ``obsolete`` may be caching
    versions of ``file_drift`` and ``obsolete_line``; ``modules`` (a package -> its files) lets a target
    whose file is gone be looked for in the others."""
    per_file = per_file or file_drift
    obsolete = obsolete or obsolete_line
    rows: list[DriftRow] = []
    for path in dict.fromkeys(t.file for t in spec.targets):
        present = has_package(package_of(path))
        text = read(path) if present else None
        baseline = baseline_read(path) if present and baseline_read else None
        found = per_file(spec, path, text, baseline, present, fingerprints)
        hint = became(path, read) if present and text is None else ""
        for row in found if present and text is None else ():   # the module is elsewhere in this release
            if row.status == Status.TARGET_MISSING:
                row.detail += hint or _defined_elsewhere(row.function, package_of(path), read, modules)
        rows += found
    hits = [(cond, line) for cond in spec.obsolete_when if has_package(package_of(cond.file))
            and (line := obsolete(cond, read(cond.file))) is not None]
    return with_obsolete(rows, hits)


def _defined_elsewhere(qualname: str, package: str, read: Callable[[str], str | None],
                       modules: Callable[[str], list[str]] | None) -> str:
    """Where another module of the package defines ``qualname`` (tenacity's ``_asyncio.py`` became
    ``asyncio/__init__.py``), as the override that follows it; "" when none or more than one does."""
    first = qualname.split(".")[0]
    found = []
    for rel in modules(package) if modules else ():
        text = read(rel)
        if text is None or not re.search(rf"^\s*(?:async\s+def|def|class)\s+{re.escape(first)}\b", text, re.M):
            continue
        try:
            found += [rel] if SourceFile(rel, text).find(qualname) is not None else []
        except SourceError:
            continue
    if len(found) != 1:
        return ""
    return (f"; {qualname} is defined in {found[0]} here: give the target `file: {found[0]}` (a release "
            "profile's override, for this release only)")


def binding_rows(spec: Spec, uses: dict[str, list[str]],
                 check_file: Callable[[str, list[str]], list[tuple[str, str | None]] | None],
                 has_package: Callable[[str], bool]) -> list[DriftRow]:
    """One row per entry of the snippets' ``USES``: ``bound``, ``binding-missing``, ``binding-mismatch``, or
    ``not-checked`` when its package is not under the root; ``check_file(rel, entries)`` is
    ``bindings.check`` on that file (None: the file is missing), or a caching version of it."""
    rows = []
    for rel, entries in uses.items():
        present = has_package(package_of(rel))
        checked = check_file(rel, entries) if present else [(entry, None) for entry in entries]
        for entry, problem in checked or [(entry, "the file is missing") for entry in entries]:
            drift = (Drift.NOT_CHECKED if not present else Drift.BOUND if problem is None
                     else Drift.BINDING_MISMATCH if bindings.is_mismatch(problem) else Drift.BINDING_MISSING)
            rows.append(DriftRow(spec.name, f"{entry} in {rel}", 0, USES, rel, entry,
                                 Status.OK if problem is None else Status.MISSING, detail=problem or "",
                                 drift=drift))
    return rows


def exit_code(rows: list[DriftRow]) -> int:
    """0 no drift, 1 drift that still applies, 2 broken."""
    return max((r.severity for r in rows), default=0)


def file_drift(spec: Spec, path: str, text: str | None, baseline: str | None, present: bool,
               fingerprints: dict[str, str]) -> list[DriftRow]:
    """The rows of the targets in one file, from its text (and the baseline release's text of it)."""
    scoped = spec.with_targets(tuple(t for t in spec.targets if t.file == path))
    plan = resolve([scoped], lambda rel: text, lambda package: present)
    base = resolve([scoped], lambda rel: baseline, lambda package: True) if baseline is not None else None
    rows = []
    for target in scoped.targets:
        rows += _target_rows(scoped, target, plan, base, fingerprints.get(target.id))
    return rows


def _key(plan: Plan, target: Target) -> tuple[str, str]:
    """The target's definition in ``plan`` (another definition of a name the plan patches has its own)."""
    return next((r.key for r in plan.resolved if r.target == target.id), (target.file, target.function))


def _target_rows(spec: Spec, target: Target, plan: Plan, base: Plan | None,
                 recorded: str | None) -> list[DriftRow]:
    current_def = plan.definitions.get(_key(plan, target))
    base_def = base.definitions.get(_key(base, target)) if base else None
    current = _fingerprint(current_def)
    base_print = _fingerprint(base_def)
    expected = recorded or base_print
    changes = []
    if current_def and base_def and current != base_print:
        changes = fingerprint.changes(fingerprint.statements(base_def.node),
                                      fingerprint.statements(current_def.node))
    base_lines = {r.index: r.line for r in base.resolved if r.target == target.id} if base else {}
    rows = [r for r in plan.resolved if r.target == target.id]
    candidates = []
    if any(r.status == Status.TARGET_MISSING for r in rows) and target.file in plan.sources:
        reference = fingerprint.statements(base_def.node) if base_def else None
        candidates = find_candidates(spec, target, plan.sources[target.file], reference)
    return [DriftRow(**{f.name: getattr(r, f.name) for f in dataclasses.fields(Resolved) if f.name != "edits"},
                     drift=(drift := _classify(r, current, expected)), fingerprint=current, expected=expected,
                     under=_by_fingerprint(current, expected) if drift == Drift.OBSOLETE else None,
                     baseline_line=base_lines.get(r.index), changes=changes,
                     candidates=candidates if r.status == Status.TARGET_MISSING else [])
            for r in rows]


def _fingerprint(definition: Definition | None) -> str | None:
    if definition is None:
        return None
    try:
        parsed = None if isinstance(definition.node, ast.ClassDef) else definition.whole
        return fingerprint.of_definition(definition.source, definition.node, parsed)
    except SourceError:
        return None


def _classify(row: Resolved, current: str | None, expected: str | None) -> Drift:
    if row.status == Status.SKIPPED:
        return Drift.NOT_CHECKED
    if row.ok:
        if KINDS[row.kind].rewrites and not row.edits:
            return Drift.OBSOLETE   # what the rewrite would write is there already: upstream has the change
        return _by_fingerprint(current, expected)
    return FROM_STATUS[row.status]


def _by_fingerprint(current: str | None, expected: str | None) -> Drift:
    if expected is None:
        return Drift.UNRECORDED
    return Drift.UNCHANGED if current == expected else Drift.CHANGED


def find_candidates(spec: Spec, target: Target, source: SourceFile,
                    reference: list[fingerprint.Statement] | None) -> list[Candidate]:
    """Definitions of the file that may be the target renamed: ranked by how many of its anchors
    resolve there, then by similarity to the baseline's target (or, without one, of the names)."""
    want_class = any(t.kind in CLASS_KINDS for t in target.transforms)
    words = _pattern_words(target)
    scored = []
    for qualname, node in source.definitions():
        if isinstance(node, ast.ClassDef) != want_class:
            continue
        if reference is not None:
            score = fingerprint.similarity(reference, fingerprint.statements(node))
        else:
            score = difflib.SequenceMatcher(None, target.function, qualname).ratio()
        start, end = span(node)
        text = "".join(source.lines[start - 1:end])
        scored.append((all(w in text for w in words), score, qualname, start))
    scored.sort(reverse=True)
    out = []
    for _has_words, score, qualname, start in scored[:TRIED_CANDIDATES]:
        moved = dataclasses.replace(target, function=qualname)
        trial = resolve([spec.with_targets((moved,))], lambda rel: source.text, lambda p: True,
                        sources={source.path: source})
        held = sum(r.ok for r, t in zip(trial.resolved, target.transforms, strict=True) if has_pattern(t))
        if held or score >= 0.5:
            out.append(Candidate(qualname, start, round(score, 3), held))
    out.sort(key=lambda c: (-c.anchors, -c.similarity))
    return out[:MAX_CANDIDATES]


def has_pattern(transform: Transform) -> bool:
    """Whether the transform locates something by a pattern (an anchor, a loop, a call)."""
    return bool(KINDS[transform.kind].pattern_keys)


def _pattern_words(target: Target) -> set[str]:
    """The names and attributes the target's anchors mention: a candidate lacking one cannot match."""
    words = set()
    for transform in target.transforms:
        for key in KINDS[transform.kind].pattern_keys:
            if key in transform.params:
                tree = ast.parse(textwrap.dedent(transform.params[key]).strip())
                words |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
                words |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return words


def obsolete_line(cond: ObsoleteWhen, text: str | None) -> int | None:
    """The line where the spec's obsolete condition holds (the pattern is found in the function)."""
    if text is None:
        return None
    source = SourceFile(cond.file, text)
    try:
        node = source.find(cond.function)
        if node is None:
            return None
        definition = Definition(source, node, cond.function)
        found = definition.find(pattern.compile_pattern(cond.contains, "statement_or_expression"))
    except SourceError:
        return None
    if not found:
        return None
    located = isinstance(found[0], cst.BaseStatement | cst.BaseSmallStatement | cst.Call)
    return definition.line_of(found[0]) if located else node.lineno  # lines are kept for those only


def with_obsolete(rows: list[DriftRow], hits: list[tuple[ObsoleteWhen, int]]) -> list[DriftRow]:
    """Every checked row becomes ``obsolete`` when a condition holds; the class it had is kept."""
    if not hits:
        return rows
    why = "; ".join(f"{c.file}:{line}: {c.function} contains {c.contains!r}" for c, line in hits)
    return [r if r.drift == Drift.NOT_CHECKED else dataclasses.replace(r, drift=Drift.OBSOLETE, under=r.drift,
                                                                  detail=f"fix is upstream: {why}")
            for r in rows]
