"""One typed descriptor per transform kind: its keys, how each is read and checked, and its edit.

Everything else that depends on the set of kinds (the schema's transform enum and fragments, which keys
are patterns or code, the class-only kinds, how a snippet hook is checked) is derived from the registry
in ``patchspec.compiler.transforms``, so adding a kind means adding one module.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class Key(enum.Enum):
    """What a transform key holds."""

    STATEMENT_PATTERN = "statement pattern"    # located in the target: an anchor, a loop
    EXPRESSION_PATTERN = "expression pattern"  # located in the target: a call
    CODE = "code"                              # one line of Python inserted as a statement
    EXPRESSION = "expression"                  # a Python expression inserted as a value
    IDENTIFIER = "identifier"                  # a plain name (a keyword, an attribute)
    HOOK = "hook"                              # a function of the snippet package, by name

    @property
    def pattern_form(self) -> str | None:
        return {Key.STATEMENT_PATTERN: "statement", Key.EXPRESSION_PATTERN: "expression"}.get(self)

    @property
    def code_form(self) -> str | None:
        return {Key.CODE: "code", Key.EXPRESSION: "expression"}.get(self)

    @property
    def schema(self) -> dict:
        if self in (Key.IDENTIFIER, Key.HOOK):
            return {"$ref": "#/$defs/identifier"}
        if self is Key.CODE:
            return {"$ref": "#/$defs/code"}
        return {"type": "string"}


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


@dataclass(frozen=True)
class Kind:
    name: str
    summary: str                                  # one line, for the docs table
    keys: dict[str, Key]
    resolve: Callable                             # (TargetContext, params) -> (line, edits)
    on_class: bool = False                        # needs a class target (else a function, or either)
    any_target: bool = False                      # the target only names the file (add_import)
    hook: Hook | None = None                      # how the HOOK key's function is used
    live: Live = Live.CODE_LINES                  # how verify shows it live

    @property
    def schema(self) -> dict:
        return {"type": "object", "additionalProperties": False, "required": list(self.keys),
                "properties": {key: kind.schema for key, kind in self.keys.items()}}

    @property
    def pattern_keys(self) -> dict[str, str]:
        return {key: k.pattern_form for key, k in self.keys.items() if k.pattern_form}

    @property
    def code_keys(self) -> dict[str, str]:
        return {key: k.code_form for key, k in self.keys.items() if k.code_form}

    @property
    def hook_key(self) -> str | None:
        return next((key for key, k in self.keys.items() if k is Key.HOOK), None)
