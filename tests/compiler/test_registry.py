"""One descriptor per transform kind: the schema, the pattern/code keys and the class kinds all come from
the registry, and the schema file editors read is kept in step with it."""
from __future__ import annotations

import json
from pathlib import Path

from patchspec.compiler.edits import Status
from patchspec.compiler.transforms import CLASS_KINDS, CODE_KEYS, KINDS, PATTERN_KEYS, docs_table, transform_schema
from patchspec.spec import schema, schema_text


def test_the_shipped_schema_file_is_the_registry_s():
    shipped = json.loads(schema_text("spec"))["$defs"]["transform"]
    assert shipped == transform_schema(), json.dumps(transform_schema())
    assert schema()["$defs"]["transform"]["propertyNames"]["enum"] == list(KINDS)


def test_keys_and_kinds_derived_from_the_descriptors():
    assert PATTERN_KEYS == {"anchor": "statement", "loop": "statement", "call": "expression",
                            "pattern": "rewrite", "statement": "rewrite", "statements": "statements"}
    assert CODE_KEYS == {"code": "code", "import": "code", "value": "expression", "by": "replacement"}
    assert CLASS_KINDS == {"add_method", "add_attribute"}
    assert {k.name: k.hook_key for k in KINDS.values() if k.hook} == {"wrap": "with", "add_method": "with"}


def test_statuses_are_an_enum_that_reads_as_its_value():
    assert json.dumps([Status.TARGET_MISSING]) == '["target-missing"]'
    assert f"{Status.AMBIGUOUS}" == "ambiguous" and Status("missing") is Status.MISSING


def test_the_docs_table_is_generated_from_the_descriptors():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "spec-language.md").read_text()
    table = doc.split("<!-- kinds:", 1)[1].split("-->", 1)[1].split("<!-- /kinds -->", 1)[0]
    assert table.strip() == docs_table().strip(), "regenerate the table: python -c 'from patchspec.compiler" \
        ".transforms import docs_table; print(docs_table())'"
    for kind in KINDS.values():
        assert kind.docs_row in table and kind.summary in kind.docs_row
