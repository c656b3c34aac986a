"""What lint accepts: names bound where the code lands, in the shapes real targets have."""
from __future__ import annotations

import textwrap

import pytest

from patchspec.compiler import plan as planner
from tests.compiler.helpers import make_spec, resolve, target

SOURCE = textwrap.dedent("""
    import os
    LIMIT = 3


    def f(a, *rest, key=None, **kw):
        total = 0
        def inner(item):
            return item + total
        for i, (x, y) in enumerate(rest):
            total += x
        with open(os.devnull) as fh:
            data = fh.read()
        return inner(data)
""").lstrip()


@pytest.mark.parametrize("transform", [
    {"insert_before": {"anchor": "return item + total", "code": "_s.note(item, total, a)"}},
    {"loop_guard": {"loop": "for i, (x, y) in enumerate(rest): ...", "code": "if _s.note(i, x, y): break"}},
    {"insert_after": {"anchor": "data = fh.read()", "code": "_s.note(data, fh, key, kw, rest, LIMIT, os)"}},
    {"insert_before": {"anchor": "return inner(data)", "code": "_s.note([z for z in rest], lambda q: q, (w := 1), w)"}},
    {"add_argument": {"call": "inner(data)", "keyword": "extra", "value": "_s.note(data, len(rest))"}},
])
def test_names_bound_where_the_code_lands_are_accepted(transform):
    spec = make_spec([target("f", transform)])
    plan = resolve(SOURCE, spec)
    assert not plan.errors, [r.detail for r in plan.errors]
    planner.emit(plan, [spec])
    assert plan.problems == []


def test_a_local_assigned_only_after_the_anchor_is_refused():
    spec = make_spec([target("f", {"insert_before": {"anchor": "total = 0", "code": "_s.note(data)"}})])
    plan = resolve(SOURCE, spec)
    planner.emit(plan, [spec])
    assert [p.text for p in plan.problems] == ["inserted code reads a name not bound before it: f:6: data"]


def test_a_one_line_body_reads_the_parameters_on_its_line():
    spec = make_spec([target("f", {"insert_before": {"anchor": "return g(x)", "code": "_s.note(x)"}})])
    plan = resolve("def f(x): return g(x)\n", spec)
    planner.emit(plan, [spec])
    assert plan.problems == []
