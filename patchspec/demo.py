"""``patchspec demo``: the tool at work on a real release in a minute, on a machine without vLLM.

It fetches a vLLM wheel from PyPI into the cache, copies its sources to a scratch root, and shows what
the spec does there: the plan, the drift report, the diff, then apply, check and unapply, ending with a
byte-for-byte comparison of the whole root against the untouched copy.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from patchspec.errors import printable
from patchspec.releases.cache import pypi_root

DEFAULT_SPEC = Path(__file__).resolve().parent / "specs" / "pipeline-parallel.yaml"


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def run(requirement: str, spec: str, main) -> int:
    """``main`` is the CLI entry point, so every step prints exactly what the user's own command would."""
    def step(title: str, *argv: str) -> int:
        print("\n" + printable(f"$ patchspec {' '.join(argv)}    # {title}"), flush=True)
        return main(list(argv))

    source = pypi_root(requirement)
    with tempfile.TemporaryDirectory(prefix="patchspec-demo-") as scratch:
        root = Path(scratch) / "site-packages"
        shutil.copytree(source, root, ignore=shutil.ignore_patterns(".complete"))
        print(printable(f"{requirement} from PyPI, sources copied to {root}"))
        before = tree_digest(root)
        if step("resolve every anchor: plan and drift report", "compile", spec, "--root", str(root)) != 0:
            return step("what moved, target by target", "drift", spec, "--root", str(root))
        step("what the patched files gain (apply also installs the snippets)", "diff", spec, "--root",
             str(root), "--patched-only")
        if step("patch in place, all files or none", "apply", spec, "--root", str(root)) != 0:
            return 2
        step("0 = applied", "check", spec, "--root", str(root))
        step("restore every byte", "unapply", spec, "--root", str(root))
        same = tree_digest(root) == before
        print(f"\nround trip: the root is {'byte-identical to' if same else 'DIFFERENT from'} the copy before apply")
        return 0 if same else 2
