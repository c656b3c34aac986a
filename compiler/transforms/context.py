"""What a transform sees: one target definition of one source file, and the spec asking."""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from compiler import pattern
from compiler.edits import ResolveError
from compiler.source import DefNode, Fragment, SourceFile


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
    def _positions(self):
        return MetadataWrapper(self.fragment.module, unsafe_skip_copy=True).resolve(PositionProvider)

    def line_of(self, node: cst.CSTNode) -> int:
        offset = 1 if self.fragment.header else 0
        return self._positions[node].start.line - offset + self.fragment.start - 1


@dataclass
class TargetContext:
    definition: Definition
    alias: str
    marker: str
    owner: str

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
        found = [n for n in pattern.find(self.fragment.node, pattern.compile_pattern(text, form))
                 if not types or isinstance(n, types)]
        if len(found) != 1:
            raise ResolveError("missing" if not found else "ambiguous", what,
                               [self.line_of(n) for n in found])
        return found[0]

    def require_function(self, kind: str) -> None:
        if isinstance(self.definition.node, ast.ClassDef):
            raise ResolveError("not-applicable", f"{kind} needs a function, {self.qualname} is a class", [])

    def require_class(self, kind: str) -> None:
        if not isinstance(self.definition.node, ast.ClassDef):
            raise ResolveError("not-applicable", f"{kind} needs a class, {self.qualname} is a function", [])
