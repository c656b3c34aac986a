"""``add_import``: a module-level import after the file's leading imports, none when the file has it."""
from __future__ import annotations

import pytest

CASES = [
    pytest.param("f", {"add_import": {"import": "import functools"}},
                 '''
                 """Doc."""
                 def f():
                     pass
                 ''',
                 '''
                 """Doc."""
                 import functools  # patchspec: fix
                 def f():
                     pass
                 ''', id="after-the-docstring-of-a-file-without-imports"),
    pytest.param("f", {"add_import": {"import": "from os import (path, sep)"}},
                 """
                 from os import path, sep
                 import sys
                 def f():
                     return sys
                 """,
                 """
                 from os import path, sep
                 import sys
                 def f():
                     return sys
                 """, id="the-same-import-in-another-layout-adds-nothing"),
]

REFUSALS = [
    pytest.param("f", {"add_import": {"import": "import os"}}, "def g():\n    pass\n", "target-missing",
                 id="the-target-it-is-listed-under-is-not-in-the-file"),
]
