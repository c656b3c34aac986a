"""What a transform sees: one target definition of one source file, and the spec asking."""
from __future__ import annotations

import ast
import contextlib
import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

import libcst as cst
import libcst.matchers as m
from libcst._nodes.internal import CodegenState

from patchspec.compiler import pattern
from patchspec.compiler.edits import ResolveError, Status
from patchspec.compiler.fingerprint import tokens
from patchspec.compiler.pattern import Matcher
from patchspec.compiler.scope import DefNode, TargetNode
from patchspec.compiler.source import Fragment, SourceFile

N = TypeVar("N", bound=cst.CSTNode)
# what a metavariable captured: a node, or a run of them (``$$$NAME``)
Capture = cst.CSTNode | Sequence[cst.CSTNode]


def consistent(captures: dict[str, Capture]) -> dict[str, Capture] | None:
    """The captures by metavariable name, when every name used twice matched equal code; else None."""
    by_name: dict[str, Capture] = {}
    for key, node in captures.items():
        name, _, number = key.rpartition("__")
        if name == "_":
            continue
        if name in by_name:
            first = by_name[name]   # of the same form as node: one metavariable is one or a run
            if isinstance(node, cst.CSTNode):
                if list(tokens(cast(cst.CSTNode, first))) != list(tokens(node)):
                    return None
            elif [list(tokens(a)) for a in cast(Sequence[cst.CSTNode], first)] != [list(tokens(b)) for b in node]:
                return None
        if number == "0" or name not in by_name:
            by_name[name] = node
    return by_name


@dataclass(eq=False)
class Definition:
    """A target definition, parsed by libcst at most once however many transforms and specs use it.

    ``needs``: for every pattern of every transform on it, and every statement in one, the names a match
    holds (``pattern.names_needed``), when each of those transforms is ``local``: a function's statements
    whose text holds all the names of none of them are then left unparsed (``Fragment``). None parses
    the whole definition."""

    source: SourceFile
    node: TargetNode
    qualname: str
    needs: tuple[frozenset[str], ...] | None = None

    @functools.cached_property
    def fragment(self) -> Fragment:
        needs = self.needs
        if needs is None or not isinstance(self.node, ast.FunctionDef | ast.AsyncFunctionDef):
            return self.source.fragment(self.node)
        return self.source.fragment(self.node, lambda text: any(all(n in text for n in names) for names in needs))

    @property
    def whole(self) -> cst.FunctionDef | cst.ClassDef:
        """The definition parsed whole (what a fingerprint reads), its statements left unparsed included."""
        return self.source.fragment(self.node).node if self.fragment.stand_ins else self.fragment.node

    @functools.cached_property
    def _walk(self) -> _WalkState:
        """The one walk of the definition: a code generation pass, which meets every node in source order
        (a ``CSTVisitor`` walk rebuilds every node it passes and costs several times more)."""
        module = self.fragment.module
        state = _WalkState(default_indent=module.default_indent, default_newline=module.default_newline,
                           target=self.fragment.node)
        module._codegen(state)
        return state

    @property
    def _nodes(self) -> dict[type, list[cst.CSTNode]]:
        """Every node of the definition by type, in source order: one walk serves every pattern."""
        return self._walk.nodes

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The nodes enclosing ``node``, innermost first, up to the definition itself."""
        parents = self._walk.parents
        out = []
        while node is not self.fragment.node and id(node) in parents:
            node = parents[id(node)]
            out.append(node)
        return out

    def enclosing(self, nodes: Iterable[cst.CSTNode]) -> set[int]:
        """The ids of ``nodes`` and of every node that contains one of them, up to the fragment's module:
        the only nodes an edit of ``nodes`` has to rebuild."""
        parents = self._walk.parents
        out: set[int] = set()
        for node in nodes:
            key = id(node)
            while key not in out:
                out.add(key)
                parent = parents.get(key)
                if parent is None:
                    break
                key = id(parent)
        return out

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement:
        """The innermost statement holding ``node`` (itself, when it is one)."""
        if isinstance(node, cst.BaseStatement):
            return node
        return next(n for n in self.ancestors(node) if isinstance(n, cst.BaseStatement))

    def find_bound(self, matcher: Matcher,
                   types: tuple[type, ...] = ()) -> list[tuple[cst.CSTNode, dict[str, Capture]]]:
        """The nodes the matcher matches, each with what its metavariables captured (consistently)."""
        node_type = getattr(cst, type(matcher).__name__, cst.CSTNode)
        out = []
        for t, found in self._nodes.items():
            if not issubclass(t, node_type):
                continue
            for n in found:
                if types and not isinstance(n, types):
                    continue
                captured = m.extract(n, matcher)
                if captured is not None and (bound := consistent(captured)) is not None:
                    out.append((n, bound))
        return out

    def find(self, matcher: Matcher, types: tuple[type, ...] = ()) -> list[cst.CSTNode]:
        """The nodes the matcher matches; only nodes of the matcher's own type are tried."""
        node_type = getattr(cst, type(matcher).__name__, cst.CSTNode)  # a literal's matcher has no type
        candidates = [n for t, found in self._nodes.items() if issubclass(t, node_type) for n in found]
        return [n for n in candidates if (not types or isinstance(n, types)) and m.matches(n, matcher)]

    @functools.cached_property
    def _lines(self) -> dict[int, int]:
        """File line of every statement and call (libcst's PositionProvider would record a range for
        every node, at several times the cost)."""
        offset = self.fragment.start - (2 if self.fragment.header else 1)
        return {key: line + offset for key, line in self._walk.lines.items()}

    def line_of(self, node: cst.CSTNode) -> int:
        if node is self.fragment.node:
            return self.node.lineno
        line = self._lines[id(node)]
        # a one-line body was given its own lines in the fragment; in the file it is on the header's
        return min(line, self.node.end_lineno or line) if self.fragment.one_line else line   # ast sets it


