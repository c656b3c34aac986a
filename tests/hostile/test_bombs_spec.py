"""Input that used to kill or hang a verb (issue 28 item 5): each is refused in one line naming the file,
the line and column, and the limit, exit 2, in a child process (a SIGSEGV or an unbounded read must show
as what it is, not take the test run down), before any parser sees more than it can bound."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD = 120   # seconds: only so that a regression fails instead of hanging the run
DEMO = REPO / "tests" / "fixtures" / "demo_spec" / "demo.yaml"
CODE = 'code: "if _demo.stop(self, req_index): break"'


def patchspec(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "patchspec", *argv], capture_output=True, text=True, env=env,
                          timeout=HANG_GUARD)


def refused(done: subprocess.CompletedProcess, pattern: str) -> None:
    """Exit 2, and one line on stderr matching ``pattern``: no traceback, no signal death."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(pattern, lines[0]), lines[-3:]


def demo_with(tmp_path: Path, old: str, new: str) -> str:
    text = DEMO.read_text()
    assert text.count(old) == 1
    spec = tmp_path / "demo.yaml"
    spec.write_text(text.replace(old, new))
    return str(spec)


CODE_BOMBS = {
    "5000_nested_parentheses": ("(" * 5000 + "1" + ")" * 5000, r"brackets nested more than 50 deep"),
    "200000_plus_terms": ("1+" * 200_000 + "1", r"400,001 characters, more than the 20,000 patchspec parses"),
    "3000_plus_terms": ("1+" * 3_000 + "1", r"nested or chained more than 200 levels deep"),
    "1000_unary_minus": ("-" * 1000 + "1", r"nested or chained more than 200 levels deep"),
    "2000_attributes": ("a" + ".b" * 2000, r"nested or chained more than 200 levels deep"),
}


@pytest.mark.parametrize("verb", ["validate", "diff"])
@pytest.mark.parametrize("bomb", sorted(CODE_BOMBS))
def test_a_code_string_too_deep_or_long_is_refused_at_its_key(tmp_path, bomb, verb):
    code, message = CODE_BOMBS[bomb]
    spec = demo_with(tmp_path, CODE, f"code: {code!r}")
    argv = [verb, spec] + (["--root", str(tmp_path)] if verb == "diff" else [])
    refused(patchspec(*argv), rf"demo\.yaml:17:11: code: {message}")


def test_an_anchor_pattern_too_deep_is_refused_at_its_key(tmp_path):
    spec = demo_with(tmp_path, "      - wrap: {with: passthrough}",
                     "      - insert_before: {anchor: '" + "[" * 3000 + "]" * 3000 + "', code: 'pass'}")
    refused(patchspec("validate", spec), r"demo\.yaml:18:\d+: anchor: brackets nested more than 50 deep")


def _laughs() -> str:
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in "bcdefghi":
        lines.append(f"{level}: &{level} [" + ", ".join([f"*{chr(ord(level) - 1)}"] * 9) + "]")
    return "\n".join(lines) + "\n"


HEAD = "spec: 1\nname: bomb\nsummary: bomb\n"
# (the spec's text, what its one line says): each crashed, hung or ate memory before
SPEC_BOMBS = {
    "3000_flow_mappings_deep": (HEAD + "targets: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
                                r":4:\d+: YAML: nested more than 64 levels deep"),
    "20000_flow_mappings_deep": (HEAD + "targets: " + "{a: " * 20000 + "1" + "}" * 20000 + "\n",
                                 r":4:\d+: YAML: nested more than 64 levels deep"),
    "5000_block_sequences_deep": (HEAD + "targets:\n" + "- " * 5000 + "1\n",
                                  r":5:127: YAML: nested more than 64 levels deep"),
    "a_key_that_is_a_sequence": (HEAD + "? [a, b]\n: 1\n", r":4:3: YAML: a mapping key must be text, not a sequence"),
    "billion_laughs": (HEAD + _laughs(), r":9:4: YAML: aliases expand this to more than 100,000 nodes"),
    "an_alias_inside_its_node": (HEAD + "targets: &t [*t]\n", r":4:\d+: YAML: an alias refers to a node it is inside"),
    "600_KiB": (HEAD + "x: '" + "x" * (600 * 1024) + "'\n", r":1:1: larger than 512 KiB, the most patchspec reads"),
}


@pytest.mark.parametrize("bomb", sorted(SPEC_BOMBS))
def test_a_spec_too_deep_too_big_or_malformed_is_refused_before_it_is_built(tmp_path, bomb):
    text, message = SPEC_BOMBS[bomb]
    spec = tmp_path / "bomb.yaml"
    spec.write_text(text)
    refused(patchspec("validate", str(spec)), r"bomb\.yaml" + message)


@pytest.mark.parametrize("what", ["dev_zero", "fifo", "directory"])
def test_a_spec_path_that_is_no_regular_file_is_refused_unread(tmp_path, what):
    path = {"dev_zero": Path("/dev/zero"), "fifo": tmp_path / "fifo", "directory": tmp_path / "dir.yaml"}[what]
    if what == "fifo":
        os.mkfifo(path)
    elif what == "directory":
        path.mkdir()
    refused(patchspec("validate", str(path)), rf"{re.escape(str(path))}: spec is not a regular file; nothing was read")
