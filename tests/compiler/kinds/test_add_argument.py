"""``add_argument``: a keyword added to the one call matching a pattern, in the call's own layout."""
from __future__ import annotations

import pytest

from tests.compiler.kinds.cases import patched, status

PREAMBLE = "from m import prompt\n"   # before each case's source and text (the name the calls read)
CASES = [
    pytest.param("Option.prompt_for_value",
                 {"add_argument": {"call": "prompt(...)", "keyword": "err", "value": "True"}},
                 """
                 import typing as t

                 class Option:
                     def prompt_for_value(self, ctx):
                         prompt_kwargs: t.Any = {}
                         if isinstance(self.show_default, bool):
                             prompt_kwargs["show_default"] = self.show_default

                         return prompt(
                             self.prompt,
                             default=None,
                             **prompt_kwargs,
                         )
                 """,
                 """
                 import typing as t

                 class Option:
                     def prompt_for_value(self, ctx):
                         prompt_kwargs: t.Any = {}
                         if isinstance(self.show_default, bool):
                             prompt_kwargs["show_default"] = self.show_default

                         return prompt(
                             self.prompt,
                             default=None,
                             **prompt_kwargs,
                             err=True,
                         )
                 """, id="beside-a-mapping-annotated-and-given-literal-keys-by-subscript"),
]


REFUSALS = [
    pytest.param("f", {"add_argument": {"call": "g(...)", "keyword": "k", "value": "1"}}, "def f():\n    g(1, k=2)\n",
                 "not-applicable", id="a-call-that-passes-the-keyword-already"),
]


@pytest.mark.parametrize("body", [
    pytest.param("kw: dict = {'err': 1}\n", id="an-annotated-mapping-with-that-literal-key"),
    pytest.param("kw: dict = {}\nkw['err'] = 1\n", id="an-annotated-mapping-given-that-key-by-subscript"),
    pytest.param("kw: dict = make()\n", id="an-annotated-mapping-of-unknown-keys"),
])
def test_add_argument_refused_beside_a_mapping_that_may_hold_the_keyword(body):
    source = "def f():\n" + "".join(f"    {line}\n" for line in body.splitlines()) + "    return g(1, **kw)\n"
    assert status("f", {"add_argument": {"call": "g(...)", "keyword": "err", "value": "True"}}, source) \
        == "not-applicable"


def test_add_argument_beside_a_mapping_the_spec_acknowledges():
    source = "def f(opts):\n    return g(1, **opts)\n"
    transform = {"add_argument": {"call": "g(...)", "keyword": "err", "value": "True"}}
    assert status("f", transform, source) == "not-applicable"
    transform["add_argument"]["acknowledge"] = ["mapping-keyword"]
    assert patched("f", transform, "from m import g\n" + source) == \
        "from m import g\ndef f(opts):\n    return g(1, **opts, err=True)\n"
