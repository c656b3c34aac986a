"""The journal is untrusted input (issue 28, item 1): ``recover``, and so the next apply or unapply, acts on
it only once it is a journal patchspec wrote: its schema, and every path in it the canonical path of a file
under the root. Each attack below passed before (the journal's paths were joined to the root unchecked, its
keys read unchecked: a TypeError or KeyError, exit 3) and is now refused in one line naming the field and the
path, with nothing outside the root touched and every original byte kept."""
from __future__ import annotations

import json
import os

import pytest

from patchspec.cli import main
from patchspec.install import txn
from patchspec.install.state import RECORD_LIMIT, sha256
from tests.hostile.arena import VICTIM, arena, journal, one_line, run
from tests.state.toy import tree


def _op(journal: dict, **changes) -> dict:
    journal["ops"][0].update(changes)
    return journal


def _at(journal: dict, index: int, **changes) -> dict:
    journal["ops"][index].update(changes)
    return journal


def _kept(journal: dict, **saved: int | None) -> dict:
    """Op ``a`` (index 2, pkg/a.py) and ``b`` (3, pkg/b.py) keeping the old file of the op named, or none."""
    files = [journal["ops"][2]["saved"], journal["ops"][3]["saved"]]
    for name, index in {"a": 2, "b": 3}.items():
        if name in saved:
            journal["ops"][index]["saved"] = None if saved[name] is None else files[saved[name] - 2]
    return journal


def _empty_dir(ground, journal: dict) -> dict:
    (ground.root / "data").mkdir()         # the user's own empty directory: recover would remove it
    return {**journal, "dirs": [*journal["dirs"], "data"]}


def _outside(ground, rel: str) -> str:
    return os.path.relpath(ground.outside / rel, ground.root)


ATTACKS = {
    # name: (how the journal is changed, what the refusal names)
    "tmp out of the root": (lambda j, g: _op(j, tmp=_outside(g, "victim.py.patchspec-tmp")), "ops/0/tmp"),
    "path out with its sha": (lambda j, g: _op(j, path=_outside(g, "victim.py"), tmp=None, saved=None,
                                               new_sha256=sha256(VICTIM)), "ops/0/path"),
    "absolute path": (lambda j, g: _op(j, path=str(g.outside / "victim.py"), tmp=None, saved=None,
                                       new_sha256=sha256(VICTIM)), "ops/0/path"),
    "saved out of the root": (lambda j, g: _op(j, saved=_outside(g, "victim.py")), "ops/0/saved"),
    "dirs out of the root": (lambda j, g: {**j, "dirs": [_outside(g, "empty")]}, "dirs/0"),
    # ops 2 and 3 replace pkg/a.py and pkg/b.py, kept as txn/2 and txn/3: naming another op's kept file
    # put b.py's old bytes over a.py and a.py's were deleted with txn/ (each recovered, exit 0, before)
    "saved of another op": (lambda j, g: _kept(j, a=3, b=None), "ops/2/saved"),
    "two ops keep one file": (lambda j, g: _kept(j, b=2), "ops/3/saved"),
    "version 1, kept files swapped": (lambda j, g: _kept({**j, "version": 1}, a=3, b=2), "ops/3/saved"),
    "a path named twice": (lambda j, g: _at(j, 3, path="pkg/a.py", tmp="pkg/a.py.patchspec-tmp"), "ops/3/path"),
    "dirs the run did not create": (lambda j, g: _empty_dir(g, j), "dirs/4"),
    "tmp of another file": (lambda j, g: _op(j, tmp="pkg/__init__.py.patchspec-tmp"), "ops/0/tmp"),
    "integer path": (lambda j, g: _op(j, path=7), "ops/0/path"),
    "an op missing keys": (lambda j, g: {**j, "ops": [{"path": "pkg/a.py"}]}, "ops/0"),
    "an op that is a number": (lambda j, g: {**j, "ops": [1]}, "ops/0"),
    "no dirs key": (lambda j, g: {k: v for k, v in j.items() if k != "dirs"}, "'dirs' is a required property"),
    "a newer journal": (lambda j, g: {**j, "version": 99}, "format 99 is newer than this patchspec reads"),
}
RAW = {
    "nested 100,000 deep": (b'{"ops": ' + b"[" * 100_000 + b"]" * 100_000 + b', "dirs": []}', "nested deeper"),
    "not JSON": (b'{"ops": [', "unreadable"),
    "not UTF-8": (b'{"ops": [], "dirs": ["\xff"]}', "unreadable"),
}


