"""Metavariables for the rewrite kinds, as ast-grep writes them: ``$X`` one node, ``$$$XS`` a run of nodes.

A pattern or replacement is read as Python after each metavariable is turned into a placeholder name
(``$X`` -> ``__ps_one_X__0``, numbered by occurrence so that a name used twice can be held equal);
``compiler.pattern`` turns a placeholder into a capturing matcher, and ``substitute`` writes what was
captured back into the replacement. Outside string literals only: a ``$`` inside a string is text.

It also holds what several kinds share (``transforms/`` holds only kinds): the one place a pattern or a
run of statements matches in a target, and the marker on the line of a rewritten expression.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar, cast

import libcst as cst
import libcst.matchers as m

from patchspec.compiler import pattern
from patchspec.compiler.context import Capture, TargetContext
from patchspec.compiler.edits import Action, NodeEdit, Place, ResolveError, Status, with_marker
from patchspec.compiler.pattern import metavariable, names_in, placeholders

N = TypeVar("N", bound=cst.CSTNode)
A = TypeVar("A", cst.Arg, cst.Element)


class _Substitute(cst.CSTTransformer):
    def __init__(self, bound: Mapping[str, object]) -> None:
        super().__init__()
        self.bound = bound

    def _captured(self, node: cst.CSTNode) -> tuple[str, object] | None:
        found = metavariable(node)
        if found is None:
            return None
        name = found[1].rpartition("__")[0]
        return found[0], self.bound[name]

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement] | cst.RemovalSentinel:
        found = self._captured(original)
        if found is None:
            return updated
        form, value = found
        values = list(cast(list[cst.CSTNode], value)) if form == "run" else [value]
        if values and not all(isinstance(v, cst.BaseStatement) for v in values):
            return updated.with_changes(body=[cst.Expr(v) for v in values if isinstance(v, cst.BaseExpression)])
        return cst.FlattenSentinel(cast(list[cst.BaseStatement], values)) if values else cst.RemoveFromParent()

    def _sequence_item(self, original: cst.CSTNode, updated: A) -> A | cst.FlattenSentinel[A] | cst.RemovalSentinel:
        found = self._captured(original)
        if found is None:
            return updated
        if found[0] == "one":   # a `$X` argument captured the whole argument (a keyword or star included)
            value = found[1]
            return value.with_changes(comma=updated.comma) if type(value) is type(updated) else updated
        values = list(cast(list[A], found[1]))   # a run captures the items of a sequence
        return cst.FlattenSentinel(values) if values else cst.RemoveFromParent()

    # one function for both: libcst types each leave_ method with its own node type
    leave_Arg = leave_Element = _sequence_item   # type: ignore[assignment]

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        found = self._captured(original)
        if found is None or found[0] != "one":
            return updated
        value = found[1]
        if isinstance(value, cst.Arg | cst.Element) and not getattr(value, "keyword", None) \
                and not getattr(value, "star", ""):
            value = value.value   # captured as an argument, written where an expression goes
        return value if isinstance(value, cst.BaseExpression) else updated


def substitute(node: N, bound: Mapping[str, object]) -> N:
    """The replacement with each metavariable replaced by what it captured (upstream's own nodes)."""
    return cast(N, node.visit(_Substitute(bound)))   # the root is a module or an expression: it stays one


def unbound(text: str, bound: Mapping[str, object]) -> list[str]:
    """Metavariables a replacement names that its pattern does not bind."""
    return sorted(n for n in names_in(text) if n != "_" and n not in bound)


class _Mark(cst.CSTTransformer):
    """Every line of inserted code ends with the marker: simple statements and compound headers."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if metavariable(original) is not None:
            return updated
        return updated.with_changes(trailing_whitespace=with_marker(updated.trailing_whitespace, self.marker))

    def leave_SimpleStatementSuite(
        self, original: cst.SimpleStatementSuite, updated: cst.SimpleStatementSuite
    ) -> cst.SimpleStatementSuite:
        return updated.with_changes(trailing_whitespace=with_marker(updated.trailing_whitespace, self.marker))

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(header=with_marker(updated.header, self.marker))

    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine) -> cst.EmptyLine:
        """A blank line of the code stays blank wherever it lands (no indentation of its own)."""
        if updated.comment is None:
            return updated.with_changes(indent=False, whitespace=cst.SimpleWhitespace(""))
        return updated


def mark_code(node: N, marker: str) -> N:
    return cast(N, node.visit(_Mark(marker)))   # _Mark changes nodes, never removes one


def mark_statement(stmt: cst.CSTNode, marker: str) -> cst.CSTNode:
    """One statement's line marked: a simple statement's end, a compound statement's header."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.with_changes(trailing_whitespace=with_marker(stmt.trailing_whitespace, marker))
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        return stmt.with_changes(body=body.with_changes(header=with_marker(body.header, marker)))
    if isinstance(body, cst.SimpleStatementSuite):
        return stmt.with_changes(body=body.with_changes(trailing_whitespace=with_marker(body.trailing_whitespace,
                                                                                         marker)))
    return stmt


def parse_statements(text: str) -> list[cst.BaseStatement]:
    return list(cst.parse_module(placeholders(text).strip("\n") + "\n").body)


def holds_run(stmt: cst.CSTNode) -> bool:
    """Whether a guard's statement holds the placeholder of the run it guards."""
    return _run_slot(stmt) is not None


def _run_slot(stmt: cst.CSTNode) -> cst.IndentedBlock | None:
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock) and len(body.body) == 1:
        found = metavariable(body.body[0])
        if found is not None and found[0] == "run":
            return body
    return None