@dataclass
class _WalkState(CodegenState):
    """A code generator that keeps no text: it notes each node of ``target`` by type, each node's
    parent, and the line where each statement and call starts."""

    target: cst.CSTNode | None = None
    line: int = 1
    lines: dict[int, int] = field(default_factory=dict)
    nodes: dict[type, list[cst.CSTNode]] = field(default_factory=dict)
    parents: dict[int, cst.CSTNode] = field(default_factory=dict)
    stack: list[cst.CSTNode] = field(default_factory=list)
    inside: bool = False

    def add_token(self, value: str) -> None:
        self.line += value.count("\n")

    def add_indent_tokens(self) -> None:
        pass

    def pop_trailing_newline(self) -> None:
        pass

    def before_codegen(self, node: cst.CSTNode) -> None:
        if self.stack:
            self.parents[id(node)] = self.stack[-1]
        self.stack.append(node)
        self.inside = self.inside or node is self.target
        if self.inside:
            self.nodes.setdefault(type(node), []).append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.stack.pop()
        if node is self.target:
            self.inside = False

    @contextlib.contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> Iterator[None]:
        if isinstance(node, cst.BaseStatement | cst.BaseSmallStatement | cst.Call):
            self.lines.setdefault(id(node), self.line)
        yield


@dataclass
class TargetContext:
    definition: Definition
    alias: str | None   # None: the spec has no snippet package
    marker: str
    owner: str
    notes: list[str] = field(default_factory=list)   # what the plan line should say about this transform
    acknowledged: frozenset[str] = frozenset()        # the rules the transform's ``acknowledge`` names

    def note(self, text: str) -> None:
        self.notes.append(text)

    def refuse(self, broken: list[tuple[str, str, list[int]]]) -> None:
        """``(rule, what is wrong, lines)`` for each rule (``Kind.rules``) the transform breaks: refused
        (``not-applicable``) with the first one's text and the ``acknowledge`` key that lets it through,
        unless the transform acknowledges every one of them, which the plan line then says."""
        pending = [(rule, text, lines) for rule, text, lines in broken if rule not in self.acknowledged]
        if pending:
            rule, text, lines = pending[0]
            names = ", ".join(dict.fromkeys(r for r, _, _ in pending))
            raise ResolveError(Status.NOT_APPLICABLE, f"{text} (a spec that means it says so: `acknowledge: "
                                                      f"[{names}]` in this transform)", lines)
        for rule, text, _lines in broken:
            self.note(f"acknowledged {rule}: {text}")

    def fragment_is_one_line(self) -> bool:
        """Whether the target's body shares its header's line (without parsing it when it does not)."""
        node = cast(DefNode, self.definition.node)   # asked of a class or a function target
        first = node.body[0]
        return bool(self.source.lines[first.lineno - 1][:first.col_offset].strip())

    @property
    def source(self) -> SourceFile:
        return self.definition.source

    @property
    def fragment(self) -> Fragment:
        return self.definition.fragment

    @property
    def qualname(self) -> str:
        return self.definition.qualname

    def line_of(self, node: cst.CSTNode) -> int:
        return self.definition.line_of(node)

    def find_one(self, text: str, form: str, what: str, types: tuple[type[N], ...]) -> N:
        """The single node of the target matching the pattern; zero or several is a ``ResolveError``."""
        found = self.definition.find(pattern.compile_pattern(text, form), types)
        if len(found) != 1:
            raise ResolveError(Status.MISSING if not found else Status.AMBIGUOUS, what,
                               [self.line_of(n) for n in found])
        return cast(N, found[0])   # found holds only nodes of ``types``

    def _is(self) -> str:
        return {ast.ClassDef: "a class", ast.Assign: "an assignment", ast.AnnAssign: "an assignment"}.get(
            type(self.definition.node), "a function")

    def require_function(self, kind: str) -> None:
        if not isinstance(self.definition.node, ast.FunctionDef | ast.AsyncFunctionDef):
            raise ResolveError(Status.NOT_APPLICABLE, f"{kind} needs a function, {self.qualname} is {self._is()}", [])

    def require_class(self, kind: str) -> None:
        if not isinstance(self.definition.node, ast.ClassDef):
            raise ResolveError(Status.NOT_APPLICABLE, f"{kind} needs a class, {self.qualname} is {self._is()}", [])
