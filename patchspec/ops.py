"""The verbs as functions: compile, apply, unapply, check, diff. Only apply and unapply write.

Several specs may patch one root, even one file. The pristine bytes of every patched file are kept, and
a file's patched text is always computed from its pristine text with all the specs applied to it, so
specs can be applied and unapplied in any order and the root still comes back byte for byte.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from patchspec.compiler import bindings, encoding, plan as planner, snippet_api
from patchspec.compiler.edits import Status
from patchspec import installed, profiles, snippets, state as staterec, txn
from patchspec.errors import Exit, Location, PatchspecError
from patchspec.model import Spec, package_of
from patchspec.root import Root
from patchspec.spec import load_spec, load_spec_bytes


@dataclass
class Prepared:
    """A spec resolved for one release on one root, and the plan of its transforms there."""

    spec: Spec
    release: str
    root: Root
    plan: planner.Plan
    profile: profiles.Profile
    raw_spec: bytes
    read: object  # rel -> pristine text or None
    warnings: list[str] = field(default_factory=list)  # said in the report and kept in the state record


def prepare(spec_path: str, release: str, root_path: str, only: set[str] | None = None,
            state: dict | None = None) -> Prepared:
    root = Root.open(root_path)
    base = load_spec(spec_path)
    directory = profiles.releases_dir(spec_path)
    warnings: list[str] = []
    found = installed.scan(root.path)
    if release == "auto":
        release = profiles.select_release(directory, found, base, root_path)
    profile = profiles.load_profile(directory, release)
    if not profile.matches(found):
        warnings.append(f"release {release} was forced with --release: its profile covers "
                        f"{', '.join(f'{n} {p.describe()}' for n, p in profile.packages.items())}, the root has "
                        f"{profiles.describe(found, profile.packages)}")
    spec = profiles.for_release(base, profile)
    snippets.validate(spec)
    state = staterec.load(root) if state is None else state
    read = pristine_reader(root, state)
    plan = planner.resolve([spec], read, root.has_package, only)
    return Prepared(spec, release, root, plan, profile, Path(spec_path).read_bytes(), read, warnings)


def pristine_reader(root: Root, state: dict):
    """Read a file as it was before any spec patched it, in the encoding it declares (BOM, cookie)."""
    def read(rel: str) -> str | None:
        path = staterec.pristine_path(rel) if rel in state["files"] else rel
        data = root.read_bytes(path)
        if data is None and rel in state["files"]:
            raise PatchspecError("pristine copy missing from the state record", file=str(root.path / path))
        try:
            return None if data is None else encoding.decode(data)
        except (UnicodeDecodeError, LookupError) as exc:
            raise PatchspecError(f"cannot decode as {encoding.detect(data)}: {exc}",
                                 file=str(root.path / rel)) from None
    return read


def raise_plan_errors(plan: planner.Plan) -> None:
    """The first unresolved transform, at its place in the spec and (where known) in the source."""
    if plan.errors:
        first = plan.errors[0]
        more = f" (and {len(plan.errors) - 1} more)" if len(plan.errors) > 1 else ""
        definition = plan.definitions.get((first.file, first.function))
        line = first.lines[0] if first.lines else definition.node.lineno if definition else None
        source = Location(first.file, line)
        raise _at_spec(f"{first.spec} {first.target}#{first.index} {first.kind} in {first.function}: "
                       f"{first.detail}{more}; nothing was written", first.spec_loc, source)


def _at_spec(message: str, spec_loc, *source: Location) -> PatchspecError:
    if spec_loc is None:
        first, *rest = source
        return PatchspecError(message, file=first.file, line=first.line, also=tuple(rest))
    return PatchspecError(message, file=spec_loc.file, line=spec_loc.line, col=spec_loc.col, also=source)


def emit_checked(plan: planner.Plan, specs: list[Spec]) -> dict[str, str]:
    """``planner.emit``, with a conflict or anything lint refuses raised at the spec's line:col."""
    try:
        texts = planner.emit(plan, specs)
    except planner.ConflictError as exc:
        first, *rest = exc.locations or [None]
        raise _at_spec(f"{exc}; nothing was written", first, *[Location(r.file, r.line, r.col) for r in rest],
                       Location(exc.file, exc.line)) from None
    if plan.problems:
        first = plan.problems[0]
        more = f" (and {len(plan.problems) - 1} more)" if len(plan.problems) > 1 else ""
        raise _at_spec(f"{first.spec}: {first.text}{more}; nothing was written", first.where,
                       Location(first.file, first.line))
    return texts


