"""What lint accepts: names bound where the code lands, in the shapes real targets have."""
from __future__ import annotations

import textwrap

import pytest

from patchspec.compiler.plan import emit
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
    emit(plan, [spec])
    assert plan.problems == []


def test_a_local_assigned_only_after_the_anchor_is_refused():
    spec = make_spec([target("f", {"insert_before": {"anchor": "total = 0", "code": "_s.note(data)"}})])
    plan = resolve(SOURCE, spec)
    assert [(r.status, r.detail) for r in plan.errors] == [
        ("unbound-name", "inserted code reads a name not bound before it: f:6: data")]


def test_a_one_line_body_reads_the_parameters_on_its_line():
    spec = make_spec([target("f", {"insert_before": {"anchor": "return g(x)", "code": "_s.note(x)"}})])
    plan = resolve("def f(x): return g(x)\n", spec)
    emit(plan, [spec])
    assert plan.problems == []


# --- one binding model: what the spec itself binds counts (issue 20, items 9 and 10) -------------------

CLICKISH = textwrap.dedent("""
    def prompt(text, value_proc=None):
        if value_proc is None:
            value_proc = str
        while True:
            value = input(text)
            return value_proc(value)
""").lstrip()

CLASSY = textwrap.dedent("""
    import os


    class Session:
        trust = True

        def send(self, request):
            return request
""").lstrip()


@pytest.mark.parametrize("source, transforms", [
    pytest.param(CLASSY, [{"add_import": {"import": "import logging"}},
                          {"add_attribute": {"name": "log", "value": "logging.getLogger('x')"}}],
                 id="the spec's own add_import binds at module level"),
    pytest.param(CLASSY, [{"add_import": {"import": "import threading as th"}},
                          {"add_attribute": {"name": "lock", "value": "th.Lock()"}}],
                 id="an add_import alias binds its asname"),
    pytest.param(CLICKISH, [{"insert_before": {"anchor": "if value_proc is None: ...", "code": "_n = _s.count()"}},
                            {"loop_guard": {"loop": "while True: ...", "code": "_s.note(_n)"}}],
                 id="an earlier insert binds for a later loop guard"),
    pytest.param(CLICKISH, [{"insert_after": {"anchor": "value = input(text)", "code": "_v = value"}},
                            {"insert_before": {"anchor": "return value_proc(value)", "code": "_s.note(_v)"}}],
                 id="an earlier insert_after binds for a later insert_before"),
])
def test_names_the_spec_itself_binds_earlier_are_accepted(source, transforms):
    function = "Session" if source is CLASSY else "prompt"
    targets = [target(function, *[t for t in transforms if "add_import" not in t])]
    targets += [target(function, t, id=f"i{n}") for n, t in enumerate(transforms) if "add_import" in t]
    spec = make_spec(targets)
    plan = resolve(source, spec)
    assert not plan.errors, [r.detail for r in plan.errors]
    emit(plan, [spec])
    assert plan.problems == []


@pytest.mark.parametrize("source, transforms, why", [
    pytest.param(CLASSY, [{"add_attribute": {"name": "log", "value": "logging.getLogger('x')"}}],
                 "Session:4: logging", id="without the add_import the name is unbound"),
    pytest.param(CLICKISH, [{"loop_guard": {"loop": "while True: ...", "code": "_s.note(_n)"}},
                            {"insert_before": {"anchor": "return value_proc(value)", "code": "_n = 1"}}],
                 "prompt:4: _n", id="an insert that runs later binds nothing for code before it"),
    pytest.param(CLASSY, [{"add_attribute": {"name": "log", "value": "loging.getLogger('x')"}}],
                 "loging", id="a misspelt name in an add_attribute value"),
])
def test_names_bound_only_later_or_nowhere_are_refused(source, transforms, why):
    function = "Session" if source is CLASSY else "prompt"
    plan = resolve(source, make_spec([target(function, *transforms)]))
    assert [r.status for r in plan.errors] == ["unbound-name"]
    assert why in plan.errors[0].detail
