"""The root being patched (a site-packages directory or a source tree): safe paths and what it holds."""
from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from patchspec.compiler import encoding
from patchspec.errors import PatchspecError

STATE_DIR = ".patchspec"


def os_reason(exc: OSError) -> str:
    """What the system says went wrong (``No such file or directory``): its text for the error number."""
    return os.strerror(exc.errno) if exc.errno is not None else str(exc)


@dataclass(frozen=True)
class Root:
    path: Path
    # rel -> bytes (None: absent) that reads see instead of the disk: the files as an interrupted run's
    # journal says they were before it (read-only verbs answer from there; see ``txn.pending_view``).
    overlay: dict[str, bytes | None] | None = field(default=None, compare=False)

    @classmethod
    def open(cls, path: str | Path | Root) -> Root:
        if isinstance(path, Root):  # a view already opened (``txn.pending_view``)
            return path
        root = Path(path)
        if not root.is_dir():
            raise PatchspecError("root is not a directory", file=str(path))
        return cls(root.resolve())

    def canonical(self, rel: str, what: str = "path") -> str:
        """The one relative path of the file ``rel`` names (``inside`` the root); a link out of the root
        is refused saying how the package's files came to be linked in."""
        try:
            return inside(self.path, rel, what)
        except LinkOut as exc:
            raise PatchspecError(
                f"{exc.message}; the package's files are linked in from elsewhere, as `uv pip install "
                f"--link-mode=symlink` installs them, and patching one would change every environment sharing "
                f"it; reinstall the package with files of its own (`uv pip install --link-mode=copy --reinstall "
                f"...`, or pip), then apply", file=exc.file) from None

    def resolve(self, rel: str) -> Path:
        """The absolute path of ``rel``'s canonical path; refuses anything that leaves the root."""
        return self.path / self.canonical(rel)

    def read_text(self, rel: str) -> str | None:
        """The text of a file in the encoding it declares (a BOM, a coding cookie; else UTF-8)."""
        data = self.read_bytes(rel)
        try:
            return None if data is None else encoding.decode(data)
        except (UnicodeDecodeError, LookupError) as exc:
            raise PatchspecError(f"cannot decode as {encoding.detect(cast(bytes, data))}: {exc}",
                                 file=str(self.path / rel)) from None   # data: decoding raised, so not None

    def read_bytes(self, rel: str, limit: int | None = None) -> bytes | None:
        """The bytes of a regular file, ``None`` when absent; a directory, FIFO or device is refused
        without opening it (a FIFO would block), and so is a file larger than ``limit`` bytes."""
        if self.overlay is not None and rel in self.overlay:
            return self.overlay[rel]
        path = self.resolve(rel)
        try:
            st = path.lstat()
            mode = st.st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PatchspecError(f"cannot read: {os_reason(exc)}", file=str(path)) from None
        if not stat.S_ISREG(mode):
            raise PatchspecError("not a regular file (a directory, FIFO or device is never patched); "
                                 "nothing was written", file=str(path))
        if limit is not None and st.st_size > limit:
            raise PatchspecError(f"{st.st_size} bytes, more than the {limit} bytes any patchspec writes there: "
                                 "not a file patchspec wrote; nothing was written", file=str(path))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise PatchspecError(f"cannot read: {os_reason(exc)}", file=str(path)) from None
        with os.fdopen(fd, "rb") as handle:
            data: bytes = handle.read()
            return data

    def modules(self, package: str) -> list[str]:
        """The ``.py`` files of a package directory, root-relative, in order (links not followed)."""
        top = self.path / package
        if top.is_symlink() or not top.is_dir():
            return []
        return sorted(str((Path(folder) / name).relative_to(self.path)) for folder, dirs, names in os.walk(top)
                      for name in names if name.endswith(".py") and "__pycache__" not in folder)

    def has_package(self, package: str) -> bool:
        """A package directory, or a one-module distribution's ``package.py``."""
        return self.resolve(package).is_dir() or self.resolve(package + ".py").is_file()


class LinkOut(PatchspecError):
    """A path that leaves its directory through a symbolic link on the way."""


def inside(base: Path, rel: str, what: str = "path", where: str = "the root") -> str:
    """The one rule for every path patchspec acts on, relative to the directory ``base`` it must stay in (a
    root, a releases directory, ``-o``): ``./``, ``//`` and ``..`` inside ``base`` normalised and links
    inside it followed (a link stays a link; its target is the file). Refused, in one line naming ``what``
    and the path, when it is empty, absolute, holds a NUL or a backslash, or leaves ``base`` through ``..``
    or through a link. Returns the canonical relative path."""
    base = Path(os.path.realpath(base))
    if not isinstance(rel, str) or "\0" in rel:
        raise PatchspecError(f"{what} {rel!r} is not a path", file=str(base))
    norm = posixpath.normpath(rel) if rel else ""
    if rel.startswith("/"):
        raise PatchspecError(f"{what} {rel!r} is an absolute path: it leaves {where} (give it relative to it)",
                             file=str(base))
    if not rel or "\\" in rel or norm in (".", "..") or norm.startswith("../"):
        raise PatchspecError(f"{what} {rel!r} leaves {where}", file=str(base))
    real = Path(os.path.realpath(base / norm))
    if real == base or base not in real.parents:
        link = next((base / p for p in _prefixes(norm) if (base / p).is_symlink()), None)
        if link is not None:
            raise LinkOut(f"{what} {rel!r}: {link.relative_to(base).as_posix()} is a symbolic link out of "
                          f"{where}; it resolves outside {where} (to {real})", file=str(base))
        raise PatchspecError(f"{what} {rel!r} resolves outside {where} (to {real})", file=str(base))
    return real.relative_to(base).as_posix()


def name_in(base: Path, name: str, suffix: str, what: str) -> Path:
    """The file ``NAME + suffix`` of the directory ``base``, for a name a user or a file gives (a release
    profile's, a distribution's): a name, never a path; refused in one line when it holds a ``/``, is
    ``..`` or absolute, or (``inside``) its file is a link out of ``base`` or to another file in it."""
    if not isinstance(name, str) or not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        kind = "an absolute path" if isinstance(name, str) and name.startswith("/") else "not a name"
        raise PatchspecError(f"{what} {name!r} is {kind}: a name holds no '/' and is not '..', and this one would "
                             f"leave {base}", file=str(base))
    rel = inside(base, f"{name}{suffix}", what, f"its directory ({base})")
    if rel != f"{name}{suffix}":
        raise PatchspecError(f"{what} {name!r}: {name}{suffix} is a link to {rel}; patchspec reads and writes "
                             "a name's own file only", file=str(base))
    return Path(os.path.realpath(base)) / rel


def _prefixes(norm: str) -> list[str]:
    """``a``, ``a/b``, ``a/b/c`` of ``a/b/c``: each path a link on the way could be."""
    parts = norm.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
