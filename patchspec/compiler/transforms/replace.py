"""``replace``: the one expression or statement matching a pattern (with metavariables) becomes new code.

An expression is replaced in place and its statement's line carries the marker; a statement is replaced
by the statements of ``by``, each line of them marked. What the metavariables captured is written back
in upstream's own text. A target that already holds the replacement (and no longer the pattern) has
nothing to do: drift calls that transform obsolete.
"""
from __future__ import annotations

import libcst as cst

from patchspec.compiler import pattern, rewrite
from patchspec.compiler.edits import Action, NodeEdit, Place, ResolveError, Status
from patchspec.compiler.transforms.context import TargetContext
from patchspec.compiler.transforms.kind import Binds, Key, Kind, code_binds


def _swap(node: cst.CSTNode, news: list) -> cst.CSTNode:
    """An expression's replacement keeps the parentheses around it (its layout in the statement)."""
    new = news[0]
    if getattr(node, "lpar", None) and not getattr(new, "lpar", None):
        return new.with_changes(lpar=node.lpar, rpar=node.rpar)
    return new


def _mark(node: cst.CSTNode, news: list) -> cst.CSTNode:
    for marker in news:
        node = rewrite.mark_statement(node, marker.value)
    return node


EXPRESSION = Action("replace-expression", Place.NODE, apply=_swap, rewrites=True)
STATEMENT = Action("replace-statement", Place.INSTEAD, rewrites=True, lint=lambda new: new)
MARK = Action("mark", Place.NODE, apply=_mark, stage=9, lint=lambda new: None, anchors=False)


def marker_edit(ctx: TargetContext, node: cst.CSTNode) -> NodeEdit:
    """The marker on the line of the statement that holds a rewritten expression."""
    return NodeEdit(MARK, ctx.definition.statement_of(node), cst.Comment(ctx.marker), ctx.owner)


def find_rewritten(ctx: TargetContext, text: str, what: str) -> tuple[cst.CSTNode, dict]:
    """The one node matching a rewrite pattern, with its captures; zero or several is a ResolveError."""
    matcher = pattern.to_matcher(pattern.parse(text, "rewrite"))
    found = [(n, b) for n, b in ctx.definition.find_bound(matcher) if n is not ctx.fragment.node]
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
        from patchspec.compiler.transforms.guard import find_runs

        runs = find_runs(ctx, list(parsed.body))
        return set().union(*(rewrite.subtree(s) for s in runs[0][0].body[runs[0][1]:runs[0][2]])) if len(runs) == 1 \
            else None
    node = parsed.body[0] if isinstance(parsed, cst.Module) else parsed
    found = ctx.definition.find_bound(pattern.to_matcher(node))
    return rewrite.subtree(found[0][0]) if len(found) == 1 else None


def already(ctx: TargetContext, pattern_text: str, code: str) -> bool:
    """Whether the change is there: the target holds the replacement once, and whatever the pattern still
    matches lies inside it (``$A and $B`` matches inside ``not s and a and b``)."""
    place = held(ctx, code)
    if place is None:
        return False
    matcher = pattern.to_matcher(pattern.parse(pattern_text, "rewrite"))
    return all(id(n) in place for n, _ in ctx.definition.find_bound(matcher))


def replacement(ctx: TargetContext, code: str, bound: dict, expression: bool):
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
    statements = list(parsed.body) if isinstance(parsed, cst.Module) else [cst.SimpleStatementLine([cst.Expr(parsed)])]
    module = rewrite.mark_code(cst.Module(body=statements), ctx.marker)
    return list(rewrite.substitute(module, bound).body)


def replace(ctx: TargetContext, params: dict[str, str]):
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
               replace, actions=(EXPRESSION, STATEMENT, MARK), rewrites=True, binds=_binds, rank=8)
