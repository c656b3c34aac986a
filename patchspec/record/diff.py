"""Two versions of one definition -> the statement-level steps that turn the first into the second.

The bodies are compared as statement sequences (``difflib`` over their trees, so layout and comments do
not count); a compound statement whose header stayed is compared inside; of a statement that changed,
the smallest changed expression is replaced when it is one, else the statement. Every step names the
code it changes by an anchor that must match exactly once in the old definition: a step whose anchor
matches several times widens to the enclosing statement, which is replaced whole. A run of statements
that became the body of one new ``try``/``with`` is a ``guard``; a changed parameter default or a
class- or module-level assignment is a ``set``. What has no faithful step (a changed signature, a
decorator, a definition removed, a statement that no enclosing statement tells apart) is refused in one
line naming its lines.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from patchspec.errors import PatchspecError
from patchspec.record.text import DEF_TYPES, Text, dump, without_docstring

BLOCKS = ("body", "orelse", "finalbody")


class Unfaithful(PatchspecError):
    """A part of the change that no transform says faithfully."""


@dataclass(frozen=True)
class Step:
    """One transform of a recorded target: its kind and keys, and the lines it covers on each side."""

    kind: str
    keys: dict[str, str]
    old: tuple[int, int] | None = None
    new: tuple[int, int] | None = None


@dataclass
class Drafted:
    """What one target's change came to: its steps, and what must move into the snippet module."""

    file: str
    qualname: str
    steps: list[Step] = field(default_factory=list)
    snippets: dict[str, str] = field(default_factory=dict)   # name -> its definition's source
    reads: set[str] = field(default_factory=set)              # names the new code reads


class _Widen(Exception):
    """An anchor inside this statement is not unique: replace the whole statement instead."""


def header_key(node: ast.stmt) -> str:
    """What two versions of a statement must share to be compared inside: its type and everything but
    its blocks (a definition by its name only)."""
    if isinstance(node, DEF_TYPES):
        return f"{type(node).__name__} {node.name}"
    parts = [type(node).__name__]
    for name, value in ast.iter_fields(node):
        if name in BLOCKS or name == "handlers":
            if name == "handlers":
                parts.append(dump([ast.ExceptHandler(h.type, h.name, []) for h in value]))
            continue
        parts.append(dump(value) if isinstance(value, ast.AST | list) else repr(value))
    return " ".join(parts)


