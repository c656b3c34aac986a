"""Stale-record upkeep: what a reinstall, an upgrade or an uninstall left in the state record."""
from __future__ import annotations

from patchspec.compiler.plan import RUNTIME_PACKAGE
from patchspec.errors import PatchspecError
from patchspec.install import bytecode
from patchspec.install.installed import REMOVED, REPLACED, PipRecords
from patchspec.install.root import STATE_DIR, Root
from patchspec.install.state import PRISTINE_DIR, State, pristine_path
from patchspec.model import MARKER


def drop_stale(root: Root, state: State, records: PipRecords, names: list[str],
               writes: dict[str, bytes | None]) -> list[str]:
    """Forget what a reinstall, an upgrade or an uninstall made stale in the records of ``names``: a file
    replaced by the installed release's own bytes (or removed with its package) leaves the record, the file
    stays as it is, and its stale pristine copy goes. A spec left with no file leaves the record too."""
    notes = []
    for name in names:
        rec = state.specs.get(name)
        if rec is None:
            continue
        for rel in list(rec.files):
            status = records.file_status(state, rel)
            if status in (REPLACED, REMOVED):
                state.drop_file(rel)
                writes[pristine_path(rel)] = None
                writes.update(dict.fromkeys(bytecode.kept(root, rel).values()))
                how = f"replaced by {records.where(rel)}" if status == REPLACED else "removed with its package"
                notes.append(f"dropped: {rel}: {how}; the record of {name} ({rec.release}) for it is gone, "
                             "the file is left as it is")
        if not rec.files:
            _, _, unused = state.drop_spec(name)
            for rel in unused:
                writes[rel] = None
                writes.update(bytecode.removed(root, rel))
            notes.append(f"dropped: the record of {name} ({rec.release}): none of its files is as it wrote them")
    return notes


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
