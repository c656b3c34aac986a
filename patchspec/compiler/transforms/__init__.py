"""The transform registry: one module per kind, each exporting a ``Kind`` descriptor (see ``kind``)."""
from patchspec.compiler.transforms.add_argument import ADD_ARGUMENT
from patchspec.compiler.transforms.add_import import ADD_IMPORT
from patchspec.compiler.transforms.class_member import ADD_ATTRIBUTE, ADD_METHOD
from patchspec.compiler.transforms.insert import INSERT_AFTER, INSERT_BEFORE
from patchspec.compiler.transforms.kind import Kind
from patchspec.compiler.transforms.loop_guard import LOOP_GUARD
from patchspec.compiler.transforms.wrap import WRAP

KINDS: dict[str, Kind] = {k.name: k for k in (INSERT_BEFORE, INSERT_AFTER, WRAP, ADD_ARGUMENT, LOOP_GUARD,
                                             ADD_METHOD, ADD_ATTRIBUTE, ADD_IMPORT)}
CLASS_KINDS = frozenset(name for name, k in KINDS.items() if k.on_class)
PATTERN_KEYS = {key: form for k in KINDS.values() for key, form in k.pattern_keys.items()}
CODE_KEYS = {key: form for k in KINDS.values() for key, form in k.code_keys.items()}


def transform_schema() -> dict:
    """The ``$defs/transform`` fragment of the spec schema: one key, a kind, with that kind's keys."""
    return {"type": "object", "minProperties": 1, "maxProperties": 1,
            "propertyNames": {"enum": list(KINDS)},
            "properties": {name: k.schema for name, k in KINDS.items()}}
