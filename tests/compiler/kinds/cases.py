"""One transform kind's before/after table, as pyupgrade's tests/features/*_test.py are: each case is a
source, one transform and the text it must become, byte for byte outside the changed lines."""
from __future__ import annotations

import textwrap

from patchspec.compiler import plan as planner
from patchspec.spec import build_spec
from tests.compiler.helpers import FILE


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
