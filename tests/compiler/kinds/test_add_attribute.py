"""``add_attribute``: ``name = value`` at the end of a class body; the rules it keeps (a name the body
captured or binds already) refuse a spec unless it acknowledges them by name."""
from __future__ import annotations

import pytest

from patchspec.compiler import plan as planner
from tests.compiler.helpers import FILE
from tests.compiler.kinds.cases import d, patched, spec

CASES = [
    pytest.param("Session", {"add_attribute": {"name": "trust_env", "value": "False"}},
                 """
                 class Session:
                     timeout = 10

                     def send(self, request):
                         return request
                 """,
                 """
                 class Session:
                     timeout = 10

                     def send(self, request):
                         return request
                     trust_env = False  # patchspec: fix
                 """, id="at-the-end-of-the-class-after-its-last-method"),
    pytest.param("Config", {"add_attribute": {"name": "LIMIT", "value": "64"}},
                 '''
                 class Config:
                     """Settings."""
                 ''',
                 '''
                 class Config:
                     """Settings."""
                     LIMIT = 64  # patchspec: fix
                 ''', id="a-class-of-only-a-docstring"),
]

REFUSALS = [
    pytest.param("C", {"add_attribute": {"name": "x", "value": "2"}}, "class C:\n    x = 1\n", "not-applicable",
                 id="a-name-the-class-binds-already"),
]


RETRY = d("""
          class Retry:
              DEFAULT = frozenset(["Authorization"])

              def __init__(self, remove=DEFAULT):
                  self.remove = remove
          """)


@pytest.mark.parametrize("acknowledge, said", [
    pytest.param([], "`acknowledge: [captured-default, existing-member]`", id="refused-naming-both-rules"),
    pytest.param(["captured-default"], "`acknowledge: [existing-member]`", id="one-acknowledged-names-the-other"),
])
def test_add_attribute_refused_names_the_key_that_lets_it_through(acknowledge, said):
    one = spec("Retry", {"add_attribute": {"name": "DEFAULT", "value": 'frozenset(["Cookie"])',
                                           **({"acknowledge": acknowledge} if acknowledge else {})}})
    row, = planner.resolve([one], {FILE: RETRY}.get, lambda pkg: True).resolved
    assert row.status == "not-applicable" and said in row.detail, row.detail


def test_add_attribute_of_a_captured_name_the_spec_acknowledges():
    transform = {"add_attribute": {"name": "DEFAULT", "value": 'frozenset(["Cookie"])',
                                   "acknowledge": ["captured-default", "existing-member"]}}
    assert patched("Retry", transform, RETRY) == RETRY + '    DEFAULT = frozenset(["Cookie"])  # patchspec: fix\n'
    one = spec("Retry", transform)
    row, = planner.resolve([one], {FILE: RETRY}.get, lambda pkg: True).resolved
    assert "acknowledged captured-default: Retry's body reads DEFAULT at line 4" in row.note