def _applied_specs(state: dict, root: Root, exclude: str | None = None) -> dict[str, Spec]:
    """The release-resolved specs already applied to the root, rebuilt from the texts the record keeps."""
    out = {}
    for name, rec in state["specs"].items():
        if name == exclude:
            continue
        spec = load_spec_bytes(rec["spec_text"].encode(), rec["spec_path"])
        profile = profiles.load_profile_text(rec["profile_text"], rec["profile_path"])
        out[name] = profiles.for_release(spec, profile)
    return out


def patched_texts(specs: list[Spec], files: set[str], root: Root, state: dict) -> dict[str, str]:
    """The text of each file with every one of ``specs`` applied to its pristine text, in stacking order
    (``order``, then name), so that the text does not depend on the order the specs were applied in."""
    scoped = [s.with_targets(tuple(t for t in s.targets if t.file in files))
              for s in sorted(specs, key=lambda s: s.rank)]
    plan = planner.resolve(scoped, pristine_reader(root, state), root.has_package,
                           {package_of(f) for f in files})
    raise_plan_errors(plan)
    return emit_checked(plan, scoped)


def compile_spec(prepared: Prepared) -> dict[str, str]:
    raise_plan_errors(prepared.plan)
    texts = emit_checked(prepared.plan, [prepared.spec])
    raise_binding_problems(binding_problems(prepared), prepared.spec)
    return texts


def binding_problems(prepared: Prepared) -> list[str]:
    """What anchors cannot show: a member or signature the snippets use (their ``USES``) that the release
    lacks, or what lint found in the inserted code (a name not bound before it...): emit first."""
    spec, plan = prepared.spec, prepared.plan
    present = {package_of(r.file) for r in plan.resolved if r.status != Status.SKIPPED}
    uses = {rel: entries for rel, entries in snippets.read_package(snippet_api.declared_uses, spec).items()
            if package_of(rel) in present}
    parsed = bindings.tree_reader(prepared.read)
    found = bindings.problems(uses, lambda rel: plan.sources[rel].tree if rel in plan.sources else parsed(rel))
    return found + [str(p) for p in plan.problems]


def raise_binding_problems(problems: list[str], spec: Spec) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PatchspecError(f"binding: {problems[0]}{more}; nothing was written", file=spec.path)


@dataclass
class ApplyResult:
    changed: bool
    files: list[str]
    skipped: list[planner.Resolved] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def apply(spec_path: str, release: str, root_path: str, only: set[str] | None = None,
          lock_timeout: float = 30.0) -> ApplyResult:
    root = Root.open(root_path)
    txn.check_writable(root.path)
    with staterec.locked(root, lock_timeout):
        state = staterec.load(root)
        prepared = prepare(spec_path, release, root_path, only, state)
        spec = prepared.spec
        skipped = [r for r in prepared.plan.resolved if r.status == Status.SKIPPED]
        if spec.name in state["specs"]:
            rec = state["specs"][spec.name]
            if rec["spec_sha256"] != spec.sha256 or rec["release"] != prepared.release:
                raise PatchspecError(f"spec {spec.name} is applied from another version of the spec or "
                                     f"release ({rec['release']}); unapply it first", file=spec_path)
            _verify_unchanged(root, state, spec.name)
            return ApplyResult(False, rec["files"], skipped, prepared.warnings)
        raise_plan_errors(prepared.plan)
        files = set(prepared.plan.files)
        if not files:
            raise PatchspecError(f"nothing to apply: every target of {spec.name} was skipped", file=spec_path)
        for rel in files & set(state["files"]):
            _verify_file(root, state, rel)
        sharing = [s for n, s in _applied_specs(state, root).items() if _touches(state, n, files)]
        texts = compile_spec(prepared)  # the spec alone holds on this release, its bindings included
        if sharing:
            texts = patched_texts([*sharing, spec], files, root, state)
        writes: dict[Path, bytes | None] = {}
        for rel in sorted(files):
            current = root.read_bytes(rel)
            record = state["files"].setdefault(rel, {"pristine_sha256": staterec.sha256(current), "specs": []})
            if not record["specs"]:
                writes[root.resolve(staterec.pristine_path(rel))] = current
            data = encoding.encode(texts[rel], current)
            record["specs"].append(spec.name)
            record["patched_sha256"] = staterec.sha256(data)
            writes[root.resolve(rel)] = data
        installed = snippets.install_files(spec)
        for rel, data in installed.items():
            entry = state["snippets"].setdefault(rel, {"sha256": staterec.sha256(data), "specs": []})
            if entry["sha256"] != staterec.sha256(data):
                raise PatchspecError(f"snippet file {rel} is installed with other contents by "
                                     f"{', '.join(entry['specs'])}", file=str(root.path / rel))
            entry["specs"].append(spec.name)
            writes[root.resolve(rel)] = data
        state["specs"][spec.name] = {
            "spec_path": str(Path(spec_path).resolve()), "spec_sha256": spec.sha256,
            "spec_text": prepared.raw_spec.decode("utf-8"), "release": prepared.release,
            "profile_path": prepared.profile.path, "profile_text": prepared.profile.text,
            "files": sorted(files), "snippets": sorted(installed), "warnings": prepared.warnings,
        }
        writes[root.path / staterec.STATE_FILE] = staterec.dump(state)
        txn.commit(writes, root.path)
        return ApplyResult(True, sorted(files), skipped, prepared.warnings)


