"""One source file of a release, and the pieces of it the compiler parses with libcst.

A whole-file libcst parse of a 7,000-line runner costs seconds; Python's own ``ast`` finds a definition
in a tenth of that. So the compiler locates each target with ``ast`` and hands libcst only the lines of
that definition (a *fragment*), then splices the regenerated lines back. Everything outside the
targeted definitions is never parsed by libcst and is kept byte for byte. Within a function whose
transforms only look at what their patterns match, a body statement whose text lacks a name every match
needs is not parsed either: it stands in as one name of as many lines, put back when the fragment renders.
"""
from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, cast

import libcst as cst

from patchspec.compiler import bounds, scope
from patchspec.compiler.scope import DefNode, TargetNode
from patchspec.errors import PatchspecError

# The line model of Python's tokenizer (and so of ast and libcst): only CR, LF and CRLF end a line. A form
# feed or U+2028 is not a line break, though ``str.splitlines`` takes it for one.
_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """``text`` as lines with their endings, split where Python's tokenizer splits."""
    return _LINE.findall(text)


class SourceError(PatchspecError):
    """A source file that cannot be read as Python, or a definition that is not where it should be."""


class TargetNotLive(SourceError):
    """A definition that is not the live binding of its name: a later statement, a ``global`` rebinding or
    a module-level ``Class.attr = ...`` replaces it, so a patch of it would not run."""

    def __init__(self, message: str, lines: list[int]) -> None:
        super().__init__(message)
        self.lines = lines


class TargetAmbiguous(SourceError):
    """A name defined in several branches (``if``/``else``, ``try``/``except``) with no ``branch`` chosen."""

    def __init__(self, message: str, lines: list[int]) -> None:
        super().__init__(message)
        self.lines = lines


class _Chosen(NamedTuple):
    """One level's live definition of a name: the node, a property's other accessors by kind, and the
    name at that level that keeps the definition when a ``del`` removed its own."""

    node: TargetNode
    accessors: dict[str, DefNode] | None = None
    kept_as: str | None = None


@dataclass(frozen=True)
class Located:
    """The live definition of a qualified name, and how it was chosen (for the plan line)."""

    node: TargetNode
    note: str = ""
    kept_as: str | None = None  # the dotted name callers reach it by when a ``del`` removed its own name


def is_assignment(node: ast.stmt, name: str) -> bool:
    """``name = ...`` or ``name: T = ...``: one target, the plain name (what ``set`` may target)."""
    if isinstance(node, ast.Assign):
        return len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name
    return isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name


def _several_live(part: str, live: list[scope.Binding]) -> TargetAmbiguous:
    """The refusal of a name several branches bind, each live where its branch runs: what to choose, or,
    when the branches bind no definition, what to target instead."""
    others = [b for b in live if not b.is_def]
    if not others:
        listed = ", ".join(f"{scope.label(b.path)} (line {b.line})" for b in live)
        return TargetAmbiguous(f"{part} is defined in several branches: {listed}; choose one with "
                               f"`branch:`", [b.line for b in live])
    listed = ", ".join(f"{scope.label(b.path)} (line {b.line}: {b.describe()})" for b in live)
    if not any(b.is_def for b in live):   # pyrsistent's pvector: `= python_pvector` or an import
        bound = sorted({b.node.value.id for b in live
                        if isinstance(b.node, ast.Assign) and isinstance(b.node.value, ast.Name)})
        way = (f"target the definition they bind, {' or '.join(bound)} (its patch runs only where that "
               "branch does; verify shows which runs)" if bound else "no branch holds one to patch")
        return TargetAmbiguous(f"{part} is bound in several branches: {listed}; none of them is a "
                               f"definition: {way}", [b.line for b in live])
    return TargetAmbiguous(f"{part} is bound in several branches: {listed}; which one is live depends "
                           f"on which branch runs, and {others[0].describe()} is no definition to patch; "
                           f"choose one with `branch:`", [b.line for b in live])


