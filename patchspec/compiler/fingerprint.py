"""Fingerprints and statement sequences of a target definition, blind to layout.

A fingerprint is a hash of the definition's libcst tree with comments, docstrings, whitespace, commas and
parentheses left out and literals normalized, so that reformatting a file leaves it unchanged while any
change of meaning moves it. A class's fingerprint covers its own level only (bases, decorators,
attributes, method signatures): its methods are targets of their own, and a whole-class libcst parse of
a 5,000-line runner would cost seconds.

Statement sequences (one normalized key per statement, from ``ast``) are what similarity and change
ranges are computed over: cheap enough to build for every definition of a file.
"""
from __future__ import annotations

import ast
import copy
import difflib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import libcst as cst

from patchspec.compiler import bounds
from patchspec.compiler.pattern import NO_VALUE, STRING_TYPES, fstring_prefix, literal_value, semantic_fields
from patchspec.compiler.scope import DefNode, TargetNode
from patchspec.compiler.source import SourceError, SourceFile, span

BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def tokens(node: cst.CSTNode) -> Iterator[str]:
    """The node's meaning as a flat token stream: node types, names, operators, normalized literals."""
    if isinstance(node, cst.BaseSuite):  # an indented block or a one-line body: the same statements
        yield from _sequence(_small_statements(node.body))
        return
    value = literal_value(node)
    if value is not NO_VALUE:  # as patterns compare them: "a" "b" is the one string "ab"
        yield "SimpleString" if isinstance(node, STRING_TYPES) else type(node).__name__
        yield repr(cast(tuple[str, object], value)[1])   # (type name, value), not NO_VALUE
        return
    yield type(node).__name__
    if isinstance(node, cst.FormattedString):  # its quotes are layout, its prefix is not
        yield fstring_prefix(node.start)
        for part in node.parts:
            yield from tokens(part)
        return
    if getattr(node, "asynchronous", None) is not None:  # a layout field to patterns, meaning here
        yield "async"
    for name, value in semantic_fields(node):
        if name == "body" and isinstance(node, cst.FunctionDef | cst.ClassDef):
            yield from _sequence(_without_docstring(_small_statements(cast(cst.BaseSuite, value).body)))
            continue
        if isinstance(value, cst.CSTNode):
            yield from tokens(value)
        elif isinstance(value, tuple | list):
            yield from _sequence(value)
        else:
            yield repr(value)


def _sequence(items: Sequence[cst.CSTNode]) -> Iterator[str]:
    yield f"[{len(items)}"
    for item in items:
        yield from tokens(item)


def _small_statements(body: Sequence[cst.CSTNode]) -> list[cst.CSTNode]:
    """Statements with every ``a; b`` line split, as a formatter splits them."""
    out: list[cst.CSTNode] = []
    for stmt in body:
        out += list(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
    return out


def _without_docstring(body: list[cst.CSTNode]) -> list[cst.CSTNode]:
    first = body[0] if body else None
    if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString | cst.ConcatenatedString):
        return body[1:]
    return body


def of_node(node: cst.CSTNode) -> str:
    digest = hashlib.sha256("\0".join(tokens(node)).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]


def of_definition(source: SourceFile, node: TargetNode, parsed: cst.CSTNode | None = None) -> str:
    """The fingerprint of a definition; ``parsed`` is its libcst node when the caller already has it."""
    if isinstance(node, ast.ClassDef):
        return of_node(_parse(_class_skeleton(source, node), source.newline))
    return of_node(parsed if parsed is not None else source.fragment(node).node)


def _class_skeleton(source: SourceFile, node: ast.ClassDef) -> str:
    """The class's lines with the body of each method cut down to ``...``."""
    start, end = span(node)
    lines = source.lines[start - 1:end]
    for child in reversed(node.body):
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = child.body[0]
        line = source.lines[first.lineno - 1]
        if line[:first.col_offset].strip():
            continue  # the body shares its header's line
        indent = line[:len(line) - len(line.lstrip())]
        lines[first.lineno - start:cast(int, child.end_lineno) - start + 1] = [indent + "..." + source.newline]
    return "".join(lines)


def _parse(text: str, newline: str) -> cst.CSTNode:
    indented = text[:1] in (" ", "\t")
    too_deep = bounds.refusal(text, bounds.SOURCE)   # libcst's native parser would crash or take minutes
    if too_deep:
        raise SourceError(f"this class is {too_deep}")
    try:
        module = cst.parse_module(("if True:" + newline if indented else "") + text)
    except cst.ParserSyntaxError as exc:
        raise SourceError(f"libcst cannot parse this class: {str(exc).splitlines()[0]}") from None
    # under the ``if True:`` block when indented: its one statement
    return cast(cst.IndentedBlock, cast(cst.If, module.body[0]).body).body[0] if indented else module.body[0]


@dataclass(frozen=True)
class Statement:
    first: int      # first line of the statement (of its header, for a compound statement)
    last: int       # last line of it (of its header)
    key: str        # normalized form: ast dump without positions, nested blocks left out


def statements(node: TargetNode) -> list[Statement]:
    """The definition's statements in source order, nested blocks included; in a class, methods count
    by their signature only."""
    out: list[Statement] = [_statement(node)]
    for block in _blocks(node):
        for child in block:
            _walk(child, out, isinstance(node, ast.ClassDef))
    return out


def _walk(node: ast.stmt, out: list[Statement], signatures_only: bool) -> None:
    out.append(_statement(node))
    if signatures_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return
    for block in _blocks(node):
        for child in block:
            _walk(child, out, signatures_only)


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for name in BLOCK_FIELDS:
        block = getattr(node, name, None)
        if block and isinstance(block, list):
            if name == "body" and isinstance(node, DefNode):
                block = _ast_without_docstring(block)
            yield block


def _ast_without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        return body[1:]
    return body


def _statement(node: ast.stmt) -> Statement:
    header = copy.copy(node)
    inner = []
    for name in BLOCK_FIELDS:
        if isinstance(getattr(node, name, None), list):
            inner += getattr(node, name)
            setattr(header, name, [])
    first = getattr(node, "lineno", None) or inner[0].lineno
    if isinstance(node, DefNode) and node.decorator_list:
        first = min(d.lineno for d in node.decorator_list)
    last = max(first, min(c.lineno for c in inner) - 1) if inner else cast(int, node.end_lineno)   # ast sets it
    return Statement(first, last, ast.dump(header, annotate_fields=False))


def similarity(a: list[Statement], b: list[Statement]) -> float:
    """How alike two definitions are, 0..1, over their statement sequences."""
    return difflib.SequenceMatcher(None, [s.key for s in a], [s.key for s in b], autojunk=False).ratio()


@dataclass(frozen=True)
class Change:
    tag: str        # replace | insert | delete (relative to the baseline)
    first: int      # lines of the current source; a deletion is shown at the line it happened before
    last: int


def changes(baseline: list[Statement], current: list[Statement]) -> list[Change]:
    """Where the current definition differs from the baseline's, as ranges of current lines."""
    matcher = difflib.SequenceMatcher(None, [s.key for s in baseline], [s.key for s in current],
                                      autojunk=False)
    out = []
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if j1 == j2:
            at = current[j1].first if j1 < len(current) else current[-1].last
            out.append(Change(tag, at, at))
        else:
            out.append(Change(tag, current[j1].first, max(s.last for s in current[j1:j2])))
    return out
