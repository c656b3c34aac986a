"""The root being patched (a site-packages directory or a source tree): safe paths and what it holds."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from patchspec.errors import PatchspecError

STATE_DIR = ".patchspec"


@dataclass(frozen=True)
class Root:
    path: Path

    @classmethod
    def open(cls, path: str | Path) -> "Root":
        root = Path(path)
        if not root.is_dir():
            raise PatchspecError(f"root is not a directory", file=str(path))
        return cls(root.resolve())

    def resolve(self, rel: str) -> Path:
        """The absolute path of ``rel``; refuses anything that leaves the root, symlinks included."""
        if not rel or rel.startswith("/") or ".." in rel.split("/") or "\\" in rel:
            raise PatchspecError(f"path {rel!r} leaves the root", file=str(self.path))
        full = self.path / rel
        real = Path(os.path.realpath(full))
        if real != self.path and self.path not in real.parents:
            raise PatchspecError(f"path {rel!r} resolves outside the root (to {real})", file=str(self.path))
        return full

    def read_text(self, rel: str) -> str | None:
        path = self.resolve(rel)
        try:
            return path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            raise PatchspecError(f"not UTF-8 text: {exc.reason}", file=str(path)) from None

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            return self.resolve(rel).read_bytes()
        except FileNotFoundError:
            return None

    def has_package(self, package: str) -> bool:
        return self.resolve(package).is_dir()

    @property
    def state_dir(self) -> Path:
        return self.path / STATE_DIR

    def installed_versions(self) -> dict[str, str]:
        """Top-level package → version: from ``*.dist-info`` (site-packages) or version files (source tree)."""
        versions: dict[str, str] = {}
        for dist in sorted(self.path.glob("*.dist-info")):
            version = _metadata_version(dist / "METADATA")
            if version is None:
                continue
            for package in _top_level_packages(dist):
                versions.setdefault(package, version)
        for package in ("vllm", "vllm_gaudi"):
            if package not in versions:
                for name in ("_version.py", "version.py"):
                    found = _version_file(self.path / package / name)
                    if found:
                        versions[package] = found
                        break
        return versions


def _metadata_version(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():
                    break
    except OSError:
        return None
    return None


def _top_level_packages(dist: Path) -> set[str]:
    top = dist / "top_level.txt"
    if top.is_file():
        return {line.strip() for line in top.read_text().splitlines() if line.strip()}
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


_VERSION = re.compile(r"""^(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.M)


def _version_file(path: Path) -> str | None:
    try:
        match = _VERSION.search(path.read_text(errors="replace"))
    except OSError:
        return None
    return match.group(1) if match else None
