"""Release names are names (issue 28, item 3): ``profile new NAME``, ``--release NAME``, ``--from NAME`` and
the distribution name and version ``init`` drafts its first profile's name from are refused in one line
when they hold a ``/``, are ``..`` or absolute, or their file is a link out of the releases directory.
Before, ``profile new ../../out/x`` wrote ``releases/../../out/x.yaml``, ``--release /any/dir/evil`` read
``/any/dir/evil.yaml`` and recorded the path as the release, and a dist-info ``Name: ../../../out/x``
steered where ``init`` writes."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.hostile.arena import arena, one_line, run
from tests.state.toy import tree

NAMES = {
    "up and out": lambda g: os.path.relpath(g.outside / "x", Path(g.spec).parent / "releases"),
    "absolute": lambda g: str(g.outside / "x"),
    "a path down": lambda g: "sub/x",
    "dot dot": lambda g: "..",
}


def _evil_profile(ground) -> None:
    """A profile that would match the root, outside the releases directory."""
    shutil.copy(Path(ground.spec).parent / "releases" / "r1.yaml", ground.outside / "x.yaml")
    ground.before = tree(ground.outside)


@pytest.mark.parametrize("name", NAMES)
def test_profile_new_writes_only_a_name_in_the_releases_directory(tmp_path, capsys, name):
    ground = arena(tmp_path)
    specs = tree(Path(ground.spec).parent)
    given = NAMES[name](ground)
    code, err = run(capsys, "profile", "new", given, "--root", str(ground.root), "--spec", ground.spec)
    assert code == 2 and f"release {given!r} is" in one_line(err) and "a name holds no '/'" in err, err
    assert tree(Path(ground.spec).parent) == specs
    ground.untouched()


@pytest.mark.parametrize("verb", ["apply", "check", "compile", "diff", "drift"])
@pytest.mark.parametrize("name", NAMES)
def test_release_that_is_a_path_is_never_read_nor_recorded(tmp_path, capsys, name, verb):
    ground = arena(tmp_path)
    _evil_profile(ground)
    before = tree(ground.root)
    given = NAMES[name](ground)
    code, err = run(capsys, verb, ground.spec, "--release", given, "--root", str(ground.root),
                    *(["--no-verify"] if verb == "apply" else []))
    assert code == 2 and f"release {given!r} is" in one_line(err), err
    assert tree(ground.root) == before
    ground.untouched()


def test_a_profile_that_is_a_link_out_of_the_releases_directory_is_not_followed(tmp_path, capsys):
    ground = arena(tmp_path)
    _evil_profile(ground)
    releases = Path(ground.spec).parent / "releases"
    (releases / "x.yaml").symlink_to(ground.outside / "x.yaml")
    before = tree(ground.root)
    code, err = run(capsys, "apply", ground.spec, "--release", "x", "--root", str(ground.root), "--no-verify")
    assert code == 2 and "x.yaml is a symbolic link out of its directory" in one_line(err), err
    code, err = run(capsys, "profile", "new", "x", "--force", "--root", str(ground.root), "--spec", ground.spec)
    assert code == 2 and "x.yaml is a symbolic link out of its directory" in one_line(err), err
    code, err = run(capsys, "profile", "new", "r3", "--from", "../x", "--root", str(ground.root), "--spec", ground.spec)
    assert code == 2 and "release '../x' is not a name" in one_line(err), err
    assert tree(ground.root) == before and not (releases / "r3.yaml").exists()
    ground.untouched()


@pytest.mark.parametrize("field, value", [("Name", "../../../outside/x"), ("Version", "1.0/../../../outside/x"),
                                          ("Name", "/abs")])
def test_init_drafts_a_profile_name_from_the_dist_info_only_when_it_is_a_name(tmp_path, capsys, field, value):
    ground = arena(tmp_path)
    metadata = next(ground.root.glob("pkg-*.dist-info")) / "METADATA"
    metadata.write_text(re.sub(f"^{field}: .*$", f"{field}: {value}", metadata.read_text(), count=1, flags=re.M))
    fix = tmp_path / "fix"
    code, err = run(capsys, "init", "hook", "--root", str(ground.root), "--target", "pkg/b.py:target",
                    "--dir", str(fix))
    assert code == 2 and "the first profile's name (from" in one_line(err) and "a name holds no '/'" in err, err
    assert not fix.exists()
    ground.untouched()


@pytest.mark.parametrize("damage", ["fifo", "not utf-8"])
@pytest.mark.parametrize("verb", ["apply", "check", "drift"])
def test_a_profile_beside_the_spec_that_is_a_fifo_or_not_text_is_refused_unread(tmp_path, capsys, damage, verb):
    """``--release auto`` reads every profile beside the spec: a FIFO named ``*.yaml`` blocked the read
    forever, bytes that are not UTF-8 were an internal error (exit 3)."""
    ground = arena(tmp_path)
    bad = Path(ground.spec).parent / "releases" / "r9.yaml"
    if damage == "fifo":
        os.mkfifo(bad)
    else:
        bad.write_bytes(b"release: r9\nformat: 1\n\xff\n")
    before = tree(ground.root)
    code, err = run(capsys, verb, ground.spec, "--root", str(ground.root),
                    *(["--no-verify"] if verb == "apply" else []))
    said = {"fifo": "release profile is not a regular file", "not utf-8": "release profile is not UTF-8 text"}
    assert code == 2 and said[damage] in one_line(err) and "r9.yaml" in err, err
    assert tree(ground.root) == before
    ground.untouched()
