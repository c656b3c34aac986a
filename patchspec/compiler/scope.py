"""Where a module or class body binds a name: the one binding model of the compiler.

A name at module or class level is live at its LAST binding of any kind: ``def``, ``class``, an
assignment (plain, augmented, annotated with a value), an import, a ``for``/``with`` target, ``del``; a
function's ``global NAME`` rebinding, which runs later (when the function is called); and for a class, a
module-level ``Class.attr = ...`` after the class. Target resolution (``source.locate``), the lint of
inserted code and the ``USES`` check read bindings only from here.
"""
from __future__ import annotations

import ast
import collections
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeGuard, cast

DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
# what a target names: a definition, or a module- or class-level assignment (the ``set`` kind's)
TargetNode = DefNode | ast.Assign | ast.AnnAssign
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
ACCESSORS = ("setter", "deleter", "getter")   # ``@prop.setter``: a property's other functions

# The blocks a statement is nested in: (id of the if/try statement, key of the block, its label).
Path = tuple[tuple[int, tuple[str, str], str], ...]


@dataclass(frozen=True)
class Binding:
    """One statement binding a name at one level, and the branch blocks it sits in."""

    node: ast.stmt
    path: Path

    @property
    def line(self) -> int:
        return self.node.lineno

    @property
    def is_def(self) -> bool:
        return isinstance(self.node, DefNode)

    def describe(self) -> str:
        """``class BaseSSLError`` or the statement itself: ``BaseSSLError = ssl.SSLError``."""
        if isinstance(self.node, ast.ClassDef):
            return f"class {self.node.name}"
        if isinstance(self.node, DefNode):
            return f"def {self.node.name}"
        return f"`{statement_text(self.node)}`"


def statement_text(node: ast.stmt, width: int = 60) -> str:
    """A statement on one line, shortened to ``width`` characters (its header for a compound one)."""
    if isinstance(node, ast.For | ast.AsyncFor):
        text = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}: ..."
    elif isinstance(node, ast.With | ast.AsyncWith):
        text = f"with {', '.join(ast.unparse(i) for i in node.items)}: ..."
    else:
        text = ast.unparse(node).splitlines()[0]
    return text if len(text) <= width else text[: width - 3] + "..."


def blocks(stmt: ast.stmt) -> list[tuple[tuple[str, str], str, list[ast.stmt]]]:
    """The blocks of a module- or class-level ``if``/``try``: key (see ``branch_key``), label, body."""
    if isinstance(stmt, ast.If):
        return [(("if", ast.dump(stmt.test)), f"if {ast.unparse(stmt.test)}", stmt.body),
                (("else", ""), "else", stmt.orelse)]
    if isinstance(stmt, ast.Try | ast.TryStar):
        handlers = [(("except", ast.dump(h.type) if h.type else ""),
                     f"except {ast.unparse(h.type)}" if h.type else "except", h.body) for h in stmt.handlers]
        return [(("try", ""), "try", stmt.body), *handlers, (("else", ""), "else", stmt.orelse),
                (("finally", ""), "finally", stmt.finalbody)]
    return []


def branch_key(text: str) -> tuple[str, str]:
    """``if TYPE_CHECKING`` → ("if", dump of the test): compared as trees, so layout does not matter."""
    if text.strip() == "top level":
        return "top level", ""
    word, _, rest = text.strip().rstrip(":").partition(" ")
    word = "if" if word == "elif" else word
    try:
        return word, ast.dump(ast.parse(rest.strip(), mode="eval").body) if rest.strip() else ""
    except SyntaxError:
        return word, rest.strip()


def occurrence(text: str | None) -> tuple[str, str | int] | None:
    """A ``branch`` that picks one of several definitions of a name at one level: ``register(int)`` the
    singledispatch handler registered for that type (compared as trees), ``definition 2`` the second
    ``def`` of the name in source order; else None (an ``if``/``try`` block, see ``branch_key``)."""
    text = (text or "").strip()
    word, _, rest = text.partition(" ")
    if word == "definition" and rest.strip().isdigit():
        return "definition", int(rest)
    if text.startswith("register(") and text.endswith(")"):
        try:
            return "register", ast.dump(ast.parse(text[len("register("):-1], mode="eval").body)
        except SyntaxError:
            return None
    return None


