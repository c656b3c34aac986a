"""A toy installed package with a pip-style dist-info, a two-file spec over it, and the tools the state
tests share: laying out a release as pip does, hashing a tree, running a verb in a child process that the
fault hook stops."""
from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import stat
from pathlib import Path

from patchspec.cli import main
from patchspec.install import txn

SNIPS = Path(__file__).resolve().parents[1] / "fixtures" / "demo_spec" / "snips"

SPEC = f"""spec: 1
name: toy
summary: Two files of a toy package.
snippets: {{package: demo_snips, alias: _p, path: {SNIPS}}}
targets:
  - id: a
    file: pkg/a.py
    function: target
    transforms:
      - insert_before: {{anchor: "marker_call(...)", code: "_p.stop(self, 1)"}}
  - id: b
    file: pkg/b.py
    function: target
    transforms:
      - wrap: {{with: passthrough}}
"""

RELEASES = {
    "1.0": {"pkg/__init__.py": "", "pkg/a.py": "def target(self):\n    x = 1\n    marker_call(1)\n",
            "pkg/b.py": "def target(self):\n    return 2\n"},
    "2.0": {"pkg/__init__.py": "VERSION = 2\n", "pkg/a.py": "def target(self):\n    x = 2\n    marker_call(1)\n",
            "pkg/b.py": "def target(self):\n    return 3\n", "pkg/c.py": "C = 1\n"},
}


def write_spec(directory: Path) -> str:
    (directory / "releases").mkdir(parents=True, exist_ok=True)
    for name, version in (("r1", "1.0"), ("r2", "2.0")):
        (directory / "releases" / f"{name}.yaml").write_text(f"release: {name}\npackages: {{pkg: '=={version}'}}\n")
    (directory / "toy.yaml").write_text(SPEC)
    return str(directory / "toy.yaml")


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def pip_install(root: Path, version: str) -> None:
    """What ``pip install`` of ``pkg==version`` does over whatever is installed: remove every file the old
    RECORD lists, then write the new release's files and its dist-info."""
    for dist in root.glob("pkg-*.dist-info"):
        for line in (dist / "RECORD").read_text().splitlines():
            (root / line.split(",")[0]).unlink(missing_ok=True)
        dist.rmdir()
    dist = root / f"pkg-{version}.dist-info"
    dist.mkdir(parents=True)
    files = {**RELEASES[version], f"{dist.name}/METADATA": f"Metadata-Version: 2.1\nName: pkg\nVersion: {version}\n\n",
             f"{dist.name}/top_level.txt": "pkg\n"}
    lines = []
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        lines.append(f"{rel},{_record_hash(text.encode())},{len(text.encode())}")
    (dist / "RECORD").write_text("\n".join(lines + [f"{dist.name}/RECORD,,"]) + "\n")


def pip_uninstall(root: Path) -> None:
    for dist in root.glob("pkg-*.dist-info"):
        for line in (dist / "RECORD").read_text().splitlines():
            (root / line.split(",")[0]).unlink(missing_ok=True)
        dist.rmdir()
    shutil.rmtree(root / "pkg", ignore_errors=True)


def toy_root(dest: Path, version: str = "1.0") -> Path:
    dest.mkdir(parents=True)
    pip_install(dest, version)
    return dest


def tree(root: Path) -> dict[str, tuple]:
    """Every entry under the root: regular files by content and mode, links by target, directories."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        st = path.lstat()
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir",)
        elif not stat.S_ISREG(st.st_mode):
            out[rel] = ("special", stat.S_IFMT(st.st_mode))
        else:
            out[rel] = (hashlib.sha256(path.read_bytes()).hexdigest(), oct(st.st_mode), st.st_uid, st.st_gid)
    return out


def points(argv: list[str], trace: Path) -> list[tuple[int, str, str]]:
    """The numbered write points a verb passes, from a run in a child with the trace on (nothing stops)."""
    trace.unlink(missing_ok=True)
    assert in_child(argv, {txn.TRACE_ENV: str(trace)}) == 0
    return [(int(n), kind, path) for n, kind, path in (line.split(" ", 2) for line in trace.read_text().splitlines())]


def in_child(argv: list[str], env: dict[str, str]) -> int:
    """Run the CLI in a forked child with ``env`` set: its exit code, or minus the signal that ended it."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            os.environ.update(env)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            code = main(argv)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