def assignment(node: ast.stmt) -> tuple[str, ast.expr] | None:
    """``X = value`` / ``X: T = value``: the one plain name it binds, and its value."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id, node.value
    return None


def assigned_name(node: ast.stmt) -> str | None:
    """``X = ...`` / ``X: T = ...``: the one plain name it binds."""
    found = assignment(node)
    return found[0] if found else None


@dataclass
class Differ:
    """Steps for one function body, anchors checked by ``count(pattern, form)`` on the old definition."""

    old: Text
    new: Text
    count: Callable[[str, str], int]
    where: str                           # file:qualname, for refusals
    steps: list[Step] = field(default_factory=list)
    reads: set[str] = field(default_factory=set)
    _replaced: dict[int, int] = field(default_factory=dict)      # old statement -> its replace step
    _before: dict[int, list[int]] = field(default_factory=dict)  # old statement -> insert_before steps
    elifs: set[int] = field(default_factory=set)   # old ``elif`` branches: no statement of their own

    def refuse(self, lines: tuple[int, int], what: str) -> Unfaithful:
        span = f"{lines[0]}" if lines[0] == lines[1] else f"{lines[0]}-{lines[1]}"
        return Unfaithful(f"{self.where}: {what} (lines {span} of {self.new.path}); no transform says it "
                          "faithfully, nothing was written", file=self.new.path, line=lines[0])

    def unique(self, node: ast.AST, text: str | None = None) -> bool:
        form = "statement" if isinstance(node, ast.stmt) else "expression"
        return self.count(text or self.old.code(node), form) == 1

    def block(self, old: list[ast.stmt], new: list[ast.stmt]) -> None:
        matcher = difflib.SequenceMatcher(None, [dump(s) for s in old], [dump(s) for s in new], autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                continue
            self._pair_up(old, new, i1, i2, j1, j2)

    def _pair_up(self, old, new, i1, i2, j1, j2) -> None:
        """Inside one changed run: statements whose header stayed are compared inside, the rest are
        removed, inserted or replaced."""
        keys = difflib.SequenceMatcher(None, [header_key(s) for s in old[i1:i2]],
                                       [header_key(s) for s in new[j1:j2]], autojunk=False)
        for op, a1, a2, b1, b2 in keys.get_opcodes():
            a1, a2, b1, b2 = a1 + i1, a2 + i1, b1 + j1, b2 + j1
            if op == "equal":
                for o, n in zip(old[a1:a2], new[b1:b2], strict=True):
                    self.statement(o, n)
            elif op == "delete":
                for o in old[a1:a2]:
                    self.remove(o)
            elif op == "insert":
                self.insert(old, a1, new[b1:b2])
            elif a2 - a1 == b2 - b1:   # as many statements: each is its own change
                for o, n in zip(old[a1:a2], new[b1:b2], strict=True):
                    self.pair(o, n)
            else:
                self.replace_run(old[a1:a2], new[b1:b2])

    def pair(self, old: ast.stmt, new: ast.stmt) -> None:
        """Two versions of one statement whose headers differ: a compound statement whose header differs
        in one expression has that expression replaced and its blocks compared; else it is replaced."""
        if type(old) is not type(new) or not hasattr(old, "body") or isinstance(old, DEF_TYPES):
            self.replace_run([old], [new])
            return
        mark = len(self.steps)
        bare = [copy.copy(n) for n in (old, new)]
        for node in bare:
            for name in (*BLOCKS, "handlers"):
                if hasattr(node, name):
                    setattr(node, name, [])
        try:
            if not self._expression(*bare):
                raise _Widen
            self.statement(old, new, widen=True)
        except _Widen:
            del self.steps[mark:]
            self.replace_run([old], [new])

    def statement(self, old: ast.stmt, new: ast.stmt, widen: bool = False) -> None:
        """Two versions of one statement that share their header (``widen``: let the caller replace it)."""
        if isinstance(old, DEF_TYPES):
            raise self.refuse(self.new.lines_of(new), f"the nested definition {old.name} changed")
        mark = len(self.steps)
        try:
            for name in (*BLOCKS, "handlers"):
                before, after = getattr(old, name, None), getattr(new, name, None)
                if before is None or after is None:   # one type (a shared header): both have the block or neither
                    continue
                if name == "handlers" and before:
                    for h_old, h_new in zip(before, after, strict=True):   # their types are in the shared header
                        if dump(h_old.body) != dump(h_new.body):
                            self.block(h_old.body, h_new.body)
                elif dump(before) != dump(after):
                    if not before or not after:
                        raise _Widen  # an else: added or dropped
                    self.block(before, after)
        except _Widen:
            if widen:
                raise
            del self.steps[mark:]
            self.replace_run([old], [new])

    def remove(self, old: ast.stmt) -> None:
        if not self.unique(old) or id(old) in self.elifs:
            raise _Widen
        self.steps.append(Step("remove", {"anchor": self.old.code(old)}, self.old.lines_of(old)))

    def insert(self, old: list[ast.stmt], at: int, new: list[ast.stmt]) -> None:
        """New statements before ``old[at]`` (or after the last one). Next to a statement this change
        replaces whole they join its replacement."""
        self._note_reads(new)
        span = (self.new.lines_of(new[0])[0], self.new.lines_of(new[-1])[1])
        code = "\n".join(self.new.code(s) for s in new)
        if at > 0 and id(old[at - 1]) in self._replaced:
            index = self._replaced[id(old[at - 1])]
            step = self.steps[index]
            assert step.new is not None   # a replace step covers the lines of its code
            self.steps[index] = dataclasses.replace(step, keys={**step.keys, "code": step.keys["code"] + "\n" + code},
                                                    new=(step.new[0], span[1]))
        elif at < len(old) and (anchor := self._anchor(old[at])):
            self._before.setdefault(id(old[at]), []).append(len(self.steps))
            self.steps.append(Step("insert_before", {"anchor": anchor, "code": code,
                                                     "full": self.old.code(old[at])}, None, span))
        elif at > 0 and (anchor := self._anchor(old[at - 1])):
            self.steps.append(Step("insert_after", {"anchor": anchor, "code": code,
                                                    "full": self.old.code(old[at - 1])}, None, span))
        else:
            raise _Widen

    def _absent(self, node: ast.AST) -> bool:
        """A replacement the old definition holds already (inside what it replaces) would read as a
        change already made: the enclosing statement is replaced instead."""
        form = "statement" if isinstance(node, ast.stmt) else "expression"
        return self.count(self.new.code(node), form) == 0

    def _anchor(self, node: ast.stmt) -> str | None:
        """The smallest unique pattern of the statement, or None."""
        if id(node) in self.elifs:
            return None
        for text in dict.fromkeys((self.old.anchor(node), self.old.code(node))):
            if self.unique(node, text):
                return text
        return None

    def replace_run(self, old: list[ast.stmt], new: list[ast.stmt]) -> None:
        if not new:
            for o in old:
                self.remove(o)
            return
        if len(new) == 1 and self._guard(old, new[0]):
            return
        if len(old) == 1 and len(new) == 1 and self._expression(old[0], new[0]):
            return
        if not self.unique(old[0]) or id(old[0]) in self.elifs or (len(new) == 1 and not self._absent(new[0])):
            raise _Widen
        self._note_reads(new)
        code = "\n".join(self.new.code(s) for s in new)
        span = (self.new.lines_of(new[0])[0], self.new.lines_of(new[-1])[1])
        folded = self._before.pop(id(old[0]), [])
        if folded:  # statements inserted before this one join its replacement
            code = "\n".join([*(self.steps[i].keys["code"] for i in folded), code])
            first = self.steps[folded[0]].new
            assert first is not None   # an insert_before step covers the lines of its code
            span = (first[0], span[1])
            for i in reversed(folded):
                del self.steps[i]
        self._replaced[id(old[0])] = len(self.steps)
        self.steps.append(Step("replace", {"pattern": self.old.code(old[0]), "code": code},
                               self.old.lines_of(old[0]), span))
        for o in old[1:]:
            self.remove(o)

    def _guard(self, old: list[ast.stmt], new: ast.stmt) -> bool:
        """A run of statements that became the body of a new ``try`` or ``with``."""
        if not isinstance(new, ast.Try | ast.With) or dump(old) != dump(new.body):
            return False
        if not (self.unique(old[0]) and self.unique(old[-1])):
            raise _Widen
        codes = [self.old.code(s) for s in old]
        statements = codes if len(codes) <= 3 else [codes[0], "...", codes[-1]]
        self._note_reads([n for n in ast.iter_child_nodes(new) if n not in new.body])
        self.steps.append(Step("guard", {"statements": "\n".join(statements), "by": _wrapper(self.new, new)},
                               (self.old.lines_of(old[0])[0], self.old.lines_of(old[-1])[1]),
                               self.new.lines_of(new)))
        return True

    def _expression(self, old: ast.stmt, new: ast.stmt) -> bool:
        """The smallest expression that differs between two versions of one statement, replaced alone
        when it is the only difference: the innermost one whose pattern is unique and whose replacement
        the old code does not hold; else False (replace the statement)."""
        for o, n in reversed(_differences(old, new)):
            if not (isinstance(o, ast.expr) and isinstance(n, ast.expr)):   # one field: both or neither
                break
            if self.unique(o) and self._absent(n):
                self._note_reads([n])
                self.steps.append(Step("replace", {"pattern": self.old.code(o), "code": self.new.code(n)},
                                       self.old.lines_of(o), self.new.lines_of(n)))
                return True
        return False

    def _note_reads(self, nodes: Iterable[ast.AST]) -> None:
        for node in nodes:
            self.reads |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _wrapper(text: Text, node: ast.Try | ast.With) -> str:
    """A ``try``/``with`` statement at indentation zero with its body written ``$$$BODY``."""
    first = text.lines[node.lineno - 1]
    indent = len(first) - len(first.lstrip())
    body_start, body_end = node.body[0].lineno, text.lines_of(node.body[-1])[1]
    inner = text.lines[body_start - 1]
    out = []
    for number in range(node.lineno, text.lines_of(node)[1] + 1):
        line = text.lines[number - 1]
        if number == body_start:
            out.append(inner[indent:len(inner) - len(inner.lstrip())] + "$$$BODY\n")
        elif not body_start <= number <= body_end:
            out.append(line[indent:] if not line[:indent].strip() else line)
    return "".join(out).rstrip("\r\n")


def _differences(old: ast.AST, new: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """The pairs of sub-nodes where two trees differ, outermost first, descending while they differ in
    one place only; empty when they are equal."""
    if dump(old) == dump(new):
        return []
    chain = [(old, new)]
    while True:
        o, n = chain[-1]
        if type(o) is not type(n):
            return chain
        differing = []
        for name, value in ast.iter_fields(o):
            other = getattr(n, name)
            if isinstance(value, list):
                if len(value) != len(other):
                    return chain
                differing += [(a, b) for a, b in zip(value, other, strict=True) if dump(a) != dump(b)]
            elif isinstance(value, ast.AST):
                if dump(value) != dump(other):
                    differing.append((value, other))
            elif value != other:
                return chain
        if len(differing) != 1 or not isinstance(differing[0][0], ast.AST) or isinstance(
                differing[0][0], ast.expr_context | ast.operator | ast.boolop | ast.cmpop | ast.unaryop):
            return chain
        chain.append(differing[0])


def function_steps(differ: Differ, old: ast.FunctionDef | ast.AsyncFunctionDef,
                   new: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """A function's changes: defaults become ``set``; body statements become steps; a changed name,
    parameter list, annotation or decorator is refused."""
    lines = differ.new.lines_of(new)
    if dump(old.decorator_list) != dump(new.decorator_list):
        raise differ.refuse(lines, "its decorators changed")
    if (dump(old.returns) if old.returns else "") != (dump(new.returns) if new.returns else ""):
        raise differ.refuse(lines, "its return annotation changed")
    o_args, n_args = old.args, new.args
    shape = lambda a: dump(ast.arguments(a.posonlyargs, a.args, a.vararg, a.kwonlyargs, [], a.kwarg, []))  # noqa: E731
    if shape(o_args) != shape(n_args) or len(o_args.defaults) != len(n_args.defaults) \
            or [d is None for d in o_args.kw_defaults] != [d is None for d in n_args.kw_defaults]:
        raise differ.refuse(lines, "its parameters changed")
    positional = [*o_args.posonlyargs, *o_args.args][len(o_args.args) + len(o_args.posonlyargs) - len(o_args.defaults):]
    pairs = list(zip(positional, o_args.defaults, n_args.defaults, strict=True))
    pairs += [(a, o, n) for a, o, n in zip(o_args.kwonlyargs, o_args.kw_defaults, n_args.kw_defaults, strict=True)
              if o is not None and n is not None]   # the same parameters have defaults (above)
    for arg, before, after in pairs:
        if dump(before) != dump(after):
            differ._note_reads([after])
            differ.steps.append(Step("set", {"parameter": arg.arg, "value": differ.new.code(after)},
                                     differ.old.lines_of(before), differ.new.lines_of(after)))
    differ.elifs = {id(n.orelse[0]) for n in ast.walk(old) if isinstance(n, ast.If) and len(n.orelse) == 1
                    and isinstance(n.orelse[0], ast.If) and n.orelse[0].col_offset == n.col_offset}
    try:
        differ.block(without_docstring(old.body), without_docstring(new.body))
    except _Widen:
        raise differ.refuse(lines, "a changed statement occurs more than once and no enclosing statement "
                                   "tells its places apart") from None
