"""The corpus driver's own parts on a package this test writes: what the survey reaches, what the
generator targets, and how a refusal's message is read. No PyPI, no patchspec verbs: fast."""
from __future__ import annotations

import textwrap

from tests.corpus import harness

FILES = {
    "toyco/__init__.py": """
        from ._impl import Box, Derived, helper, make
        from . import _impl as impl_module

        __all__ = ["Box", "Derived", "helper", "make"]
    """,
    "toyco/_impl.py": '''
        import functools


        def deco(fn):
            @functools.wraps(fn)
            def inner(*a, **k):
                return fn(*a, **k)
            return inner


        @deco
        def helper(x, scale=2):
            """Doc."""
            if x:
                return x * scale
            return 0


        def make():
            def local():
                return 1
            return local


        class Box:
            def __init__(self, v=None):
                self.v = v

            def size(self):
                return 1

            def _private(self):
                return 2

            @property
            def value(self):
                return self.v

            @value.setter
            def value(self, v):
                self.v = v

            @staticmethod
            def build(*, n=3):
                return Box(n)


        class Derived(Box):
            def size(self):
                return 2


        Derived.__module__ = "toyco"
    ''',
}


def write(root):
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def test_the_survey_reaches_public_definitions_and_the_generator_targets_each(tmp_path):
    root = write(tmp_path / "root")
    survey = harness.reach({"mode": "survey", "root": str(root), "top": "toyco", "depth": 1}, tmp_path)
    made = harness.Generator(root, survey).generate()
    targets = {(t.kind, t.function) for t in made}
    assert {("insert_before", "helper"), ("wrap", "helper"), ("set", "helper"),
            ("insert_before", "Box.__init__"), ("set", "Box.__init__"), ("wrap", "Box.size"),
            ("insert_before", "Box.value"), ("insert_before", "Box.value.setter"), ("set", "Box.build"),
            ("wrap", "Derived.size"), ("add_method", "Box"), ("add_method", "Derived")} <= targets
    # private members, closures made at run time, and a base's member every public class overrides: none
    assert not {f for _, f in targets if "_private" in f or "local" in f}
    # the insert goes before the first statement after the docstring, as written (a compound one whole)
    insert = next(t for t in made if t.kind == "insert_before" and t.function == "helper")
    assert insert.body["insert_before"]["anchor"] == "if x:\n    return x * scale"
    # a class whose __module__ was reassigned is found in the file its methods' code names
    assert next(t for t in made if t.function == "Derived").file == "toyco/_impl.py"
    # the set keeps the old default, counted: `_ch.dflt(key, 2)`
    setting = next(t for t in made if t.kind == "set" and t.function == "helper")
    assert setting.body["set"] == {"parameter": "scale", "value": f"_ch.dflt('corpus:{setting.id}', 2)"}
    # every path the survey gives leads from the top-level names
    assert ["Derived", "size"] in next(t for t in made if t.function == "Derived.size").check["paths"]


def test_a_refusal_that_asks_for_a_branch_is_answered_from_its_own_message(tmp_path):
    run = harness.Run(harness.packages()[0], tmp_path)
    t = harness.Transform("t0", "wrap", "m.py", "f", {}, {}, True, def_lines=(7, 7))
    message = ("target-ambiguous: f is defined in several branches: if sys.version_info >= (3, 11) (line 3), "
               "else (line 7); choose one with `branch:`")
    assert run.take_branch(t, message) and t.branch == "else"
    assert not run.take_branch(t, message)   # asked again: a refusal, not a loop
    bound = harness.Transform("t1", "wrap", "m.py", "K.f", {}, {}, True, def_lines=(50, 51))   # a method of K
    assert run.take_branch(bound, "target-ambiguous: K is bound in several branches: if TYPE_CHECKING (line 25: "
                                  "`from builtins import list as K`), else (line 42: class K); which one is live "
                                  "depends on which branch runs; choose one with `branch:`")
    assert bound.branch == "else"


def test_classes_are_messages_without_their_names():
    one = harness.shape("line(s) 71 carry no code in the live idna.core.check_bidi")
    other = harness.shape("line(s) 162 carry no code in the live six.MovedAttribute.__init__")
    assert one == other == "line(s) N carry no code in the live NAME"
