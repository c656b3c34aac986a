"""What one file's change says, target by target: definitions, class members and module-level names.

A function compared with its other version gives body steps (``diff``); a class gives one target per
changed member; a class- or module-level assignment whose value changed is a ``set``; a new method is an
``add_method`` whose hook holds its code in the snippet module, a new class attribute an
``add_attribute``, a new module-level name moves into the snippet module and is imported from there, and
a new import is an ``add_import``. A definition the change removes, or a statement at class or module
level that is none of these, is refused in one line.
"""
from __future__ import annotations

import ast
import difflib

from patchspec.compiler import pattern, scope
from patchspec.compiler.context import Definition
from patchspec.compiler.lint import BUILTINS, _all_locals, _free_names
from patchspec.compiler.source import SourceError, TargetNotLive
from patchspec.record.diff import (
    Differ,
    Drafted,
    Step,
    Unfaithful,
    assigned_name,
    assignment,
    function_steps,
    header_key,
)
from patchspec.record.text import DEF_TYPES, Text, dump

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# A value of this many lines or more moves into the snippet module, as a function that returns it (new
# methods and names always move).
INLINE_LINES = 12
SNIPPET_ALIAS = "$SNIPPETS"   # the spec's alias, once the draft names it (see ``draft``)


def locate(text: Text, qualname: str) -> ast.stmt | None:
    """The live definition ``qualname`` names, or the last assignment of ``Class.attr`` / ``name`` (the
    binding ``set`` edits, which the compiler calls not live as a definition)."""
    try:
        node = text.find(qualname)
    except TargetNotLive:
        node = None
    except SourceError as exc:
        raise Unfaithful(str(exc), file=text.path) from None
    if node is not None:
        return node
    owner_name, _, name = qualname.rpartition(".")
    owner = text.find(owner_name) if owner_name else text.tree
    if not isinstance(owner, ast.ClassDef | ast.Module):   # a class, or the module itself
        return None
    bound = [s for s in owner.body if assigned_name(s) == name]
    return bound[-1] if bound else None


def _refuse(text: Text, node: ast.stmt, what: str) -> Unfaithful:
    start, end = text.lines_of(node)
    span = f"{start}" if start == end else f"{start}-{end}"
    return Unfaithful(f"{what} (lines {span} of {text.path}); no transform says it faithfully, nothing was "
                      "written", file=text.path, line=start)


