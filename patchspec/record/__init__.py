"""``patchspec record``: a spec drafted from a change, statement by statement.

The change is either the user's hand edit of the installed files (``change.hand_edit``), or what
upstream did to named definitions between two releases (``change.upstream``). ``targets`` turns each
file's change into steps, ``draft`` writes them as the spec (and its snippet module when code moves
there), ``prove`` compiles the spec on the text it applies to and compares the trees, and the first
profile is drafted by ``profile new``. A hand edit is then replaced by the spec applied to the pristine
release, through the journaled writer, so ``check`` says 0 and ``unapply`` gives back the release.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from patchspec.errors import PatchspecError
from patchspec.install import txn
from patchspec.install.root import Root
from patchspec.install.state import locked
from patchspec.record import change as changes
from patchspec.record import draft as drafting
from patchspec.record import prove
from patchspec.record.diff import Drafted
from patchspec.record.targets import FileDraft, locate, needed_imports, snippet_imports


@dataclass
class Recorded:
    written: list[Path]
    targets: list[Drafted]
    applied: list[str] = field(default_factory=list)   # the files a hand edit was replaced in
    notes: list[str] = field(default_factory=list)


def record(name: str, root_path: str, requirement: str | None = None, before: str | None = None,
           targets: tuple[str, ...] = (), directory: str = ".", apply_edit=None, new_profile=None) -> Recorded:
    """``apply_edit(spec_path, root_view)`` applies the spec to a root whose edited files read as the
    pristine release; ``new_profile(release, root, spec_path)`` drafts the first profile."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise PatchspecError(f"spec name {name!r}: use lower-case letters, digits and dashes")
    if before and not requirement:
        raise PatchspecError("--before needs --from DIST==AFTER")
    root = Root.open(root_path)
    change = (changes.upstream(root, requirement, before, list(targets)) if requirement
              else changes.hand_edit(root, list(targets)))
    draft = _draft(name, change)
    release = f"{change.dist}-{change.version}"
    where = drafting.paths(draft, Path(directory), release)
    created = not Path(directory).exists()
    written = drafting.write(draft, where)
    try:
        _prove(draft, change, where)
        view = root if requirement else Root(root.path, {f.rel: f.pristine for f in change.files})
        profile = new_profile(release, view, str(where["spec"]))
        written.append(profile)
        if not requirement:  # the edit's own bytes (its comments, its layout) are kept beside the spec
            written += _keep_edits(change, Path(directory) / f"{name}.edit")
        applied = [] if requirement else _replace_edit(change, root, lambda: apply_edit(str(where["spec"]), view))
    except BaseException:
        drafting.remove([*written, where["profile"]], Path(directory), created)
        raise
    return Recorded(written, draft.targets, applied, change.notes)


def _draft(name: str, change: changes.Change) -> drafting.Draft:
    targets, imports, moved, moved_imports = [], {}, [], set()
    for item in change.files:
        files = FileDraft(item.old, item.new)
        if item.qualnames:
            for qualname in item.qualnames:
                files.named(qualname)
        else:
            files.members("", item.old.tree.body, item.new.tree.body)
        package = name.replace("-", "_")
        provided = {*files.snippet_names, *files.added_names}
        reads = set().union(*(t.reads for t in files.targets)) if files.targets else set()
        wanted = files.imports
        if change.upstream:
            wanted = wanted + needed_imports(item.installed, item.new, reads, provided)
        from_snippet = [f"from _patchspec_runtime.{package} import {n}" for n in files.snippet_names]
        if wanted or from_snippet:
            imports[item.rel] = list(dict.fromkeys(wanted + from_snippet))
        for qualname in files.snippet_names:
            moved_node = locate(item.new, qualname)
            assert moved_node is not None   # FileDraft.added found it there
            code = item.new.code(moved_node)
            moved.append(code)
            moved_imports |= set(snippet_imports(item.new, code))
        for target in files.targets:
            for code in target.snippets.values():
                moved.append(code)
                moved_imports |= set(snippet_imports(item.new, code))
        targets += files.targets
        changed = {t.qualname for t in files.targets if t.steps} | provided
        change.notes += [f"note: {item.rel}:{q}: the change leaves it as it was; nothing to carry"
                         for q in item.qualnames if q not in changed and not any(
                             t.qualname == q.rpartition(".")[0] and t.steps for t in files.targets)]
    if not any(t.steps for t in targets):
        raise PatchspecError("the change has no statement to carry (only comments, layout or docstrings "
                             "differ); nothing was written")
    what = f"{change.dist} {change.upstream}" if change.upstream else f"a hand edit of {change.dist} {change.version}"
    summary = f"Recorded from {what} ({', '.join(sorted({f.rel for f in change.files}))})."
    return drafting.Draft(name, summary, targets, imports, moved, sorted(moved_imports))


def _replace_edit(change: changes.Change, root: Root, apply_edit) -> list[str]:
    """The edited files replaced by the spec applied; when that apply refuses (its proof among others, which
    undoes it to the pristine release), the files are put back as the user left them, through the journaled
    writer: a refused record leaves the edit, never a marker without a state record."""
    try:
        return apply_edit()
    except BaseException:
        disk = Root(root.path)
        back = {f.rel: f.edited for f in change.files if disk.read_bytes(f.rel) != f.edited}
        if back:
            with locked(disk, 30.0):
                txn.commit(disk, back)
        raise


def _keep_edits(change: changes.Change, directory: Path) -> list[Path]:
    kept = []
    for item in change.files:
        path = directory / item.rel
        if path.exists():
            raise PatchspecError(f"{path} exists; nothing was written", file=str(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(item.edited)
        kept.append(path)
    return kept


def _prove(draft: drafting.Draft, change: changes.Change, where: dict[str, Path]) -> None:
    """Compile the draft on the text it was recorded from; its tree must be the changed text's."""
    texts = {f.rel: f.old.text for f in change.files}
    compiled = prove.compile_texts(str(where["spec"]), texts)
    snippet = draft.snippet_text() if draft.has_snippets else None
    for item in change.files:
        expected = item.new.text if not (change.upstream and item.qualnames) else \
            prove.expected_text(item.old, item.new, item.qualnames) + "".join(
                f"{i}\n" for i in draft.imports.get(item.rel, []) if not i.startswith("from _patchspec_runtime."))
        got = compiled.get(item.rel, item.old.text)
        wrong = prove.difference(got, expected, item.old.text, snippet, draft.alias, item.rel)
        if wrong:
            raise PatchspecError(f"the draft does not say the change: {wrong}; no transform says it faithfully, "
                                 "nothing was written", file=str(where["spec"]))
