"""``add_method``: ``name = alias.<with>`` at the end of a class body, spaced as the class spaces its
methods."""
from __future__ import annotations

import pytest

CASES = [
    pytest.param("Pair", {"add_method": {"name": "__iter__", "with": "pair_iter"}},
                 """
                 class Pair:
                     def first(self):
                         return 1
                     def second(self):
                         return 2
                 """,
                 """
                 {IMPORT}class Pair:
                     def first(self):
                         return 1
                     def second(self):
                         return 2
                     __iter__ = _s.pair_iter  # patchspec: demo
                 """, id="methods-without-blank-lines-get-none-before-it"),
    pytest.param("Outer.Inner", {"add_method": {"name": "close", "with": "close"}},
                 '''
                 class Outer:
                     class Inner:
                         """Nested."""

                         def open(self):
                             return self
                     size = 1
                 ''',
                 '''
                 {IMPORT}class Outer:
                     class Inner:
                         """Nested."""

                         def open(self):
                             return self

                         close = _s.close  # patchspec: demo
                     size = 1
                 ''', id="a-nested-class-ends-before-its-outer-class-goes-on"),
]

REFUSALS = [
    pytest.param("C", {"add_method": {"name": "keys", "with": "keys"}},
                 "class C:\n    def keys(self):\n        return []\n", "not-applicable",
                 id="a-name-the-class-defines-already"),
    pytest.param("f", {"add_method": {"name": "keys", "with": "keys"}}, "def f():\n    pass\n", "not-applicable",
                 id="a-function-target"),
]