def _how_chosen(part: str, chosen: scope.Binding, stubs: list[scope.Binding], replaced: list[scope.Binding],
                wrapping: list[scope.Binding]) -> list[str]:
    """The plan line's notes on how the live definition was chosen: stubs skipped, earlier definitions
    (singledispatch handlers among them), its branch, and later rebindings that wrap it."""
    node = chosen.node
    notes = []
    if stubs:
        notes.append(f"{len(stubs)} @overload stub{'s' if len(stubs) > 1 else ''} of {part} skipped")
    handlers = [b for b in replaced if scope.registered_type(b.node)]
    if handlers:
        listed = ", ".join(f"register({scope.registered_name(b.node)}) at line {b.line}" for b in handlers)
        notes.append(f"{part} is defined {len(replaced) + 1} times; this is the last (line {node.lineno}); the "
                     f"singledispatch handlers before it ({listed}) are chosen with `branch: register(TYPE)` "
                     f"or `branch: definition N`")
    elif replaced:
        notes.append(f"{part} is defined {len(replaced) + 1} times; the last at its level (line "
                     f"{node.lineno}) is live")
    if chosen.path:
        notes.append(f"{part} in branch {scope.label(chosen.path)}")
    for b in wrapping:
        if b.line > node.lineno and scope.encloses(chosen.path, b.path):
            notes.append(f"{part} is rebound at line {b.line} by {b.describe()}, which wraps it")
    return notes


