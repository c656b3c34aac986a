"""Rewrites of issue 27 on the real releases they were seen on (fetched from PyPI into the cache as the
other tiers fetch them): each spec resolves, passes the lint and emits what it says, and what it refuses
is refused before anything is written."""
from __future__ import annotations

from pathlib import Path

import pytest

from patchspec.compiler import plan as planner
from patchspec.releases.cache import pypi_root
from patchspec.spec import build_spec


def _spec(file: str, function: str, *transforms: dict):
    return build_spec({"spec": 1, "name": "fix", "summary": "t",
                       "targets": [{"id": "t", "file": file, "function": function, "transforms": list(transforms)}]},
                      "fix.yaml", "0" * 64)


def _emit(root: Path, spec) -> dict[str, str]:
    read = lambda rel: (root / rel).read_text() if (root / rel).is_file() else None
    plan = planner.resolve([spec], read, lambda pkg: (root / pkg).is_dir())
    assert not plan.errors, [r.detail for r in plan.errors]
    texts = planner.emit(plan, [spec])
    assert not plan.problems, plan.problems
    return texts


def test_click_8_2_1_a_keyword_beside_an_annotated_mapping_given_literal_keys():
    """click 8.2.1 ``Option.prompt_for_value`` builds ``prompt_kwargs: t.Any = {}`` and sets
    ``prompt_kwargs["show_default"]``: ``err`` cannot arrive twice (refused before)."""
    root = pypi_root("click==8.2.1")
    text = _emit(root, _spec("click/core.py", "Option.prompt_for_value",
                             {"add_argument": {"call": "prompt(...)", "keyword": "err", "value": "True"}}))
    compile(text["click/core.py"], "core.py", "exec")
    assert "            **prompt_kwargs,\n            err=True,\n        )\n" in text["click/core.py"]


@pytest.mark.parametrize("release", ["markupsafe==2.1.5", "markupsafe==3.0.2"])
def test_markupsafe_a_metavariable_argument_in_replace(release):
    """``Markup.unescape`` returns ``unescape(str(self))``: ``$S`` written back (refused before as the
    unbound ``__ps_one_S__0``)."""
    root = pypi_root(release)
    text = _emit(root, _spec("markupsafe/__init__.py", "Markup.unescape",
                             {"replace": {"pattern": "unescape(str($S))",
                                          "by": "unescape(str($S)).replace('\\x00', '')"}}))
    assert "return unescape(str(self)).replace('\\x00', '')  # patchspec: fix\n" in text["markupsafe/__init__.py"]
