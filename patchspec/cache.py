"""Release sources fetched for checking: vLLM wheels from PyPI, vllm-gaudi tags from a git directory.

Both are unpacked once into the cache (``PATCHSPEC_CACHE``, default ``~/.cache/patchspec``) and reused;
an unpacked root is only ever read, so tests copy it before they patch it.
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from patchspec.errors import PatchspecError


def cache_dir() -> Path:
    return Path(os.environ.get("PATCHSPEC_CACHE") or Path.home() / ".cache" / "patchspec")


def releases_of(name: str, since: str | None = None) -> list[str]:
    """The final releases of ``name`` on the index pip is configured with (PyPI, or ``PIP_INDEX_URL`` /
    ``PIP_FIND_LINKS``), oldest first; from ``since`` on when given."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"],
                          capture_output=True, text=True)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("Available versions:")), None)
    if done.returncode != 0 or line is None:
        last = (done.stderr.strip().splitlines() or ["no versions listed"])[-1]
        raise PatchspecError(f"{name}: cannot list its releases: {last}")
    found = sorted((Version(v.strip()) for v in line.split(":", 1)[1].split(",")), reverse=False)
    floor = Version(since) if since else None
    return [str(v) for v in found if floor is None or v >= floor]


def requirement(text: str) -> str:
    """``NAME==VERSION`` as given, or for a bare ``NAME`` its newest release."""
    name, sep, version = text.partition("==")
    if sep:
        return text
    return f"{name}=={releases_of(name)[-1]}"


def pypi_root(requirement: str) -> Path:
    """The `.py` files and ``*.dist-info`` of a release from PyPI such as ``vllm==0.30.0``, unpacked once.

    A wheel that is pure Python or built for this interpreter is taken first; else the wheel vLLM's
    releases publish (CPython 3.12, manylinux x86_64), so a vLLM release reads the same on any machine;
    else the sdist, whose package directories and modules are laid out as an install would, with a
    ``dist-info`` made from its ``PKG-INFO``.
    """
    name, sep, version = requirement.partition("==")
    if not sep or not name or not version:
        raise PatchspecError(f"{requirement}: expected NAME==VERSION")
    root = cache_dir() / "releases" / f"{name}-{version}"
    if (root / ".complete").exists():
        return root
    downloads = cache_dir() / "wheels"
    downloads.mkdir(parents=True, exist_ok=True)
    found = _find_download(downloads, name, version)
    errors = []
    for extra in ([], ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.12"], None):
        if found is not None:
            break
        binary = ["--no-binary", ":all:"] if extra is None else ["--only-binary", ":all:", *extra]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *binary,
               "-q", "-d", str(downloads), requirement]
        done = subprocess.run(cmd, capture_output=True, text=True)
        found = _find_download(downloads, name, version)
        errors.append((done.stderr.strip().splitlines() or ["nothing downloaded"])[-1])
    if found is None:
        raise PatchspecError(f"{requirement}: no wheel or sdist could be downloaded: {errors[-1]}")
    unpack = _extract_wheel if found.suffix == ".whl" else _extract_sdist
    _unpack_atomically(root, lambda dest: unpack(found, dest))
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


def _find_download(downloads: Path, name: str, version: str) -> Path | None:
    """A wheel of that release (file names normalize the project name), else its sdist."""
    want = canonicalize_name(name)
    wheels, sdists = [], []
    for path in sorted(downloads.iterdir()):
        if path.suffix == ".whl":
            project, release = path.name.split("-")[:2]
            if canonicalize_name(project) == want and release == version:
                wheels.append(path)
        elif path.name.endswith((".tar.gz", ".zip")):
            stem = path.name.removesuffix(".tar.gz").removesuffix(".zip")
            project, _, release = stem.rpartition("-")
            if canonicalize_name(project) == want and release == version:
                sdists.append(path)
    return (wheels + sdists or [None])[0]


def _extract_wheel(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            top = member.split("/", 1)[0]
            if member.endswith(".py") or top.endswith(".dist-info"):
                zf.extract(member, dest)


def _extract_sdist(sdist: Path, dest: Path) -> None:
    """The sdist's packages and top-level modules (under ``src/`` or beside ``PKG-INFO``), and a
    ``dist-info`` whose METADATA is its ``PKG-INFO`` and whose ``top_level.txt`` names them."""
    with tempfile.TemporaryDirectory() as scratch:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as zf:
                zf.extractall(scratch)
        else:
            with tarfile.open(sdist) as tar:
                tar.extractall(scratch, filter="data")
        (top,) = [p for p in Path(scratch).iterdir() if p.is_dir()]
        source = top / "src" if (top / "src").is_dir() else top
        names = []
        for path in sorted(source.iterdir()):
            if path.is_dir() and (path / "__init__.py").is_file() and path.name.isidentifier():
                shutil.copytree(path, dest / path.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                names.append(path.name)
            elif path.suffix == ".py" and path.stem.isidentifier() and path.name != "setup.py":
                shutil.copy2(path, dest / path.name)
                names.append(path.stem)
        info = top / "PKG-INFO"
        if not names or not info.is_file():
            raise PatchspecError(f"{sdist.name}: no package or PKG-INFO found in the sdist")
        dist = dest / f"{top.name.replace('-', '_', top.name.count('-') - 1)}.dist-info"
        dist.mkdir()
        shutil.copy2(info, dist / "METADATA")
        (dist / "top_level.txt").write_text("".join(f"{n}\n" for n in names))


def _unpack_atomically(root: Path, fill) -> None:
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}."))
    fill(tmp)
    (tmp / ".complete").touch()
    try:
        tmp.rename(root)
    except OSError:  # another process finished first
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