def registered_name(node: ast.stmt) -> str:
    """The type a singledispatch handler is registered for, as source text ("" when it is none)."""
    return (registered_type(node) or ("", ""))[1]


def registered_type(node: ast.stmt) -> tuple[str, str] | None:
    """``(dispatcher, type)`` of a singledispatch handler: ``@fmt.register(int)`` or ``@fmt.register``
    with its first parameter annotated (the dispatcher dotted as written, the type as source text)."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    for d in node.decorator_list:
        call = d if isinstance(d, ast.Call) and d.args else None
        func = call.func if call else d
        if not (isinstance(func, ast.Attribute) and func.attr == "register"):
            continue
        if call is not None:
            return ast.unparse(func.value), ast.unparse(call.args[0])
        args = [*node.args.posonlyargs, *node.args.args]
        first = args[1] if len(args) > 1 and args[0].arg in ("self", "cls") else (args[0] if args else None)
        if first is not None and first.annotation is not None:
            return ast.unparse(func.value), ast.unparse(first.annotation)
    return None


def label(path: Path) -> str:
    return path[-1][2] if path else "top level"


def encloses(outer: Path, inner: Path) -> bool:
    """Whether a binding on ``outer`` runs whenever one on ``inner`` does (``outer`` is a prefix)."""
    return inner[:len(outer)] == outer


def bound_by(node: ast.AST) -> set[str]:
    """The names one node binds in the scope it belongs to."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
        return {node.id}
    if isinstance(node, DefNode):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    if isinstance(node, ast.Global | ast.Nonlocal):
        return set(node.names)
    if isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
        return {node.name}
    if isinstance(node, ast.arg):
        return {node.arg}
    return set()


