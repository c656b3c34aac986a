"""The hostile tier's ground: a toy root as pip lays it out (run as whoever runs the tests, often root),
its spec, and a sibling directory ``outside`` holding files an attack would reach for. Every attack asserts
that nothing outside the root was created, changed or deleted, and that no original byte of the root was
lost."""
from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from patchspec.cli import main
from patchspec.install import txn
from tests.state.toy import RELEASES, in_child, points, toy_root, tree, write_spec

VICTIM = b"print('a file outside the root')\n"


@dataclass
class Arena:
    root: Path
    spec: str
    outside: Path
    before: dict        # the outside directory's tree before the attack

    def untouched(self) -> None:
        """Nothing outside the root was created, changed or deleted."""
        assert tree(self.outside) == self.before

    def pristine(self) -> dict[str, str]:
        """The package's files that are not the toy release's own bytes (empty: no original byte lost)."""
        return {rel: (self.root / rel).read_text() for rel, text in RELEASES["1.0"].items()
                if not (self.root / rel).is_file() or (self.root / rel).read_text() != text}


_TEMPLATES: dict[str, Path] = {}


def arena(tmp_path: Path, start: str = "pristine") -> Arena:
    """The ground in ``tmp_path``: the root ``pristine``, ``applied`` (the toy spec applied with --no-verify)
    or ``interrupted`` (an apply killed at its first rename, its journal left). A root in each state is made
    once per process and copied, as it is, for each test."""
    if start not in _TEMPLATES:
        place = Path(tempfile.mkdtemp(prefix=f"hostile-{start}-"))
        atexit.register(shutil.rmtree, place, True)
        template = _ground(place)
        if start == "applied":
            assert main(["apply", template.spec, "--root", str(template.root), "--no-verify"]) == 0
        elif start == "interrupted":
            _interrupt(template, place)
        _TEMPLATES[start] = template.root
    ground = _ground(tmp_path, _TEMPLATES[start] if start != "pristine" else None)
    return ground


def _ground(tmp_path: Path, template: Path | None = None) -> Arena:
    outside = tmp_path / "outside"
    (outside / "empty").mkdir(parents=True)
    (outside / "victim.py").write_bytes(VICTIM)
    (outside / "victim.py.patchspec-tmp").write_bytes(VICTIM)
    (outside / "pkg").mkdir()
    (outside / "pkg" / "a.py").write_bytes(VICTIM)
    if template is None:
        root = toy_root(tmp_path / "root")
    else:
        root = tmp_path / "root"
        shutil.copytree(template, root, symlinks=True)
    return Arena(root, write_spec(tmp_path / "spec"), outside, tree(outside))


def run(capsys, *argv: str) -> tuple[int, str]:
    """A verb's exit code and its stderr (what a refusal says)."""
    code = main(list(argv))
    return code, capsys.readouterr().err


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def journal(ground: Arena) -> dict:
    return json.loads((ground.root / txn.JOURNAL).read_text())


def _interrupt(ground: Arena, tmp_path: Path) -> None:
    """Apply killed at its first rename: the journal of an interrupted run left under the root, as a kill
    leaves it."""
    argv = ["apply", ground.spec, "--root", str(ground.root), "--no-verify"]
    first = next(n for n, kind, _ in points(argv, tmp_path / "trace") if kind == "rename")
    assert main(["unapply", "toy", "--root", str(ground.root)]) == 0
    assert in_child(argv, {txn.FAULT_ENV: f"{first}:kill"}) == -9
