"""Refusals that say what is wrong in words (issue 28 item 7): one line at the spec's line:col, exit 2."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from patchspec.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "demo_spec"

CASES = {
    "absolute_file": ("file: vllm/sequence.py", "file: /etc/sequence.py",
                      r":20:5: targets/1/file: '/etc/sequence\.py' is an absolute path; a target file is a path "
                      r"relative to the root"),
    "not_a_python_file": ("file: vllm/sequence.py", "file: vllm/sequence.txt",
                          r":20:5: targets/1/file: 'vllm/sequence\.txt' is not a Python file"),
    "pattern_only_a_metavariable": ("      - wrap: {with: passthrough}", '      - replace: {pattern: "$X", by: "$X"}',
                                    r":18:19: pattern: '\$X' is only a metavariable: it matches every expression "
                                    r"of the target, so it names no one place"),
    "statements_only_a_metavariable": ("      - wrap: {with: passthrough}",
                                       '      - guard: {statements: "$$$XS", by: "if x:\n    $$$XS"}',
                                       r":18:\d+: statements: '\$\$\$XS' is only a metavariable: it matches every "
                                       r"run of statements"),
    "newer_spec_format": ("spec: 1", "spec: 2",
                          r":3:1: spec format 2 is newer than this patchspec reads \(1\); upgrade patchspec"),
    "control_character": ("alias: _demo", "alias: _de\x1fmo",
                          r":6:\d+: YAML: the control character U\+001F is not allowed in YAML"),
    "alias_a_keyword": ("alias: _demo", "alias: None",
                        r":6:33: snippets alias 'None' is a Python keyword, not a name"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_refusal_names_the_problem_at_its_line_and_column(tmp_path, capsys, case):
    old, new, message = CASES[case]
    shutil.copytree(FIXTURES, tmp_path / "spec")
    spec = tmp_path / "spec" / "demo.yaml"
    text = spec.read_text()
    assert text.count(old) == 1
    spec.write_text(text.replace(old, new))
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(r"demo\.yaml" + message, err), err
