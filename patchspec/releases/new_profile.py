"""The profile-new verb: a draft releases/RELEASE.yaml beside the spec, from a root of the new release."""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
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
from patchspec.install.root import Root
from patchspec.install.state import load_state
from patchspec.model import Spec
from patchspec.install.pristine import pristine_reader
from patchspec.verdict import compile_plan
from patchspec.releases import profiles
from patchspec.releases.drift_cache import cached_binding_rows
from patchspec.releases.report import row_line
from patchspec.spec import load_spec

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
        raise PatchspecError(f"{path.name} exists; --force to replace it", file=str(path))
    previous = profiles.load_profile(directory, old) if old else None
    read = pristine_reader(root, load_state(root))
    found = installed.scan(root.path)
    specs_out, needs, broken, notes, packages = {}, [], [], [], set()
    for spec_path in spec_paths:
        base = load_spec(spec_path)
        packages |= {t.package for t in base.targets}
        # OLD may not cover this spec yet (a spec new to the release line): nothing to carry over then.
        forms = [profiles.for_release(base, previous)] if previous and previous.covers(base.name) else []
        reports = [report(spec, read, root.has_package, {}) for spec in forms + [base]]
        overrides = (previous.specs or {}).get(base.name, {}).get("overrides", {}) if previous else {}
        kept, prints, chosen, held = {}, {}, {}, len(needs)
        for target in base.targets:
            for spec, rows in zip(forms + [base], reports):
                mine = [r for r in rows if r.target == target.id]
                if all(r.drift == Drift.UNRECORDED for r in mine):
                    prints[target.id] = mine[0].fingerprint
                    if spec is not base and target.id in overrides:
                        kept[target.id] = _plain(overrides[target.id])
                    chosen[target.id] = next(t for t in spec.targets if t.id == target.id)
                    break
            else:
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
                        kept[target.id] = {"function": nearest}
                        prints[target.id] = rows[0].fingerprint
                        notes.append(f"accepted: {suggestion}")
                        chosen[target.id] = moved
                        continue
                needs += [f"{base.name}: {row_line(r)}" for r in mine if r.drift != Drift.UNRECORDED]
                broken += [f"{base.name} {r.target}#{r.index} {r.kind} {r.function}: {r.drift}"
                           for r in mine if r.drift != Drift.UNRECORDED]
                needs += [suggestion] if suggestion else []
        for row in cached_binding_rows(base, read, root.has_package):
            if row.severity:
                needs.append(f"{base.name}: {row_line(row)}")
                broken.append(f"{base.name} uses {row.target}: {row.drift}")
        if len(needs) == held:   # every target resolves: the verdict compile and apply give, on the draft
            refused = _refusal(base.with_targets(tuple(chosen[t.id] for t in base.targets)), read, root)
            needs += [f"{base.name}: {refused}"] if refused else []
            broken += [f"{base.name}: {refused}"] if refused else []
        dropped = sorted(set(overrides) - set(kept))
        if dropped:
            notes.append(f"{base.name}: overrides of {old} not carried (the spec's own form resolves, or "
                         f"nothing does): {', '.join(dropped)}")
        specs_out[base.name] = {**({"overrides": kept} if kept else {}), "fingerprints": prints}
    if needs and not allow_broken:
        return ProfileDraft(path, None, needs, notes)
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
    data = {"format": profiles.FORMAT, "release": release, "packages": pins, "specs": specs_out}
    schema = os.path.relpath(Path(__file__).parent.parent / "schema" / "profile.schema.json", path.parent)
    text = (f"# yaml-language-server: $schema={schema}\n"
            f"# Draft by patchspec profile new {release}" + (f" --from {old}" if old else "")
            + (" --allow-broken" if broken else "") + ": review it.\n"
            + "".join(f"# {BROKEN_COMMENT} {line}\n" for line in broken)
            + yaml.safe_dump(data, sort_keys=False, width=110))
    profiles.load_profile_text(text, str(path))  # the draft must load like any profile
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return ProfileDraft(path, text, needs, notes)


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
