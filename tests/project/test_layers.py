"""The layers of docs/architecture.md are the code's: every module of ``patchspec/`` (the runtime snippets
aside) sits in exactly one row of the doc's layer table, imports only its own layer and those below it (a
function-level import counts), and no modules import each other in a circle."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "patchspec"
DOC = REPO / "docs" / "architecture.md"


def layer_table(text: str) -> list[tuple[str, list[str]]]:
    """The doc's layer table, top layer first: (layer, the modules and folders its row names)."""
    rows = []
    for line in text.split("## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("layer", "---") and not set(cells[0]) <= {"-", " "}:
            rows.append((cells[0], re.findall(r"`([\w/]+(?:\.py|/))`", cells[1])))
    return rows


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package but the code it ships for others (runtime snippets, the specs' own)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))
            if not {"runtime_snippets", "specs"} & set(p.parts)}


def imports(path: Path, known: set[str]) -> set[str]:
    """The patchspec modules a file imports, anywhere in it: ``from a import b`` is ``a.b`` when that is a
    module, else ``a``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in found if m in known and m != name}


def layer_of(name: str, table: list[tuple[str, list[str]]]) -> list[int]:
    """The rows whose modules or folders hold ``name`` (a folder's ``__init__`` is in the folder's row)."""
    rel = name.replace(".", "/").removeprefix("patchspec/")
    found = []
    for index, (_, entries) in enumerate(table):
        for entry in entries:
            if entry.endswith("/") and (rel + "/").startswith(entry) or entry == rel + ".py":
                found.append(index)
                break
    return found


def arrows_up(graph: dict[str, set[str]], table: list[tuple[str, list[str]]]) -> list[str]:
    """The imports of a row above the importer's (the table lists the top layer first)."""
    row = {name: layer_of(name, table)[0] for name in graph if name != "patchspec"}
    return sorted(f"{name} ({table[row[name]][0]}) -> {dep} ({table[row[dep]][0]})"
                  for name in row for dep in graph[name] if dep in row and row[dep] < row[name])


def circles(graph: dict[str, set[str]]) -> list[str]:
    """Each circle of imports a depth-first walk meets, as ``a -> b -> a``."""
    found, state = [], {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == "open":
                found.append(" -> ".join(path[path.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, path + [dep])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, set(found)) for name, path in found.items()}


@pytest.fixture(scope="module")
def table() -> list[tuple[str, list[str]]]:
    return layer_table(DOC.read_text(encoding="utf-8"))


def test_every_module_sits_in_one_layer_of_the_doc(graph, table):
    assert len(table) >= 5
    placed = {name: layer_of(name, table) for name in graph if name != "patchspec"}
    assert {name: rows for name, rows in placed.items() if len(rows) != 1} == {}


def test_every_module_the_doc_names_is_there(table):
    missing = [entry for _, entries in table for entry in entries if not (PACKAGE / entry).exists()]
    assert missing == []


def test_no_import_goes_up_a_layer(graph, table):
    assert arrows_up(graph, table) == []


def test_no_modules_import_each_other_in_a_circle(graph):
    """Imports at module level and inside functions alike."""
    assert circles(graph) == []


def test_the_checks_see_an_arrow_up_and_a_circle():
    table = layer_table("| layer | modules | knows |\n| --- | --- | --- |\n| top | `cli/`, `demo.py` | a |\n"
                        "| bottom | `errors.py` | b |\n")
    assert table == [("top", ["cli/", "demo.py"]), ("bottom", ["errors.py"])]
    graph = {"patchspec.cli.verbs": {"patchspec.errors"}, "patchspec.errors": {"patchspec.demo"},
             "patchspec.demo": {"patchspec.cli.verbs"}}
    assert arrows_up(graph, table) == ["patchspec.errors (bottom) -> patchspec.demo (top)"]
    assert circles(graph) == ["patchspec.cli.verbs -> patchspec.errors -> patchspec.demo -> patchspec.cli.verbs"]
