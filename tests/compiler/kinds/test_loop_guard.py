"""``loop_guard``: one marked statement at the head of the body of the one loop the pattern matches."""
from __future__ import annotations

import pytest

CASES = [
    pytest.param("drain", {"loop_guard": {"loop": "for item in queue:\n    ...\nelse:\n    ...",
                                          "code": "if item is None: break"}},
                 """
                 def drain(queue, handle, done):
                     for item in queue:
                         handle(item)
                     else:
                         done()
                 """,
                 """
                 def drain(queue, handle, done):
                     for item in queue:
                         if item is None: break  # patchspec: fix
                         handle(item)
                     else:
                         done()
                 """, id="a-for-loop-with-an-else-keeps-its-else"),
    pytest.param("wait", {"loop_guard": {"loop": "while not flag.is_set(): ...", "code": "print(flag)"}},
                 """
                 def wait(flag):
                     while True:
                         while not flag.is_set():
                             flag.wait(1)
                         break
                 """,
                 """
                 def wait(flag):
                     while True:
                         while not flag.is_set():
                             print(flag)  # patchspec: fix
                             flag.wait(1)
                         break
                 """, id="the-inner-of-two-nested-while-loops"),
]

REFUSALS = [
    pytest.param("f", {"loop_guard": {"loop": "for x in q: ...", "code": "print(x)"}},
                 "def f(q):\n    for x in q: pass\n", "not-applicable", id="a-loop-body-on-its-header-line"),
    pytest.param("f", {"loop_guard": {"loop": "while busy(): ...", "code": "print(1)"}},
                 "def f(q):\n    for x in q:\n        pass\n", "missing", id="no-loop-matches"),
]
