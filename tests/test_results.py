"""Results are typed across layers: every row ``check`` returns carries an enum status (the compiler's
``Status``, or check's own ``Verdict`` for a spec that holds or is applied), never a bare string."""
from __future__ import annotations

import enum

import pytest

from patchspec import ops
from patchspec.compiler.edits import Status
from patchspec.results import Verdict
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
    assert all(isinstance(r.status, enum.Enum) for r in rows)
    assert {r.status for r in rows} == expected
