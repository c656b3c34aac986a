"""From two versions of a module to record's steps: each case named by what it shows (before, after,
the steps), and each refusal by what it refuses. No release is needed: the texts are written here."""
from __future__ import annotations

import textwrap

import pytest

from patchspec.record.diff import Unfaithful
from patchspec.record.targets import FileDraft
from patchspec.record.text import Text


def steps(before: str, after: str) -> list[tuple[str, str, dict]]:
    old, new = Text("pkg/mod.py", textwrap.dedent(before)), Text("pkg/mod.py", textwrap.dedent(after))
    draft = FileDraft(old, new)
    draft.members("", old.tree.body, new.tree.body)
    found = [(t.qualname, s.kind, {k: v for k, v in s.keys.items() if k != "full"})
             for t in draft.targets for s in t.steps]
    return found + [("", "add_import", {"import": i}) for i in draft.imports] + \
        [(n, "snippet", {}) for n in draft.snippet_names]


CASES = {
    "one_changed_expression_is_replaced_alone": (
        "def f(a, b):\n    if a and b:\n        g()\n",
        "def f(a, b):\n    if not h() and a and b:\n        g()\n",
        [("f", "replace", {"pattern": "a and b", "code": "not h() and a and b"})]),
    "an_expression_that_occurs_twice_widens_to_the_unique_one_around_it": (
        "def f(a):\n    x = a + 1\n    y = (a + 1) * 2\n",
        "def f(a):\n    x = a + 1\n    y = (a + 2) * 2\n",
        [("f", "replace", {"pattern": "(a + 1) * 2", "code": "(a + 2) * 2"})]),
    "a_deleted_statement_is_removed": (
        "def f():\n    a()\n    b()\n    c()\n",
        "def f():\n    a()\n    c()\n",
        [("f", "remove", {"anchor": "b()"})]),
    "an_added_statement_is_inserted_before_the_next_one": (
        "def f():\n    a()\n    c()\n",
        "def f():\n    a()\n    b()\n    c()\n",
        [("f", "insert_before", {"anchor": "c()", "code": "b()"})]),
    "an_insert_anchor_is_a_compound_statement_by_its_header": (
        "def f(x):\n    if x:\n        g()\n",
        "def f(x):\n    h()\n    if x:\n        g()\n",
        [("f", "insert_before", {"anchor": "if x: ...", "code": "h()"})]),
    "a_statement_that_occurs_twice_widens_to_its_enclosing_statement": (
        "def f(xs):\n    for x in xs:\n        g()\n    while xs:\n        g()\n",
        "def f(xs):\n    for x in xs:\n        g(x)\n    while xs:\n        g()\n",
        [("f", "replace", {"pattern": "for x in xs:\n    g()", "code": "for x in xs:\n    g(x)"})]),
    "statements_that_became_a_try_body_are_guarded": (
        "def f():\n    a()\n    b()\n",
        "def f():\n    try:\n        a()\n        b()\n    except OSError as err:\n        raise E() from err\n",
        [("f", "guard", {"statements": "a()\nb()",
                         "by": "try:\n    $$$BODY\nexcept OSError as err:\n    raise E() from err"})]),
    "statements_inside_a_new_with_are_guarded": (
        "def f():\n    a()\n",
        "def f():\n    with lock:\n        a()\n",
        [("f", "guard", {"statements": "a()", "by": "with lock:\n    $$$BODY"})]),
    "a_changed_default_is_set": (
        "def f(a, b=1, *, c=2):\n    pass\n",
        "def f(a, b=1, *, c=3):\n    pass\n",
        [("f", "set", {"parameter": "c", "value": "3"})]),
    "a_class_attribute_is_set": (
        "class K:\n    X = frozenset(['a'])\n",
        "class K:\n    X = frozenset(['a', 'b'])\n",
        [("K.X", "set", {"value": "frozenset(['a', 'b'])"})]),
    "a_module_level_name_is_set": (
        "import re\nPAT = re.compile('a')\n",
        "import re\nPAT = re.compile('[ab]')\n",
        [("PAT", "set", {"value": "re.compile('[ab]')"})]),
    "a_new_small_method_goes_right_after_the_one_upstream_put_it_after": (
        "class K:\n    def a(self):\n        pass\n",
        "class K:\n    def a(self):\n        pass\n\n    def b(self):\n        return 1\n",
        [("K.a", "add_statement", {"code": "def b(self):\n    return 1"})]),
    "a_new_method_of_twelve_lines_or_more_moves_to_the_snippets_as_an_add_method": (
        "class K:\n    def a(self):\n        pass\n",
        "class K:\n    def a(self):\n        pass\n\n    def b(self):\n" + "        x = 1\n" * 12,
        [("K", "add_method", {"name": "b", "with": "b"})]),
    "a_new_class_attribute_goes_right_after_its_neighbour": (
        "class K:\n    A = 1\n    def f(self):\n        pass\n",
        "class K:\n    A = 1\n    B = 2\n    def f(self):\n        pass\n",
        [("K.A", "add_statement", {"code": "B = 2"})]),
    "a_new_first_class_attribute_is_an_add_attribute": (
        "class K:\n    def f(self):\n        pass\n",
        "class K:\n    B = 2\n    def f(self):\n        pass\n",
        [("K", "add_attribute", {"name": "B", "value": "2"})]),
    "a_new_module_level_name_after_a_definition_goes_right_after_it": (
        "import re\n\ndef f():\n    pass\n",
        "import re\n\ndef f():\n    pass\n\n_R = re.compile('x')\n",
        [("f", "add_statement", {"code": "_R = re.compile('x')"})]),
    "a_new_import_is_an_add_import_and_a_new_first_module_name_moves_to_the_snippets": (
        "import os\n\ndef f():\n    pass\n",
        "import os\nimport re\n\n_R = re.compile('x')\n\ndef f():\n    pass\n",
        [("", "add_import", {"import": "import re"}), ("_R", "snippet", {})]),
    "an_added_else_branch_replaces_the_statement": (
        "def f(x):\n    if x:\n        a()\n",
        "def f(x):\n    if x:\n        a()\n    else:\n        b()\n",
        [("f", "replace", {"pattern": "if x:\n    a()", "code": "if x:\n    a()\nelse:\n    b()"})]),
    "the_worked_example_of_the_spec_language": (
        "class Cart:\n    LIMIT = 10\n    def add(self, item, qty=1):\n        if item and qty:\n"
                        "            log(item)\n            self.items.append(item)\n        self.save()\n",
        "class Cart:\n    LIMIT = 5\n    def add(self, item, qty=0):\n        if item and qty > 0:\n"
        "            self.items.append(item)\n            check(item)\n        try:\n            self.save()\n"
        "        except OSError:\n            pass\n    def clear(self):\n        self.items = []\n",
        [("Cart.LIMIT", "set", {"value": "5"}),
         ("Cart.add", "set", {"parameter": "qty", "value": "0"}),
         ("Cart.add", "replace", {"pattern": "item and qty", "code": "item and qty > 0"}),
         ("Cart.add", "remove", {"anchor": "log(item)"}),
         ("Cart.add", "insert_after", {"anchor": "self.items.append(item)", "code": "check(item)"}),
         ("Cart.add", "guard", {"statements": "self.save()", "by": "try:\n    $$$BODY\nexcept OSError:\n    pass"}),
         ("Cart.add", "add_statement", {"code": "def clear(self):\n    self.items = []"})]),
    "a_removed_definition_is_removed_on_the_target_naming_it": (
        "def f():\n    pass\ndef g():\n    pass\n", "def f():\n    pass\n",
        [("g", "remove", {"anchor": "def g():\n    pass"})]),
    "a_removed_module_level_name_is_removed_on_the_target_naming_it": (
        "import re\n_space_re = re.compile(r'\\s')\nX = 1\n", "import re\nX = 1\n",
        [("_space_re", "remove", {"anchor": "_space_re = re.compile(r'\\s')"})]),
    "comments_layout_and_docstrings_are_no_change": (
        'def f():\n    """Old."""\n    return g(1, 2)\n',
        'def f():\n    """New."""\n    # a comment\n    return g(\n        1,\n        2,\n    )\n',
        []),
}


@pytest.mark.parametrize("before, after, expected", list(CASES.values()), ids=list(CASES))
def test_steps(before, after, expected):
    assert steps(before, after) == expected


REFUSALS = {
    "a_changed_parameter_list": ("def f(a):\n    pass\n", "def f(a, b):\n    pass\n", "its parameters changed"),
    "a_changed_decorator": ("@d\ndef f():\n    pass\n", "@e\ndef f():\n    pass\n", "its decorators changed"),
    "a_new_module_level_statement_that_defines_nothing": ("X = 1\n", "X = 1\nprint(X)\n", "is added or rewritten"),
    "a_new_method_that_moves_and_reads_its_module": ("class K:\n    A = 1\n", "class K:\n    A = 1\n    def m(self):\n"
                                                   + "        x = 1\n" * 12 + "        return helper()\n",
                                           "reads helper of its module"),
    "a_statement_no_enclosing_statement_tells_apart": ("def f():\n    g()\n    g()\n", "def f():\n    g()\n    h()\n",
                                                       "occurs more than once"),
}


@pytest.mark.parametrize("before, after, said", list(REFUSALS.values()), ids=list(REFUSALS))
def test_refused(before, after, said):
    with pytest.raises(Unfaithful, match=said):
        steps(before, after)
