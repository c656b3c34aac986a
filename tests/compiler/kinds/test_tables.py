"""Every registered transform kind has its tables in this folder (see ``cases.py``): a before/after table
(``CASES``) and a refusal table (``REFUSALS``), so a kind added is its file plus its tables, and a kind
without them fails here by name. The tables run here: a kind that calls a snippet (``Kind.hook``) through
a spec with a snippet package, the others through one without; a module's ``PREAMBLE`` goes before each
of its sources and texts."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from patchspec.compiler.transforms import KINDS
from tests.compiler.kinds.cases import IMPORT, d, hooked, hooked_status, patched, status

HERE = Path(__file__).resolve().parent
MODULES = [importlib.import_module(f"tests.compiler.kinds.{path.stem}") for path in sorted(HERE.glob("test_*.py"))
           if path.stem != "test_tables"]


def kind_of(case) -> str:
    (kind,) = case.values[1]    # a case's transform is its second value: one key, the kind
    return kind


def rows(table: str) -> list:
    """Every case of ``table`` in this folder, with its module's preamble, named by its kind and its id."""
    return [pytest.param(getattr(module, "PREAMBLE", ""), *case.values, id=f"{kind_of(case)}-{case.id}")
            for module in MODULES for case in getattr(module, table, [])]


@pytest.mark.parametrize("table", ["CASES", "REFUSALS"])
def test_every_registered_kind_has_its_table(table):
    found = {kind_of(case) for module in MODULES for case in getattr(module, table, [])}
    missing = sorted(set(KINDS) - found)
    assert not missing, f"kinds without a {table} table in tests/compiler/kinds/: {', '.join(missing)}"
    assert found <= set(KINDS), f"{table} cases of kinds not registered: {sorted(found - set(KINDS))}"


@pytest.mark.parametrize("preamble,function,transform,source,expected", rows("CASES"))
def test_the_transform_gives_its_text(preamble, function, transform, source, expected):
    run = hooked if KINDS[next(iter(transform))].hook else patched
    assert run(function, transform, preamble + d(source)) == preamble + d(expected).replace("{IMPORT}", IMPORT)


@pytest.mark.parametrize("preamble,function,transform,source,what", rows("REFUSALS"))
def test_the_transform_is_refused(preamble, function, transform, source, what):
    run = hooked_status if KINDS[next(iter(transform))].hook else status
    assert run(function, transform, preamble + source) == what
