"""Results are typed across layers: every row ``check`` returns carries an enum status (the compiler's
``Status``, or check's own ``Verdict`` for a spec that holds or is applied), never a bare string."""
from __future__ import annotations

import ast
import enum
import json
from importlib import resources
from pathlib import Path

import pytest

from patchspec import ops
from patchspec.compiler.edits import Status
from patchspec.errors import Exit
from patchspec.results import FileState, NoteKind, Row, Verdict
from tests.state.toy import toy_root, write_spec


@pytest.mark.parametrize("when, expected", [("not applied", {Verdict.WOULD_APPLY}),
                                            ("applied", {Verdict.APPLIED}),
                                            ("file edited after apply", {Verdict.EDITED, Verdict.APPLIED}),
                                            ("anchor gone", {Status.MISSING, Verdict.WOULD_APPLY})])
def test_check_rows_carry_enum_statuses(tmp_path, when, expected):
    root, spec = toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")
    if when in ("applied", "file edited after apply"):
        ops.apply(spec, "auto", str(root), verify=False)
    if when == "file edited after apply":
        (root / "pkg" / "b.py").write_text((root / "pkg" / "b.py").read_text() + "# by hand\n")
    if when == "anchor gone":
        (root / "pkg" / "a.py").write_text("def target(self):\n    x = 1\n    other_call(1)\n")
    rows = ops.check(spec, "auto", str(root)).rows
    assert all(isinstance(r, Row) and isinstance(r.status, enum.Enum) for r in rows)
    assert {r.status for r in rows} == expected


def test_the_output_schema_lists_the_codes_enums():
    """Until the output schema is generated from the result records, its enums are the code's: the exit
    codes a JSON document can carry (not 141: stdout is gone), the file states, the note kinds."""
    schema = json.loads(resources.files("patchspec").joinpath("schema/output.schema.json").read_text())
    assert set(schema["properties"]["exit"]["enum"]) == set(Exit) - {Exit.PIPE}
    result = schema["$defs"]["result"]
    status = next(rule["then"]["oneOf"][1] for rule in result["allOf"]
                  if rule["if"]["properties"]["type"].get("const") == "status")
    assert status["properties"]["status"]["enum"] == [str(s) for s in FileState]
    assert {str(k) for k in NoteKind} <= set(result["properties"]["type"]["enum"])


def test_the_compiler_imports_no_layer_above_it():
    """The compiler knows Python source and the spec model: check's verdict on a row is check's own record
    (``results.Row``), not a status the compiler's ``Resolved`` has to know of."""
    compiler = Path(ops.__file__).parent / "compiler"
    above = set()
    for path in compiler.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            above |= {(path.name, n) for n in names if n.startswith("patchspec") and
                      n.split(".")[1] not in ("compiler", "model", "errors")}
    assert not above
