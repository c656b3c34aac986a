"""The output schema, ``patchspec/schema/output.schema.json``, generated from the result records (every
``results.Record``) as the spec schema's transforms are from the transform registry.

``python -m patchspec.cli.output_schema`` writes the file; a test keeps the shipped one equal to ``text()``.
A record's JSON keys are its fields (``Record.json_fields``) and their JSON types its annotations.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import types
import typing
from pathlib import Path

from patchspec.errors import Exit, Location
from patchspec.results import Record

# the modules that declare records: results (shared by every verb), and the layers that own the others
RECORD_MODULES = ("patchspec.results", "patchspec.verbs.reading", "patchspec.proof", "patchspec.releases.report",
                  "patchspec.releases.matrix")
FILE = Path(__file__).resolve().parent.parent / "schema" / "output.schema.json"


def records() -> list[type[Record]]:
    """Every record class, by its ``type`` (then by name): one order whatever was imported first."""
    for module in RECORD_MODULES:
        importlib.import_module(module)
    found, todo = [], list(Record.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return sorted(found, key=lambda c: (types_of(c), c.__qualname__))


def types_of(cls: type[Record]) -> list[str]:
    """The ``type`` values a record takes: its ``TYPE``, or every value of the enum its ``IS_TYPE`` field
    holds."""
    field = next((f for f in dataclasses.fields(cls) if f.metadata.get("is_type")), None)
    if field is None:
        return [cls.TYPE]
    return [str(v) for v in typing.get_type_hints(cls)[field.name]]


def json_type(hint) -> dict:
    """The JSON Schema of a value annotated ``hint``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        rest = [a for a in args if a is not type(None)]
        null = [None] if len(rest) < len(args) else []
        if all(isinstance(a, type) and issubclass(a, enum.Enum) for a in rest):
            return {"enum": list(dict.fromkeys(v.value for a in rest for v in a)) + null}
        shown = [json_type(a) for a in rest]
        if len(shown) == 1 and list(shown[0]) == ["type"] and null:
            return {"type": [shown[0]["type"], "null"]}
        return {"anyOf": shown + ([{"type": "null"}] if null else [])}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [v.value for v in hint]}
    if hint is list or origin is list:
        return {"type": "array", **({"items": json_type(args[0])} if args else {})}
    if hint is dict or origin is dict:
        return {"type": "object"}
    if dataclasses.is_dataclass(hint):
        return _object(dataclasses.fields(hint), typing.get_type_hints(hint))
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError(f"no JSON type for {hint!r}")


def _object(fields, hints: dict, first: dict | None = None) -> dict:
    properties = dict(first or {})
    required = list(properties)
    for f in fields:
        key = f.metadata.get("key", f.name)
        properties[key] = json_type(hints[f.name])
        if not f.metadata.get("optional"):
            required.append(key)
    return {"type": "object", "additionalProperties": False, "required": required, "properties": properties}


def record_schema(cls: type[Record]) -> dict:
    kinds = types_of(cls)
    is_type = {"const": kinds[0]} if len(kinds) == 1 else {"enum": kinds}
    return _object(cls.json_fields(), cls.json_hints(), {"type": is_type})


def result_schema() -> dict:
    """``$defs/result``: one rule per ``type``; records that share a ``type`` are one of theirs."""
    groups: dict[tuple[str, ...], list[dict]] = {}
    for cls in records():
        groups.setdefault(tuple(types_of(cls)), []).append(record_schema(cls))
    every = [t for kinds in groups for t in kinds]
    if len(every) != len(set(every)):
        raise TypeError(f"two kinds of record share a type but not all of theirs: {sorted(every)}")
    rules = []
    for kinds, shapes in groups.items():
        when = {"const": kinds[0]} if len(kinds) == 1 else {"enum": list(kinds)}
        rules.append({"if": {"properties": {"type": when}},
                      "then": shapes[0] if len(shapes) == 1 else {"oneOf": shapes}})
    return {"type": "object", "required": ["type"], "properties": {"type": {"enum": every}}, "allOf": rules}


def schema() -> dict:
    """The envelope every verb prints (``patchspec.cli.envelope``), its error and its result records."""
    location = _object(dataclasses.fields(Location), typing.get_type_hints(Location))
    error = {"type": "object", "additionalProperties": False, "required": ["message", "locations"],
             "properties": {"message": {"type": "string"},
                            "locations": {"type": "array", "items": {"$ref": "#/$defs/location"}}}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://patchspec.invalid/output.schema.json",
        "title": "patchspec --json output: one envelope for every verb (generated: python -m "
                 "patchspec.cli.output_schema)",
        "type": "object",
        "additionalProperties": False,
        "required": ["verb", "exit", "results", "error"],
        "properties": {
            "verb": {"type": "string"},
            "exit": {"enum": [int(e) for e in Exit if e is not Exit.PIPE]},  # 141: stdout is gone
            "results": {"type": "array", "items": {"$ref": "#/$defs/result"}},
            "error": {"oneOf": [{"type": "null"}, error]},
        },
        "$defs": {"location": location, "result": result_schema()},
    }


def text() -> str:
    return json.dumps(schema(), indent=2) + "\n"


if __name__ == "__main__":
    FILE.write_text(text())
    print(f"wrote {FILE}")
