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
import tomllib
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

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
    """The files under ``prefix`` at ``tag`` (a tag, branch or commit) of a git directory, unpacked once,
    with the ``*.dist-info`` a build of that ref would install (see ``build_dist_info``), so the root says
    which version it is and ``--release auto`` can pair it. Keyed by the commit the ref names."""
    commit = _git(git_dir, "rev-parse", "--verify", "--quiet", f"{tag}^{{commit}}")
    name = f"{Path(git_dir).resolve().name}-{prefix}-{tag}-{commit[:12]}".replace("/", "_")
    root = cache_dir() / "releases" / name
    if (root / ".complete").exists():
        return root
    done = subprocess.run(["git", "-C", str(git_dir), "archive", "--format=tar", commit, prefix],
                          capture_output=True)
    if done.returncode != 0:
        raise PatchspecError(f"{git_dir}: git archive {tag} failed: {done.stderr.decode().strip()}")

    def extract(dest: Path) -> None:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            tar.extractall(dest, filter="data")
        build_dist_info(git_dir, commit, prefix.split("/", 1)[0], dest)

    _unpack_atomically(root, extract)
    return root


def build_dist_info(git_dir: Path, ref: str, package: str, dest: Path) -> Path | None:
    """``<dist>-<version>.dist-info`` (METADATA, top_level.txt; no RECORD: nothing was installed by pip)
    as a build of ``ref`` would write it: the name is the ref's ``pyproject.toml`` ``[project] name``, the
    version its static ``[project] version``, else (setuptools_scm) ``scm_version``. None when the ref's
    pyproject names no project or no version can be told (a shallow clone without tags, a tag that is no
    version): the root is then unpacked as before, and ``--release auto`` pairs it by its other packages."""
    shown = subprocess.run(["git", "-C", str(git_dir), "show", f"{ref}:pyproject.toml"], capture_output=True)
    try:
        project = tomllib.loads(shown.stdout.decode()).get("project", {}) if shown.returncode == 0 else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        project = {}
    name = project.get("name")
    if not isinstance(name, str):
        return None
    version = project.get("version")
    if not isinstance(version, str):
        try:
            version = scm_version(git_dir, ref)
        except PatchspecError:  # no tag, or a tag that is no version: unpaired, but still readable
            return None
    dist = dest / f"{canonicalize_name(name).replace('-', '_')}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (dist / "top_level.txt").write_text(f"{package}\n")
    return dist


def scm_version(git_dir: Path, ref: str) -> str:
    """The version setuptools_scm's default schemes give a clean checkout of ``ref`` (guess-next-dev,
    node-and-date): the tag's own version on a tag; N commits after tag T, T with its last number bumped
    (or its ``.dev0`` dropped), then ``.devN+g<commit>`` (``0.27.0rc0`` + 51 -> ``0.27.0rc1.dev51+g091bbadd``).
    The tag and distance come from ``git describe --tags --long``, as setuptools_scm reads them."""
    described = _git(git_dir, "describe", "--tags", "--long", "--match", "*[0-9]*", ref)
    tag, distance, node = described.rsplit("-", 2)
    try:
        version = Version(tag)
    except InvalidVersion:
        raise PatchspecError(f"{git_dir}: {ref}: tag {tag!r} is not a version") from None
    if distance == "0":
        return str(version)
    base = str(version).split("+", 1)[0]
    if version.dev is not None:
        if version.dev != 0:
            raise PatchspecError(f"{git_dir}: {ref}: tag {tag!r}: setuptools_scm bumps only a .dev0 tag")
        guessed = base.rsplit(".dev", 1)[0]
    else:
        stem = base.rstrip("0123456789")
        guessed = f"{stem}{int(base[len(stem):]) + 1}"
    return f"{guessed}.dev{distance}+{node}"


def _git(git_dir: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(git_dir), *args], capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PatchspecError(f"{git_dir}: git {' '.join(args)} failed: {why}")
    return done.stdout.strip()


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
    found = wheels + sdists
    return found[0] if found else None


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
