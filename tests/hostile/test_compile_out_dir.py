"""``compile -o OUT`` writes copies, never the root and never through a link (issue 28, item 2). Before,
``-o ROOT`` rewrote the installed files in place with no journal, state or pristine copy, and a link at
``OUT/pkg/a.py`` had the file it points to overwritten."""
from __future__ import annotations

from tests.hostile.arena import VICTIM, arena, one_line, run
from tests.state.toy import tree
from tests.verify_toy import install, write_spec


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


LATIN = "# -*- coding: latin-1 -*-\nGREETING = 'café'\n\n\ndef greet(s):\n    return GREETING + s\n"

LATIN_SPEC = '''spec: 1
name: vtoy
summary: A hook in a latin-1 module.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: greet
    file: vpkg/lat.py
    function: greet
    transforms:
      - insert_before: {anchor: "return GREETING + s", code: "s = s or 'né'"}
'''


def test_a_latin_1_file_is_written_under_out_in_its_own_encoding(tmp_path, capsys):
    """Before: the copy under OUT was UTF-8 under its latin-1 cookie ('é' as two bytes, read back 'Ã©')."""
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": ""})
    (site / "vpkg" / "lat.py").write_bytes(LATIN.encode("latin-1"))
    spec = write_spec(tmp_path / "spec", LATIN_SPEC, "")
    before = tree(site)
    code, err = run(capsys, "compile", spec, "--root", str(site), "-o", str(tmp_path / "out"))
    assert code == 0, err
    data = (tmp_path / "out" / "vpkg" / "lat.py").read_bytes()
    ours = [line for line in data.splitlines(keepends=True) if b"# patchspec: vtoy" in line]
    assert b"".join(line for line in data.splitlines(keepends=True) if line not in ours) == LATIN.encode("latin-1")
    assert "    s = s or 'né'  # patchspec: vtoy\n" in data.decode("latin-1")
    assert tree(site) == before
