"""``wrap``: the snippet's decorator on the target, innermost (under the target's own decorators)."""
from __future__ import annotations

import pytest

CASES = [
    pytest.param("handler", {"wrap": {"with": "traced"}},
                 """
                 import logging


                 def handler(event):
                     return event
                 """,
                 """
                 import logging
                 {IMPORT}

                 @_s.traced  # patchspec: demo
                 def handler(event):
                     return event
                 """, id="a-module-function-gets-the-decorator-the-import-after-the-file-s-own"),
    pytest.param("Loader.load", {"wrap": {"with": "traced"}},
                 """
                 class Loader:
                     @classmethod
                     def load(cls, path):
                         return cls()
                 """,
                 """
                 {IMPORT}class Loader:
                     @classmethod
                     @_s.traced  # patchspec: demo
                     def load(cls, path):
                         return cls()
                 """, id="under-a-classmethod-the-snippet-wraps-the-plain-function"),
]

REFUSALS = [
    pytest.param("C", {"wrap": {"with": "traced"}}, "class C:\n    x = 1\n", "not-applicable", id="a-class-target"),
]
