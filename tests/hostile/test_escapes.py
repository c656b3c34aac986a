"""Human output escaped (issue 28 item 6): a control character in anything a user controls (a target's
``file:``, a spec path, a name) is printed as its escape, so it cannot drive the terminal; ``--json``
carries the string as it is."""
from __future__ import annotations

import json

import pytest

from patchspec.cli import main
from patchspec.errors import printable
from tests.state.toy import SPEC, toy_root, write_spec

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u202e"   # set the window title, clear the screen, reverse the text
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\u202e"


@pytest.mark.parametrize(("raw", "shown"), [
    (HOSTILE, SHOWN), ("a\nb\rc", "a\\nb\\rc"), ("tab\tkept", "tab\tkept"), ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"),
    ("caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"), ("bad\udcffbyte", "bad\\udcffbyte"),
])
def test_printable_escapes_what_a_terminal_acts_on_and_keeps_the_rest(raw, shown):
    assert printable(raw) == shown


@pytest.fixture
def hostile_spec(tmp_path):
    """The toy spec with its second target's ``file:`` holding escape sequences; the root lacks the file."""
    spec = write_spec(tmp_path / "spec")
    text = SPEC.replace("file: pkg/b.py", f"file: {json.dumps(f'pkg/b{HOSTILE}.py')}")   # YAML's escapes
    assert text != SPEC
    (tmp_path / "spec" / "toy.yaml").write_text(text)
    return spec, toy_root(tmp_path / "root")


def test_check_prints_a_target_file_escaped(hostile_spec, capsys):
    spec, root = hostile_spec
    main(["check", spec, "--release", "r1", "--root", str(root)])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\u202e" not in out + err
    assert f"pkg/b{SHOWN}.py" in out


def test_json_carries_the_file_unescaped(hostile_spec, capsys):
    spec, root = hostile_spec
    main(["check", spec, "--release", "r1", "--root", str(root), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert f"pkg/b{HOSTILE}.py" in {r.get("file") for r in doc["results"]}


def test_an_error_naming_a_hostile_spec_path_is_one_escaped_line(tmp_path, capsys):
    assert main(["validate", str(tmp_path / f"x{HOSTILE}\n.yaml")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and len(err.splitlines()) == 1 and f"x{SHOWN}\\n.yaml" in err
