"""A spec prepared and compiled on a root: the one layer between the verbs and the compiler.

It reads the root (pristine texts through the state record), resolves the spec for one release, and
runs the compiler; it is the one place that turns the compiler's findings (an unresolved transform, a
conflict, what lint refuses, a binding that does not hold) into a user error at the spec's line:col.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from patchspec import snippets
from patchspec.compiler import bindings, encoding, snippet_api
from patchspec.compiler.edits import ConflictError, Status
from patchspec.compiler.plan import Plan, emit, resolve
from patchspec.errors import Location, PatchspecError
from patchspec.install import installed, txn
from patchspec.install.root import Root
from patchspec.install.state import State, load_state, pristine_path, sha256
from patchspec.model import Spec, package_of
from patchspec.releases import profiles
from patchspec.spec import load_spec, load_spec_bytes


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
    return Prepared(spec, release, root, plan, profile, Path(spec_path).read_bytes(), read, warnings)


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


def raise_plan_errors(plan: Plan) -> None:
    """The first unresolved transform, at its place in the spec and (where known) in the source."""
    if plan.errors:
        first = plan.errors[0]
        more = f" (and {len(plan.errors) - 1} more)" if len(plan.errors) > 1 else ""
        definition = plan.definitions.get((first.file, first.function))
        line = first.lines[0] if first.lines else definition.node.lineno if definition else None
        source = Location(first.file, line)
        # an anchor missing from one of several definitions of the name: say which one was searched
        where = f" ({first.note})" if first.status == Status.MISSING and " is defined " in (first.note or "") else ""
        raise _at_spec(f"{first.spec} {first.target}#{first.index} {first.kind} in {first.function}: "
                       f"{first.detail}{where}{more}; nothing was written", first.spec_loc, source)


def _at_spec(message: str, spec_loc, *source: Location) -> PatchspecError:
    if spec_loc is None:
        first, *rest = source
        return PatchspecError(message, file=first.file, line=first.line, also=tuple(rest))
    return PatchspecError(message, file=spec_loc.file, line=spec_loc.line, col=spec_loc.col, also=source)


def emit_checked(plan: Plan, specs: list[Spec]) -> dict[str, str]:
    """``emit``, with a conflict or anything lint refuses raised at the spec's line:col."""
    try:
        texts = emit(plan, specs)
    except ConflictError as exc:
        first, *rest = exc.spec_locations or [None]
        raise _at_spec(f"{exc.message}; nothing was written", first, *[Location(r.file, r.line, r.col) for r in rest],
                       Location(exc.file, exc.line)) from None
    if plan.problems:
        first = plan.problems[0]
        more = f" (and {len(plan.problems) - 1} more)" if len(plan.problems) > 1 else ""
        raise _at_spec(f"{first.spec}: {first.text}{more}; nothing was written", first.where,
                       Location(first.file, first.line))
    return texts


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


def compile_plan(spec: Spec, plan: Plan, read) -> dict[str, str]:
    """The one verdict of validate, compile, apply and profile new on a spec resolved on a root: the patched
    texts, or the first thing that refuses it (an unresolved transform, a conflict, what lint finds in the
    patched file, a ``USES`` binding the release lacks) raised at the spec's line:col."""
    raise_plan_errors(plan)
    raise_if_upstream(spec, plan)
    texts = emit_checked(plan, [spec])
    raise_binding_problems(binding_problems(spec, plan, read), spec)
    return texts


def raise_if_upstream(spec: Spec, plan: Plan) -> None:
    """A release that already holds every change of the spec: nothing to write, and a rewrite whose
    replacement is there (drift calls it ``obsolete``). Apply and check say it in these words."""
    done = [r for r in plan.resolved if r.ok and not r.edits]
    if done and not plan.files:
        raise PatchspecError(f"nothing to apply: this release already holds every change of {spec.name} "
                             f"({done[0].target}#{done[0].index}: {done[0].note or 'nothing to do'}); "
                             f"the fix is upstream", file=spec.path)


def binding_problems(spec: Spec, plan: Plan, read) -> list[str]:
    """What anchors cannot show: a member or signature the snippets use (their ``USES``) that the release
    lacks, or what lint found in the inserted code (a name not bound before it...): emit first."""
    present = {package_of(r.file) for r in plan.resolved if r.status != Status.SKIPPED}
    uses = {rel: entries for rel, entries in snippets.read_package(snippet_api.declared_uses, spec).items()
            if package_of(rel) in present}
    parsed = bindings.tree_reader(read)
    found = bindings.problems(uses, lambda rel: plan.sources[rel].tree if rel in plan.sources else parsed(rel),
                              bindings.spec_binds(spec))
    return found + [str(p) for p in plan.problems]


def raise_binding_problems(problems: list[str], spec: Spec) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PatchspecError(f"binding: {problems[0]}{more}; nothing was written", file=spec.path)
