"""The root being patched (a site-packages directory or a source tree): safe paths and what it holds."""
from __future__ import annotations

import os
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
        """A package directory, or a one-module distribution's ``package.py``."""
        return self.resolve(package).is_dir() or self.resolve(package + ".py").is_file()

    @property
    def state_dir(self) -> Path:
        return self.path / STATE_DIR