@pytest.mark.parametrize("verb", ["recover", "apply", "unapply", "check", "status"])
@pytest.mark.parametrize("attack", [*ATTACKS, *RAW, "a sparse file over the limit"])
def test_a_damaged_or_hostile_journal_is_refused_naming_the_field(tmp_path, capsys, attack, verb):
    ground = arena(tmp_path, "interrupted")
    if attack == "a sparse file over the limit":       # refused by its size, never read into memory
        data, why = b"", f"more than the {RECORD_LIMIT} bytes any patchspec writes there"
    elif attack in RAW:
        data, why = RAW[attack]
    else:
        change, why = ATTACKS[attack]
        data = json.dumps(change(journal(ground), ground)).encode()
    (ground.root / txn.JOURNAL).write_bytes(data)
    if attack == "a sparse file over the limit":
        os.truncate(ground.root / txn.JOURNAL, RECORD_LIMIT + 1)
    before = tree(ground.root)
    argv = {"recover": ["recover"], "apply": ["apply", ground.spec, "--no-verify"], "unapply": ["unapply", "toy"],
            "check": ["check", ground.spec], "status": ["status"]}[verb]
    code, err = run(capsys, *argv, "--root", str(ground.root))
    assert code == 2 and why in one_line(err) and "journal" in err and "recover does not guess" in err, err
    assert f"delete {txn.JOURNAL}" in err
    ground.untouched()
    assert tree(ground.root) == before      # refused before anything acted: every byte where it was


def test_a_link_on_the_way_is_refused_in_or_out_of_the_root(tmp_path, capsys):
    """A kept old file swapped for a link (out of the root, or to another file in it), and a path through
    a directory link out of the root: each is a path ``commit`` never writes."""
    ground = arena(tmp_path, "interrupted")
    written = journal(ground)
    index, saved = next((i, op["saved"]) for i, op in enumerate(written["ops"]) if op["saved"])
    (ground.root / saved).unlink()
    (ground.root / saved).symlink_to(ground.outside / "victim.py")
    code, err = run(capsys, "recover", "--root", str(ground.root))
    assert code == 2 and f"journal ops/{index}/saved {saved!r}" in one_line(err) and "symbolic link" in err, err
    (ground.root / saved).unlink()
    (ground.root / saved).symlink_to(ground.root / "pkg/__init__.py")
    code, err = run(capsys, "recover", "--root", str(ground.root))
    assert code == 2 and "is not a path patchspec writes (it names 'pkg/__init__.py'" in one_line(err), err
    (ground.root / "linked").symlink_to(ground.outside / "pkg", target_is_directory=True)
    written["ops"][0].update(path="linked/a.py", tmp=None, saved=None, new_sha256=sha256(VICTIM))
    (ground.root / txn.JOURNAL).write_text(json.dumps(written))
    code, err = run(capsys, "apply", ground.spec, "--root", str(ground.root), "--no-verify")
    assert code == 2 and "journal ops/0/path 'linked/a.py'" in one_line(err), err
    ground.untouched()
    assert ground.pristine() == {}


def test_the_journal_patchspec_wrote_still_recovers_and_one_without_a_version_too(tmp_path, capsys):
    """The check refuses no journal patchspec writes: a real interrupted run rolls back byte for byte, and
    a journal written before journals had a version (the same shape) reads as version 1."""
    ground = arena(tmp_path, "interrupted")
    written = journal(ground)
    assert written["version"] == txn.JOURNAL_VERSION
    del written["version"]
    (ground.root / txn.JOURNAL).write_text(json.dumps(written))
    assert main(["recover", "--root", str(ground.root)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "recovered: rolled back an interrupted run" in out
    assert ground.pristine() == {} and not (ground.root / ".patchspec").exists()
    ground.untouched()


def test_a_state_directory_that_is_a_link_is_never_written_through(tmp_path, capsys):
    """``.patchspec`` a link out of the root: the lock, the journal and the kept files would all go there
    (and ``recover`` removes ``.patchspec/txn`` with everything in it). Every writing verb refuses it."""
    ground = arena(tmp_path)
    (ground.outside / "txn").mkdir()
    (ground.outside / "txn" / "keep").write_bytes(VICTIM)
    ground.before = tree(ground.outside)
    (ground.root / ".patchspec").symlink_to(ground.outside, target_is_directory=True)
    for argv in (["recover"], ["apply", ground.spec, "--no-verify"], ["unapply", "toy"], ["forget", "toy"]):
        code, err = run(capsys, *argv, "--root", str(ground.root))
        assert code == 2 and "symbolic link" in one_line(err), (argv, err)
    for argv in (["status"], ["check", ground.spec]):
        code, err = run(capsys, *argv, "--root", str(ground.root))
        assert code == 2 and "symbolic link" in one_line(err), (argv, err)
    ground.untouched()
    assert ground.pristine() == {}
