"""Edits → patched text: one libcst pass per parsed definition, then a line splice over the file."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, cast

import libcst as cst

from patchspec.compiler.edits import Action, ConflictError, LineEdit, NodeEdit, Place, with_marker
from patchspec.compiler.rewrite import fill_run, holds_run
from patchspec.compiler.source import Fragment, SourceFile


class _ApplyNodeEdits(cst.CSTTransformer):
    """Every edit where its action says: a ``NODE`` action on its node (in stage order, each action with all
    its specs' new nodes in stacking order), the statement actions in the node's block."""

    def __init__(self, edits: list[NodeEdit], rebuilt: set[int] | None = None, synthetic: int | None = None) -> None:
        super().__init__()
        self.rebuilt = rebuilt
        self.synthetic = synthetic   # the ``if True:`` block an indented fragment is parsed under (not the file's)
        self.emptied: list[cst.EmptyLine] | None = None   # that block's lines, when nothing of it is left
        self.by_node: dict[int, dict[Action, list[cst.CSTNode]]] = defaultdict(lambda: defaultdict(list))
        for edit in edits:
            self.by_node[id(edit.node)][edit.action].append(edit.new)

    def on_visit(self, node: cst.CSTNode) -> bool:
        """Only the edited nodes and those containing them are rebuilt; the rest is kept as it is."""
        return self.rebuilt is None or id(node) in self.rebuilt

    # libcst types on_leave generic in the node type; this one takes and returns any node
    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        edits = self.by_node.get(id(original))
        if edits:
            for action in sorted((a for a in edits if a.place is Place.NODE), key=lambda a: a.stage):
                updated = action.apply(updated, edits[action])
        if isinstance(updated, cst.IndentedBlock | cst.Module):
            updated = updated.with_changes(**self._splice(cast(cst.IndentedBlock | cst.Module, original), updated))
        return updated

    def _news(self, node: cst.CSTNode, place: Place) -> list[cst.CSTNode]:
        return [new for action, news in self.by_node.get(id(node), {}).items() if action.place is place
                for new in news]

    def _splice(self, original: cst.IndentedBlock | cst.Module,
                updated: cst.IndentedBlock | cst.Module) -> dict[str, Any]:
        """The block's statements with the statement actions done: inserted before and after, replaced,
        removed (its marker comment line kept in its place), or gathered into a guard."""
        out: list[cst.CSTNode] = []
        carried: list[cst.EmptyLine] = []           # a removed statement's lines, for the next statement
        guard: tuple[cst.BaseCompoundStatement, list[cst.CSTNode]] | None = None   # the guard and its run so far
        for orig, new in zip(original.body, updated.body, strict=True):
            before, after = self._news(orig, Place.BEFORE), self._news(orig, Place.AFTER)
            instead = self._news(orig, Place.INSTEAD)
            lead = cast(cst.SimpleStatementLine | cst.BaseCompoundStatement, new).leading_lines
            group = [*before, new, *after]
            if guard is not None and self._news(orig, Place.ABSORB):
                guard[1].extend(group)
                continue
            if guard is not None:
                out.append(_filled(guard))
                guard = None
            statements = [n for n in instead if not isinstance(n, cst.EmptyLine)]
            if statements and holds_run(statements[0]):
                guard = (cast(cst.BaseCompoundStatement, statements[0]), group)   # holds_run: a try or with
                continue
            tail: list[cst.EmptyLine] = []   # a replacement's closing comment lines, for the next statement
            if instead:
                group = [*before, *statements, *after]
                if not statements:
                    carried += [*lead, *cast(list[cst.EmptyLine], instead)]   # no statement: its lines
                    continue
                tail = [n for n in instead[instead.index(statements[-1]) + 1:] if isinstance(n, cst.EmptyLine)]
            if group:
                first = cast(cst.SimpleStatementLine | cst.BaseCompoundStatement, group[0])
                own = first.leading_lines if first is not new else ()   # a replacement's opening comments
                group = [group[0].with_changes(leading_lines=(*carried, *lead, *own)),
                         *[s.with_changes(leading_lines=()) if s is new else s for s in group[1:]]]
                carried = tail
                out += group
        if guard is not None:
            out.append(_filled(guard))
        changes: dict[str, Any] = {"body": tuple(out)}
        if carried:
            if not out and id(original) == self.synthetic:   # an indented target's own statement removed
                self.emptied = carried
            elif not out and isinstance(updated, cst.IndentedBlock):   # its only statement removed: a marked pass
                changes["body"] = (cst.SimpleStatementLine(
                    body=[cst.Pass()], leading_lines=tuple(carried[:-1]),
                    trailing_whitespace=with_marker(cst.TrailingWhitespace(), _comment(carried[-1]))),)
            else:
                changes["footer"] = (*carried, *updated.footer)
        return changes


def _filled(guard: tuple[cst.BaseCompoundStatement, list[cst.CSTNode]]) -> cst.BaseCompoundStatement:
    """The guard with its run in it: the statements of the block that it gathered."""
    return fill_run(guard[0], cast(list[cst.BaseStatement], guard[1]))


def _comment(line: cst.EmptyLine) -> str:
    """A removed statement's marker line: an empty line with the marker as its comment."""
    return cast(cst.Comment, line.comment).value


def render_fragment(fragment: Fragment, edits: list[NodeEdit], rebuilt: set[int] | None = None) -> str:
    """``rebuilt``: the ids of the edited nodes and their ancestors (``Definition.enclosing``); None
    rebuilds every node."""
    synthetic = id(fragment.module.body[0].body) if fragment.header else None
    visitor = _ApplyNodeEdits(edits, rebuilt, synthetic)
    module = fragment.module.visit(visitor)
    if visitor.emptied is not None:   # the comment lines alone, at the statement's indentation
        first = fragment.source.lines[fragment.start - 1]
        indent = first[:len(first) - len(first.lstrip())]
        newline = fragment.source.newline
        return "".join(f"{indent}{line.comment.value}{newline}" if line.comment else newline
                       for line in visitor.emptied)
    return fragment.render(module)


def splice(source: SourceFile, fragments: dict[int, tuple[int, str]], line_edits: list[LineEdit]) -> str:
    """Rebuild the file: ``fragments`` maps a start line to (end line, new text); line edits are inserted
    after their line, in the order given."""
    inserts: dict[int, list[str]] = defaultdict(list)
    for edit in line_edits:
        inserts[edit.after_line].append(edit.text)
    out = list(inserts.get(0, ()))
    line = 1
    lines = source.lines
    while line <= len(lines):
        if line in fragments:
            end, text = fragments[line]
            out.append(text)
            inside = [n for n in inserts if line <= n < end]
            if inside:
                raise ConflictError(f"a line added after line {inside[0]} (a class member or an import) falls inside "
                                    f"the definition at lines {line}-{end} that another transform rewrites: they "
                                    "cannot both apply", source.path, inside[0], [])
            nested = [start for start in fragments if line < start <= end]
            if nested:   # this fragment's text holds the inner one's lines unpatched: its edits would be lost
                raise ConflictError(f"the definition at line {nested[0]} that a transform patches lies inside the "
                                    f"definition at lines {line}-{end} that another transform patches: they cannot "
                                    "both apply; patch the outer one (its anchors reach inside)", source.path,
                                    nested[0], [])
            line = end
        else:
            out.append(lines[line - 1])
        if line in inserts and line != 0:
            if not out[-1].endswith(("\n", "\r")):
                out[-1] += source.newline
            out += inserts[line]
        line += 1
    return "".join(out)
