"""The profile-new verb: a draft releases/RELEASE.yaml beside the spec, from a root of the new release."""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.utils import canonicalize_name

from patchspec import yamlloc
from patchspec.compiler.drift import Candidate, Drift, DriftRow, has_pattern, report
from patchspec.compiler.edits import Status
from patchspec.compiler.plan import close_names, resolve
from patchspec.compiler.source import SourceFile
from patchspec.errors import PatchspecError
from patchspec.install import installed
from patchspec.install.pristine import pristine_reader
from patchspec.install.root import Root
from patchspec.install.state import load_state
from patchspec.model import Spec
from patchspec.releases import profiles
from patchspec.releases.drift_cache import cached_binding_rows
from patchspec.releases.report import row_line
from patchspec.spec import load_spec
from patchspec.verdict import compile_plan

BROKEN_COMMENT = "does not hold (no fingerprint; check and apply refuse it):"


@dataclass
class ProfileDraft:
    path: Path
    text: str | None                 # None: nothing written, see ``needs``
    needs: list[str]                 # what a human must look at (written all the same with allow_broken)
    notes: list[str]


def new_profile(release: str, root_path: str, spec_paths: list[str], old: str | None = None,
                force: bool = False, accept=None, allow_broken: bool = False) -> ProfileDraft:
    """A draft ``releases/RELEASE.yaml`` beside the spec: fingerprints of every target, OLD's overrides
    kept where they still resolve (dropped where the spec's own form resolves instead). Written only when
    every transform of every spec resolves and every name its snippets use (``USES``) binds. A renamed
    target whose every anchor holds in one candidate is suggested as an override; ``accept(suggestion)``
    (``--accept-suggested``, or a question on a tty) takes it into the draft. Replacing a profile keeps
    its package pins and the sections of the specs not given.
    ``allow_broken`` writes it all the same, for a release the fix cannot take: what holds is recorded,
    each transform that does not hold is named (with its class) in a comment and keeps no fingerprint, so
    the release is paired and check, apply and drift name what fails instead of finding no profile."""
    root = Root.open(root_path)
    directory = profiles.releases_dir(spec_paths[0])
    path = profiles.profile_path(directory, release)
    if path.exists() and not force:
        _refuse_replacing(path, [load_spec(p).name for p in spec_paths])
    previous = profiles.load_profile(directory, old) if old else None
    read = pristine_reader(root, load_state(root))
    found = installed.scan(root.path)
    specs_out, needs, broken, notes, packages = {}, [], [], [], set()
    for spec_path in spec_paths:
        base = load_spec(spec_path)
        packages |= {t.package for t in base.targets}
        section = _spec_section(base, previous, old, read, root, accept)
        needs += section.needs
        broken += section.broken
        notes += section.notes
        specs_out[base.name] = section.recorded()
    if needs and not allow_broken:
        return ProfileDraft(path, None, needs, notes)
    pins, specs_out = _pins_and_sections(path, specs_out, packages, found, root)
    data = {"format": profiles.FORMAT, "release": release, "packages": pins, "specs": specs_out}
    text = _draft_text(data, path, release, old, broken)
    profiles.load_profile_text(text, str(path))  # the draft must load like any profile
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return ProfileDraft(path, text, needs, notes)


def _refuse_replacing(path: Path, names: list[str]) -> None:
    """A release's profile holds one section per spec: adding a spec's section replaces nothing, and
    replacing one takes ``--force``."""
    held = sorted(set(names) & set(_plain(yamlloc.load(profiles.read_profile(path), str(path))).get("specs") or {}))
    if held:
        raise PatchspecError(f"{path.name} holds a section of {', '.join(held)} already; --force replaces it (the "
                             "other specs' sections are kept)", file=str(path))


@dataclass
class _Section:
    """One spec's section of the draft as it is built, and what a human must look at in it."""

    kept: dict = field(default_factory=dict)      # target id -> its override: OLD's carried, or accepted
    prints: dict = field(default_factory=dict)    # target id -> its fingerprint
    chosen: dict = field(default_factory=dict)    # target id -> the form of the target that resolves
    needs: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)   # the draft's comment lines, with --allow-broken
    notes: list[str] = field(default_factory=list)

    def recorded(self) -> dict:
        return {**({"overrides": self.kept} if self.kept else {}), "fingerprints": self.prints}


def _spec_section(base: Spec, previous, old: str | None, read, root: Root, accept) -> _Section:
    """One spec's section: each target as OLD's override or the spec's own form resolves it (or a
    suggestion taken, or what needs a human), the names its snippets use, and the verdict on the draft."""
    # OLD may not cover this spec yet (a spec new to the release line): nothing to carry over then.
    forms = [profiles.for_release(base, previous)] if previous and previous.covers(base.name) else []
    reports = [report(spec, read, root.has_package, {}, modules=root.modules) for spec in forms + [base]]
    overrides = (previous.specs or {}).get(base.name, {}).get("overrides", {}) if previous else {}
    section = _Section()
    for target in base.targets:
        if not _resolves_in_a_form(section, target, base, zip(forms + [base], reports, strict=True), overrides):
            mine = [r for r in reports[-1] if r.target == target.id]
            _unresolved(section, base, target, mine, read, root, accept)
    for row in cached_binding_rows(base, read, root.has_package):
        if row.severity:
            section.needs.append(f"{base.name}: {row_line(row)}")
            section.broken.append(f"{base.name} uses {row.target}: {row.drift}")
    if not section.needs:   # every target resolves: the verdict compile and apply give, on the draft
        refused = _refusal(base.with_targets(tuple(section.chosen[t.id] for t in base.targets)), read, root)
        section.needs += [f"{base.name}: {refused}"] if refused else []
        section.broken += [f"{base.name}: {refused}"] if refused else []
    dropped = sorted(set(overrides) - set(section.kept))
    if dropped:
        section.notes.append(f"{base.name}: overrides of {old} not carried (the spec's own form resolves, or "
                             f"nothing does): {', '.join(dropped)}")
    return section


