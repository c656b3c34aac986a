"""The root being patched (a site-packages directory or a source tree): safe paths and what it holds."""
from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path

from patchspec.compiler import encoding
from patchspec.errors import PatchspecError

STATE_DIR = ".patchspec"


@dataclass(frozen=True)
class Root:
    path: Path
    # rel -> bytes (None: absent) that reads see instead of the disk: the files as an interrupted run's
    # journal says they were before it (read-only verbs answer from there; see ``txn.pending_view``).
    overlay: dict | None = field(default=None, compare=False)

    @classmethod
    def open(cls, path: "str | Path | Root") -> "Root":
        if isinstance(path, Root):  # a view already opened (``txn.pending_view``)
            return path
        root = Path(path)
        if not root.is_dir():
            raise PatchspecError("root is not a directory", file=str(path))
        return cls(root.resolve())

    def canonical(self, rel: str) -> str:
        """The one relative path of the file ``rel`` names: ``./``, ``//`` and ``..`` inside the root are
        normalised and in-root symlinks followed (a link stays a link; its target is the file). Refuses
        what leaves the root, through ``..`` or through a link."""
        norm = posixpath.normpath(rel) if rel else ""
        if not rel or rel.startswith("/") or "\\" in rel or norm in (".", "..") or norm.startswith("../"):
            raise PatchspecError(f"path {rel!r} leaves the root", file=str(self.path))
        real = Path(os.path.realpath(self.path / norm))
        if real == self.path or self.path not in real.parents:
            link = next((self.path / p for p in _prefixes(norm) if (self.path / p).is_symlink()), None)
            if link is not None:
                raise PatchspecError(
                    f"{link.relative_to(self.path).as_posix()} is a symbolic link out of the root: {rel!r} "
                    f"resolves outside the root (to {real}); the "
                    f"package's files are linked in from elsewhere, as `uv pip install --link-mode=symlink` installs "
                    f"them, and patching one would change every environment sharing it; reinstall the package "
                    f"with files of its own (`uv pip install --link-mode=copy --reinstall ...`, or pip), then apply",
                    file=str(self.path))
            raise PatchspecError(f"path {rel!r} resolves outside the root (to {real})", file=str(self.path))
        return real.relative_to(self.path).as_posix()

    def resolve(self, rel: str) -> Path:
        """The absolute path of ``rel``'s canonical path; refuses anything that leaves the root."""
        return self.path / self.canonical(rel)

    def read_text(self, rel: str) -> str | None:
        """The text of a file in the encoding it declares (a BOM, a coding cookie; else UTF-8)."""
        data = self.read_bytes(rel)
        try:
            return None if data is None else encoding.decode(data)
        except (UnicodeDecodeError, LookupError) as exc:
            raise PatchspecError(f"cannot decode as {encoding.detect(data)}: {exc}",
                                 file=str(self.path / rel)) from None

    def read_bytes(self, rel: str) -> bytes | None:
        """The bytes of a regular file, ``None`` when absent; a directory, FIFO or device is refused
        without opening it (a FIFO would block)."""
        if self.overlay is not None and rel in self.overlay:
            return self.overlay[rel]
        path = self.resolve(rel)
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PatchspecError(f"cannot read: {os.strerror(exc.errno)}", file=str(path)) from None
        if not stat.S_ISREG(mode):
            raise PatchspecError("not a regular file (a directory, FIFO or device is never patched); "
                                 "nothing was written", file=str(path))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise PatchspecError(f"cannot read: {os.strerror(exc.errno)}", file=str(path)) from None
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def has_package(self, package: str) -> bool:
        """A package directory, or a one-module distribution's ``package.py``."""
        return self.resolve(package).is_dir() or self.resolve(package + ".py").is_file()


def _prefixes(norm: str) -> list[str]:
    """``a``, ``a/b``, ``a/b/c`` of ``a/b/c``: each path a link on the way could be."""
    parts = norm.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
