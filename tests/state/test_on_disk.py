"""The root on disk (interrupted runs, marked files, aliases, links, a full disk, an upgrade under a patched
root): each case reproduced the way it once failed, on the toy package (see toy.py)."""
from __future__ import annotations

import importlib.util
import os
import py_compile
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.errors import PatchspecError
from patchspec.install import txn
from patchspec.install.pristine import pristine_reader
from patchspec.install.root import Root
from patchspec.install.state import LOCK_FILE, STATE_FILE, load_state, locked
from patchspec.verbs import reading, writing
from tests.state.toy import RELEASES, in_child, pip_install, pip_uninstall, points, tree


def _kill_at(root, argv, kind: str, nth: int, tmp_path, action: str = "kill") -> int:
    """Stop ``argv`` at its ``nth`` (1-based) write point of ``kind``, found on a copy of the root."""
    probe = tmp_path / f"probe-{len(list(tmp_path.glob('probe-*')))}"
    shutil.copytree(root, probe)
    found = [n for n, k, _ in points([*argv[:-1], str(probe)], tmp_path / "trace") if k == kind]
    return in_child(argv, {txn.FAULT_ENV: f"{found[nth - 1]}:{action}"})


def _apply(spec, root):
    return ["apply", spec, "--root", str(root)]


def test_interrupted_apply_then_apply_again_keeps_the_originals(toy, tmp_path, capsys):
    root, spec = toy
    before = tree(root)
    assert _kill_at(root, _apply(spec, root), "rename", 4, tmp_path) == -9
    assert main(_apply(spec, root)) == 0
    assert capsys.readouterr().out.startswith("recovered: rolled back an interrupted run (")
    assert main(["unapply", "toy", "--root", str(root)]) == 0
    assert tree(root) == before


