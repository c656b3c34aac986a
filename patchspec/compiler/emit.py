"""Edits → patched text: one libcst pass per parsed definition, then a line splice over the file."""
from __future__ import annotations

from collections import defaultdict

import libcst as cst

from patchspec.compiler.edits import LineEdit, NodeEdit
from patchspec.compiler.source import Fragment, SourceFile


class _ApplyNodeEdits(cst.CSTTransformer):
    def __init__(self, edits: list[NodeEdit], rebuilt: set[int] | None = None) -> None:
        super().__init__()
        self.rebuilt = rebuilt
        self.by_node: dict[int, dict[str, list[cst.CSTNode]]] = defaultdict(lambda: defaultdict(list))
        for edit in edits:
            self.by_node[id(edit.node)][edit.action].append(edit.new)

    def on_visit(self, node) -> bool:
        """Only the edited nodes and those containing them are rebuilt; the rest is kept as it is."""
        return self.rebuilt is None or id(node) in self.rebuilt

    def on_leave(self, original, updated):
        edits = self.by_node.get(id(original))
        if edits:
            if edits.get("decorate"):
                # stacking order: the first spec's decorator is innermost, it wraps the original
                updated = updated.with_changes(decorators=(*updated.decorators, *reversed(edits["decorate"])))
            if edits.get("argument"):
                updated = updated.with_changes(args=_append_args(updated.args, edits["argument"]))
            if edits.get("body_head"):
                body = updated.body
                updated = updated.with_changes(body=body.with_changes(body=(*edits["body_head"], *body.body)))
            if edits.get("member"):
                body = updated.body
                updated = updated.with_changes(body=body.with_changes(body=(*body.body, *edits["member"])))
        if isinstance(updated, cst.IndentedBlock):
            updated = updated.with_changes(body=self._splice(original.body, updated.body))
        return updated

    def _splice(self, originals, updated) -> tuple[cst.BaseStatement, ...]:
        out: list[cst.BaseStatement] = []
        for orig, new in zip(originals, updated):
            edits = self.by_node.get(id(orig), {})
            before = list(edits.get("before", ()))
            if before:  # the anchor's comments and blank lines now lead the inserted statement
                before[0] = before[0].with_changes(leading_lines=new.leading_lines)
                new = new.with_changes(leading_lines=())
            out += before
            out.append(new)
            out += edits.get("after", ())
        return tuple(out)


def _append_args(args, new_args) -> tuple[cst.Arg, ...]:
    """Append keyword arguments in the call's own layout: each new one takes the separator before it."""
    args = list(args)
    for new in new_args:
        if not args:
            args.append(new)
            continue
        last = args[-1]
        separator = args[-2].comma if len(args) > 1 and args[-2].comma is not cst.MaybeSentinel.DEFAULT \
            else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args[-1] = last.with_changes(comma=separator)
        args.append(new.with_changes(comma=last.comma))
    return tuple(args)


def render_fragment(fragment: Fragment, edits: list[NodeEdit], rebuilt: set[int] | None = None) -> str:
    """``rebuilt``: the ids of the edited nodes and their ancestors (``Definition.enclosing``); None
    rebuilds every node."""
    return fragment.render(fragment.module.visit(_ApplyNodeEdits(edits, rebuilt)))


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
                raise ValueError(f"{source.path}:{inside[0]}: a line insertion falls inside a patched definition")
            line = end
        else:
            out.append(lines[line - 1])
        if line in inserts and line != 0:
            if not out[-1].endswith(("\n", "\r")):
                out[-1] += source.newline
            out += inserts[line]
        line += 1
    return "".join(out)
