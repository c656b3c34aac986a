"""The pristine text of a file a spec patched (what every spec's patch is computed from), and the files
that cannot be taken for one or written over: a marked file no record lists, a patched file edited since."""
from __future__ import annotations

from collections.abc import Callable
from typing import cast

from patchspec.compiler import encoding
from patchspec.compiler.plan import RUNTIME_PACKAGE
from patchspec.errors import PatchspecError
from patchspec.install.root import STATE_DIR, Root
from patchspec.install.state import PRISTINE_DIR, State, pristine_path, sha256
from patchspec.model import MARKER


def pristine_reader(root: Root, state: State) -> Callable[[str], str | None]:
    """Read a file as it was before any spec patched it, in the encoding it declares (BOM, cookie): its
    pristine copy while the file is as a spec wrote it, else the file itself (a reinstall or an upgrade
    replaced it: the copy is stale)."""
    def read(rel: str) -> str | None:
        record = state.files.get(rel)
        path = rel
        if record is not None and sha256(root.read_bytes(rel)) == record.patched_sha256:
            path = pristine_path(rel)
        data = root.read_bytes(path)
        if data is None and path != rel:
            raise PatchspecError("pristine copy missing from the state record", file=str(root.path / path))
        try:
            return None if data is None else encoding.decode(data)
        except (UnicodeDecodeError, LookupError) as exc:
            raise PatchspecError(f"cannot decode as {encoding.detect(cast(bytes, data))}: {exc}",   # not None
                                 file=str(root.path / rel)) from None
    return read


def refuse_unrecorded(root: Root, state: State, rel: str, data: bytes | None) -> None:
    """A file that carries a patchspec marker though no state record lists it is not the pristine file
    (patched files copied by hand, or a state record lost): storing it as one would lose the original, so
    apply refuses it, and check says so as apply would. Where a pristine copy of an earlier apply is still
    there, the refusal names it."""
    if rel in state.files or data is None or MARKER.encode() not in data:
        return
    copy = root.path / pristine_path(rel)
    how = (f"the state record that listed it is gone, and {root.path / PRISTINE_DIR} holds the pristine copy of "
           f"every file patchspec patched ({copy} is this one's): copy each back over its file, remove "
           f"{STATE_DIR}/ and {RUNTIME_PACKAGE}/" if copy.is_file() and not copy.is_symlink() else
           "restore it (reinstall the package, e.g. pip install --force-reinstall --no-deps NAME==VERSION)")
    raise PatchspecError(f"carries a patchspec marker but no state record lists it: it is not the pristine file, "
                         f"and storing it as one would lose the original; {how}, then apply; nothing was written",
                         file=str(root.path / rel))


def refuse_edited(root: Root, state: State, rel: str) -> None:
    """A patched file that is not as apply wrote it (edited by hand, or removed) is not written over."""
    if sha256(root.read_bytes(rel)) != state.files[rel].patched_sha256:
        raise PatchspecError("patched file was edited or removed since apply (use unapply --force to "
                             "restore it anyway); nothing was written", file=str(root.path / rel))
