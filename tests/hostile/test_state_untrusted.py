"""The state record is untrusted input too (issue 28, item 1): parsed and schema-checked whatever its bytes
or nesting, and every path it names under the root checked by the one safe-path rule before any verb acts
on it. Before, one nested 100,000 deep was a RecursionError (exit 3)."""
from __future__ import annotations

import json
import os

import pytest

from patchspec.install.state import RECORD_LIMIT, STATE_FILE
from tests.hostile.arena import VICTIM, arena, one_line, run
from tests.state.toy import tree

VERBS = {"apply": lambda g: ["apply", g.spec, "--no-verify"], "unapply": lambda g: ["unapply", "toy"],
         "forget": lambda g: ["forget", "toy"], "check": lambda g: ["check", g.spec], "status": lambda g: ["status"]}


def _outside(ground, rel: str) -> str:
    return os.path.relpath(ground.outside / rel, ground.root)


def _rename_file(record: dict, old: str, new: str) -> dict:
    record["files"][new] = record["files"].pop(old)
    for rec in record["specs"].values():
        rec["files"] = [new if f == old else f for f in rec["files"]]
    return record


ATTACKS = {
    "a file out of the root": (lambda r, g: _rename_file(r, "pkg/a.py", _outside(g, "pkg/a.py")),
                               "state record files/../outside/pkg/a.py '../outside/pkg/a.py' leaves the root"),
    "an absolute file": (lambda r, g: _rename_file(r, "pkg/a.py", str(g.outside / "pkg/a.py")),
                         "is an absolute path"),
    "a snippet out of the root": (
        lambda r, g: {**r, "snippets": {_outside(g, "victim.py"): next(iter(r["snippets"].values())),
                                        **r["snippets"]}}, "state record snippets/../outside/victim.py"),
    "a release that is a path": (lambda r, g: {**r, "specs": {"toy": {**r["specs"]["toy"], "release": "../../x"}}},
                                 "specs/toy/release"),
    "a list for the specs": (lambda r, g: {**r, "specs": [1]}, "is not of type 'object'"),
}


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("attack", [*ATTACKS, "nested 100,000 deep", "not UTF-8", "a sparse file over the limit"])
def test_a_hostile_state_record_is_refused_in_one_line(tmp_path, capsys, attack, verb):
    ground = arena(tmp_path, "applied")
    record = ground.root / STATE_FILE
    if attack == "nested 100,000 deep":
        record.write_bytes(b'{"version": 2, "specs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        why = "nested deeper than any patchspec writes"
    elif attack == "a sparse file over the limit":        # refused by its size, never read into memory
        with open(record, "r+b") as handle:
            handle.truncate(RECORD_LIMIT + 1)
        why = f"more than the {RECORD_LIMIT} bytes any patchspec writes there"
    elif attack == "not UTF-8":
        record.write_bytes(b'{"version": 2, "specs": {"\xff": 1}}')
        why = "state record is unreadable"
    else:
        change, why = ATTACKS[attack]
        record.write_text(json.dumps(change(json.loads(record.read_text()), ground)))
    before = tree(ground.root)
    code, err = run(capsys, *VERBS[verb](ground), "--root", str(ground.root))
    assert code == 2 and why in one_line(err) and STATE_FILE in err, err
    ground.untouched()
    assert tree(ground.root) == before


def test_a_state_record_that_is_a_link_out_of_the_root_is_neither_read_nor_written(tmp_path, capsys):
    ground = arena(tmp_path)
    (ground.root / ".patchspec").mkdir()
    (ground.root / STATE_FILE).symlink_to(ground.outside / "victim.py")
    for argv in (["status"], ["apply", ground.spec, "--no-verify"], ["check", ground.spec]):
        code, err = run(capsys, *argv, "--root", str(ground.root))
        assert code == 2 and "symbolic link out of the root" in one_line(err), (argv, err)
    ground.untouched()
    assert (ground.outside / "victim.py").read_bytes() == VICTIM and ground.pristine() == {}