def walk_scope(body: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """Every node of one scope: nested functions and classes are yielded, their insides are not."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def statement_binds(stmt: ast.stmt) -> set[str]:
    """The names a statement binds at its own level (a compound statement's header only: its blocks are
    statements of their own)."""
    if isinstance(stmt, DefNode):
        return {stmt.name}
    if isinstance(stmt, ast.For | ast.AsyncFor):
        heads: list[ast.AST] = [stmt.target]
    elif isinstance(stmt, ast.With | ast.AsyncWith):
        heads = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    elif isinstance(stmt, ast.If | ast.While):
        heads = [stmt.test]   # a walrus in the test binds
    elif isinstance(stmt, ast.Try | ast.TryStar | ast.Match):
        return set()
    else:
        heads = [stmt]
    return {name for head in heads for node in walk_scope([head]) for name in bound_by(node)}


def level_bindings(body: list[ast.stmt], name: str, path: Path = ()) -> list[Binding]:
    """Every statement of one level (inside its ``if``/``try`` blocks too) that binds ``name``, in source
    order; ``for``/``while``/``with`` bodies are not followed (what they bind depends on a run)."""
    found: list[Binding] = []
    for stmt in body:
        if name in statement_binds(stmt):
            found.append(Binding(stmt, path))
        for key, text, block in blocks(stmt):
            found += level_bindings(block, name, path + ((id(stmt), key, text),))
    return found


def level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of one level, inside its ``if``/``try`` blocks too, in source order."""
    for stmt in body:
        yield stmt
        for _key, _text, block in blocks(stmt):
            yield from level_statements(block)


def is_overload(node: ast.stmt) -> bool:
    """``@overload`` / ``@typing.overload``: a stub for type checkers that the next definition replaces."""
    return isinstance(node, DefNode) and any(
        (isinstance(d, ast.Name) and d.id == "overload") or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in node.decorator_list)


def accessor_of(node: ast.stmt, name: str) -> str | None:
    """``setter`` for a ``@name.setter`` function (``getter``, ``deleter`` likewise), else None."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    for d in node.decorator_list:
        if (isinstance(d, ast.Attribute) and d.attr in ACCESSORS and isinstance(d.value, ast.Name)
                and d.value.id == name):
            return d.attr
    return None


def property_call(node: ast.stmt, name: str) -> dict[str, str] | None:
    """``name = property(fget, fset, fdel)`` (positional or by keyword, each a plain name): the name of
    each accessor function by kind (``getter``, ``setter``, ``deleter``), else None."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "property"):
        return None
    kinds = ("getter", "setter", "deleter")
    given = dict(zip(kinds, node.value.args, strict=False))   # fewer than three, or a fourth: the doc
    given.update({dict(fget="getter", fset="setter", fdel="deleter").get(k.arg or "", ""): k.value
                  for k in node.value.keywords})
    given.pop("", None)
    names = {kind: value.id for kind, value in given.items() if isinstance(value, ast.Name)}
    return names if "getter" in names and len(names) == len(given) else None


def is_property(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
        (isinstance(d, ast.Name) and d.id == "property") or (isinstance(d, ast.Attribute) and d.attr == "property")
        for d in node.decorator_list)


def reads_name(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(node))


@dataclass(frozen=True)
class Rebinding:
    """A binding that runs after the module's own statements: a function's ``global`` rebinding, a
    ``Class.attr = ...`` (or ``setattr(Class, "attr", ...)``) at module level or inside a function."""

    node: ast.stmt          # the statement that binds
    keeps: bool             # its value reads the name it rebinds (``f = deco(f)``): it wraps the original
    where: str = ""         # the function it runs in, when it is one's (it runs when that is called)

    def describe(self) -> str:
        return f"line {self.node.lineno} (`{statement_text(self.node)}`{self.where})"


def global_rebindings(tree: ast.Module, name: str) -> list[Rebinding]:
    """Statements that bind the module-level ``name`` from inside a function declaring it ``global``."""
    return list(_function_rebindings(tree).get(name, ()))


def attribute_rebindings(tree: ast.Module, owner: str, attr: str, after: int) -> list[Rebinding]:
    """What sets ``owner.attr`` once the class stands: a module-level statement after line ``after``, or a
    function's statement (any line: it runs when the function is called)."""
    return [Rebinding(stmt, _keeps(value, attr, owner)) for name, stmt, value in attribute_assignments(tree, owner)
            if name == attr and stmt.lineno > after] + list(_function_rebindings(tree).get((owner, attr), ()))


@functools.lru_cache(maxsize=16)
def _function_rebindings(tree: ast.Module) -> dict[str | tuple[str, str], list[Rebinding]]:
    """From one walk of the module's statements (a walk per target made resolving quadratic in the number
    of targets of a file): by ``name``, the statements binding a module-level name through ``global``; by
    ``(owner, attr)``, those setting an attribute of a module-level name the function does not bind. Only
    statements are walked (no expression holds one); a function's locals are gathered only for an owner
    that is not a parameter (``self.x = ...`` is the common case)."""
    found: dict[str | tuple[str, str], list[Rebinding]] = {}
    for func in _functions(tree):
        body = list(scope_statements(func.body))
        declared = {name for n in body if isinstance(n, ast.Global) for name in n.names}
        params: set[str] | None = None
        local: set[str] | None = None
        through = f", through `global` in {func.name}, line {func.lineno}"
        inside = f", in {func.name}, line {func.lineno}"
        for stmt in body:
            if isinstance(stmt, ast.Global):
                continue
            for name in sorted(declared & statement_binds(stmt)) if declared else ():
                found.setdefault(name, []).append(Rebinding(stmt, keeps(stmt, name), through))
            for owner, attr, value in _attribute_sets(stmt):
                if params is None:
                    params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
                if owner in params and owner not in declared:
                    continue
                if local is None:
                    local = (params | {name for n in walk_scope(func.body) for name in bound_by(n)}) - declared
                if owner not in local:
                    found.setdefault((owner, attr), []).append(Rebinding(stmt, _keeps(value, attr, owner), inside))
    return found


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _blocks_of(node: ast.AST) -> list[ast.AST]:
    """The statements (and ``except``/``case`` clauses) directly inside a statement, in field order."""
    return [item for name in node._fields if isinstance(value := getattr(node, name), list)
            for item in value if isinstance(item, _BLOCKS)]


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of the module, in ``ast.walk``'s order (breadth first): only statements are
    followed, as no expression holds a function definition."""
    queue: collections.deque[ast.AST] = collections.deque(tree.body)
    while queue:
        node = queue.popleft()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node
        queue.extend(_blocks_of(node))


def scope_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of one scope, as ``walk_scope`` meets them (nested functions and classes yielded,
    their bodies not), without walking their expressions."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            yield node
        if isinstance(node, SCOPES):
            continue
        stack.extend(reversed(_blocks_of(node)))


def _attribute_sets(stmt: ast.stmt) -> list[tuple[str, str, ast.expr | None]]:
    """``(owner, attr, value)`` for a statement ``owner.attr = value`` or ``setattr(owner, "attr", value)``;
    an ``owner.attr`` among unpacked targets (``A.m, A.n = f, g``) or as a ``for``/``with`` target too,
    its value the matching item when the value is a tuple alike, else None (no value to read)."""
    if isinstance(stmt, ast.Expr) and isinstance(call := stmt.value, ast.Call) and _is(call.func, "setattr") \
            and len(call.args) == 3 and isinstance(call.args[0], ast.Name) and _is_str(call.args[1]):
        return [(call.args[0].id, _text(call.args[1]), call.args[2])]
    pairs: list[tuple[ast.expr, ast.expr | None]]
    if isinstance(stmt, ast.Assign):
        pairs = [(t, stmt.value) for t in stmt.targets]
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign) and stmt.value is not None:
        pairs = [(stmt.target, stmt.value)]
    elif isinstance(stmt, ast.For | ast.AsyncFor):
        pairs = [(stmt.target, None)]
    elif isinstance(stmt, ast.With | ast.AsyncWith):
        pairs = [(i.optional_vars, None) for i in stmt.items if i.optional_vars is not None]
    else:
        return []
    out: list[tuple[str, str, ast.expr | None]] = []
    while pairs:
        target, value = pairs.pop(0)
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            out.append((target.value.id, target.attr, value))
        elif isinstance(target, ast.Starred):
            pairs.append((target.value, None))
        elif isinstance(target, ast.Tuple | ast.List):
            items = value.elts if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts) \
                and not any(isinstance(e, ast.Starred) for e in [*value.elts, *target.elts]) else None
            pairs += [(t, items[n] if items else None) for n, t in enumerate(target.elts)]
    return out


def attribute_assignments(tree: ast.Module, owner: str) -> list[tuple[str, ast.stmt, ast.expr | None]]:
    """``(attr, statement, value)`` of every module-level ``owner.attr = value`` or ``setattr(owner, "attr",
    value)`` (inside ``if``/``try`` too)."""
    return [(attr, stmt, value) for stmt in level_statements(tree.body)
            for who, attr, value in _attribute_sets(stmt) if who == owner]


_HOLDERS = ("staticmethod", "classmethod")


def captured_by(body: list[ast.stmt], name: str, after: int, before: int) -> tuple[str, int] | None:
    """The dotted name that keeps the object of ``name`` after a ``del name`` at line ``before`` (jinja2's
    ``NodeType.__new__ = staticmethod(_failing_new)`` then ``del _failing_new``): a plain statement of this
    level between lines ``after`` and ``before`` that binds a name or an attribute to ``name`` itself or to
    ``staticmethod(name)``/``classmethod(name)`` (of a chained ``a = b = name``, its first target); the first
    one, and its line. None when nothing does."""
    for stmt in body:
        if not (after < stmt.lineno < before and isinstance(stmt, ast.Assign)):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _HOLDERS \
                and len(value.args) == 1 and not value.keywords:
            value = value.args[0]
        target = _dotted(stmt.targets[0])
        if target is not None and _is(value, name):
            return target, stmt.lineno
    return None


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a name or an attribute chain of names; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return None if owner is None else f"{owner}.{node.attr}"
    return None


def keeps(stmt: ast.stmt, name: str) -> bool:
    """Whether a rebinding's value reads what it rebinds (``f = deco(f)``): it wraps the original."""
    value = getattr(stmt, "value", None)
    return value is not None and _keeps(value, name)


def _keeps(value: ast.AST | None, name: str, owner: str | None = None) -> bool:
    if value is None:
        return False
    if owner is None:
        return reads_name(value, name)
    return any(isinstance(n, ast.Attribute) and n.attr == name and isinstance(n.value, ast.Name)
               and n.value.id == owner for n in ast.walk(value))


def module_names(tree: ast.Module) -> frozenset[str] | None:
    """Names the module binds at its top level (inside ``if``/``try``/``with`` blocks too); None when a
    star import makes that unknowable."""
    names: set[str] = set()
    for node in walk_scope(tree.body):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        names |= bound_by(node)
    return frozenset(names)


def class_names(cls: ast.ClassDef, tree: ast.Module | None = None) -> set[str]:
    """Names a class binds: its body's, and the module's ``Class.attr = ...`` for a module-level class."""
    names = {n for stmt in cls.body for node in walk_scope([stmt]) for n in bound_by(node)}
    if tree is not None and cls in tree.body:
        names |= {attr for attr, _stmt, _value in attribute_assignments(tree, cls.name)}
    return names


def class_reads_before(cls: ast.ClassDef, name: str) -> tuple[ast.expr, str] | None:
    """The first expression the class body evaluates while it runs that reads ``name``, and what it is:
    a default argument, a decorator, a base, another attribute's value (a function's body runs later and
    reads the live value, so it does not count)."""
    for stmt in cls.body:
        for node, what in _evaluated(stmt):
            if reads_name(node, name):
                return node, what
    return None


def _evaluated(stmt: ast.stmt) -> Iterator[tuple[ast.expr, str]]:
    """(sub-expression, what it is) of a class-body statement, for those that run when the body runs."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        a = stmt.args
        yield from ((d, f"a decorator of {stmt.name}") for d in stmt.decorator_list)
        yield from ((d, f"a default argument of {stmt.name}") for d in a.defaults + a.kw_defaults if d is not None)
        return
    if isinstance(stmt, ast.ClassDef):
        yield from ((d, f"the header of class {stmt.name}")
                    for d in stmt.decorator_list + stmt.bases + [k.value for k in stmt.keywords])
        return
    yield cast(ast.expr, stmt), f"`{statement_text(stmt)}`"   # the statement itself: reads_name takes any node


_READS = frozenset({"get", "items", "keys", "values", "copy", "pop", "update", "setdefault"})


def literal_keys(func: ast.AST, name: str) -> set[str] | None:
    """The keys the local dict ``name`` of a function can hold, when the function builds it from
    literals only (``name = {"k": v}`` / ``dict(k=v)``, annotated or not, ``name.update({...})``, ``name["k"] = v``,
    ``name.setdefault("k", v)``) and passes it nowhere but ``**name``; None when that cannot be told (a
    parameter, an attribute, a key computed at run time, the dict handed to other code)."""
    if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    if name in {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}:
        return None
    keys: set[str] = set()
    allowed: set[int] = set()   # Name nodes whose use is accounted for
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = _literal_mapping(node.value)
            if found is None or len(node.targets) != 1:
                return None
            keys |= found
            allowed.add(id(node.targets[0]))
        elif isinstance(node, ast.AnnAssign) and _is(node.target, name):   # ``kw: t.Any = {}``
            found = _literal_mapping(node.value) if node.value is not None else set()
            if found is None:
                return None
            keys |= found
            allowed.add(id(node.target))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is(node.func.value, name):
            if node.func.attr not in _READS:
                return None
            allowed.add(id(node.func.value))
            if node.func.attr == "update":
                found = _literal_mapping(ast.Call(ast.Name("dict"), node.args, node.keywords))
                if found is None:
                    return None
                keys |= found
            elif node.func.attr == "setdefault":
                if not node.args or not _is_str(node.args[0]):
                    return None
                keys.add(_text(node.args[0]))
        elif isinstance(node, ast.Subscript) and _is(node.value, name):
            allowed.add(id(node.value))
            if isinstance(node.ctx, ast.Store):
                if not _is_str(node.slice):
                    return None
                keys.add(_text(node.slice))
        elif isinstance(node, ast.keyword) and node.arg is None and _is(node.value, name):
            allowed.add(id(node.value))
    uses = [n for n in ast.walk(func) if isinstance(n, ast.Name) and n.id == name]
    if not uses or any(id(n) not in allowed for n in uses):
        return None
    return keys


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_str(node: ast.AST | None) -> TypeGuard[ast.Constant]:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _text(node: ast.Constant) -> str:
    """A string constant's text (``_is_str`` said it is one)."""
    return cast(str, node.value)


def _literal_mapping(node: ast.AST) -> set[str] | None:
    """The keys of ``{"k": v}`` or ``dict(k=v)`` (``dict({"k": v})`` too); None for anything else."""
    if isinstance(node, ast.Dict):
        return {_text(cast(ast.Constant, k)) for k in node.keys} if all(_is_str(k) for k in node.keys) else None
    if isinstance(node, ast.Call) and _is(node.func, "dict"):
        if any(k.arg is None for k in node.keywords) or len(node.args) > 1:
            return None
        inner = _literal_mapping(node.args[0]) if node.args else set()
        return None if inner is None else inner | {k.arg for k in node.keywords if k.arg is not None}
    return None
