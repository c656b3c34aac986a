"""No function of ``patchspec/`` is longer than 60 lines (the code it ships for others aside: the runtime
snippets, the shipped specs' own snippet packages), so one screen reads each: a longer one is split into
pieces whose names say why."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "patchspec"
LIMIT = 60


def long_functions(package: Path, limit: int) -> list[str]:
    """``file:line name (N lines)`` for each function or method (nested ones too) over ``limit`` lines,
    from its ``def`` line to its last (its docstring counts, its decorators do not)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if {"runtime_snippets", "specs"} & set(path.relative_to(package).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_over_60_lines():
    too_long = long_functions(PACKAGE, LIMIT)
    assert not too_long, f"functions over {LIMIT} lines (split them):\n" + "\n".join(too_long)


def test_the_walk_finds_a_long_function_and_names_it(tmp_path):
    body = "".join(f"    x{n} = {n}\n" for n in range(LIMIT))
    (tmp_path / "mod.py").write_text("import os\n\n\nclass A:\n    def long(self):\n" + body.replace("    ", "        ")
                                     + "\n\ndef short():\n    return 1\n")
    found = long_functions(tmp_path, LIMIT)
    assert [f.rsplit(" ", 3)[1:] for f in found] == [["long", f"({LIMIT + 1}", "lines)"]]
    assert found[0].split(" ")[0].endswith("mod.py:5")