def _touches(state: dict, name: str, files: set[str]) -> bool:
    return bool(set(state["specs"][name]["files"]) & files)


def _verify_file(root: Root, state: dict, rel: str) -> None:
    current = root.read_bytes(rel)
    if current is None or staterec.sha256(current) != state["files"][rel]["patched_sha256"]:
        raise PatchspecError("patched file was edited or removed since apply (use unapply --force to "
                             "restore it anyway); nothing was written", file=str(root.path / rel))


def _verify_unchanged(root: Root, state: dict, name: str) -> None:
    for rel in state["specs"][name]["files"]:
        _verify_file(root, state, rel)


def unapply(spec_name_or_path: str, root_path: str, force: bool = False, lock_timeout: float = 30.0) -> list[str]:
    root = Root.open(root_path)
    txn.check_writable(root.path)
    with staterec.locked(root, lock_timeout):
        state = staterec.load(root)
        name = _spec_name(spec_name_or_path)
        if name not in state["specs"]:
            raise PatchspecError(f"spec {name} is not applied to this root", file=str(root.path))
        rec = state["specs"].pop(name)
        if not force:
            for rel in rec["files"]:
                _verify_file(root, state, rel)
        others = _applied_specs(state, root)
        writes: dict[Path, bytes | None] = {}
        for rel in rec["files"]:
            record = state["files"][rel]
            record["specs"].remove(name)
            pristine = root.read_bytes(staterec.pristine_path(rel))
            if pristine is None or staterec.sha256(pristine) != record["pristine_sha256"]:
                raise PatchspecError("pristine copy is missing or altered: the original cannot be restored; "
                                     "nothing was written", file=str(root.path / staterec.pristine_path(rel)))
            if not record["specs"]:
                writes[root.resolve(rel)] = pristine
                writes[root.resolve(staterec.pristine_path(rel))] = None
                del state["files"][rel]
            else:
                remaining = [others[n] for n in record["specs"]]
                data = encoding.encode(patched_texts(remaining, {rel}, root, state)[rel], pristine)
                record["patched_sha256"] = staterec.sha256(data)
                writes[root.resolve(rel)] = data
        for rel in rec["snippets"]:
            entry = state["snippets"][rel]
            entry["specs"].remove(name)
            if not entry["specs"]:
                del state["snippets"][rel]
                writes[root.resolve(rel)] = None
        writes[root.path / staterec.STATE_FILE] = staterec.dump(state)
        _drop_bytecode(root, [p for p, d in writes.items() if d is None])
        txn.commit(writes, root.path)
        return rec["files"]


def _drop_bytecode(root: Root, deleted: list[Path]) -> None:
    """Importing the installed snippets leaves ``__pycache__`` beside them; it goes with them."""
    for path in deleted:
        cache = path.parent / "__pycache__"
        if cache.is_dir():
            for pyc in cache.glob(path.stem + ".*.pyc"):
                pyc.unlink()
            if not any(cache.iterdir()):
                cache.rmdir()


