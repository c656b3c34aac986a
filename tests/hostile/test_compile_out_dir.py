"""``compile -o OUT`` writes copies, never the root and never through a link (issue 28, item 2). Before,
``-o ROOT`` rewrote the installed files in place with no journal, state or pristine copy, and a link at
``OUT/pkg/a.py`` had the file it points to overwritten."""
from __future__ import annotations

from tests.hostile.arena import VICTIM, arena, one_line, run
from tests.state.toy import tree


def _compile(capsys, ground, out) -> tuple[int, str]:
    return run(capsys, "compile", ground.spec, "--root", str(ground.root), "-o", str(out))


def test_an_out_inside_the_root_or_equal_to_it_is_refused(tmp_path, capsys):
    ground = arena(tmp_path)
    before = tree(ground.root)
    (tmp_path / "to-root").symlink_to(ground.root, target_is_directory=True)
    for out in (ground.root, ground.root / "pkg", ground.root / "new" / "dir", tmp_path / "to-root"):
        code, err = _compile(capsys, ground, out)
        assert code == 2 and "is inside the root" in one_line(err) and "nothing was written" in err, (out, err)
    assert tree(ground.root) == before
    ground.untouched()


def test_no_file_is_written_through_a_link(tmp_path, capsys):
    ground = arena(tmp_path)
    out = tmp_path / "out"
    (out / "pkg").mkdir(parents=True)
    (out / "pkg" / "a.py").symlink_to(ground.outside / "victim.py")
    code, err = _compile(capsys, ground, out)
    assert code == 0 and err == "", err
    assert (ground.outside / "victim.py").read_bytes() == VICTIM
    assert not (out / "pkg" / "a.py").is_symlink() and "# patchspec: toy" in (out / "pkg" / "a.py").read_text()
    ground.untouched()


def test_a_directory_link_out_of_out_is_refused_before_anything_is_written(tmp_path, capsys):
    ground = arena(tmp_path)
    before = tree(ground.root)
    for target in (ground.outside / "pkg", ground.root / "pkg"):
        out = tmp_path / f"out-{target.parent.name}"
        out.mkdir()
        (out / "pkg").symlink_to(target, target_is_directory=True)
        code, err = _compile(capsys, ground, out)
        assert code == 2 and "pkg is a symbolic link out of -o" in one_line(err), err
        assert sorted(p.name for p in out.iterdir()) == ["pkg"]
    assert tree(ground.root) == before
    ground.untouched()
