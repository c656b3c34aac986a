"""Results are typed across layers: every row ``check`` returns is a record (``results.Row``) with an enum
status (the compiler's ``Status``, or check's own ``Verdict`` for a spec that holds or is applied), never a
bare string; every JSON record a verb prints is a ``results.Record``, and the output schema is generated
from them."""
from __future__ import annotations

import ast
import enum
import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

import patchspec
from patchspec.cli import output_schema
from patchspec.cli.present import note_line
from patchspec.compiler.edits import Status
from patchspec.errors import Exit
from patchspec.results import FileAction, FileDone, FileState, Liveness, Note, NoteKind, Row, Verdict
from patchspec.verbs import reading, writing
from tests.state.toy import toy_root, write_spec


@pytest.mark.parametrize("when, expected", [("not applied", {Verdict.WOULD_APPLY}),
                                            ("applied", {Verdict.APPLIED}),
                                            ("file edited after apply", {Verdict.EDITED, Verdict.APPLIED}),
                                            ("anchor gone", {Status.MISSING, Verdict.WOULD_APPLY})])
def test_check_rows_carry_enum_statuses(tmp_path, when, expected):
    root, spec = toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")
    if when in ("applied", "file edited after apply"):
        writing.apply(spec, "auto", str(root), verify=False)
    if when == "file edited after apply":
        (root / "pkg" / "b.py").write_text((root / "pkg" / "b.py").read_text() + "# by hand\n")
    if when == "anchor gone":
        (root / "pkg" / "a.py").write_text("def target(self):\n    x = 1\n    other_call(1)\n")
    rows = reading.check(spec, "auto", str(root)).rows
    assert all(isinstance(r, Row) and isinstance(r.status, enum.Enum) for r in rows)
    assert {r.status for r in rows} == expected


def test_the_shipped_output_schema_is_generated_from_the_records():
    """The output schema is the records' (their fields and annotations), as the spec schema is the
    registry's: the exit codes a JSON document can carry (not 141: stdout is gone), the file states and the
    note kinds are the code's enums; regenerate with ``python -m patchspec.cli.output_schema``."""
    shipped = resources.files("patchspec").joinpath("schema/output.schema.json").read_text()
    assert shipped == output_schema.text(), "regenerate: python -m patchspec.cli.output_schema"
    schema = json.loads(shipped)
    assert set(schema["properties"]["exit"]["enum"]) == set(Exit) - {Exit.PIPE}
    result = schema["$defs"]["result"]
    status = next(rule["then"]["oneOf"] for rule in result["allOf"]
                  if rule["if"]["properties"]["type"].get("const") == "status")
    assert [s["properties"]["status"]["enum"] for s in status if "status" in s["properties"]] == \
        [[str(s) for s in FileState]]
    assert {str(k) for k in NoteKind} <= set(result["properties"]["type"]["enum"])


def test_a_record_s_keys_are_its_fields_and_an_optional_one_is_left_out_while_none():
    assert FileAction("a.py", "written").to_json() == {"type": "file", "path": "a.py", "action": "written"}
    assert FileAction("a.py", "written", "out").to_json()["under"] == "out"
    assert Note(NoteKind.EDITED, "a.py differs from what apply wrote", file="a.py").to_json() == \
        {"type": "edited", "file": "a.py", "detail": "a.py differs from what apply wrote"}
    assert note_line(Note(NoteKind.EDITED, "a.py differs")) == "edited: a.py differs"   # the kind says it once
    assert FileAction("a.py", FileDone.RESTORED_UNDER, detail="b, c").to_json() == \
        {"type": "file", "path": "a.py", "action": "restored under b, c"}
    shape = output_schema.record_schema(FileAction)
    assert shape["required"] == ["type", "path", "action"] and shape["properties"]["under"] == \
        {"type": ["string", "null"]}
    assert output_schema.record_schema(Row)["properties"]["status"]["enum"] == list(dict.fromkeys(
        [*map(str, Status), *map(str, Verdict), *map(str, Liveness)]))


def test_every_recorded_verb_output_meets_the_generated_schema():
    """What every verb printed on the shipped specs (``tests/data/verb_outputs.json``, kept byte for byte by
    test_verb_outputs) is what the records' schema allows, key for key (``additionalProperties: false``)."""
    recorded = json.loads((Path(__file__).parents[1] / "data" / "verb_outputs.json").read_text())
    documents = [json.loads(forms["json"]["stdout"]) for forms in recorded.values() if "json" in forms]  # demo: lines
    for document in documents:
        jsonschema.validate(document, output_schema.schema())
    seen = {r["type"] for d in documents for r in d["results"]}
    assert {"transform", "file", "drift", "drift-summary", "matrix-column", "matrix-row", "diff", "spec",
            "status", "note"} <= seen


def test_the_compiler_imports_no_layer_above_it():
    """The compiler knows Python source and the spec model: check's verdict on a row is check's own record
    (``results.Row``), not a status the compiler's ``Resolved`` has to know of."""
    compiler = Path(patchspec.__file__).parent / "compiler"
    above = set()
    for path in compiler.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            above |= {(path.name, n) for n in names if n.startswith("patchspec") and
                      n.split(".")[1] not in ("compiler", "model", "errors")}
    assert not above


def test_every_module_that_declares_a_record_is_one_the_schema_is_generated_from():
    package = Path(patchspec.__file__).parent
    declaring = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        if any(isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "Record" for b in node.bases)
               for node in tree.body):
            declaring.add(".".join(path.relative_to(package.parent).with_suffix("").parts))
    assert declaring == set(output_schema.RECORD_MODULES)
