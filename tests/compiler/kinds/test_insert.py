"""``insert_before`` / ``insert_after``: one marked statement next to the one statement the anchor matches,
in the anchor's own block."""
from __future__ import annotations

import pytest

CASES = [
    pytest.param("send", {"insert_before": {"anchor": "response = request.send()", "code": "print(retries)"}},
                 """
                 def send(request, retries):
                     # one attempt
                     response = request.send()
                     return response
                 """,
                 """
                 def send(request, retries):
                     # one attempt
                     print(retries)  # patchspec: fix
                     response = request.send()
                     return response
                 """, id="insert_before-goes-below-the-comment-above-the-anchor"),
    pytest.param("parse", {"insert_after": {"anchor": "value = int(text)", "code": "assert value >= 0"}},
                 """
                 def parse(text):
                     if not text:
                         return None
                     else:
                         value = int(text)
                     return value
                 """,
                 """
                 def parse(text):
                     if not text:
                         return None
                     else:
                         value = int(text)
                         assert value >= 0  # patchspec: fix
                     return value
                 """, id="insert_after-stays-in-the-anchor-s-else-block"),
    # the anchor as a YAML block gives it: the file's indentation gone from the string's lines too (boltons)
    pytest.param("args2cmd", {"insert_before": {"anchor": '"""\n1) Arguments are delimited.\n   Quoted.\n"""',
                                                "code": "print(args)"}},
                 """
                 def args2cmd(args):
                     \"\"\"Escape *args*.\"\"\"
                     \"\"\"
                     1) Arguments are delimited.
                        Quoted.
                     \"\"\"
                     return " ".join(args)
                 """,
                 """
                 def args2cmd(args):
                     \"\"\"Escape *args*.\"\"\"
                     print(args)  # patchspec: fix
                     \"\"\"
                     1) Arguments are delimited.
                        Quoted.
                     \"\"\"
                     return " ".join(args)
                 """, id="insert_before-a-multi-line-string-anchored-without-the-file-s-indentation"),
]

REFUSALS = [
    pytest.param("f", {"insert_before": {"anchor": "z = h(...)", "code": "print(x)"}},
                 "def f(x):\n    y = g(x)\n    return y\n", "missing", id="an-anchor-the-function-lacks"),
    pytest.param("f", {"insert_after": {"anchor": "y = g(...)", "code": "print(y)"}},
                 "def f(x):\n    y = g(x)\n    y = g(y)\n    return y\n", "ambiguous",
                 id="an-anchor-matching-two-statements"),
    pytest.param("f", {"insert_before": {"anchor": '"""\na\n  b\n"""', "code": "print(x)"}},
                 'def f(x):\n    """\n    a\n    b\n    """\n    return x\n', "missing",
                 id="a-multi-line-string-whose-lines-differ-in-their-own-indentation"),
]
