"""A spec prepared and compiled on a root: the one layer between the verbs and the compiler.

It reads the root (pristine texts through the state record), resolves the spec for one release, and
runs the compiler; what the compiler finds becomes a user error at the spec's line:col in ``verdict``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from patchspec import snippets
from patchspec.compiler.plan import Plan, resolve
from patchspec.errors import PatchspecError
from patchspec.install import installed, shadowed, txn
from patchspec.install.pristine import pristine_reader
from patchspec.install.root import Root
from patchspec.install.state import State, load_state
from patchspec.model import Spec, package_of
from patchspec.releases import profiles
from patchspec.spec import load_spec, load_spec_bytes
from patchspec.verdict import compile_plan, emit_checked, raise_plan_errors


@dataclass
class Prepared:
    """A spec resolved for one release on one root, and the plan of its transforms there."""

    spec: Spec
    release: str
    root: Root
    plan: Plan
    profile: profiles.Profile
    raw_spec: bytes
    read: object  # rel -> pristine text or None
    warnings: list[str] = field(default_factory=list)  # said in the report and kept in the state record


def prepare(spec_path: str, release: str, root_path: str | Root, only: set[str] | None = None,
            state: State | None = None, base: Spec | None = None) -> Prepared:
    """``base``: the spec at ``spec_path`` when the caller has loaded it already (it is loaded once)."""
    root = txn.pending_view(Root.open(root_path))  # as before an interrupted run, if one is pending
    base = load_spec(spec_path) if base is None else base
    directory = profiles.releases_dir(spec_path)
    warnings: list[str] = []
    found = installed.scan(root.path)
    if release == "auto":
        release = profiles.select_release(directory, found, base, str(root.path))
    profile = profiles.load_profile(directory, release)
    if not profile.matches(found):
        warnings.append(f"release {release} was forced with --release: its profile covers "
                        f"{', '.join(f'{n} {p.describe()}' for n, p in profile.packages.items())}, the root has "
                        f"{profiles.describe(found, profile.packages)}")
    spec = canonical_spec(profiles.for_release(base, profile), root)
    snippets.validate(spec)
    state = load_state(root) if state is None else state
    read = pristine_reader(root, state)
    plan = resolve([spec], read, root.has_package, only)
    for target in spec.targets:   # what Python may run instead of the target's source
        if root.has_package(target.package):
            warnings += [w for w in shadowed.warnings(root, target.file, target.function, read) if w not in warnings]
    return Prepared(spec, release, root, plan, profile, Path(spec_path).read_bytes(), read, warnings)


def canonical_spec(spec: Spec, root: Root) -> Spec:
    """The spec with each target naming its file by the root's one canonical path, so that two spellings
    of a path are one file to the plan and to the state record."""
    targets = []
    for t in spec.targets:
        try:
            rel = root.canonical(t.file)
        except PatchspecError as exc:
            raise PatchspecError(f"target {t.id}: {exc.message}", file=t.loc.file, line=t.loc.line,
                                 col=t.loc.col) from None
        targets.append(t if rel == t.file else dataclasses.replace(t, file=rel))
    return spec.with_targets(tuple(targets))


def applied_specs(state: State, root: Root, exclude: str | None = None) -> dict[str, Spec]:
    """The release-resolved specs already applied to the root, rebuilt from the texts the record keeps."""
    out = {}
    for name, rec in state.specs.items():
        if name == exclude:
            continue
        spec = load_spec_bytes(rec.spec_text.encode(), rec.spec_path)
        profile = profiles.load_profile_text(rec.profile_text, rec.profile_path)
        out[name] = canonical_spec(profiles.for_release(spec, profile), root)
    return out


def patched_texts(specs: list[Spec], files: set[str], root: Root, state: State) -> dict[str, str]:
    """The text of each file with every one of ``specs`` applied to its pristine text, in stacking order
    (``order``, then name), so that the text does not depend on the order the specs were applied in."""
    scoped = [s.with_targets(tuple(t for t in s.targets if t.file in files))
              for s in sorted(specs, key=lambda s: s.rank)]
    plan = resolve(scoped, pristine_reader(root, state), root.has_package,
                           {package_of(f) for f in files})
    raise_plan_errors(plan)
    return emit_checked(plan, scoped)


def compile_spec(prepared: Prepared) -> dict[str, str]:
    return compile_plan(prepared.spec, prepared.plan, prepared.read)
