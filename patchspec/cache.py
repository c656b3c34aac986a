"""Release sources fetched for checking: vLLM wheels from PyPI, vllm-gaudi tags from a git directory.

Both are unpacked once into the cache (``PATCHSPEC_CACHE``, default ``~/.cache/patchspec``) and reused;
an unpacked root is only ever read, so tests copy it before they patch it.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from patchspec.errors import PatchspecError


def cache_dir() -> Path:
    return Path(os.environ.get("PATCHSPEC_CACHE") or Path.home() / ".cache" / "patchspec")


def pypi_root(requirement: str) -> Path:
    """The `.py` files and `*.dist-info` of a PyPI wheel such as ``vllm==0.30.0``, unpacked once."""
    name, sep, version = requirement.partition("==")
    if not sep or not name or not version:
        raise PatchspecError(f"{requirement}: expected NAME==VERSION")
    root = cache_dir() / "releases" / f"{name}-{version}"
    if (root / ".complete").exists():
        return root
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = _find_wheel(wheels, name, version)
    if wheel is None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--platform", "manylinux_2_28_x86_64", "--python-version", "3.12",
               "-q", "-d", str(wheels), requirement]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheel = _find_wheel(wheels, name, version)
        if done.returncode != 0 or wheel is None:
            last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise PatchspecError(f"{requirement}: pip download failed: {last}")
    _unpack_atomically(root, lambda dest: _extract_wheel(wheel, dest))
    return root


def git_tag_root(git_dir: Path, tag: str, prefix: str) -> Path:
    """The files under ``prefix`` at ``tag`` of a git directory (a vllm-gaudi checkout), unpacked once."""
    root = cache_dir() / "releases" / f"{Path(git_dir).resolve().name}-{prefix}-{tag}".replace("/", "_")
    if (root / ".complete").exists():
        return root
    done = subprocess.run(["git", "-C", str(git_dir), "archive", "--format=tar", tag, prefix],
                          capture_output=True)
    if done.returncode != 0:
        raise PatchspecError(f"{git_dir}: git archive {tag} failed: {done.stderr.decode().strip()}")

    def extract(dest: Path) -> None:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            tar.extractall(dest, filter="data")

    _unpack_atomically(root, extract)
    return root


def _find_wheel(wheels: Path, name: str, version: str) -> Path | None:
    stem = name.replace("-", "_")
    found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    return found[0] if found else None


def _extract_wheel(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            top = member.split("/", 1)[0]
            if member.endswith(".py") or top.endswith(".dist-info"):
                zf.extract(member, dest)


def _unpack_atomically(root: Path, fill) -> None:
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}."))
    fill(tmp)
    (tmp / ".complete").touch()
    try:
        tmp.rename(root)
    except OSError:  # another process finished first
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