def _resolves_in_a_form(section: _Section, target, base: Spec, forms, overrides: dict) -> bool:
    """Record the first form of ``target`` (OLD's, then the spec's own) where every transform holds."""
    for spec, rows in forms:
        mine = [r for r in rows if r.target == target.id]
        if all(r.drift == Drift.UNRECORDED for r in mine):
            section.prints[target.id] = mine[0].fingerprint
            if spec is not base and target.id in overrides:
                section.kept[target.id] = _plain(overrides[target.id])
            section.chosen[target.id] = next(t for t in spec.targets if t.id == target.id)
            return True
    return False


def _unresolved(section: _Section, base: Spec, target, mine: list[DriftRow], read, root: Root, accept) -> None:
    """A target no form resolves: the rename it suggests when accepted and it holds there, else its rows
    (and the suggestion) as what a human must look at."""
    renamed = _renamed_to(target, mine)
    nearest = renamed.qualname if renamed else _nearest(target, mine, read)
    suggestion = renamed and (f"{base.name}: {target.id}: every anchor holds in {renamed.qualname} "
                              f"(line {renamed.line}); if it is the same function renamed, override "
                              f"it: {target.id}: {{function: {renamed.qualname}}}")
    suggestion = suggestion or nearest and (
        f"{base.name}: {target.id}: {target.function} is not defined in {target.file}; its nearest "
        f"name is {nearest}: if it is the same function renamed, override it: {target.id}: "
        f"{{function: {nearest}}}")
    if suggestion and accept is not None and accept(suggestion):
        moved = dataclasses.replace(target, function=nearest)
        rows = report(base.with_targets((moved,)), read, root.has_package, {})
        if all(r.drift == Drift.UNRECORDED for r in rows):
            section.kept[target.id] = {"function": nearest}
            section.prints[target.id] = rows[0].fingerprint
            section.notes.append(f"accepted: {suggestion}")
            section.chosen[target.id] = moved
            return
    section.needs += [f"{base.name}: {row_line(r)}" for r in mine if r.drift != Drift.UNRECORDED]
    section.broken += [f"{base.name} {r.target}#{r.index} {r.kind} {r.function}: {r.drift}"
                       for r in mine if r.drift != Drift.UNRECORDED]
    section.needs += [suggestion] if suggestion else []


def _pins_and_sections(path: Path, specs_out: dict, packages: set[str], found: dict[str, installed.Installed],
                       root: Root) -> tuple[dict, dict]:
    """The draft's package pins and spec sections: a replaced profile keeps its pins and the sections of
    the specs not given; a new one pins what is installed under the root."""
    if path.exists():
        replaced = _plain(yamlloc.load(profiles.read_profile(path), str(path)))
        pins = replaced["packages"]
        kept = replaced.get("specs") or {}
        specs_out = {**{name: specs_out.get(name, section) for name, section in kept.items()}, **specs_out}
    else:
        pins = {name: _pin(found[name]) for name in sorted(packages) if name in found}
    if not pins:
        raise PatchspecError(f"no installed version found under the root for {', '.join(sorted(packages))}",
                             file=str(root.path))
    return pins, specs_out


def _draft_text(data: dict, path: Path, release: str, old: str | None, broken: list[str]) -> str:
    """The draft as written: its schema line, what made it (review it), what does not hold, the YAML."""
    schema = os.path.relpath(Path(__file__).parent.parent / "schema" / "profile.schema.json", path.parent)
    return (f"# yaml-language-server: $schema={schema}\n"
            f"# Draft by patchspec profile new {release}" + (f" --from {old}" if old else "")
            + (" --allow-broken" if broken else "") + ": review it.\n"
            + "".join(f"# {BROKEN_COMMENT} {line}\n" for line in broken)
            + yaml.safe_dump(data, sort_keys=False, width=110))


def _refusal(spec: Spec, read, root: Root) -> str | None:
    """What refuses the spec as this draft would pair it with the release (``verdict.compile_plan``, the
    one verdict), or None when it holds."""
    try:
        compile_plan(spec, resolve([spec], read, root.has_package), read)
    except PatchspecError as exc:
        return exc.message.removesuffix("; nothing was written")
    return None


def _pin(item: installed.Installed):
    """A new profile's pin: the exact version, and the distribution when it is not the import name's own."""
    if item.distribution in (None, canonicalize_name(item.package)):
        return f"=={item.version}"
    return {"versions": f"=={item.version}", "distributions": [item.distribution]}


def _renamed_to(target, rows: list[DriftRow]) -> Candidate | None:
    """The candidate a missing target was renamed to, when every anchor of the target holds there."""
    anchored = sum(map(has_pattern, target.transforms))
    best = next((c for r in rows for c in r.candidates), None)
    if best is None or not anchored or best.anchors < anchored:
        return None
    return best


def _nearest(target, rows: list[DriftRow], read) -> str | None:
    """The nearest name of the file to a target it no longer defines (the "did you mean" its row says)."""
    text = read(target.file) if any(r.status == Status.TARGET_MISSING for r in rows) else None
    close = close_names(target.function, SourceFile(target.file, text)) if text is not None else []
    return close[0] if close else None


def _plain(data):
    """YAML-loaded data (mappings that remember locations) as plain dicts and lists for dumping."""
    return json.loads(json.dumps(data))