def _spec_name(spec_name_or_path: str) -> str:
    if spec_name_or_path.endswith((".yaml", ".yml")) or "/" in spec_name_or_path:
        return load_spec(spec_name_or_path).name
    return spec_name_or_path


@dataclass
class CheckResult:
    """One row per transform (the same unit before and after apply) and what else stops the spec."""

    code: int                      # Exit.OK applied, Exit.PENDING would apply cleanly, Exit.BROKEN does not hold
    rows: list[planner.Resolved]
    problems: list[dict] = field(default_factory=list)   # {"type", "detail"[, "file"]}


APPLIED, EDITED, WOULD_APPLY = "applied", "edited", "would-apply"


def check(spec_path: str, release: str, root_path: str, only: set[str] | None = None) -> CheckResult:
    root = Root.open(root_path)
    state = staterec.load(root)
    spec = load_spec(spec_path)
    rec = state["specs"].get(spec.name)
    if rec is not None and rec["spec_sha256"] == spec.sha256 and release in ("auto", rec["release"]):
        # Fast path: the record says what was written; hashes say whether it is still there.
        resolved = _applied_specs(state, root)[spec.name]
        edited = {rel for rel in rec["files"] + rec["snippets"] if not _matches_record(root, state, rel)}
        rows = [planner.Resolved(spec.name, t.id, x.index, x.kind, t.file, t.function,
                                 EDITED if t.file in edited else APPLIED if t.file in rec["files"] else Status.SKIPPED)
                for t in resolved.targets for x in t.transforms]
        problems = [{"type": "edited", "file": rel, "detail": f"edited: {rel} differs from what apply wrote"}
                    for rel in sorted(edited - set(rec["files"]))]
        return CheckResult(Exit.BROKEN if edited else Exit.OK, rows, problems)
    if rec is not None:
        return CheckResult(Exit.BROKEN, [], [{"type": "record", "detail": f"{spec.name} is applied from another "
                                              f"spec version or release ({rec['release']})"}])
    prepared = prepare(spec_path, release, root_path, only, state)
    rows = [dataclasses.replace(r, status=WOULD_APPLY) if r.ok else r for r in prepared.plan.resolved]
    if prepared.plan.errors:
        return CheckResult(Exit.BROKEN, rows)
    try:
        planner.emit(prepared.plan, [prepared.spec])
    except planner.ConflictError as exc:
        return CheckResult(Exit.BROKEN, rows, [{"type": "conflict", "detail": str(exc)}])
    problems = [{"type": "binding", "detail": f"binding: {p}"} for p in binding_problems(prepared)]
    marker = prepared.spec.marker
    problems += [{"type": "partial", "file": rel, "detail": f"partial: {rel} carries {marker!r} but the state "
                  "record does not list it"} for rel in prepared.plan.files
                 if marker in encoding.decode(root.read_bytes(rel) or b"")]
    return CheckResult(Exit.BROKEN if problems else Exit.PENDING, rows, problems)


def check_line(r: planner.Resolved) -> str:
    where = f"{r.file}:{r.line}" if r.line else r.file
    detail = f" ({r.detail})" if r.detail and r.status not in (WOULD_APPLY, APPLIED, EDITED) else ""
    return f"{r.status}: {r.spec} {r.target}#{r.index} {r.kind} {r.function} in {where}{detail}"


def _matches_record(root: Root, state: dict, rel: str) -> bool:
    data = root.read_bytes(rel)
    if data is None:
        return False
    want = state["files"][rel]["patched_sha256"] if rel in state["files"] else state["snippets"][rel]["sha256"]
    return staterec.sha256(data) == want


def plan_line(r: planner.Resolved) -> str:
    where = f"{r.file}:{r.line}" if r.line else r.file
    detail = f" ({r.detail})" if r.detail and not r.ok else f" ({r.note})" if r.note else ""
    state = "would apply" if r.ok else r.status
    return f"{state}: {r.spec} {r.target}#{r.index} {r.kind} {r.function} at {where}{detail}"


def diff_texts(prepared: Prepared) -> list[tuple[str, str | None, str]]:
    """(path, pristine text or None for a new file, patched text) for every file the spec writes."""
    texts = compile_spec(prepared)
    out = [(rel, prepared.read(rel), texts[rel]) for rel in sorted(texts)]
    for rel, data in snippets.install_files(prepared.spec).items():
        out.append((rel, None, data.decode("utf-8")))
    return out