@dataclass
class SourceFile:
    path: str
    text: str

    @functools.cached_property
    def lines(self) -> list[str]:
        return split_lines(self.text)

    @functools.cached_property
    def newline(self) -> str:
        first = self.lines[0] if self.lines else "\n"
        return "\r\n" if first.endswith("\r\n") else "\n"

    @functools.cached_property
    def tree(self) -> ast.Module:
        if "\r" in self.text and (lone := next((n for n, line in enumerate(self.lines, 1) if line.endswith("\r")),
                                               None)):
            # libcst's lines, the walk's line count and the file's last line ending would each be wrong
            raise SourceError(f"{self.path}:{lone}: this line ends in CR alone: patchspec patches files whose lines "
                              f"end in LF or CRLF; convert the file's line endings first")
        try:
            return ast.parse(self.text, filename=self.path)
        except SyntaxError as exc:
            raise self.not_python(exc) from None
        except (RecursionError, MemoryError):   # Python's own parser gave up on an expression thousands deep
            raise SourceError(f"{self.path}: an expression in it is nested too deep for Python's own parser: "
                              "patchspec does not patch this file") from None

    def not_python(self, exc: SyntaxError) -> PatchspecError:
        """The error for a file that is not valid Python (a reader with its own user words it its way)."""
        return SourceError(f"{self.path}:{exc.lineno}: not valid Python: {exc.msg}")

    def find(self, qualname: str, branch: str | None = None) -> TargetNode | None:
        """The live definition named ``Outer.inner`` at module or class level (see ``locate``)."""
        located = self.locate(qualname, branch)
        return located.node if located else None

    def locate(self, qualname: str, branch: str | None = None, assignments: bool = False) -> Located | None:
        """The definition of ``Outer.inner`` that is live at run time (see ``compiler.scope``): each name is
        live at its last binding of any kind, so a definition that a later statement, a function's
        ``global`` rebinding or a module-level ``Class.attr = ...`` replaces is ``TargetNotLive``;
        ``@overload`` stubs are skipped; a property is named ``Class.prop`` (its getter) and
        ``Class.prop.setter`` / ``.deleter``. When several branches (``if <test>``, ``else``, ``try``,
        ``except <type>``, ``finally``: the innermost block) bind the name, ``branch`` picks one; without it
        that is ``TargetAmbiguous``, a fallback definition included (the other branch may be the one that
        runs). With ``assignments``, a name whose live binding is a plain assignment (``NAME = ...``,
        ``Class.NAME = ...`` in the class body) names that assignment (the ``set`` kind edits it).
        ``prop = property(fget, fset)`` names its functions the same way."""
        scope_body: list[ast.stmt] = self.tree.body
        notes: list[str] = []
        found: TargetNode | None = None
        kept_as: str | None = None
        parts = qualname.split(".")
        index = 0
        while index < len(parts):
            part = parts[index]
            chosen = self._live(scope_body, part, branch, notes, assignments and index == len(parts) - 1)
            if chosen is None:
                return None
            found, accessors, kept = chosen
            if index + 1 < len(parts) and parts[index + 1] in scope.ACCESSORS and accessors is not None:
                wanted = parts[index + 1]
                if wanted not in accessors:
                    return None
                found = accessors[wanted]
                notes.append(f"the {wanted} of property {part} (line {found.lineno})")
                index += 1
            elif accessors:
                named = ", ".join(f"{part}.{kind} its {kind}" for kind in sorted(accessors))
                notes.append(f"{part} is a property: this is its getter (line {found.lineno}); {named}")
            if kept is not None:
                kept_as = ".".join([*parts[:index], kept])
            elif kept_as is not None:
                kept_as = f"{kept_as}.{part}"
            scope_body = getattr(found, "body", [])
            index += 1
        if found is not None:
            self._refuse_rebound(parts, found)
        return Located(found, "; ".join(notes), kept_as) if found else None

    def _live(self, body: list[ast.stmt], part: str, branch: str | None, notes: list[str],
              assignment: bool = False) -> _Chosen | None:
        """The live definition of ``part`` in one level and, for a property, its accessors by kind."""
        every = scope.level_bindings(body, part)
        stubs = [b for b in every if scope.is_overload(b.node)]
        accessor = [b for b in every if scope.accessor_of(b.node, part)]
        wrapping = [b for b in every if not b.is_def and scope.keeps(b.node, part)]
        bindings = [b for b in every if b not in stubs and b not in accessor and b not in wrapping]
        if scope.occurrence(branch) is not None and sum(b.is_def for b in bindings) > 1:
            return _Chosen(self._occurrence(bindings, part, cast(str, branch), notes))   # a branch: occurrence
        live = [b for b in bindings if not any(o.line > b.line and scope.encloses(o.path, b.path) for o in bindings)]
        replaced = [b for b in bindings if b not in live]
        if branch is not None and len(live) > 1:
            live = [b for b in live if (b.path[-1][1] if b.path else ("top level", "")) == scope.branch_key(branch)]
            if not live:
                raise TargetAmbiguous(f"{part} has no definition in a branch {branch!r}",
                                      [b.line for b in bindings])
        if not live:
            return None
        if len(live) > 1:
            raise _several_live(part, live)
        chosen = live[0]
        if assignment and is_assignment(chosen.node, part):
            return _Chosen(cast(ast.Assign | ast.AnnAssign, chosen.node))
        accessors = scope.property_call(chosen.node, part)
        if accessors is not None and not chosen.path:   # ``value = property(_get, _set)``: its functions
            return self._property_functions(body, part, accessors, chosen.line, notes)
        if not chosen.is_def and (aliased := self._aliased(body, part, chosen, notes)) is not None:
            return aliased
        if not chosen.is_def and (captured := self._captured(body, part, chosen, replaced, notes)) is not None:
            return captured
        if not chosen.is_def:
            defs = [b for b in replaced if b.is_def]
            where = f" after its definition at line {defs[-1].line}" if defs else ""
            raise TargetNotLive(f"{part} is bound by {chosen.describe()} at line {chosen.line}{where}: that "
                                f"binding is live, not a definition patchspec can patch", [chosen.line])
        node = chosen.node
        notes.extend(_how_chosen(part, chosen, stubs, replaced, wrapping))
        props = [b for b in accessor if b.line > node.lineno and scope.encloses(chosen.path, b.path)]
        if not scope.is_property(node):
            if props:
                raise TargetNotLive(f"{part} is rebound by the @{part}.{scope.accessor_of(props[-1].node, part)} "
                                    f"function at line {props[-1].line}, and {part} (line {node.lineno}) is no "
                                    f"property", [props[-1].line])
            return _Chosen(cast(DefNode, node))   # a binding that is a definition (is_def)
        kinds: dict[str, DefNode] = {}
        for b in props:   # each an accessor's function (``accessor_of`` named its kind)
            kinds[cast(str, scope.accessor_of(b.node, part))] = cast(DefNode, b.node)
        getter = kinds.pop("getter", cast(DefNode, node))
        return _Chosen(getter, kinds)

    def _occurrence(self, bindings: list[scope.Binding], part: str, branch: str, notes: list[str]) -> DefNode:
        """The definition ``branch`` picks among several of ``part`` (``register(int)``, ``definition 2``):
        live when it is the last binding or a singledispatch handler (the dispatcher keeps it)."""
        how, value = cast(tuple[str, str | int], scope.occurrence(branch))   # _live asks only for one
        defs = [b for b in bindings if b.is_def]
        if how == "definition":
            number = cast(int, value)
            chosen = defs[number - 1] if 0 < number <= len(defs) else None
        else:
            chosen = next((b for b in defs if scope.registered_name(b.node)
                           and scope.occurrence(f"register({scope.registered_name(b.node)})") == (how, value)),
                          None)
        if chosen is None:
            listed = ", ".join(f"line {b.line}" + (f" register({scope.registered_name(b.node)})"
                                                   if scope.registered_type(b.node) else "") for b in defs)
            raise TargetAmbiguous(f"{part} has no definition {branch!r}: it is defined {len(defs)} times "
                                  f"({listed or 'no def'})", [b.line for b in defs])
        later = [b for b in bindings if b.line > chosen.line]
        if later and not scope.registered_type(chosen.node):
            raise TargetNotLive(f"{part} ({branch}, line {chosen.line}) is rebound at line {later[0].line} and is "
                                f"no singledispatch handler: nothing keeps it", [later[0].line])
        notes.append(f"{part} is defined {len(defs)} times: {branch} (line {chosen.line})")
        return cast(DefNode, chosen.node)   # one of defs

    def _property_functions(self, body: list[ast.stmt], part: str, names: dict[str, str], line: int,
                            notes: list[str]) -> _Chosen:
        """The getter and the other accessors of ``part = property(fget, ...)``: each the live definition
        of its name at the same level (``Box.value`` patches ``Box._get``)."""
        found: dict[str, DefNode] = {}
        for kind, name in names.items():
            node = self._live(body, name, None, [])
            if node is None or node[1] is not None or node[0].lineno > line:
                raise TargetNotLive(f"{part} is `{part} = property(...)` at line {line}, and its {kind} {name} is "
                                    f"no function defined before it at that level", [line])
            found[kind] = cast(DefNode, node[0])   # not asked for an assignment: a definition
        notes.append(f"{part} is `property({', '.join(names.values())})` at line {line}")
        return _Chosen(found.pop("getter"), found)

    def _aliased(self, body: list[ast.stmt], part: str, chosen: scope.Binding,
                 notes: list[str]) -> _Chosen | None:
        """``part = other`` at this level (in no branch), ``other`` a definition bound before it: that
        definition, the object both names hold (pyparsing's ``defaultName = default_name``); else None."""
        node = chosen.node
        if chosen.path or not (isinstance(node, ast.Assign) and len(node.targets) == 1
                               and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Name)):
            return None
        other = node.value.id
        if other == part:
            return None
        seen: list[str] = []
        try:
            found = self._live([s for s in body if s.lineno < chosen.line], other, None, seen)
        except (TargetNotLive, TargetAmbiguous):
            return None
        if found is None:
            return None
        notes.extend(seen)
        notes.append(f"{part} is `{part} = {other}` (line {chosen.line}): the definition of {other} (line "
                     f"{found[0].lineno}), which both names hold")
        return found

    def _captured(self, body: list[ast.stmt], part: str, chosen: scope.Binding, replaced: list[scope.Binding],
                  notes: list[str]) -> _Chosen | None:
        """``del part`` at this level after a statement kept its definition under another name (see
        ``scope.captured_by``): that definition, which callers reach under the name that keeps it; else None."""
        node = chosen.node
        if chosen.path or not (isinstance(node, ast.Delete) and len(node.targets) == 1):
            return None
        defs = [b for b in replaced if b.is_def and not b.path]
        if not defs:
            return None
        found = cast(DefNode, defs[-1].node)
        kept = scope.captured_by(body, part, found.end_lineno or found.lineno, chosen.line)
        if kept is None:
            return None
        notes.append(f"{part} is deleted at line {chosen.line} after `{kept[0]} = ...` (line {kept[1]}) kept its "
                     f"definition (line {found.lineno}): callers reach it as {kept[0]}")
        return _Chosen(found, None, kept[0])

    def _refuse_rebound(self, parts: list[str], found: TargetNode) -> None:
        """A definition replaced after the module's statements ran: by a function's ``global`` rebinding
        of a module-level name, or by a ``Class.attr = ...`` of a class's member (at module level after
        the class, or in a function)."""
        if len(parts) == 1:
            later = scope.global_rebindings(self.tree, parts[0])
        elif len(parts) == 2:
            later = scope.attribute_rebindings(self.tree, parts[0], parts[1], found.lineno)
        else:
            return
        replacing = [r for r in later if not r.keeps]
        if replacing:
            first = replacing[0]
            name = ".".join(parts)
            raise TargetNotLive(f"{name} is rebound at {first.describe()}: once that runs, {name} is another "
                                f"object and a patch of this definition (line {found.lineno}) stops running; "
                                f"patch what it binds instead", [first.node.lineno])

    def definitions(self) -> list[tuple[str, DefNode]]:
        """Every function and class reachable by a qualified name (inside ``if``/``try`` blocks too),
        with that name: a property's ``@name.setter`` as ``Class.name.setter``; ``@overload`` stubs left
        out."""
        out: list[tuple[str, DefNode]] = []

        def walk(body: list[ast.stmt], prefix: str) -> None:
            for node in _defs(body):
                if scope.is_overload(node):
                    continue
                accessor = scope.accessor_of(node, node.name)
                name = prefix + node.name + (f".{accessor}" if accessor else "")
                out.append((name, node))
                walk(node.body, name + ".")

        walk(self.tree.body, "")
        return out

    def fragment(self, node: TargetNode, keep: Callable[[str], bool] | None = None) -> Fragment:
        return Fragment.parse(self, node, keep)

    def import_line(self) -> int:
        """The line after which module-level imports go: after the leading imports (or the docstring), and
        never above a shebang or coding cookie (which must stay on the first two lines)."""
        after = 0
        for index, line in enumerate(self.lines[:2]):
            if line.startswith("#!") or _COOKIE.match(line):
                after = index + 1
        for index, stmt in enumerate(self.tree.body):
            is_doc = (index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                      and isinstance(stmt.value.value, str))
            if is_doc or isinstance(stmt, ast.Import | ast.ImportFrom):
                after = cast(int, stmt.end_lineno)   # ast sets it
            else:
                break
        return after

    def body_indent(self, node: ast.ClassDef) -> str:
        first = self.lines[node.body[0].lineno - 1]
        return first[: len(first) - len(first.lstrip())]