def fill_run(guard: cst.BaseCompoundStatement, run: Sequence[cst.BaseStatement]) -> cst.BaseCompoundStatement:
    """The guard with the run's statements as its body; the run's leading comments now lead the guard."""
    block = cast(cst.IndentedBlock, _run_slot(guard))   # a guard holds the run (``holds_run``)
    lead = cast(cst.SimpleStatementLine | cst.BaseCompoundStatement, run[0]).leading_lines if run else ()
    run = [run[0].with_changes(leading_lines=()), *run[1:]] if run else [cst.SimpleStatementLine([cst.Pass()])]
    return guard.with_changes(body=block.with_changes(body=tuple(run)), leading_lines=lead)


def subtree(node: cst.CSTNode) -> set[int]:
    """The ids of ``node`` and every node under it."""
    found: set[int] = set()

    class Collect(cst.CSTVisitor):
        def on_visit(self, child: cst.CSTNode) -> bool:
            found.add(id(child))
            return True

    node.visit(Collect())
    return found


def find_runs(ctx: TargetContext, patterns: Sequence[cst.BaseStatement]) -> list[tuple[cst.IndentedBlock, int, int]]:
    """Every (block, first, end) whose statements ``first:end`` match the pattern's statements."""
    wanted = m.IndentedBlock(body=[pattern._item_matcher(p) for p in patterns])
    last = pattern.to_matcher(patterns[-1])
    out = []
    for block in cast(list[cst.IndentedBlock], ctx.definition._nodes.get(cst.IndentedBlock, [])):
        body = block.body
        for first in range(len(body)):
            for end in range(first + 1, len(body) + 1):
                if m.matches(body[end - 1], last) and m.matches(cst.IndentedBlock(body=body[first:end]), wanted):
                    out.append((block, first, end))
    return out


def _swap(node: cst.BaseExpression, news: list[cst.CSTNode]) -> cst.BaseExpression:
    """An expression's replacement keeps the parentheses around it (its layout in the statement)."""
    new = cast(cst.BaseExpression, news[0])
    if getattr(node, "lpar", None) and not getattr(new, "lpar", None):
        return new.with_changes(lpar=node.lpar, rpar=node.rpar)
    return new


def _mark(node: cst.CSTNode, news: list[cst.CSTNode]) -> cst.CSTNode:
    for marker in news:
        node = mark_statement(node, cast(cst.Comment, marker).value)
    return node


EXPRESSION = Action("replace-expression", Place.NODE, apply=_swap, rewrites=True)
MARK = Action("mark", Place.NODE, apply=_mark, stage=9, lint=lambda new: None, anchors=False)


def marker_edit(ctx: TargetContext, node: cst.CSTNode) -> NodeEdit:
    """The marker on the line of the statement that holds a rewritten expression."""
    return NodeEdit(MARK, ctx.definition.statement_of(node), cst.Comment(ctx.marker), ctx.owner)


def find_rewritten(ctx: TargetContext, text: str, what: str) -> tuple[cst.CSTNode, dict[str, Capture]]:
    """The one node matching a rewrite pattern, with its captures; zero or several is a ResolveError. The
    target's own statement counts when the target is a module- or class-level assignment (``remove`` or
    ``replace`` of ``_OctalPatt = re.compile(...)``, the target naming ``_OctalPatt``) or when the pattern
    is a whole definition (``def f(...): ...``)."""
    parsed = pattern.parse(text, "rewrite")
    matcher = pattern.to_matcher(parsed)
    whole = isinstance(parsed, cst.FunctionDef | cst.ClassDef) or not isinstance(ctx.fragment.node, cst.FunctionDef
                                                                                   | cst.ClassDef)
    found = [(n, b) for n, b in ctx.definition.find_bound(matcher) if whole or n is not ctx.fragment.node]
    if len(found) != 1:
        raise ResolveError(Status.MISSING if not found else Status.AMBIGUOUS, what,
                           sorted({ctx.line_of(ctx.definition.statement_of(n)) for n, _ in found}))
    return found[0]


def held(ctx: TargetContext, code: str) -> set[int] | None:
    """The nodes (by id) of the one place the target holds ``code`` (metavariables as wildcards), or None
    when it holds it nowhere or in several places."""
    try:
        parsed = pattern.parse(code, "replacement")
    except pattern.PatternError:
        return None
    if isinstance(parsed, cst.Module) and len(parsed.body) > 1:
        runs = find_runs(ctx, list(parsed.body))
        return set().union(*(subtree(s) for s in runs[0][0].body[runs[0][1]:runs[0][2]])) if len(runs) == 1 \
            else None
    node = parsed.body[0] if isinstance(parsed, cst.Module) else parsed
    found = ctx.definition.find_bound(pattern.to_matcher(node))
    return subtree(found[0][0]) if len(found) == 1 else None
