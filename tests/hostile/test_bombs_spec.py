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


@pytest.mark.parametrize("depth", [3_000, 20_000])
def test_a_spec_nested_thousands_deep_is_refused_at_the_first_level_too_deep(tmp_path, depth):
    spec = tmp_path / "deep.yaml"
    spec.write_text("spec: 1\nname: deep\nsummary: deep\ntargets: " + "{a: " * depth + "1" + "}" * depth + "\n")
    refused(patchspec("validate", str(spec)), r"deep\.yaml:4:\d+: YAML: nested more than 64 levels deep")


def test_a_block_spec_nested_thousands_deep_is_refused(tmp_path):
    spec = tmp_path / "deep.yaml"
    spec.write_text("spec: 1\nname: deep\nsummary: deep\ntargets:\n" + "- " * 5000 + "1\n")
    refused(patchspec("validate", str(spec)), r"deep\.yaml:5:127: YAML: nested more than 64 levels deep")


def test_a_key_that_is_a_sequence_is_refused_at_the_key(tmp_path):
    spec = tmp_path / "key.yaml"
    spec.write_text("spec: 1\nname: key\n? [a, b]\n: 1\n")
    refused(patchspec("validate", str(spec)), r"key\.yaml:3:3: YAML: a mapping key must be text, not a sequence")


def test_a_billion_laughs_is_refused_before_it_expands(tmp_path):
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        lines.append(f"{level}: &{level} [" + ", ".join([f"*{previous}"] * 9) + "]")
    spec = tmp_path / "laughs.yaml"
    spec.write_text("spec: 1\nname: laughs\n" + "\n".join(lines) + "\n")
    refused(patchspec("validate", str(spec)), r"laughs\.yaml:8:4: YAML: aliases expand this to more than 100,000 nodes")


def test_an_alias_inside_the_node_it_names_is_refused(tmp_path):
    spec = tmp_path / "loop.yaml"
    spec.write_text("spec: 1\nname: loop\ntargets: &t [*t]\n")
    refused(patchspec("validate", str(spec)), r"loop\.yaml:3:\d+: YAML: an alias refers to a node it is inside")


def test_a_spec_over_the_size_cap_is_refused_unread(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text("spec: 1\nname: big\nsummary: '" + "x" * (600 * 1024) + "'\n")
    refused(patchspec("validate", str(spec)), r"big\.yaml:1:1: larger than 512 KiB, the most patchspec reads")


@pytest.mark.parametrize("what", ["dev_zero", "fifo", "directory"])
def test_a_spec_path_that_is_no_regular_file_is_refused_unread(tmp_path, what):
    path = {"dev_zero": Path("/dev/zero"), "fifo": tmp_path / "fifo", "directory": tmp_path / "dir.yaml"}[what]
    if what == "fifo":
        os.mkfifo(path)
    elif what == "directory":
        path.mkdir()
    refused(patchspec("validate", str(path)), rf"{re.escape(str(path))}: spec is not a regular file; nothing was read")
