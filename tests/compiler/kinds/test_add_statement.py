"""``add_statement``: statements at the target's own level, right after it."""
from __future__ import annotations

import pytest

CASES = [
    pytest.param("do_items", {"add_statement": {"code": '_space_re = re.compile(r"\\s", flags=re.ASCII)'}},
                 """
                 import re


                 def do_items(value):
                     yield from value.items()


                 @pass_eval_context
                 def do_xmlattr(d):
                     return _space_re.search(d)
                 """,
                 """
                 import re


                 def do_items(value):
                     yield from value.items()


                 _space_re = re.compile(r"\\s", flags=re.ASCII)  # patchspec: fix


                 @pass_eval_context
                 def do_xmlattr(d):
                     return _space_re.search(d)
                 """, id="after-a-module-level-definition-where-upstream-put-it"),
    pytest.param("TABLE", {"add_statement": {"code": "TABLE.update({3: 4})\nTABLE.pop(1)"}},
                 """
                 TABLE = {
                     1: 2,
                 }
                 X = 1
                 """,
                 """
                 TABLE = {
                     1: 2,
                 }
                 TABLE.update({3: 4})  # patchspec: fix
                 TABLE.pop(1)  # patchspec: fix
                 X = 1
                 """, id="after-a-module-level-assignment-several-lines-each-marked"),
    pytest.param("K.first", {"add_statement": {"code": "LIMIT = 3"}},
                 """
                 class K:
                     def first(self):
                         return 1

                     def second(self):
                         return LIMIT
                 """,
                 """
                 class K:
                     def first(self):
                         return 1

                     LIMIT = 3  # patchspec: fix

                     def second(self):
                         return LIMIT
                 """, id="after-a-method-in-its-class"),
]


REFUSALS = [
    pytest.param("f", {"add_statement": {"code": "X = undefined_name"}}, "def f():\n    pass\n", "unbound-name",
                 id="code-reading-a-name-nothing-binds"),
]
