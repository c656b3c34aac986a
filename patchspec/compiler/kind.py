"""One typed descriptor per transform kind: its keys, how each is read and checked, its edit actions, its
docs row.

Everything else that depends on the set of kinds (the schema's transform enum and fragments, which keys
are patterns or code, the class-only kinds, how a snippet hook is checked, the docs table, how emit and
lint treat its edits) is derived from the descriptors that ``patchspec.compiler.transforms`` discovers in
its modules, so adding a kind means adding one module (and its before/after tests).
"""
from __future__ import annotations

import ast
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from patchspec.compiler import scope
from patchspec.compiler.context import TargetContext
from patchspec.compiler.edits import Action, LineEdit, NodeEdit, Resolved

ACKNOWLEDGE = "acknowledge"   # the transform key naming the rules (``Kind.rules``) a spec means to pass


class Key(enum.Enum):
    """What a transform key holds."""

    STATEMENT_PATTERN = "statement pattern"    # located in the target: an anchor, a loop
    EXPRESSION_PATTERN = "expression pattern"  # located in the target: a call
    CODE = "code"                              # one line of Python inserted as a statement
    EXPRESSION = "expression"                  # a Python expression inserted as a value
    IDENTIFIER = "identifier"                  # a plain name (a keyword, an attribute)
    HOOK = "hook"                              # a function of the snippet package, by name
    REWRITE_PATTERN = "rewrite pattern"        # an expression or a statement, with metavariables
    STATEMENTS_PATTERN = "statements pattern"  # a run of statements, with metavariables
    REPLACEMENT = "replacement"                # code of one or more lines, with the pattern's metavariables

    @property
    def pattern_form(self) -> str | None:
        return {Key.STATEMENT_PATTERN: "statement", Key.EXPRESSION_PATTERN: "expression",
                Key.REWRITE_PATTERN: "rewrite", Key.STATEMENTS_PATTERN: "statements"}.get(self)

    @property
    def code_form(self) -> str | None:
        return {Key.CODE: "code", Key.EXPRESSION: "expression", Key.REPLACEMENT: "replacement"}.get(self)

    @property
    def schema(self) -> dict[str, Any]:
        if self in (Key.IDENTIFIER, Key.HOOK):
            return {"$ref": "#/$defs/identifier"}
        if self is Key.CODE:
            return {"$ref": "#/$defs/code"}
        return {"type": "string"}


@dataclass(frozen=True)
class Binds:
    """The names a transform binds (and unbinds), by where: the binding model's facet of a kind, read by
    the lint of inserted code and the ``USES`` check, so code a spec adds may use what the spec itself
    binds (its own import, an assignment it inserts earlier, a member it adds)."""

    module: frozenset[str] = frozenset()   # at module level, before the file's functions run (an import)
    here: frozenset[str] = frozenset()     # where its code lands, for code of the spec that runs after it
    member: frozenset[str] = frozenset()   # in the target class
    unbinds: frozenset[str] = frozenset()  # names it removes where it lands


NOTHING = Binds()


class Hook(enum.Enum):
    """How the inserted code uses the hook a ``HOOK`` key names, and so what its signature must take."""

    DECORATOR = "decorator"   # called with the one function it wraps
    METHOD = "method"         # bound as a method: its first parameter receives the instance


class Live(enum.Enum):
    """How ``patchspec verify`` shows a transform of the kind live in the root's interpreter: the value
    names the check in ``patchspec/probe.py``'s ``HOW`` table."""

    CODE_LINES = "code_lines"      # its lines carry code in the live function's code object (nested too)
    WRAPPED = "wrapped"            # the live object's __wrapped__ chain reaches the patched function
    CLASS_MEMBER = "class_member"  # the live class (reached by its name) has the member
    MODULE_NAME = "module_name"    # the live module binds the names
    BINDING = "binding"            # module- or class-level names the module's text binds (set, add_statement)


# the line a transform lands on in the target, and the edits it makes there
Resolution = tuple[int, list[NodeEdit | LineEdit]]


class Resolver(Protocol):
    """A kind's resolve function: the line a transform lands on in the target, and the edits it makes
    there; a ``ResolveError`` when it cannot."""

    def __call__(self, ctx: TargetContext, params: dict[str, str], /) -> Resolution:
        ...


# what an edit sets that another spec's edit could set differently (a key of the file, the node and what of
# it), and the value it sets: two specs' edits of one slot must agree
Slot = Callable[[Resolved, NodeEdit | LineEdit], tuple[tuple[object, ...], str]]


@dataclass(frozen=True)
class Kind:
    name: str
    summary: str                                  # one line, for the docs table
    keys: dict[str, Key]
    resolve: Resolver
    on_class: bool = False                        # needs a class target (else a function, or either)
    any_target: bool = False                      # the target only names the file (add_import)
    hook: Hook | None = None                      # how the HOOK key's function is used
    actions: tuple[Action, ...] = ()              # the edit actions its edits carry (emit, lint, conflicts)
    optional: frozenset[str] = frozenset()        # keys that may be left out
    rewrites: bool = False                        # it changes upstream's code: nothing to do = done upstream
    slot: Slot | None = None                      # (row, edit) -> (what it sets, value): one value per slot
    any_definition: bool = False                  # its target may be a module- or class-level assignment
    rank: int = 100                               # its place in the registry (the schema enum, docs table)
    binds: Callable[[dict[str, str]], Binds] = lambda params: NOTHING   # what it binds (see ``Binds``)
    live: Live = Live.CODE_LINES                  # how verify shows it live
    live_cases: tuple[tuple[str, str], ...] = ()  # when its keys choose the check: (check, the case as the
                                                  # docs name it); the docs' table of live checks reads them
    local: bool = False                           # it looks at and edits only what its patterns match and the
                                                  # target's own node: the body's other statements need no parse
    rules: frozenset[str] = frozenset()           # refusals a transform may acknowledge by name (``acknowledge``):
                                                  # a rule that guards a common mistake, where the spec may mean it

    @property
    def schema(self) -> dict[str, Any]:
        properties = {key: kind.schema for key, kind in self.keys.items()}
        if self.rules:
            properties[ACKNOWLEDGE] = {"type": "array", "uniqueItems": True, "items": {"enum": sorted(self.rules)}}
        return {"type": "object", "additionalProperties": False,
                "required": [key for key in self.keys if key not in self.optional], "properties": properties}

    @property
    def docs_row(self) -> str:
        """Its row of the docs table (docs/spec-language.md holds the table of every kind's row)."""
        keys = ", ".join(f"optional `{key}`" if key in self.optional else f"`{key}`" for key in self.keys)
        return f"| `{self.name}` | {keys} | {self.summary} |"

    @property
    def pattern_keys(self) -> dict[str, str]:
        return {key: k.pattern_form for key, k in self.keys.items() if k.pattern_form}

    @property
    def code_keys(self) -> dict[str, str]:
        return {key: k.code_form for key, k in self.keys.items() if k.code_form}

    @property
    def hook_key(self) -> str | None:
        return next((key for key, k in self.keys.items() if k is Key.HOOK), None)


def code_binds(params: dict[str, str]) -> Binds:
    """An inserted statement binds what it assigns, for the spec's code that runs after it."""
    tree = ast.parse(params["code"].strip())
    return Binds(here=frozenset(n for node in scope.walk_scope(tree.body) for n in scope.bound_by(node)))