def _defs(body: list[ast.stmt]) -> Iterator[DefNode]:
    for stmt in body:
        if isinstance(stmt, DefNode):
            yield stmt
        for _key, _text, block in scope.blocks(stmt):
            yield from _defs(block)


def block_of(suite: cst.SimpleStatementSuite) -> cst.IndentedBlock:
    """``class K: pass`` → the same statements as an indented block, so that edits land inside the body
    (an insertion after a one-line body would otherwise land at the level of its header)."""
    lines = [cst.SimpleStatementLine(body=[s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
             for s in suite.body]
    lines[-1] = lines[-1].with_changes(trailing_whitespace=suite.trailing_whitespace)
    return cst.IndentedBlock(body=lines)


def span(node: ast.stmt | ast.expr) -> tuple[int, int]:
    """First and last line (1-based, inclusive) of a statement (or an expression), a definition's decorators
    included."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
    return start, cast(int, node.end_lineno)   # ast sets it


STAND_IN_PREFIX = "__patchspec_stand_in_"
STAND_IN = STAND_IN_PREFIX + "{}__"


def units(body: list[ast.stmt]) -> list[tuple[int, int, list[ast.stmt]]]:
    """A block as runs of whole lines, one per statement (statements that share a line, ``a = 1; b = 2``,
    are one run): first and last line, decorators included, and the statements."""
    out: list[tuple[int, int, list[ast.stmt]]] = []
    for stmt in body:
        start, end = span(stmt)
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]), [*out[-1][2], stmt])
        else:
            out.append((start, end, [stmt]))
    return out


def _blocks(stmt: ast.stmt) -> list[tuple[list[ast.stmt], bool]]:
    """The statement lists inside a compound statement, each with whether its statements may stand in
    (not the ``if`` of an ``elif``, which is a clause of the statement above it, not a statement)."""
    found = [(getattr(stmt, name), True) for name in ("body", "orelse", "finalbody")
             if getattr(stmt, name, None)]
    found += [(h.body, True) for h in getattr(stmt, "handlers", ())]
    found += [(c.body, True) for c in getattr(stmt, "cases", ())]
    if isinstance(stmt, ast.If) and len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If):
        found = [(block, block is not stmt.orelse) for block, _ok in found]
    return sorted(found, key=lambda item: item[0][0].lineno)   # in source order: a try's except before its else

@dataclass
class Fragment:
    """The lines of one definition, parsed by libcst on their own (under an ``if True:`` if indented).

    With ``keep``, the statements of the body that ``keep`` turns down are not parsed: each stands in as
    one name of as many lines (``STAND_IN``), which ``render`` turns back into its lines; a caller gives
    ``keep`` only when nothing it looks for or edits can be inside such a statement."""

    source: SourceFile
    start: int
    end: int
    module: cst.Module
    header: str
    one_line: bool = False   # the body shared the header's line and was given a block of its own
    stand_ins: dict[str, str] = field(default_factory=dict)   # a stand-in -> the text it stands for (no indent)

    @classmethod
    def parse(cls, source: SourceFile, node: TargetNode, keep: Callable[[str], bool] | None = None) -> Fragment:
        start, end = span(node)
        lines = source.lines[start - 1:end]
        indented = lines[0][:1] in (" ", "\t") if lines else False
        header = "if True:" + source.newline if indented else ""
        stand_ins: dict[str, str] = {}
        if keep is not None:
            # keep is given for a function's fragment only (``Definition.fragment``)
            lines, stand_ins = _stand_in(source, cast(ast.FunctionDef | ast.AsyncFunctionDef, node), start, keep)
        text = "".join(lines)
        if text and not text.endswith(("\n", "\r")):
            text += source.newline
        too_deep = bounds.refusal(text, bounds.SOURCE)   # libcst's native parser would crash or take minutes
        if too_deep:
            raise SourceError(f"{source.path}:{start}: this definition is {too_deep}")
        try:
            module = cst.parse_module(header + text)
        except cst.ParserSyntaxError as exc:
            if stand_ins:   # the error is the whole definition's to report
                return cls.parse(source, node)
            raise SourceError(f"{source.path}:{start}: libcst cannot parse this definition: "
                              f"{str(exc).splitlines()[0]}") from None
        if stand_ins and not _stands_as_block(module, header):   # a stand-in took the header's line
            return cls.parse(source, node)
        parsed = _definition(module, header)
        if not isinstance(parsed.body, cst.SimpleStatementSuite):
            return cls(source, start, end, module, header, stand_ins=stand_ins)
        expanded = parsed.with_changes(body=block_of(parsed.body))
        module = cast(cst.Module, module.deep_replace(parsed, expanded)) if header \
            else module.with_changes(body=[expanded])
        return cls(source, start, end, module, header, one_line=True)

    @property
    def node(self) -> cst.FunctionDef | cst.ClassDef:
        return _definition(self.module, self.header)

    def render(self, module: cst.Module) -> str:
        """The lines that replace this fragment's lines in the file."""
        code = module.code[len(self.header):]
        for stand_in, original in self.stand_ins.items():
            if code.count(stand_in) != 1:
                raise AssertionError(f"{self.source.path}:{self.start}: a statement left unparsed was edited")
            code = code.replace(stand_in, original)
        original_end = self.source.lines[self.end - 1]
        if not original_end.endswith(("\n", "\r")):
            code = code[: -len(self.source.newline)]
        return code


def _definition(module: cst.Module, header: str) -> cst.FunctionDef | cst.ClassDef:
    """A fragment's definition: the module's one statement, or that of its ``if True:`` block (an assignment
    target's is its statement line, which the kinds that take one read as such)."""
    first = module.body[0]
    inner = cast(cst.IndentedBlock, cast(cst.If, first).body).body[0] if header else first
    return cast(cst.FunctionDef | cst.ClassDef, inner)


def _stands_as_block(module: cst.Module, header: str) -> bool:
    """Whether a fragment with stand-ins is still one function with an indented body."""
    first: cst.CSTNode | None = module.body[0] if module.body else None
    if header:
        first = first.body.body[0] if isinstance(first, cst.If) and len(first.body.body) == 1 else None
    return isinstance(first, cst.FunctionDef) and isinstance(first.body, cst.IndentedBlock) and len(module.body) == 1


def _stand_in(source: SourceFile, node: ast.FunctionDef | ast.AsyncFunctionDef, start: int,
              keep: Callable[[str], bool]) -> tuple[list[str], dict[str, str]]:
    """The definition's lines with each statement of its body (nested ones too, inside those kept) that
    ``keep`` turns down as a stand-in of as many lines, and the stand-ins' texts (up to the last line's
    ending) with the lines they stand for."""
    lines = source.lines
    out: list[str] = []
    stand_ins: dict[str, str] = {}
    after = start

    def visit(body: list[ast.stmt], may_stand: bool) -> None:
        nonlocal after
        for first, last, stmts in units(body):
            text = "".join(lines[first - 1:last])
            name = STAND_IN.format(len(stand_ins))
            if keep(text) or not may_stand or not _own_lines(lines, first, last, stmts) or name in source.text:
                for stmt in stmts:
                    for block, ok in _blocks(stmt):
                        visit(block, ok)
                continue
            out.extend(lines[after - 1:first - 1])
            after = last + 1
            # the indent stays outside the stand-in (libcst drops a form feed in it, whole or in part); a
            # stand-in over several lines ends them as the file does (a CR-only file counts CR as a line)
            indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip(" \t\f"))]
            endings = [line[len(line.rstrip("\r\n")):] for line in lines[first - 1:last]]
            stand_in = name if first == last else f"({name}{''.join(endings[:-1])})"
            stand_ins[stand_in] = text[len(indent): len(text) - len(endings[-1])]
            out.extend(split_lines(indent + stand_in + endings[-1]))

    visit(node.body, True)
    out.extend(lines[after - 1:node.end_lineno])
    return out, stand_ins


def _own_lines(lines: list[str], first: int, last: int, stmts: list[ast.stmt]) -> bool:
    """Whether a run of statements has its lines to itself: it starts its first line (not after a header's
    colon, ``if x: y``) and no backslash joins it to the line before or after."""
    head = stmts[0]
    line = lines[first - 1]
    column = len(line) - len(line.lstrip(" \t\f"))
    starts = line.lstrip(" \t\f").startswith("@") if getattr(head, "decorator_list", None) \
        else column == head.col_offset
    joined = any(text.rstrip("\r\n").endswith("\\") for text in (lines[first - 2], lines[last - 1]))
    return starts and not joined
