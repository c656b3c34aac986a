"""The transform registry: every ``Kind`` descriptor declared by a module of this package (see ``compiler.kind``).

Kinds are discovered, not listed: a new module with a ``Kind`` at its top level is a new kind. Their order
(the schema's enum, the docs table) is by each kind's ``rank``, then by name.
"""
from __future__ import annotations

import importlib
import pkgutil
import types
from typing import Any

from patchspec.compiler.kind import Kind


def discover(package: str = __name__, path: list[str] | None = None) -> dict[str, Kind]:
    found: dict[str, Kind] = {}
    for info in sorted(pkgutil.iter_modules(path or __path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Kind) and value.name not in found and getattr(module, "__name__", "") \
                    == f"{package}.{info.name}" and _declared_in(value, module):
                found[value.name] = value
    return dict(sorted(found.items(), key=lambda item: (item[1].rank, item[0])))


def _declared_in(kind: Kind, module: types.ModuleType) -> bool:
    """A kind belongs to the module whose resolve function it runs (an imported Kind is not redeclared)."""
    return bool(getattr(kind.resolve, "__module__", module.__name__) == module.__name__)


KINDS: dict[str, Kind] = discover()
CLASS_KINDS = frozenset(name for name, k in KINDS.items() if k.on_class)


def transform_schema() -> dict[str, Any]:
    """The ``$defs/transform`` fragment of the spec schema: one key, a kind, with that kind's keys."""
    return {"type": "object", "minProperties": 1, "maxProperties": 1,
            "propertyNames": {"enum": list(KINDS)},
            "properties": {name: k.schema for name, k in KINDS.items()}}


def docs_table() -> str:
    """The docs table of every kind, from the descriptors' rows."""
    return "\n".join(["| kind | keys | what it does |", "| --- | --- | --- |",
                      *(k.docs_row for k in KINDS.values())]) + "\n"
