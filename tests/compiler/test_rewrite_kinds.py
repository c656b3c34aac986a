"""What the rewrite kinds share across specs and releases: a rewrite of another spec's anchor refused
naming both, a release that already holds the replacement obsolete for that transform, a replaced
expression that changed anchor-missing. Each kind's before/after table is tests/compiler/kinds/."""
from __future__ import annotations

import pytest

from patchspec.compiler import drift
from patchspec.compiler import plan as planner
from patchspec.compiler.plan import ConflictError
from tests.compiler.helpers import FILE
from tests.compiler.kinds.cases import spec


def test_a_rewrite_of_another_spec_s_anchor_is_refused_naming_both():
    source = "from m import go, note, ok\n\n\ndef f(u, p):\n    if u and p:\n        go()\n"
    fix = spec("f", {"replace": {"pattern": "u and p", "by": "u and p and ok()"}}, name="fix")
    hook = spec("f", {"insert_before": {"anchor": "if u and p: ...", "code": "note()"}}, name="hook")
    plan = planner.resolve([fix, hook], {FILE: source}.get, lambda pkg: True)
    with pytest.raises(ConflictError, match=r"spec fix .* would change what spec hook .* is anchored on"):
        planner.emit(plan, [fix, hook])


def test_a_release_that_has_the_replacement_is_obsolete_for_that_transform():
    fixed = "def f(u, p, scheme):\n    if not scheme.startswith('https') and u and p:\n        go()\n"
    rows = drift.file_drift(spec("f", {"replace": {"pattern": "$U and $P",
                                                    "by": 'not scheme.startswith("https") and $U and $P'}}),
                            FILE, fixed, None, True, {})
    assert [(r.drift, r.under) for r in rows] == [(drift.Drift.OBSOLETE, drift.Drift.UNRECORDED)]
    assert drift.exit_code(rows) == 1


def test_a_replaced_expression_that_changed_is_anchor_missing():
    changed = "def f(u, p):\n    if u or p:\n        go()\n"
    rows = drift.file_drift(spec("f", {"replace": {"pattern": "$U and $P", "by": "$U and $P and ok()"}}),
                            FILE, changed, None, True, {})
    assert [r.drift for r in rows] == [drift.Drift.ANCHOR_MISSING]
