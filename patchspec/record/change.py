"""Where a recorded change comes from: a hand edit of the installed files, or upstream's two releases.

A hand edit is found by the installed package's RECORD hashes (a file whose bytes are not the ones pip
installed), and compared with the release's own bytes from its wheel or sdist (``cache.pypi_root``, as
``--baseline pypi`` fetches them). Upstream's change is the named definitions between release BEFORE
(default: the installed one) and AFTER of a distribution, carried onto the installed release.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from patchspec.errors import PatchspecError
from patchspec.install import installed
from patchspec.install.root import Root
from patchspec.install.state import State, load_state, sha256
from patchspec.model import package_of
from patchspec.record.text import Text
from patchspec.releases import cache


@dataclass
class FileChange:
    rel: str
    old: Text                   # the text the spec applies to (pristine, or BEFORE's)
    new: Text                   # the text the change gives
    installed: Text             # what is installed (the hand edit itself, or the release the spec is for)
    pristine: bytes             # the installed release's own bytes of the file
    edited: bytes = b""         # a hand edit's bytes, as found
    qualnames: list[str] = field(default_factory=list)   # --target: only these definitions


@dataclass
class Change:
    files: list[FileChange]
    dist: str                   # the distribution, as the profile names it
    version: str                # the installed release
    upstream: str | None = None  # "BEFORE -> AFTER" for --from
    notes: list[str] = field(default_factory=list)


def parse_target(text: str, root: Root) -> tuple[str, str]:
    """``FILE.py:QUALNAME``, its file by its canonical path under the root (refused when it leaves it)."""
    rel, sep, qualname = text.partition(":")
    if not sep or not rel.endswith(".py") or not qualname or not all(p.isidentifier() for p in qualname.split(".")):
        raise PatchspecError(f"--target {text!r}: expected FILE.py:QUALNAME, e.g. "
                             "requests/sessions.py:SessionRedirectMixin.rebuild_proxies")
    return root.canonical(rel, "--target"), qualname


def _release_root(dist: str, version: str) -> Path:
    try:
        return cache.pypi_root(f"{dist}=={version}")
    except PatchspecError as exc:
        raise PatchspecError(f"record needs {dist} {version}'s own files from the index (its wheel or sdist) "
                             f"and there are none: {exc.message}; nothing was written") from None


def _decode(data: bytes, where: str) -> str:
    from patchspec.compiler import encoding

    try:
        return encoding.decode(data)
    except (UnicodeDecodeError, LookupError) as exc:
        raise PatchspecError(f"cannot decode: {exc}", file=where) from None


def hand_edit(root: Root, targets: list[str]) -> Change:
    """The files of one installed distribution that differ from what it installed."""
    named = [parse_target(t, root) for t in targets]
    found = installed.scan(root.path)
    records = installed.PipRecords(root)
    wanted = {package_of(rel) for rel, _ in named}
    edited = _edited_files(root, named, wanted, found, records)
    if not edited:
        without = sorted(p for p, item in found.items() if (not wanted or p in wanted)
                         and not ((dist_info := records.dist(p)) and dist_info.hashes()))
        hint = (f"; {', '.join(without)} has no RECORD hashes to tell an edit by: name the edited definitions "
                "with --target FILE:QUALNAME") if without else ""
        raise PatchspecError(f"no installed file differs from what its release installed{hint}; nothing was "
                             "written", file=str(root.path))
    if len(edited) > 1:
        raise PatchspecError(f"the edit spans several packages ({', '.join(sorted(edited))}): record one at a "
                             "time with --target FILE:QUALNAME; nothing was written", file=str(root.path))
    package, rels = next(iter(edited.items()))
    item = found[package]
    dist = item.distribution or package
    pristine_root = Root.open(_release_root(dist, item.version))
    dist_info = records.dist(package)
    hashes = dist_info.hashes() if dist_info else {}
    files = [change for rel in rels
             if (change := _file_change(root, rel, pristine_root, hashes.get(rel), dist, item.version, named))]
    if not files:
        raise PatchspecError("the named files are as their release installed them; nothing was written",
                             file=str(root.path))
    return Change(files, dist, item.version)


def _edited_files(root: Root, named: list[tuple[str, str]], wanted: set[str], found: dict[str, installed.Installed],
                  records: installed.PipRecords) -> dict[str, list[str]]:
    """Package -> its files whose bytes are not the ones RECORD says pip installed (with no RECORD hashes,
    the files ``--target`` names)."""
    state = load_state(root)
    edited: dict[str, list[str]] = {}
    for package in sorted(found):
        if wanted and package not in wanted:
            continue
        dist = records.dist(package)
        hashes = dist.hashes() if dist is not None else {}
        if not hashes:
            if package in wanted:
                edited[package] = sorted({rel for rel, _ in named if package_of(rel) == package})
            continue
        mine = {rel: sha for rel, sha in hashes.items() if package_of(rel) == package}
        present = {p.relative_to(root.path).as_posix() for p in _package_files(root.path, package)}
        for rel in sorted(set(mine) | present):
            if rel.endswith(".py") and _differs(root, rel, mine, state):
                edited.setdefault(package, []).append(rel)
    return edited


def _differs(root: Root, rel: str, mine: dict[str, str], state: State) -> bool:
    """Whether an installed file is a hand edit a spec can record: refused when patchspec patched it and
    it was edited since, or when the edit added or deleted it (a spec does neither)."""
    data = root.read_bytes(rel)
    if rel in state.files:
        if sha256(data) == state.files[rel].patched_sha256:
            return False
        raise PatchspecError(f"{rel} is patched by {', '.join(state.files[rel].specs)} and was edited "
                             "since: record compares with the release's own bytes; unapply "
                             f"{state.files[rel].specs[0]} first (keep a copy of your edit) and edit "
                             "the pristine file; nothing was written", file=str(root.path / rel))
    if rel not in mine:
        raise PatchspecError(f"{rel} was added by the edit: a spec changes the files a release installed, "
                             "it adds none; move the new code into a snippet package; nothing was "
                             "written", file=str(root.path / rel))
    if data is None:
        raise PatchspecError(f"{rel} was deleted by the edit: a spec changes files, it deletes none; "
                             "reinstall it; nothing was written", file=str(root.path / rel))
    return sha256(data) != mine[rel]


def _file_change(root: Root, rel: str, pristine_root: Root, want: str | None, dist: str, version: str,
                 named: list[tuple[str, str]]) -> FileChange | None:
    """One edited file against the release's own bytes from the index (which must be what RECORD says was
    installed), or None when its text is the release's after all."""
    data = pristine_root.read_bytes(rel)
    if data is None:
        raise PatchspecError(f"{rel} is not in {dist} {version}'s wheel or sdist: it was added after "
                             "install; nothing was written", file=str(root.path / rel))
    if want is not None and sha256(data) != want:
        raise PatchspecError(f"{rel}: the index's {dist} {version} is not what was installed (its bytes "
                             "differ from RECORD's sha256); nothing was written", file=str(root.path / rel))
    edited = root.read_bytes(rel) or b""
    edit = _decode(edited, str(root.path / rel))
    pristine = _decode(data, rel)
    if pristine == edit:
        return None
    return FileChange(rel, Text(rel, pristine), Text(rel, edit), Text(rel, edit), data,
                      qualnames=[q for r, q in named if r == rel], edited=edited)


