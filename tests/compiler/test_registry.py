"""One descriptor per transform kind: the schema, the pattern/code keys and the class kinds all come from
the registry, and the schema file editors read is kept in step with it."""
from __future__ import annotations

import json
from pathlib import Path

from patchspec.compiler.edits import Status
from patchspec.compiler.transforms import CLASS_KINDS, CODE_KEYS, KINDS, PATTERN_KEYS, transform_schema
from patchspec.spec import schema, schema_text


def test_the_shipped_schema_file_is_the_registry_s():
    shipped = json.loads(schema_text("spec"))["$defs"]["transform"]
    assert shipped == transform_schema(), json.dumps(transform_schema())
    assert schema()["$defs"]["transform"]["propertyNames"]["enum"] == list(KINDS)


def test_keys_and_kinds_derived_from_the_descriptors():
    assert PATTERN_KEYS == {"anchor": "statement", "loop": "statement", "call": "expression"}
    assert CODE_KEYS == {"code": "code", "import": "code", "value": "expression"}
    assert CLASS_KINDS == {"add_method", "add_attribute"}
    assert {k.name: k.hook_key for k in KINDS.values() if k.hook} == {"wrap": "with", "add_method": "with"}


def test_statuses_are_an_enum_that_reads_as_its_value():
    assert json.dumps([Status.TARGET_MISSING]) == '["target-missing"]'
    assert f"{Status.AMBIGUOUS}" == "ambiguous" and Status("missing") is Status.MISSING


def test_the_docs_table_lists_every_kind_with_its_keys():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "spec-language.md").read_text()
    for name, kind in KINDS.items():
        row = f"| `{name}` | {', '.join(f'`{key}`' for key in kind.keys)} |"
        assert row in doc, row
