"""One descriptor per transform kind: the schema, the pattern/code keys and the class kinds all come from
the registry, and the schema file editors read is kept in step with it."""
from __future__ import annotations

import json
from pathlib import Path

from patchspec.cli import kind_docs
from patchspec.compiler.edits import Status
from patchspec.compiler.transforms import CLASS_KINDS, KINDS, docs_table, transform_schema
from patchspec.spec import schema, schema_text


def test_the_shipped_schema_file_is_the_registry_s():
    shipped = json.loads(schema_text("spec"))["$defs"]["transform"]
    assert shipped == transform_schema(), json.dumps(transform_schema())
    assert schema()["$defs"]["transform"]["propertyNames"]["enum"] == list(KINDS)


def test_keys_and_kinds_derived_from_the_descriptors():
    patterns = {name: k.pattern_keys for name, k in KINDS.items() if k.pattern_keys}
    assert patterns == {"insert_before": {"anchor": "statement"}, "insert_after": {"anchor": "statement"},
                        "add_argument": {"call": "expression"}, "loop_guard": {"loop": "statement"},
                        "replace": {"pattern": "rewrite"}, "remove": {"statement": "rewrite"},
                        "guard": {"statements": "statements"}}
    code = {name: k.code_keys for name, k in KINDS.items() if k.code_keys}
    assert code == {"insert_before": {"code": "code"}, "insert_after": {"code": "code"},
                    "add_argument": {"value": "expression"}, "loop_guard": {"code": "code"},
                    "add_attribute": {"value": "expression"}, "add_import": {"import": "code"},
                    "replace": {"by": "replacement"}, "set": {"value": "expression"},
                    "guard": {"by": "replacement"}, "add_statement": {"code": "replacement"}}
    assert {"add_method", "add_attribute"} == CLASS_KINDS
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


def test_the_spec_language_example_marks_every_key_the_schema_requires():
    """``summary:`` is required (issue 27, item 12); before, the docs' example did not say so of any key."""
    required = schema()["required"]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "spec-language.md").read_text()
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    lines = {line.split(":", 1)[0]: line for line in example.splitlines() if line[:1].isalpha()}
    assert {key: "# required" in lines.get(key, "") for key in required} == dict.fromkeys(required, True)


def test_the_kinds_docs_rows_and_schema_are_what_the_descriptors_make():
    """One command (``python -m patchspec.cli.kind_docs``) writes them; before, docs/verify.md's table of
    live checks was written by hand."""
    stale = [str(path) for path, text in kind_docs.generated().items() if path.read_text(encoding="utf-8") != text]
    assert stale == [], "regenerate: python -m patchspec.cli.kind_docs"
