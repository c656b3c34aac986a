"""One transform kind's tables, as pyupgrade's tests/features/*_test.py are: its before/after table
(``CASES``: a source, one transform and the text it must become, byte for byte outside the changed lines)
and its refusal table (``REFUSALS``: a source, one transform and the status it resolves to). Every
registered kind has both (``test_tables.py``)."""
from __future__ import annotations

import textwrap

from patchspec.compiler import plan as planner
from patchspec.spec import build_spec
from tests.compiler.helpers import FILE, make_spec, target

# what a spec with a snippet package (alias ``_s``, for the kinds that call one) adds to the file it patches
IMPORT = "from _patchspec_runtime import snips as _s  # patchspec: demo\n"


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def spec(function: str, *transforms: dict, name: str = "fix"):
    """A spec without snippets (the rewrite kinds call no hook) of one target in ``FILE``."""
    return build_spec({"spec": 1, "name": name, "summary": "t",
                       "targets": [{"id": "t", "file": FILE, "function": function, "transforms": list(transforms)}]},
                      f"{name}.yaml", "0" * 64)


def patched(function: str, transform: dict, source: str) -> str:
    """The file after the one transform, which must resolve and pass the lint."""
    one = spec(function, transform)
    plan = planner.resolve([one], {FILE: d(source)}.get, lambda pkg: True)
    assert not plan.errors, [r.detail for r in plan.errors]
    text = planner.emit(plan, [one])[FILE] if plan.files else d(source)
    assert not plan.problems, plan.problems
    return text


def status(function: str, transform: dict, source: str) -> str:
    """How the one transform resolves (for the refusals)."""
    plan = planner.resolve([spec(function, transform)], {FILE: source}.get, lambda pkg: True)
    return plan.resolved[0].status


def hooked(function: str, transform: dict, source: str) -> str:
    """The file after the one transform of a spec with a snippet package (``IMPORT`` is its first change)."""
    one = make_spec([target(function, transform)])
    plan = planner.resolve([one], {FILE: d(source)}.get, lambda pkg: True)
    assert not plan.errors, [r.detail for r in plan.errors]
    text = planner.emit(plan, [one])[FILE]
    assert not plan.problems, plan.problems
    return text


def hooked_status(function: str, transform: dict, source: str) -> str:
    """How the one transform of a spec with a snippet package resolves."""
    plan = planner.resolve([make_spec([target(function, transform)])], {FILE: source}.get, lambda pkg: True)
    return plan.resolved[0].status
