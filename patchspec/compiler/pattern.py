"""Anchor patterns: Python with ``...`` wildcards, turned into libcst matchers.

The matcher is built from the pattern's own tree, field by field: names, attributes and operators must
be equal, strings and numbers equal in value (``'a'`` matches ``"a"`` and ``"" "a"``, ``16`` matches
``0x10``; a multi-line string's lines whatever their common indentation after the first, which a YAML
block takes away), as the fingerprints see them; whitespace, comments, commas, parentheses and line breaks are
ignored; ``...`` matches any expression, or any run of arguments or statements where it stands in a
sequence.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import re
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, cast, overload

import libcst as cst
import libcst.matchers as m

from patchspec.compiler import bounds
from patchspec.errors import PatchspecError


class PatternError(PatchspecError):
    """A pattern that is not one line of Python in its form; the spec says where (``spec.py``)."""


# A libcst matcher: built by name from a node's type (``m.Call``, ``m.Name``, ...), or a combinator
# (``m.DoNotCare``, ``m.MatchIfTrue``, ``|``); libcst gives each node class a matcher class of its own, with
# no common base a checker could hold the union of.
Matcher = Any


# Fields that carry only layout: whitespace, comments, punctuation.
LAYOUT_FIELDS = frozenset({
    "lpar", "rpar", "leading_lines", "lines_after_decorators", "header", "footer", "trailing_whitespace",
    "comma", "semicolon", "dot", "colon", "equal", "lbracket", "rbracket", "lbrace", "rbrace",
    "whitespace_after_at", "newline", "indent",
})
LAYOUT_TYPES = (
    cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Newline, cst.Comment,
    cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
    cst.MaybeSentinel,
)
OPERATOR_TYPES = (cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp)
NUMBER_TYPES = (cst.Integer, cst.Float, cst.Imaginary)
STRING_TYPES = (cst.SimpleString, cst.ConcatenatedString)
NO_VALUE = object()
ONE, RUN = "__ps_one_", "__ps_run_"   # metavariable placeholders (see ``compiler.rewrite``)


def fstring_prefix(start: str) -> str:
    """An f-string's prefix as its meaning: ``F"``, ``Rf'`` and ``fr'''`` read ``f``, ``fr``, ``fr``."""
    return "".join(sorted(start.lower().rstrip("'\"")))


_TOKEN = re.compile(r"""("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|\$\$\$([A-Z_][A-Z0-9_]*)|\$([A-Z_][A-Z0-9_]*)""")


def placeholders(text: str) -> str:
    """``text`` with every metavariable as a placeholder name (Python that libcst parses)."""
    seen: dict[str, int] = defaultdict(int)

    def one(match: re.Match[str]) -> str:
        if match.group(1):
            return match.group(1)
        run, name = (True, match.group(2)) if match.group(2) else (False, match.group(3))
        number = seen[name]
        seen[name] += 1
        return f"{RUN if run else ONE}{name}__{number}"

    return _TOKEN.sub(one, textwrap.dedent(text))


def only_metavariable(text: str) -> bool:
    """Whether a rewrite pattern is one metavariable and nothing else (``$X``, ``$$$XS``): it matches every
    expression, or every run of statements, so it names no one place."""
    return re.fullmatch(r"\s*\$(?:\$\$)?[A-Z_][A-Z0-9_]*\s*", text) is not None


def names_in(text: str) -> set[str]:
    return {m_.group(2) or m_.group(3) for m_ in _TOKEN.finditer(textwrap.dedent(text)) if not m_.group(1)}


def literal_value(node: cst.CSTNode) -> object:
    """The value a string or number literal stands for (typed, so ``1`` is not ``1.0``); ``NO_VALUE``
    for anything else, an f-string among them. Quotes, prefixes, implicit concatenation and the way a
    number is written are layout."""
    if isinstance(node, NUMBER_TYPES):
        value = ast.literal_eval(node.value)
    elif isinstance(node, STRING_TYPES):
        value = node.evaluated_value
        if value is None:
            return NO_VALUE
    else:
        return NO_VALUE
    return type(value).__name__, value


def _without_indentation(value: object) -> object:
    """A multi-line string's value with the common indentation of its lines after the first taken out: the
    file's indentation of the code around it, which an anchor copied into a YAML block loses."""
    if not (isinstance(value, tuple) and value[0] == "str" and "\n" in value[1]):
        return value
    first, rest = value[1].split("\n", 1)
    return "str", f"{first}\n{textwrap.dedent(rest)}"


@overload
def parse(text: str, form: Literal["expression"]) -> cst.BaseExpression: ...
@overload
def parse(text: str, form: Literal["statement", "code"]) -> cst.BaseStatement: ...
@overload
def parse(text: str, form: Literal["statements"]) -> cst.Module: ...
@overload
def parse(text: str, form: str) -> cst.CSTNode: ...
@functools.lru_cache(maxsize=4096)
def parse(text: str, form: str) -> cst.CSTNode:
    """Parse a pattern or code string; ``form`` is statement, expression, code or statement_or_expression.
    Parsed once per text: a spec's strings are checked when it loads and read again when it resolves, and
    libcst nodes are immutable, so one tree serves every use."""
    too_big = bounds.refusal(text)
    if too_big:
        raise PatternError(too_big)
    source = textwrap.dedent(text).strip("\n")
    if form in ("rewrite", "statements", "replacement"):
        return _parse_rewrite(placeholders(source), form)
    try:
        if form == "expression":
            return cst.parse_expression(source)
        if form == "statement_or_expression":
            try:
                return cst.parse_expression(source)
            except cst.ParserSyntaxError:
                return _one_statement(source)
        node = _one_statement(source)
    except cst.ParserSyntaxError as exc:
        first = str(exc).splitlines()[0]
        raise PatternError(f"not valid Python ({form}): {first}: {source!r}{_header_hint(source)}") from None
    if form == "code" and "\n" in source:
        raise PatternError(f"code must be one line: {source!r}")
    return node


def _header_hint(source: str) -> str:
    """A compound statement's header alone (``if obj is None:``), which the docs write ``if c: ...``."""
    if not source.rstrip().endswith(":"):
        return ""
    try:
        _one_statement(source.rstrip() + " ...")
    except cst.ParserSyntaxError:
        return ""
    return f"; a compound statement is matched by its header and `...`: '{source.rstrip()} ...'"


def _parse_rewrite(source: str, form: str) -> cst.CSTNode:
    """A rewrite pattern (an expression or one statement), a run of statements (a module), or a replacement
    (an expression, else statements as a module); metavariables already placeholders."""
    try:
        if form != "statements":
            try:
                return cst.parse_expression(source)
            except cst.ParserSyntaxError:
                pass
        if form == "rewrite":
            return _one_statement(source)
        module = cst.parse_module(source + "\n")
    except cst.ParserSyntaxError as exc:
        first = str(exc).splitlines()[0]
        raise PatternError(f"not valid Python ({form}): {first}: {source!r}") from None
    if not module.body:
        raise PatternError(f"expected statements, found none: {source!r}")
    return module


def _one_statement(source: str) -> cst.BaseStatement:
    module = cst.parse_module(source + "\n")
    if len(module.body) != 1:
        raise PatternError(f"expected exactly one statement, found {len(module.body)}: {source!r}")
    return module.body[0]


def semantic_fields(node: cst.CSTNode) -> Iterator[tuple[str, object]]:
    """The fields of a node that carry meaning (layout fields left out), in declaration order."""
    for field in dataclasses.fields(node):
        if field.name in LAYOUT_FIELDS or field.name.startswith("whitespace"):
            continue
        value = getattr(node, field.name)
        if isinstance(value, LAYOUT_TYPES):
            continue
        yield field.name, value


def is_wildcard(node: object) -> bool:
    """``...`` alone: as an expression, an argument, or a statement."""
    if isinstance(node, cst.Ellipsis):
        return True
    if isinstance(node, cst.Arg):
        return node.keyword is None and not node.star and isinstance(node.value, cst.Ellipsis)
    if isinstance(node, cst.Expr):
        return isinstance(node.value, cst.Ellipsis)
    if isinstance(node, cst.SimpleStatementLine):
        return len(node.body) == 1 and is_wildcard(node.body[0])
    return False


def metavariable(node: object) -> tuple[str, str] | None:
    """("one" | "run", capture key) for a placeholder: a name, or a statement or argument holding one."""
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Expr):
        node = node.body[0].value
    elif isinstance(node, cst.Expr | cst.Arg | cst.Element) and not getattr(node, "keyword", None) \
            and not getattr(node, "star", ""):
        node = node.value
    if isinstance(node, cst.Name):
        for prefix, form in ((ONE, "one"), (RUN, "run")):
            if node.value.startswith(prefix):
                return form, node.value[len(prefix):]
    return None


def matcher_of(node: object) -> Matcher | None:
    """The capturing matcher of a placeholder (``None`` when ``node`` is none)."""
    found = metavariable(node)
    if found is None:
        return None
    form, key = found
    return m.SaveMatchedNode(m.ZeroOrMore() if form == "run" else m.DoNotCare(), key)


def to_matcher(node: cst.CSTNode) -> Matcher:
    """The libcst matcher that a pattern node stands for."""
    captured = matcher_of(node)
    if captured is not None:
        return captured
    if isinstance(node, cst.Ellipsis):
        return m.DoNotCare()
    want = literal_value(node)
    if want is not NO_VALUE:
        key = _without_indentation(want)
        return m.MatchIfTrue(lambda found: _without_indentation(literal_value(found)) == key)
    if isinstance(node, cst.FormattedString):  # its quotes are layout, its prefix is not
        prefix = fstring_prefix(node.start)
        return m.FormattedString(parts=_value_matcher(node.parts),
                                 start=m.MatchIfTrue(lambda start: fstring_prefix(start) == prefix))
    matcher_class: Callable[..., Matcher] = getattr(m, type(node).__name__)
    if isinstance(node, OPERATOR_TYPES):
        return matcher_class()
    fields = {name: _value_matcher(value) for name, value in semantic_fields(node)}
    if isinstance(node, cst.Call) and any(is_wildcard(arg) for arg in node.args):
        fields["args"] = _open_arguments(node.args)
    if isinstance(node, cst.FunctionDef | cst.ClassDef) and not node.decorators:
        fields["decorators"] = m.DoNotCare()   # written from its `def` line, it matches the decorated definition
    return matcher_class(**fields)


def _open_arguments(args: Sequence[cst.Arg]) -> Matcher:
    """``f(a, ..., k=v)``: positional arguments in order (``...`` for any run of them), and each keyword
    of the pattern present with a matching value, in any order; other keywords are allowed."""
    positional = [m.ZeroOrMore() if is_wildcard(a) else to_matcher(a)
                  for a in args if a.keyword is None and a.star != "**"]
    named = [to_matcher(a) for a in args if a.keyword is not None or a.star == "**"]

    def check(call_args: Sequence[cst.Arg]) -> bool:
        call_positional = [a for a in call_args if a.keyword is None and a.star != "**"]
        call_named = [a for a in call_args if a.keyword is not None or a.star == "**"]
        return (m.matches(cst.Call(func=cst.Name("f"), args=call_positional),
                          m.Call(args=positional))
                and all(any(m.matches(a, want) for a in call_named) for want in named))

    return m.MatchIfTrue(check)


def _value_matcher(value: object) -> Matcher:
    if isinstance(value, cst.CSTNode):
        if isinstance(value, cst.SimpleStatementSuite | cst.IndentedBlock):
            return _block_matcher(value)
        return to_matcher(value)
    if isinstance(value, tuple | list):
        return [_item_matcher(item) for item in value]
    return value  # str, bool, None: equal


def _block_matcher(block: cst.BaseSuite) -> Matcher:
    """A body matches whatever its form (indented or one-line) when its statements match."""
    if isinstance(block, cst.SimpleStatementSuite):
        lines: list[cst.BaseStatement] = [cst.SimpleStatementLine(body=[s]) for s in block.body]
    else:
        lines = list(cast(cst.IndentedBlock, block).body)
    indented = m.IndentedBlock(body=[_item_matcher(s) for s in lines])
    if not all(is_wildcard(s) or (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1) for s in lines):
        return indented
    # each a one-statement line (the check above)
    one_line = [_item_matcher(s) if is_wildcard(s) or metavariable(s)
                else to_matcher(cast(cst.SimpleStatementLine, s).body[0]) for s in lines]
    return indented | m.SimpleStatementSuite(body=one_line)


def _item_matcher(item: object) -> Matcher:
    """One item of a sequence: ``...`` any run, a metavariable its capture, else the item's matcher."""
    return m.ZeroOrMore() if is_wildcard(item) else to_matcher(cast(cst.CSTNode, item))   # a node's items are nodes


def names_needed(text: str, form: str) -> tuple[frozenset[str], ...] | None:
    """The names (attribute names among them) that the text of every node the pattern matches holds, and
    likewise for each statement inside the pattern (``loop: while x: y = f(); ...``: what its ``y = f()``
    matches holds ``y`` and ``f``): a name matches only an equal name, and libcst keeps a name as it is
    written. None when the pattern or one of its statements can match without a name (a literal, ``pass``,
    a metavariable), or when it is a function definition (it could match the target itself)."""
    node = parse(text, form)
    if isinstance(node, cst.FunctionDef):
        return None
    out = []
    for sub in [node, *(n for n in _descendants(node) if isinstance(n, cst.BaseStatement))]:
        if sub is not node and is_wildcard(sub):
            continue
        names = frozenset(n.value for n in [sub, *_descendants(sub)] if isinstance(n, cst.Name))
        if not names or any(name.startswith((ONE, RUN)) for name in names):
            return None
        out.append(names)
    return tuple(out)


def _descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    found, stack = [], list(node.children)
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.children)
    return found


@functools.lru_cache(maxsize=4096)
def compile_pattern(text: str, form: str) -> Matcher:
    """Parse a pattern and return its matcher."""
    return to_matcher(parse(text, form))