class FileDraft:
    """The drafted targets of one file, in the order of the file."""

    def __init__(self, old: Text, new: Text) -> None:
        self.old, self.new = old, new
        self.targets: list[Drafted] = []
        self.imports: list[str] = []         # add_import statements
        self.snippet_names: list[str] = []   # module-level names moved into the snippet module
        self.added_names: list[str] = []     # module-level names added in place (add_statement)

    def target(self, qualname: str) -> Drafted:
        found = next((t for t in self.targets if t.qualname == qualname), None)
        if found is None:
            found = Drafted(self.old.path, qualname)
            self.targets.append(found)
        return found

    # -- one named target ----------------------------------------------------------------------------
    def named(self, qualname: str) -> None:
        old, new = locate(self.old, qualname), locate(self.new, qualname)
        if new is None:
            if old is None:
                close = difflib.get_close_matches(qualname, [q for q, _ in self.new.definitions()], n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise Unfaithful(f"--target: {qualname} is defined in neither release's {self.old.path}{hint}",
                                 file=self.old.path)
            self.removed(qualname, old)
            return
        if old is None:
            self.added(qualname, new)
        else:
            self.changed(qualname, old, new)

    def changed(self, qualname: str, old: ast.stmt, new: ast.stmt) -> None:
        if dump(old) == dump(new):
            return
        if isinstance(old, FUNCTIONS) and isinstance(new, FUNCTIONS):
            self.function(qualname, old, new)
        elif isinstance(old, ast.ClassDef) and isinstance(new, ast.ClassDef):
            self.klass(qualname, old, new)
        elif assignment(old) and (assigned := assignment(new)) and type(old) is type(new) \
                and dump(getattr(old, "annotation", None) or ast.Pass()) \
                == dump(getattr(new, "annotation", None) or ast.Pass()):
            target = self.target(qualname)
            new_value = assigned[1]
            value = self.new.code(new_value)
            if value.count("\n") >= INLINE_LINES:   # a table: its value moves into the snippet module
                _check_movable(self.new, new, qualname)
                name = qualname.rpartition(".")[2]
                target.snippets[name] = f"def {name}():\n    return " + value.replace("\n", "\n    ")
                value = f"{SNIPPET_ALIAS}.{name}()"
            else:
                target.reads |= _reads(new_value)
            target.steps.append(Step("set", {"value": value}, self.old.lines_of(old), self.new.lines_of(new)))
        else:
            raise _refuse(self.new, new, f"{qualname} changed from {type(old).__name__} to {type(new).__name__}")

    def function(self, qualname: str, old: ast.FunctionDef | ast.AsyncFunctionDef,
                 new: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        definition = Definition(self.old, old, qualname)

        def count(code: str, form: str) -> int:
            return len(definition.find(pattern.compile_pattern(code, form)))

        differ = Differ(self.old, self.new, count, f"{self.old.path}:{qualname}")
        function_steps(differ, old, new)
        target = self.target(qualname)
        target.steps += differ.steps
        target.reads |= differ.reads - _bound_in(new)

    def klass(self, qualname: str, old: ast.ClassDef, new: ast.ClassDef) -> None:
        if dump(old.bases) != dump(new.bases) or dump(old.keywords) != dump(new.keywords) \
                or dump(old.decorator_list) != dump(new.decorator_list):
            raise _refuse(self.new, new, f"the header of class {qualname} changed")
        self.members(qualname, old.body, new.body)

    def members(self, owner: str, old: list[ast.stmt], new: list[ast.stmt]) -> None:
        """Statements of a class body (``owner``) or a module (``""``), compared by what they define."""
        prefix = f"{owner}." if owner else ""
        where = f"of {owner}" if owner else "at module level"
        old_keys = {_member_key(s): s for s in old}
        new_keys = {_member_key(s): s for s in new}
        matcher = difflib.SequenceMatcher(None, [dump(s) for s in old], [dump(s) for s in new], autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                continue
            for stmt in old[i1:i2]:
                key = _member_key(stmt)
                if key is None or key not in new_keys:
                    if _is_docstring(stmt, old):
                        continue
                    if key is not None and not key.startswith("import "):
                        self.removed(prefix + key.split(" ", 1)[1], stmt)
                        continue
                    raise _refuse(self.old, stmt, f"a statement {where} is removed or rewritten")
            for stmt in new[j1:j2]:
                key = _member_key(stmt)
                if _is_docstring(stmt, new):
                    continue
                if isinstance(stmt, ast.Import | ast.ImportFrom) and not owner:
                    if key not in old_keys:
                        self.imports.append(self.new.code(stmt))
                    continue
                if key is None:
                    raise _refuse(self.new, stmt, f"a statement {where} is added or rewritten")
                name = key.split(" ", 1)[1]
                if key in old_keys:
                    self.changed(prefix + name, old_keys[key], stmt)
                else:
                    self.added(prefix + name, stmt)

    def removed(self, qualname: str, old: ast.stmt) -> None:
        """A definition or name the change removes: ``remove`` of its statement, the target naming it."""
        target = self.target(qualname)
        target.steps.append(Step("remove", {"anchor": self.old.code(old)}, self.old.lines_of(old), None))

    def added(self, qualname: str, new: ast.stmt) -> None:
        """A definition or name the change adds: small, right after the statement upstream put it after
        (``add_statement``); larger (or first in its scope), into the snippet module."""
        owner_name, _, name = qualname.rpartition(".")
        found = locate(self.old, owner_name) if owner_name else None
        owner = found if isinstance(found, ast.ClassDef) else None
        if owner_name and owner is None:
            raise _refuse(self.new, new, f"{qualname} is new inside a function: no transform adds it there")
        code = self.new.code(new)
        after = self._preceding(owner_name, owner, new) if code.count("\n") < INLINE_LINES else None
        if after is not None and (isinstance(new, DEF_TYPES) or assigned_name(new)):
            target = self.target(after)
            target.steps.append(Step("add_statement", {"code": code}, None, self.new.lines_of(new)))
            if not owner_name:
                self.added_names.append(name)
            target.reads |= _reads(new) - (_bound_in(new) if isinstance(new, FUNCTIONS) else set())
            return
        if owner is not None:
            target = self.target(owner_name)
            if isinstance(new, FUNCTIONS):
                _check_movable(self.new, new, qualname)
                target.snippets[name] = self.new.code(new)
                target.steps.append(Step("add_method", {"name": name, "with": name}, None, self.new.lines_of(new)))
            elif assigned_name(new) and isinstance(new, ast.Assign):
                target.steps.append(Step("add_attribute", {"name": name, "value": self.new.code(new.value)},
                                         None, self.new.lines_of(new)))
                target.reads |= _reads(new.value)
            else:
                raise _refuse(self.new, new, f"{qualname} is added by a statement no transform adds")
            return
        if not (isinstance(new, FUNCTIONS) or (isinstance(new, ast.Assign) and assigned_name(new))):
            raise _refuse(self.new, new, f"{qualname} is added at module level by a statement no transform adds")
        _check_movable(self.new, new, qualname)
        self.snippet_names.append(qualname)


    def _preceding(self, owner_name: str, owner: ast.ClassDef | None, new: ast.stmt) -> str | None:
        """The qualified name of the definition or assignment the new statement follows in the new text,
        when the old text has it too."""
        scope_node = locate(self.new, owner_name) if owner_name else self.new.tree
        assert isinstance(scope_node, ast.ClassDef | ast.Module)   # where ``new`` was found
        body = scope_node.body
        kept = {_member_key(s) for s in (owner.body if owner is not None else self.old.tree.body)}
        before = [s for s in body if s.lineno < new.lineno]
        for stmt in reversed(before):
            key = _member_key(stmt)
            if key is not None and not key.startswith("import ") and key in kept:
                return (f"{owner_name}." if owner_name else "") + key.split(" ", 1)[1]
        return None


def _member_key(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, DEF_TYPES):
        return header_key(stmt)
    name = assigned_name(stmt)
    if name is not None:
        return f"= {name}"
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return "import " + dump(stmt)
    return None


def _is_docstring(stmt: ast.stmt, body: list[ast.stmt]) -> bool:
    return stmt is body[0] and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str)


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in _free_names(node)}


def _bound_in(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The parameters and locals of a function (nested scopes included): not the module's to bind."""
    return _all_locals(func)


def _check_movable(text: Text, node: ast.stmt, qualname: str) -> None:
    """Code moved into the snippet module reads its names there: only builtins and its own locals (what
    it imports from the patched module would be a cycle), annotations aside (they are not evaluated)."""
    body = node if not isinstance(node, FUNCTIONS) else ast.Module(body=node.body, type_ignores=[])
    own = _bound_in(node) if isinstance(node, FUNCTIONS) else set()
    foreign = sorted({n for n in _reads(body) if n not in BUILTINS and n not in own})
    movable = _snippet_imports(text, foreign)
    missing = [n for n in foreign if n not in movable]
    if missing:
        raise _refuse(text, node, f"{qualname} is new and reads {', '.join(missing)} of its module: moved into "
                                  "the snippet module it would not find them")


def _snippet_imports(text: Text, names: list[str]) -> dict[str, str]:
    """The absolute imports of the new module that bind ``names`` (a snippet module may repeat them)."""
    out = {}
    for stmt in text.tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                bound = (alias.asname or alias.name).split(".")[0]
                if bound in names:
                    out[bound] = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module != "__future__":
            for alias in stmt.names:
                bound = alias.asname or alias.name
                if bound in names:
                    named = f" as {alias.asname}" if alias.asname else ""
                    out[bound] = f"from {stmt.module} import {alias.name}{named}"
    return out


def snippet_imports(text: Text, source: str) -> list[str]:
    """The import lines the moved code ``source`` needs in the snippet module."""
    tree = ast.parse(source)
    names = sorted(_reads(tree) - BUILTINS)
    return sorted(set(_snippet_imports(text, names).values()))


def needed_imports(installed: Text, new: Text, reads: set[str], provided: set[str]) -> list[str]:
    """Import statements for the names the carried code reads that the installed module does not bind:
    each from the import that binds it in the new release. A name the new release binds otherwise (and
    that is not carried) is refused."""
    bound = scope.module_names(installed.tree)
    if bound is None:
        return []
    out = []
    for name in sorted(reads - bound - BUILTINS - provided):
        statement = _import_of(new, name)
        if statement is None:
            raise Unfaithful(f"{installed.path}: the carried code reads {name}, which the installed release does "
                             f"not bind and {new.path} binds by no import; add a --target for it",
                             file=installed.path)
        out.append(statement)
    return out


def _import_of(text: Text, name: str) -> str | None:
    for stmt in ast.walk(text.tree):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if (alias.asname or alias.name).split(".")[0] == name:
                    return f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    module = "." * stmt.level + (stmt.module or "")
                    return f"from {module} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
    return None
