"""``profile new --allow-broken``: a release the fix cannot take still gets a profile, so it is paired and
every verb names the transform that fails instead of saying no profile matches."""
from __future__ import annotations

from pathlib import Path

from patchspec.cli import main
from tests.state.toy import RELEASES, tree, write_spec


def release_without_anchor(dest: Path) -> Path:
    """pkg 3.0: ``a.target`` lost the call the toy spec anchors on, ``b.target`` is as in 1.0."""
    files = {**RELEASES["1.0"], "pkg/a.py": "def target(self):\n    x = 3\n",
             "pkg-3.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: pkg\nVersion: 3.0\n",
             "pkg-3.0.dist-info/top_level.txt": "pkg\n"}
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    return dest


def test_a_broken_release_is_paired_and_every_verb_names_what_fails(tmp_path, capsys):
    root = release_without_anchor(tmp_path / "root")
    spec = write_spec(tmp_path / "spec")
    profile = Path(spec).parent / "releases" / "r3.yaml"

    assert main(["profile", "new", "r3", "--root", str(root), "--spec", spec]) == 4
    assert not profile.exists()
    capsys.readouterr()

    assert main(["profile", "new", "r3", "--root", str(root), "--spec", spec, "--allow-broken"]) == 4
    out = capsys.readouterr().out
    assert "needs a human: toy: anchor-missing: a#0 insert_before" in out
    assert f"wrote {profile} (with 1 transform(s) that do not hold)" in out
    text = profile.read_text()
    assert "# does not hold (no fingerprint; check and apply refuse it): toy a#0 insert_before target: " \
           "anchor-missing\n" in text
    assert "pkg: ==3.0" in text
    fingerprints = text.split("fingerprints:", 1)[1]
    assert "b: " in fingerprints and "a: " not in fingerprints

    before = tree(root)
    assert main(["check", spec, "--root", str(root)]) == 4
    out = capsys.readouterr().out
    assert "missing: toy a#0 insert_before target in pkg/a.py (anchor 'marker_call(...)': missing)" in out
    assert "would-apply: toy b#0 wrap" in out

    assert main(["apply", spec, "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "toy a#0 insert_before in target: " in err
    assert "nothing was written" in err and tree(root) == before

    assert main(["matrix", spec, "--root", str(root)]) == 4
    out = capsys.readouterr().out
    assert [line.split() for line in out.splitlines()[1:]] == [["a", "0", "insert_before", "anchor-missing"],
                                                              ["b", "0", "wrap", "unchanged"]]
