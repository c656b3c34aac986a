"""What a transform sees: one target definition of one source file, and the spec asking."""
from __future__ import annotations

import ast
import contextlib
import functools
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m
from libcst._nodes.internal import CodegenState

from patchspec.compiler import pattern
from patchspec.compiler.edits import Status, ResolveError
from patchspec.compiler.source import DefNode, Fragment, SourceFile


@dataclass(eq=False)
class Definition:
    """A target definition, parsed by libcst at most once however many transforms and specs use it."""

    source: SourceFile
    node: DefNode
    qualname: str

    @functools.cached_property
    def fragment(self) -> Fragment:
        return self.source.fragment(self.node)

    @functools.cached_property
    def _nodes(self) -> dict[type, list[cst.CSTNode]]:
        """Every node of the definition by type, in source order: one walk serves every pattern."""
        nodes: dict[type, list[cst.CSTNode]] = {}

        class Collect(cst.CSTVisitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                nodes.setdefault(type(node), []).append(node)
                return True

        self.fragment.node.visit(Collect())
        return nodes

    @functools.cached_property
    def _parents(self) -> dict[int, cst.CSTNode]:
        """Each node's parent, by the child's id: walked only for the kinds that ask (the rewrites)."""
        parents: dict[int, cst.CSTNode] = {}

        class Collect(cst.CSTVisitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                for child in node.children:
                    parents[id(child)] = node
                return True

        self.fragment.node.visit(Collect())
        return parents

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The nodes enclosing ``node``, innermost first, up to the definition itself."""
        parents = self._parents
        out = []
        while id(node) in parents:
            node = parents[id(node)]
            out.append(node)
        return out

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement:
        """The innermost statement holding ``node`` (itself, when it is one)."""
        if isinstance(node, cst.BaseStatement):
            return node
        return next(n for n in self.ancestors(node) if isinstance(n, cst.BaseStatement))

    def find_bound(self, matcher, types: tuple[type, ...] = ()) -> list[tuple[cst.CSTNode, dict]]:
        """The nodes the matcher matches, each with what its metavariables captured (consistently)."""
        from patchspec.compiler.rewrite import consistent

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

    def find(self, matcher, types: tuple[type, ...] = ()) -> list[cst.CSTNode]:
        """The nodes the matcher matches; only nodes of the matcher's own type are tried."""
        node_type = getattr(cst, type(matcher).__name__, cst.CSTNode)  # a literal's matcher has no type
        candidates = [n for t, found in self._nodes.items() if issubclass(t, node_type) for n in found]
        return [n for n in candidates if (not types or isinstance(n, types)) and m.matches(n, matcher)]

    @functools.cached_property
    def _lines(self) -> dict[int, int]:
        """File line of every statement and call: one code generation pass over the fragment, which
        costs a fraction of libcst's PositionProvider (that records a range for every node)."""
        module = self.fragment.module
        state = _LineState(default_indent=module.default_indent, default_newline=module.default_newline)
        module._codegen(state)
        offset = self.fragment.start - (2 if self.fragment.header else 1)
        return {key: line + offset for key, line in state.lines.items()}

    def line_of(self, node: cst.CSTNode) -> int:
        if node is self.fragment.node:
            return self.node.lineno
        line = self._lines[id(node)]
        # a one-line body was given its own lines in the fragment; in the file it is on the header's
        return min(line, self.node.end_lineno) if self.fragment.one_line else line


@dataclass
class _LineState(CodegenState):
    """A code generator that counts lines and notes where each statement and call starts."""

    line: int = 1
    lines: dict[int, int] = field(default_factory=dict)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.line += value.count("\n")

    @contextlib.contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        if isinstance(node, cst.BaseStatement | cst.BaseSmallStatement | cst.Call):
            self.lines.setdefault(id(node), self.line)
        yield


@dataclass
class TargetContext:
    definition: Definition
    alias: str
    marker: str
    owner: str
    notes: list[str] = field(default_factory=list)   # what the plan line should say about this transform

    def note(self, text: str) -> None:
        self.notes.append(text)

    def fragment_is_one_line(self) -> bool:
        """Whether the target's body shares its header's line (without parsing it when it does not)."""
        node = self.definition.node
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

    def find_one(self, text: str, form: str, what: str, types: tuple[type, ...] = ()) -> cst.CSTNode:
        """The single node of the target matching the pattern; zero or several is a ``ResolveError``."""
        found = self.definition.find(pattern.compile_pattern(text, form), types)
        if len(found) != 1:
            raise ResolveError(Status.MISSING if not found else Status.AMBIGUOUS, what,
                               [self.line_of(n) for n in found])
        return found[0]

    def _is(self) -> str:
        return {ast.ClassDef: "a class", ast.Assign: "an assignment", ast.AnnAssign: "an assignment"}.get(
            type(self.definition.node), "a function")

    def require_function(self, kind: str) -> None:
        if not isinstance(self.definition.node, ast.FunctionDef | ast.AsyncFunctionDef):
            raise ResolveError(Status.NOT_APPLICABLE, f"{kind} needs a function, {self.qualname} is {self._is()}", [])

    def require_class(self, kind: str) -> None:
        if not isinstance(self.definition.node, ast.ClassDef):
            raise ResolveError(Status.NOT_APPLICABLE, f"{kind} needs a class, {self.qualname} is {self._is()}", [])
