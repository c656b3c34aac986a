"""A spec prepared and compiled on a root: the one layer between the verbs and the compiler.

It reads the root (pristine texts through the state record), resolves the spec for one release, and
runs the compiler; what the compiler finds becomes a user error at the spec's line:col in ``verdict``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchspec import snippets
from patchspec.compiler.edits import Status
from patchspec.compiler.plan import Plan, Resolved, resolve
from patchspec.errors import PatchspecError
from patchspec.install import installed, shadowed, txn
from patchspec.install.pristine import pristine_reader, refuse_edited, refuse_unrecorded
from patchspec.install.root import Root
from patchspec.install.state import State, load_state, sha256
from patchspec.model import Spec, package_of
from patchspec.releases import profiles
from patchspec.spec import load_spec, load_spec_bytes
from patchspec.verdict import compile_plan, emit_checked, raise_if_upstream, raise_plan_errors


@dataclass
class Prepared:
    """A spec resolved for one release on one root, and the plan of its transforms there."""

    spec: Spec
    release: str
    root: Root
    plan: Plan
    profile: profiles.Profile
    raw_spec: bytes
    read: Callable[[str], str | None]  # rel -> pristine text or None
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


@dataclass
class Compiled:
    """A spec prepared on a root and compiled with what its state record holds: what ``apply`` writes from.
    For a spec the record lists already nothing is compiled (``applied``: the verb checks it is as written)."""

    prepared: Prepared
    skipped: list[Resolved]            # the transforms the plan skips (another package, ``--only``)
    applied: bool                      # the record lists the spec: nothing below is computed
    files: set[str] = field(default_factory=set)            # the files the spec patches
    texts: dict[str, str] = field(default_factory=dict)     # each one's text with every spec on it applied
    pristine: dict[str, bytes | None] = field(default_factory=dict)   # the files no spec patched before
    warnings: list[str] = field(default_factory=list)       # the prepared spec's, then RECORD's on ``pristine``

    @property
    def spec(self) -> Spec:
        return self.prepared.spec


def compile_on_root(spec_path: str, release: str, root: Root, state: State, records: installed.PipRecords,
                    only: set[str] | None = None, base: Spec | None = None) -> Compiled:
    """The spec resolved and compiled on the root as ``state`` records it, in the order apply refuses
    (one ``PatchspecError``): a transform that does not resolve, nothing left to patch, a file another spec
    patched that was edited since, a file to keep as pristine that carries a marker no record explains,
    then the compiled spec not holding (a conflict, lint, a binding). Each file's text is computed from its
    pristine text with every spec the record lists on it and this one, in stacking order."""
    prepared = prepare(spec_path, release, root, only, state, base)
    spec = prepared.spec
    skipped = [r for r in prepared.plan.resolved if r.status == Status.SKIPPED]
    if spec.name in state.specs:
        return Compiled(prepared, skipped, applied=True)
    raise_plan_errors(prepared.plan)
    files = set(prepared.plan.files)
    if not files:
        raise_if_upstream(spec, prepared.plan)
        raise PatchspecError(f"nothing to apply: every target of {spec.name} was skipped", file=spec_path)
    for rel in files & set(state.files):
        refuse_edited(root, state, rel)
    warnings = list(prepared.warnings)
    pristine = _pristine_copies(root, state, records, sorted(files - set(state.files)), warnings)
    sharing = [s for n, s in applied_specs(state, root).items() if n in state.touching(files)]
    texts = compile_spec(prepared)  # the spec alone holds on this release, its bindings included
    if sharing:
        texts = patched_texts([*sharing, spec], files, root, state)
    return Compiled(prepared, skipped, applied=False, files=files, texts=texts, pristine=pristine, warnings=warnings)


def _pristine_copies(root: Root, state: State, records: installed.PipRecords, rels: list[str],
                     warnings: list[str]) -> dict[str, bytes | None]:
    """The bytes of each file the spec is the first to patch, kept as its pristine copy: refused when it
    carries a marker no record explains; a warning (added to ``warnings``) when it is not what pip installed."""
    pristine = {rel: root.read_bytes(rel) for rel in rels}
    for rel, data in pristine.items():
        refuse_unrecorded(root, state, rel, data)
        want = records.hash(rel)
        if want is not None and want != sha256(data):
            warnings.append(f"{rel} differs from what {records.where(rel)} installed (its RECORD "
                            "sha256): changed after install; kept as the pristine copy all the same")
    return pristine
