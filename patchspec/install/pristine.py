"""The pristine text of a file a spec patched: what every spec's patch is computed from."""
from __future__ import annotations

from patchspec.compiler import encoding
from patchspec.errors import PatchspecError
from patchspec.install.root import Root
from patchspec.install.state import State, pristine_path, sha256


def pristine_reader(root: Root, state: State):
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
            raise PatchspecError(f"cannot decode as {encoding.detect(data)}: {exc}",
                                 file=str(root.path / rel)) from None
    return read
