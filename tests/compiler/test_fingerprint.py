"""Fingerprints see meaning, not layout; statement sequences give similarity and changed ranges."""
from __future__ import annotations

import textwrap

import pytest

from patchspec.compiler import fingerprint
from patchspec.compiler.source import SourceFile

BASE = '''
class Runner:
    """The runner."""

    limit = 4

    @staticmethod
    def step(self, batch, *, budget=8):
        """Run one step."""
        total = 0  # running sum
        for item in batch:
            if item.size > budget:
                continue
            total += item.size * 2
        return total, 'done', f'{total:>{budget}}'
'''


def fp(text: str, qualname: str = "Runner.step") -> str:
    source = SourceFile("m.py", textwrap.dedent(text))
    return fingerprint.of_definition(source, source.find(qualname))


@pytest.mark.parametrize("variant", [
    # comments, blank lines, docstrings
    BASE.replace("  # running sum", "").replace('"""Run one step."""', '"""Run one step, differently."""'),
    BASE.replace('        """Run one step."""\n', ""),
    BASE.replace("        total = 0", "\n        # start\n        total = 0"),
    # whitespace, line breaks, parentheses, trailing commas, quotes
    BASE.replace("item.size * 2", "(item.size*2)").replace("'done'", '"done"'),
    BASE.replace("def step(self, batch, *, budget=8):", "def step(\n        self,\n        batch,\n        *,\n"
                 "        budget = 8,\n    ):"),
    BASE.replace("return total, 'done', f'{total:>{budget}}'",
                 "return (\n            total,\n            'done',\n            f'{total:>{budget}}',\n        )"),
    BASE.replace("    ", "  "),
    BASE.replace("budget=8", "budget=0x8"),
    BASE.replace("f'{total:>{budget}}'", 'F"{total:>{budget}}"'),
    # one-line bodies and semicolons, as a formatter splits them
    BASE.replace("if item.size > budget:\n                continue", "if item.size > budget: continue"),
])
def test_layout_leaves_the_fingerprint(variant):
    assert variant != BASE
    assert fp(variant) == fp(BASE)


@pytest.mark.parametrize("old, new", [
    ("item.size > budget", "item.size >= budget"),
    ("item.size * 2", "item.size * 3"),
    ("'done'", "'Done'"),
    ("continue", "break"),
    ("budget=8", "budget=9"),
    ("f'{total:>{budget}}'", "f'{total:<{budget}}'"),
    ("f'{total:>{budget}}'", "rf'{total:>{budget}}'"),
    ("def step", "async def step"),
    ("for item in batch", "async for item in batch"),
    ("@staticmethod", "@classmethod"),
    ("total += item.size * 2", "total += item.size * 2\n            total -= 1"),
])
def test_meaning_moves_the_fingerprint(old, new):
    assert BASE.count(old) == 1
    assert fp(BASE.replace(old, new)) != fp(BASE)


def test_semicolons_and_one_line_bodies_are_layout():
    """A formatter splits ``a; b`` and ``if x: return y`` into lines."""
    joined = 'def f(x):\n    """Doc."""; y = 1; z = 2\n    if x: return y\n    return z\n'
    split = "def f(x):\n    y = 1\n    z = 2\n    if x:\n        return y\n    return z\n"
    assert fp(joined, "f") == fp(split, "f")
    assert fp(joined.replace("z = 2", "z = 3"), "f") != fp(split, "f")


def test_a_class_fingerprint_covers_its_own_level_only():
    assert fp(BASE.replace("item.size * 2", "item.size * 3"), "Runner") == fp(BASE, "Runner")
    assert fp(BASE.replace("limit = 4", "limit = 5"), "Runner") != fp(BASE, "Runner")
    assert fp(BASE.replace("budget=8", "budget=9"), "Runner") != fp(BASE, "Runner")
    assert fp(BASE.replace("class Runner:", "class Runner(Base):"), "Runner") != fp(BASE, "Runner")


def statements(text: str, qualname: str = "Runner.step"):
    source = SourceFile("m.py", textwrap.dedent(text))
    return fingerprint.statements(source.find(qualname))


def test_changes_are_ranges_of_the_current_lines():
    changed = BASE.replace("item.size * 2", "item.size * 3").replace("        for", "        seen = []\n"
                                                                        "        for")
    assert fingerprint.changes(statements(BASE), statements(changed)) == [
        fingerprint.Change("insert", 11, 11), fingerprint.Change("replace", 15, 15)]
    removed = BASE.replace("            if item.size > budget:\n                continue\n", "")
    assert fingerprint.changes(statements(BASE), statements(removed)) == [
        fingerprint.Change("delete", 12, 12)]
    assert fingerprint.changes(statements(BASE), statements(BASE.replace("    ", "  "))) == []


def test_similarity_is_over_statements():
    renamed = BASE.replace("def step", "def advance")
    assert fingerprint.similarity(statements(BASE), statements(renamed, "Runner.advance")) > 0.8
    other = "def other(x):\n    return x\n"
    assert fingerprint.similarity(statements(BASE), statements(other, "other")) < 0.3