def _package_files(root: Path, package: str):
    base = root / package
    if base.is_dir():
        yield from (p for p in base.rglob("*.py") if "__pycache__" not in p.parts)
    elif (root / f"{package}.py").is_file():
        yield root / f"{package}.py"


def upstream(root: Root, requirement: str, before: str | None, targets: list[str]) -> Change:
    """The named definitions as upstream changed them between BEFORE and AFTER of a distribution."""
    dist, sep, after = requirement.partition("==")
    if not sep or not dist or not after:
        raise PatchspecError(f"--from {requirement!r}: expected DIST==AFTER, e.g. requests==2.31.0")
    if not targets:
        raise PatchspecError("--from needs --target FILE:QUALNAME: the definitions whose change to carry")
    named = [parse_target(t, root) for t in targets]
    found = installed.scan(root.path)
    packages = {package_of(rel) for rel, _ in named}
    mine = [found[p] for p in packages if p in found
            and canonicalize_name(found[p].distribution or p) == canonicalize_name(dist)]
    if len(packages) != 1:
        raise PatchspecError(f"--target names files of several packages ({', '.join(sorted(packages))}): "
                             "record one distribution at a time", file=str(root.path))
    if not mine:
        (package,) = packages
        what = f"{package} is not installed under the root" if package not in found else \
            f"{package} is installed from {found[package].distribution}, not {dist}"
        raise PatchspecError(f"--target {named[0][0]}: {what}", file=str(root.path))
    item = mine[0]
    before = before or item.version
    old_root = Root.open(_release_root(dist, before))
    new_root = Root.open(_release_root(dist, after))
    files: dict[str, FileChange] = {}
    for rel, qualname in named:
        if rel not in files:
            texts = []
            for r, which in zip((old_root, new_root, root), (before, after, f"the installed {item.version}"),
                                strict=True):
                data = r.read_bytes(rel)
                if data is None:
                    raise PatchspecError(f"{rel} is not in {dist} {which}", file=rel)
                texts.append(data)
            old, new, here = (_decode(d, rel) for d in texts)
            pristine = texts[2]
            files[rel] = FileChange(rel, Text(rel, old), Text(rel, new), Text(rel, here), pristine)
        files[rel].qualnames.append(qualname)
    return Change(list(files.values()), item.distribution or dist, item.version, f"{before} -> {after}")