def test_a_marked_file_without_record_is_never_stored_as_pristine(toy, capsys):
    root, spec = toy
    before = tree(root)
    assert main(_apply(spec, root)) == 0
    patched = tree(root)
    (root / STATE_FILE).unlink()
    capsys.readouterr()
    assert main(_apply(spec, root)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pkg/a.py: carries a patchspec marker but no state record lists it" in err
    assert tree(root) == {k: v for k, v in patched.items() if k not in (STATE_FILE, LOCK_FILE)}
    assert before != patched


def test_no_moment_a_target_is_missing_and_check_answers_as_before(toy, tmp_path, capsys):
    root, spec = toy
    found = points(_apply(spec, shutil.copytree(root, tmp_path / "probe")), tmp_path / "trace")
    for number, kind, _ in found:
        killed = shutil.copytree(root, tmp_path / f"k{number}")
        assert in_child(_apply(spec, killed), {txn.FAULT_ENV: f"{number}:kill"}) == -9
        assert all((killed / rel).is_file() for rel in ("pkg/a.py", "pkg/b.py")), (number, kind)
        left = tree(killed)
        result = reading.check(spec, "auto", str(killed))
        assert result.code in (0, 1), (number, kind, result.problems)  # as before the run, or committed
        assert tree(killed) == left


def test_interrupted_unapply_is_finished_by_unapply(toy, tmp_path):
    root, spec = toy
    before = tree(root)
    writing.apply(spec, "auto", str(root))
    argv = ["unapply", "toy", "--root", str(root)]
    assert _kill_at(root, argv, "rename", 2, tmp_path) == -9  # one file restored, one still patched
    assert writing.unapply("toy", str(root)).notes[0].text.startswith("recovered:")
    assert tree(root) == before
    writing.apply(spec, "auto", str(root))
    assert _kill_at(root, argv, "rename", 2, tmp_path) == -9
    writing.unapply("toy", str(root), force=True)
    assert tree(root) == before


def test_ctrl_c_rolls_back_in_one_line_and_exits_130(toy, tmp_path, capfd):
    root, spec = toy
    before = tree(root)
    assert _kill_at(root, _apply(spec, root), "rename", 3, tmp_path, "int") == 130
    assert capfd.readouterr().err.endswith("patchspec: interrupted\n")
    assert tree(root) == before  # no temporary file, no journal, no state directory


def test_path_aliases_are_one_file(toy, tmp_path):
    root, spec = toy
    before = tree(root)
    Root_ = Root.open(root)
    assert {Root_.canonical(p) for p in ("pkg/a.py", "./pkg/a.py", "pkg//a.py", "pkg/x/../a.py")} == {"pkg/a.py"}
    for bad in ("../a.py", "pkg/../../a.py", "/etc/passwd"):
        with pytest.raises(PatchspecError, match="leaves the root"):
            Root_.canonical(bad)
    text = Path(spec).read_text().replace("name: toy", "name: toy2").replace("file: pkg/a.py", "file: ./pkg//a.py") \
        .replace('anchor: "marker_call(...)"', 'anchor: "x = 1"').replace("file: pkg/b.py", "file: pkg//b.py") \
        .replace("- wrap: {with: passthrough}", '- insert_before: {anchor: "return 2", code: "_p.stop(self, 3)"}')
    second = tmp_path / "toy-spec" / "toy2.yaml"
    second.write_text(text)
    writing.apply(spec, "auto", str(root))
    writing.apply(str(second), "auto", str(root))
    assert sorted(load_state(Root_).files) == ["pkg/a.py", "pkg/b.py"]
    writing.unapply("toy", str(root))
    writing.unapply("toy2", str(root))
    assert tree(root) == before


def test_a_runtime_file_patchspec_did_not_write_is_left_alone(toy, capsys):
    root, spec = toy
    mine = root / "_patchspec_runtime/demo_snips/__init__.py"
    mine.parent.mkdir(parents=True)
    mine.write_text("# mine\n")
    before = tree(root)
    assert main(_apply(spec, root)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "demo_snips/__init__.py: a file patchspec did not write" in err
    assert tree(root) == before
    mine.unlink()
    mine.parent.rmdir()
    writing.apply(spec, "auto", str(root))
    extra = root / "_patchspec_runtime/extra.py"
    extra.write_text("# mine too\n")
    writing.unapply("toy", str(root))
    assert extra.read_text() == "# mine too\n"


def test_a_planted_temporary_link_is_refused(toy, tmp_path, capsys):
    root, spec = toy
    outside = tmp_path / "outside.py"
    outside.write_text("# outside\n")
    (root / f"pkg/a.py{txn.TMP_SUFFIX}").symlink_to(outside)
    before = tree(root)
    assert main(_apply(spec, root)) == 2
    assert "is in the way of patchspec's temporary file" in capsys.readouterr().err
    assert outside.read_text() == "# outside\n" and tree(root) == before


def test_links_stay_links_and_owner_and_mode_are_kept(toy):
    root, spec = toy
    os.rename(root / "pkg/b.py", root / "pkg/b_impl.py")
    (root / "pkg/b.py").symlink_to("b_impl.py")
    os.chmod(root / "pkg/a.py", 0o640)
    os.chown(root / "pkg/a.py", 1234, 4321)
    before = tree(root)
    writing.apply(spec, "auto", str(root))
    assert (root / "pkg/b.py").is_symlink() and "# patchspec: toy" in (root / "pkg/b_impl.py").read_text()
    st = (root / "pkg/a.py").stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o640, 1234, 4321)
    writing.unapply("toy", str(root))
    assert tree(root) == before


def test_a_failed_verb_leaves_no_temporary_file_or_directory(toy, tmp_path, capsys):
    root, spec = toy
    before = tree(root)
    found = points(_apply(spec, shutil.copytree(root, tmp_path / "probe")), tmp_path / "trace")
    write = next(n for n, kind, path in found if kind == "write" and "_patchspec_runtime" in path)
    rename = next(n for n, kind, path in found if kind == "rename")
    for point, action in ((write, "enospc"), (rename, "eperm")):
        assert in_child(_apply(spec, root), {txn.FAULT_ENV: f"{point}:{action}"}) == 2
        assert tree(root) == before, action
    writing.apply(spec, "auto", str(root))
    snippet = root / "_patchspec_runtime/demo_snips/__init__.py"
    py_compile.compile(str(snippet), cfile=importlib.util.cache_from_source(str(snippet)))
    cache = snippet.parent / "__pycache__"
    assert cache.is_dir()
    patched = tree(root)
    found = points(["unapply", "toy", "--root", str(shutil.copytree(root, tmp_path / "probe2"))], tmp_path / "t2")
    last = [n for n, kind, _ in found if kind in ("rename", "unlink")][-1]
    assert in_child(["unapply", "toy", "--root", str(root)], {txn.FAULT_ENV: f"{last}:eperm"}) == 2
    assert tree(root) == patched and cache.is_dir()
    writing.unapply("toy", str(root))
    assert tree(root) == before


def _spec_variant(spec, tmp_path, old, new):
    path = tmp_path / "toy-spec" / "variant.yaml"
    path.write_bytes(Path(spec).read_bytes().replace(old, new))
    return str(path)


@pytest.mark.parametrize("case", ["non-utf8-spec", "alias-none", "state-shape", "target-is-a-directory",
                                  "fifo-target", "nan-lock-timeout"])
def test_one_line_errors_and_no_hangs(toy, tmp_path, capsys, case):
    root, spec = toy
    argv = _apply(spec, root)
    if case == "non-utf8-spec":
        argv[1] = _spec_variant(spec, tmp_path, b"summary: Two", b"summary: \xff Two")
    elif case == "alias-none":
        argv[1] = _spec_variant(spec, tmp_path, b"alias: _p", b"alias: None")
    elif case == "state-shape":
        writing.apply(spec, "auto", str(root))
        (root / STATE_FILE).write_text('{"version": 1, "specs": {"toy": {}}, "files": {}, "snippets": {}}')
        argv = ["unapply", "toy", "--root", str(root)]
    elif case == "target-is-a-directory":
        (root / "pkg/b.py").unlink()
        (root / "pkg/b.py").mkdir()
    elif case == "fifo-target":
        (root / "pkg/b.py").unlink()
        os.mkfifo(root / "pkg/b.py")
    before = tree(root)
    if case == "nan-lock-timeout":
        with locked(Root.open(root), 1), pytest.raises(PatchspecError, match="not a finite number"):
            writing.apply(spec, "auto", str(root), lock_timeout=float("nan"))
        return
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert tree(root) == before


def test_upgrade_under_a_patched_root(toy, capsys):
    root, spec = toy
    writing.apply(spec, "auto", str(root))
    pip_install(root, "2.0")
    upgraded = {k: v for k, v in tree(root).items()}
    assert main(["status", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "toy: applied for r1 (pkg 1.0); installed now: pkg 2.0" in out and "replaced: pkg/a.py" in out
    assert reading.check(spec, "auto", str(root)).code == 1  # would apply on the new release
    # unapply, even forced, never writes 1.0's bytes into 2.0: it drops the record and leaves the files
    probe = root.parent / "forced"
    shutil.copytree(root, probe)
    assert main(["unapply", "toy", "--root", str(probe), "--force"]) == 0
    assert "left as it is (replaced by pkg 2.0); record dropped: pkg/a.py" in capsys.readouterr().out
    assert tree(probe) == {k: v for k, v in upgraded.items()
                           if not k.startswith((".patchspec", "_patchspec_runtime"))}
    # apply re-applies onto 2.0 with its own profile; unapply then gives 2.0 back byte for byte
    assert main(_apply(spec, root)) == 0
    out = capsys.readouterr().out
    assert "dropped: pkg/a.py: replaced by pkg 2.0" in out and "patched: pkg/a.py" in out
    assert load_state(Root.open(root)).specs["toy"].release == "r2"
    assert "x = 2" in (root / "pkg/a.py").read_text()
    writing.unapply("toy", str(root))
    assert tree(root) == {k: v for k, v in upgraded.items() if not k.startswith((".patchspec", "_patchspec_runtime"))}


def test_a_patched_file_put_back_to_its_release_is_patched_again_by_apply(toy, capsys):
    """One file of an applied spec put back to its release's bytes (by hand, or a reinstall of its package):
    apply drops its stale record and patches it again, as the first apply wrote it (it used to say "already
    applied", commit nothing and leave the file unpatched)."""
    root, spec = toy
    before = tree(root)
    assert main(_apply(spec, root)) == 0
    patched = tree(root)
    (root / "pkg/a.py").write_text(RELEASES["1.0"]["pkg/a.py"])
    capsys.readouterr()
    assert main(_apply(spec, root)) == 0
    out = capsys.readouterr().out
    assert "dropped: pkg/a.py: replaced by pkg 1.0" in out and "patched: pkg/a.py" in out, out
    assert "already applied" not in out
    assert tree(root) == patched
    assert main(["status", "--root", str(root)]) == 0
    writing.unapply("toy", str(root))
    assert tree(root) == before


def test_pip_uninstall_then_status_and_forget(toy, capsys):
    root, spec = toy
    writing.apply(spec, "auto", str(root))
    pip_uninstall(root)
    assert main(["status", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "removed: pkg/a.py" in out and "installed now: pkg not installed" in out
    assert main(["forget", "toy", "--root", str(root)]) == 0
    assert sorted(p.name for p in root.iterdir()) == []


def test_drift_reads_the_installed_files_not_a_stale_copy(toy):
    root, spec = toy
    writing.apply(spec, "auto", str(root))
    pip_install(root, "2.0")
    r = Root.open(root)
    assert "x = 2" in pristine_reader(r, load_state(r))("pkg/a.py")


@pytest.fixture
def tiny_fs(tmp_path):
    """``tiny_fs(size, inodes)``: a small tmpfs to fill for real (needs root; skips otherwise)."""
    mounts = []

    def make(size: str, inodes: int):
        where = tmp_path / f"fs{len(mounts)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},nr_inodes={inodes}", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounts.append(where)
        return where
    yield make
    for where in mounts:
        subprocess.run(["umount", str(where)], check=True)


def _fill(directory, chunk: int) -> None:
    """Fill a file system until a write of ``chunk`` bytes fails."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * chunk)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_full_disk_leaves_nothing_behind(toy, tiny_fs, capsys):
    _, spec = toy
    disk = tiny_fs("256k", 1000)
    from tests.state.toy import toy_root
    root = toy_root(disk / "root")
    _fill(disk, 4096)
    os.truncate(disk / "filler", (disk / "filler").stat().st_size - 4 * 4096)  # room for a few pages only
    before = tree(root)
    assert main(_apply(spec, root)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err, err
    assert "patchspec-tmp" in err and "journal" not in err, err  # it failed midway, not at the first write
    assert tree(root) == before


def test_no_free_inodes_while_locking_is_one_line(toy, tiny_fs, capsys):
    _, spec = toy
    disk = tiny_fs("1m", 24)
    from tests.state.toy import toy_root
    root = toy_root(disk / "root")
    for n in range(100):
        try:
            (disk / f"i{n}").touch()
        except OSError:
            break
    before = tree(root)
    assert main(_apply(spec, root)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "Traceback" not in err, err
    assert tree(root) == before
