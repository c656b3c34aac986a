"""``replace``: the one expression or statement matching a pattern (with metavariables) becomes new code.

An expression is replaced in place and its statement's line carries the marker; a statement is replaced
by the statements of ``by``, each line of them marked. What the metavariables captured is written back
in upstream's own text. A target that already holds the replacement (and no longer the pattern) has
nothing to do: drift calls that transform obsolete.
"""
from __future__ import annotations

from typing import cast

import libcst as cst
import libcst.matchers as m

from patchspec.compiler import pattern, rewrite
from patchspec.compiler.context import Capture, TargetContext
from patchspec.compiler.edits import Action, NodeEdit, Place, ResolveError, Status
from patchspec.compiler.kind import Binds, Key, Kind, Resolution, code_binds
from patchspec.compiler.pattern import Matcher
from patchspec.compiler.rewrite import EXPRESSION, MARK, find_rewritten, held, marker_edit

STATEMENT = Action("replace-statement", Place.INSTEAD, rewrites=True, lint=lambda new: new)


def already(ctx: TargetContext, pattern_text: str, code: str) -> bool:
    """Whether the change is there: the target holds the replacement once, and whatever the pattern still
    matches lies inside it (``$A and $B`` matches inside ``not s and a and b``). A held node the pattern
    itself matches still needs the rewrite (``g($$$REST)`` holds ``g(str(x), y)``, which
    ``g(str($S), $$$REST)`` drops an argument of), unless every replacement is a match of the pattern."""
    place = held(ctx, code)
    if place is None:
        return False
    matcher = pattern.to_matcher(pattern.parse(pattern_text, "rewrite"))
    matched = [n for n, _ in ctx.definition.find_bound(matcher)]
    if not all(id(n) in place for n in matched):
        return False
    return not any(rewrite.subtree(n) == place for n in matched) or _extends(matcher, code)


def _extends(matcher: Matcher, code: str) -> bool:
    """Whether ``code`` (its metavariables as names) is itself a match of the pattern's ``matcher``."""
    parsed = pattern.parse(code, "replacement")
    if isinstance(parsed, cst.Module):
        if len(parsed.body) != 1:
            return False
        parsed = parsed.body[0]
    return m.matches(parsed, matcher)


def replacement(ctx: TargetContext, code: str, bound: dict[str, Capture], expression: bool) -> list[cst.CSTNode]:
    """``by`` parsed, marked line by line, with the captures substituted."""
    missing = rewrite.unbound(code, bound)
    if missing:
        raise ResolveError(Status.NOT_APPLICABLE, f"`by` names ${', $'.join(missing)}, which the pattern does not "
                                                  f"bind", [])
    parsed = pattern.parse(code, "replacement")
    if expression:
        if not isinstance(parsed, cst.BaseExpression):
            raise ResolveError(Status.NOT_APPLICABLE, "the pattern is an expression, so `by` must be one", [])
        return [rewrite.substitute(parsed, bound)]
    if not isinstance(parsed, cst.Module):
        # a replacement is an expression or statements (a module)
        parsed = cst.Module(body=[cst.SimpleStatementLine([cst.Expr(cast(cst.BaseExpression, parsed))])])
    module = rewrite.substitute(rewrite.mark_code(parsed, ctx.marker), bound)
    statements = list(module.body)
    if statements and module.header:   # comments the code starts with lead its first statement, as in the diff
        statements[0] = statements[0].with_changes(leading_lines=(*module.header, *statements[0].leading_lines))
    return statements + [line for line in module.footer if line.comment is not None]   # and those it ends with


def replace(ctx: TargetContext, params: dict[str, str]) -> Resolution:
    text = params["pattern"]
    if already(ctx, text, params["by"]):
        ctx.note("the target already holds the replacement")
        return ctx.definition.node.lineno, []
    node, bound = find_rewritten(ctx, text, f"pattern {text.strip().splitlines()[0]!r}")
    line = ctx.line_of(ctx.definition.statement_of(node))
    if isinstance(node, cst.BaseExpression):
        new = replacement(ctx, params["by"], bound, expression=True)[0]
        return line, [NodeEdit(EXPRESSION, node, new, ctx.owner), marker_edit(ctx, node)]
    return line, [NodeEdit(STATEMENT, node, new, ctx.owner)
                  for new in replacement(ctx, params["by"], bound, expression=False)]


def _binds(params: dict[str, str]) -> Binds:
    """What the replacement assigns, for the spec's code after it (its metavariables read as names)."""
    return code_binds({"code": pattern.placeholders(params["by"])})


REPLACE = Kind("replace", "the one expression or statement matching `pattern` (metavariables `$X`, `$$$XS`) "
               "becomes `by` (an expression for an expression; one or more statements for a statement), "
               "what the metavariables bound written back", {"pattern": Key.REWRITE_PATTERN, "by": Key.REPLACEMENT},
               replace, actions=(EXPRESSION, STATEMENT, MARK), rewrites=True, binds=_binds, rank=8,
               any_definition=True, live_cases=(("code_lines", "replace"), (
                   "binding", "replace of the target's own module- or class-level statement (`Resolved.binding`)")))
