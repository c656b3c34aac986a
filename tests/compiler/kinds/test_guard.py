"""``guard``: a run of statements put inside a ``try`` or ``with``."""
from __future__ import annotations

import pytest

CASES = [
    pytest.param("T.flatten", {"guard": {"statements": "for token in self.tokens: ...",
                                         "by": "try:\n    $$$BODY\nexcept RecursionError as err:\n"
                                               "    raise ValueError('deep') from err\n"}},
                 '''
                 class T:
                     def flatten(self):
                         """Doc."""
                         for token in self.tokens:
                             if token.is_group:
                                 yield from token.flatten()
                             else:
                                 yield token
                 ''',
                 '''
                 class T:
                     def flatten(self):
                         """Doc."""
                         try:  # patchspec: fix
                             for token in self.tokens:
                                 if token.is_group:
                                     yield from token.flatten()
                                 else:
                                     yield token
                         except RecursionError as err:  # patchspec: fix
                             raise ValueError('deep') from err  # patchspec: fix
                 ''', id="guard-a-loop-in-try-except"),
    pytest.param("f", {"guard": {"statements": "a = open_it()\n...\nreturn b",
                                 "by": "with lock:\n    $$$BODY\n"}},
                 """
                 def f(lock):
                     x = 0
                     # take it
                     a = open_it()
                     b = a.read()
                     return b
                 """,
                 """
                 def f(lock):
                     x = 0
                     # take it
                     with lock:  # patchspec: fix
                         a = open_it()
                         b = a.read()
                         return b
                 """, id="guard-a-run-of-statements-in-with"),
]


REFUSALS = [
    pytest.param("f", {"guard": {"statements": "x = 1", "by": "if y:\n    $$$BODY\n"}}, "def f():\n    x = 1\n",
                 "not-applicable", id="a-guard-is-a-try-or-a-with"),
]
