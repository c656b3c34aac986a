"""Stale-record upkeep: what a reinstall, an upgrade or an uninstall left in the state record."""
from __future__ import annotations

from patchspec.install import bytecode
from patchspec.install.installed import REMOVED, REPLACED, PipRecords
from patchspec.install.root import Root
from patchspec.install.state import State, pristine_path


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
