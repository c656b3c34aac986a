"""The drift, matrix and profile-new verbs: ``compiler.drift`` on a root, with a cache keyed by file hash.

Nothing here writes to a root. Drift results are cached per file under the patchspec cache directory,
keyed by the hashes of the file's text (and its baseline's), the targets in it, the recorded
fingerprints and the compiler's own code, so a warm run reads and hashes files and parses none.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.utils import canonicalize_name

from patchspec import compiler
from patchspec.compiler import bindings, drift as driftmod, snippet_api
from patchspec import snippets, yamlloc
from patchspec.install import installed, state as staterec
from patchspec.releases import cache, profiles
from patchspec.errors import PatchspecError, severity_exit
from patchspec.model import Spec, package_of
from patchspec.ops import pristine_reader
from patchspec.install.root import Root
from patchspec.spec import load_spec


@dataclass
class DriftResult:
    spec: Spec
    release: str
    note: str                       # how the release was chosen
    rows: list[driftmod.DriftRow]   # every transform, and the snippet bindings that do not hold
    baseline: str | None = None
    bindings: list[driftmod.DriftRow] = dataclasses.field(default_factory=list)  # every binding, for matrix

    @property
    def code(self) -> int:
        return driftmod.exit_code(self.rows)


def pick_release(spec: Spec, directory: Path, root: Root, release: str) -> tuple[str, str]:
    """``auto``: the profile matching the root's versions, else the newest the spec supports (a new
    release is compared with the last one profiled)."""
    if release != "auto":
        return release, "given"
    found = installed.scan(root.path)
    seen = profiles.describe(found, {t.package for t in spec.targets})
    if profiles.matching_releases(directory, found, spec):
        return profiles.select_release(directory, found, spec, str(root.path)), "auto: matches " + seen
    supported = profiles.supported_releases(directory, spec)
    if not supported:
        raise PatchspecError(f"{spec.name} has no release profile yet (none in {directory}); draft one: patchspec "
                             f"profile new NAME --root {root.path} --spec {spec.path}", file=spec.path)
    newest = supported[-1]
    return newest, f"auto: no profile matches {seen}; compared with the newest, {newest}"


def drift(spec_path: str, root_path: str, release: str = "auto", baseline: str | None = None,
          use_cache: bool = True) -> DriftResult:
    root = Root.open(root_path)
    base = load_spec(spec_path)
    directory = profiles.releases_dir(spec_path)
    release, note = pick_release(base, directory, root, release)
    profile = profiles.load_profile(directory, release)
    spec = profiles.for_release(base, profile)
    read = pristine_reader(root, staterec.load(root))
    rows = driftmod.report(spec, read, root.has_package, profile.fingerprints(spec.name),
                           _baseline_reader(baseline, profile),
                           *((cached_file_drift, cached_obsolete_line) if use_cache else ()))
    bound = binding_rows(spec, read, root.has_package, use_cache)
    return DriftResult(spec, release, note, rows + [b for b in bound if b.severity], baseline, bound)


def binding_rows(spec: Spec, read, has_package, use_cache: bool = True) -> list[driftmod.DriftRow]:
    """The snippets' ``USES`` checked on the release (``compiler.drift.binding_rows``), cached per file."""
    added = bindings.spec_binds(spec)

    def check_file(rel: str, entries: list[str]):
        text = read(rel)
        own = added.get(rel, set())

        def compute():
            return bindings.check(entries, None if text is None else ast.parse(text, rel), own)
        key = {"uses": rel, "entries": entries, "text": _sha(text), "added": sorted(own)}
        return _cached(key, compute) if use_cache else compute()
    uses = snippets.read_package(snippet_api.declared_uses, spec)
    return driftmod.binding_rows(spec, uses, check_file, has_package)


PYPI_BASELINE = "pypi"


def _baseline_reader(baseline: str | None, profile: profiles.Profile):
    """A root's ``read_text``; for ``pypi``, each package the profile pins ``==X`` read from that wheel
    (fetched once into the cache), the files of other packages having no baseline. A pin checked at a
    source ref (``ref:``, e.g. a vllm-gaudi tag) is no wheel on the index: it has no baseline either."""
    if baseline != PYPI_BASELINE:
        return Root.open(baseline).read_text if baseline else None
    roots = {}
    for name, pin in profile.packages.items():
        if pin.release() and pin.ref is None:
            roots[name] = Root.open(cache.pypi_root(f"{profile.distribution(name)}=={pin.release()}"))
    if not roots:
        raise PatchspecError(f"--baseline pypi: release {profile.release} pins no package to one release (==X or ==X.*)",
                             file=profile.path)

    def read(rel: str) -> str | None:
        root = roots.get(package_of(rel))
        return root.read_text(rel) if root else None
    return read


def pypi_drift(spec_path: str, requirement: str, release: str = "auto", baseline: str | None = None,
               use_cache: bool = True) -> DriftResult:
    """``--pypi vllm==X``: that wheel's sources; targets of other packages come out ``not-checked``."""
    return drift(spec_path, str(cache.pypi_root(requirement)), release, baseline, use_cache)


@functools.cache
def _code_version() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(compiler.__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def cached_file_drift(spec: Spec, path: str, text: str | None, baseline: str | None, present: bool,
                      fingerprints: dict[str, str]) -> list[driftmod.DriftRow]:
    """``compiler.drift.file_drift`` remembered under the cache directory, keyed by what it depends on."""
    targets = [t for t in spec.targets if t.file == path]
    key = {"spec": [spec.name, spec.alias], "path": path, "present": present,
           "targets": [[t.id, t.function, [[x.kind, x.params] for x in t.transforms]] for t in targets],
           "fingerprints": {t.id: fingerprints.get(t.id) for t in targets},
           "text": _sha(text), "baseline": _sha(baseline)}
    rows = _cached(key, lambda: [r.to_dict() for r in
                                 driftmod.file_drift(spec, path, text, baseline, present, fingerprints)])
    return [driftmod.DriftRow.from_dict(d) for d in rows]


def cached_obsolete_line(cond, text: str | None) -> int | None:
    key = {"obsolete": [cond.file, cond.function, cond.contains], "text": _sha(text)}
    return _cached(key, lambda: driftmod.obsolete_line(cond, text))


def _cached(key: dict, compute):
    """``compute()`` (JSON data), stored under the cache directory by the hash of ``key`` and the code."""
    digest = hashlib.sha256(json.dumps({**key, "code": _code_version()}, sort_keys=True).encode()).hexdigest()
    entry = cache.cache_dir() / "drift" / f"{digest}.json"
    try:
        return json.loads(entry.read_text())["value"]
    except (OSError, ValueError, KeyError):
        pass
    value = compute()
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as handle:
            json.dump({"value": value}, handle)
        os.replace(tmp, entry)
    except OSError:
        pass  # a read-only cache only costs the next run its speed
    return value


MAX_RANGES = 8


def row_line(r: driftmod.DriftRow, changes: bool = True) -> str:
    """One line a person reads: class, target, where, and what moved or what to look at; ``changes``
    adds the target's changed statement ranges (said once per target)."""
    if r.kind == driftmod.USES:
        return f"{r.drift}: the snippets use {r.target}" + (f": {r.detail}" if r.detail else "")
    where = f"{r.file}:{r.line}" if r.line else r.file
    parts = [f"{r.drift}: {r.target}#{r.index} {r.kind} {r.function} at {where}"]
    if r.baseline_line and r.line and r.baseline_line != r.line:
        parts.append(f"moved from line {r.baseline_line}")
    if changes and r.changes:
        shown = ", ".join(f"{c.first}" + (f"-{c.last}" if c.last != c.first else "")
                          + ("" if c.tag == "replace" else f" ({c.tag})") for c in r.changes[:MAX_RANGES])
        more = f" and {len(r.changes) - MAX_RANGES} more" if len(r.changes) > MAX_RANGES else ""
        parts.append(f"changed since the baseline: lines {shown}{more}")
    if r.candidates:
        parts.append("candidates " + ", ".join(
            f"{c.qualname} (line {c.line}, {c.anchors} anchor(s) hold there, "
            f"similarity {c.similarity:.2f})" for c in r.candidates))
    if r.detail and r.drift not in (driftmod.UNCHANGED, driftmod.CHANGED):
        parts.append(r.detail)
    return "; ".join(parts)


def report_lines(result: DriftResult) -> list[str]:
    counts: dict[str, int] = {}
    for r in result.rows:
        counts[r.drift] = counts.get(r.drift, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    firsts = {r.target: r.index for r in reversed(result.rows)}
    hint = ""
    if result.baseline is None and any(r.drift in (driftmod.CHANGED, driftmod.TARGET_MISSING)
                                       for r in result.rows):
        hint = "; --baseline DIR (or pypi) shows what changed, where anchors moved, and ranks renamed targets"
    return [row_line(r, firsts[r.target] == r.index) for r in result.rows] + [
        f"drift of {result.spec.name} against release {result.release} ({result.note}): {summary}; "
        f"exit {severity_exit(result.code)}{hint}"]


def report_json(result: DriftResult) -> list[dict]:
    """One record per row, then the summary: the ``results`` of the JSON envelope."""
    return [{"type": "drift", **r.to_dict()} for r in result.rows] + [
        {"type": "drift-summary", "spec": result.spec.name, "release": result.release, "note": result.note,
         "severity": result.code}]


@dataclass
class Matrix:
    columns: list[tuple[str, str]]              # (root, release compared with)
    rows: list[tuple[str, int, str]]            # (target, transform index, kind)
    cells: dict[tuple[str, int], list[str]]     # one drift class per column

    @property
    def code(self) -> int:
        return max((driftmod.SEVERITY.get(c, 2) for cells in self.cells.values() for c in cells), default=0)


def matrix(spec_path: str, roots: list[str], release: str = "auto", use_cache: bool = True) -> Matrix:
    """One row per target and transform, one column per root, each cell the drift class there; then one
    row per snippet binding that does not hold on some root (``bound`` where it does)."""
    results = [drift(spec_path, root, release, use_cache=use_cache) for root in roots]
    out = Matrix([(root, r.release) for root, r in zip(roots, results)], [], {})
    for result in results:
        for row in result.rows:
            if row.kind == driftmod.USES:  # said below, for every root
                continue
            key = (row.target, row.index)
            if key not in out.cells:
                out.rows.append((row.target, row.index, row.kind))
                out.cells[key] = []
            out.cells[key].append(row.drift)
    failing = {b.target for r in results for b in r.bindings if b.severity}
    for target in dict.fromkeys(b.target for r in results for b in r.bindings if b.target in failing):
        out.rows.append((target, 0, driftmod.USES))
        out.cells[(target, 0)] = [next((b.drift for b in r.bindings if b.target == target), driftmod.NOT_CHECKED)
                                  for r in results]
    return out


def _transform(index: int, kind: str) -> str:
    return kind if kind == driftmod.USES else f"{index} {kind}"


def matrix_markdown(m: Matrix) -> list[str]:
    head = ["target", "transform"] + [f"{Path(root).name} ({release})" for root, release in m.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for target, index, kind in m.rows:
        lines.append("| " + " | ".join([target, _transform(index, kind), *m.cells[(target, index)]]) + " |")
    return lines


def matrix_text(m: Matrix) -> list[str]:
    table = [["target", "transform"] + [Path(root).name for root, _ in m.columns]]
    table += [[target, _transform(index, kind), *m.cells[(target, index)]] for target, index, kind in m.rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]


def matrix_json(m: Matrix) -> list[dict]:
    return ([{"type": "matrix-column", "root": root, "release": release} for root, release in m.columns]
            + [{"type": "matrix-row", "target": t, "index": i, "kind": k, "cells": m.cells[(t, i)]}
               for t, i, k in m.rows])


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
    path = directory / f"{release}.yaml"
    if path.exists() and not force:
        raise PatchspecError(f"{path.name} exists; --force to replace it", file=str(path))
    previous = profiles.load_profile(directory, old) if old else None
    read = pristine_reader(root, staterec.load(root))
    found = installed.scan(root.path)
    specs_out, needs, broken, notes, packages = {}, [], [], [], set()
    for spec_path in spec_paths:
        base = load_spec(spec_path)
        packages |= {t.package for t in base.targets}
        # OLD may not cover this spec yet (a spec new to the release line): nothing to carry over then.
        forms = [profiles.for_release(base, previous)] if previous and previous.covers(base.name) else []
        reports = [driftmod.report(spec, read, root.has_package, {}) for spec in forms + [base]]
        overrides = (previous.specs or {}).get(base.name, {}).get("overrides", {}) if previous else {}
        kept, prints = {}, {}
        for target in base.targets:
            for spec, rows in zip(forms + [base], reports):
                mine = [r for r in rows if r.target == target.id]
                if all(r.drift == driftmod.UNRECORDED for r in mine):
                    prints[target.id] = mine[0].fingerprint
                    if spec is not base and target.id in overrides:
                        kept[target.id] = _plain(overrides[target.id])
                    break
            else:
                renamed = _renamed_to(target, mine)
                suggestion = renamed and (f"{base.name}: {target.id}: every anchor holds in {renamed.qualname} "
                                          f"(line {renamed.line}); if it is the same function renamed, override "
                                          f"it: {target.id}: {{function: {renamed.qualname}}}")
                if suggestion and accept is not None and accept(suggestion):
                    moved = dataclasses.replace(target, function=renamed.qualname)
                    rows = driftmod.report(base.with_targets((moved,)), read, root.has_package, {})
                    if all(r.drift == driftmod.UNRECORDED for r in rows):
                        kept[target.id] = {"function": renamed.qualname}
                        prints[target.id] = rows[0].fingerprint
                        notes.append(f"accepted: {suggestion}")
                        continue
                needs += [f"{base.name}: {row_line(r)}" for r in mine if r.drift != driftmod.UNRECORDED]
                broken += [f"{base.name} {r.target}#{r.index} {r.kind} {r.function}: {r.drift}"
                           for r in mine if r.drift != driftmod.UNRECORDED]
                needs += [suggestion] if suggestion else []
        for row in binding_rows(base, read, root.has_package):
            if row.severity:
                needs.append(f"{base.name}: {row_line(row)}")
                broken.append(f"{base.name} uses {row.target}: {row.drift}")
        dropped = sorted(set(overrides) - set(kept))
        if dropped:
            notes.append(f"{base.name}: overrides of {old} not carried (the spec's own form resolves, or "
                         f"nothing does): {', '.join(dropped)}")
        specs_out[base.name] = {**({"overrides": kept} if kept else {}), "fingerprints": prints}
    if needs and not allow_broken:
        return ProfileDraft(path, None, needs, notes)
    if path.exists():
        replaced = _plain(yamlloc.load(path.read_text(), str(path)))
        pins = replaced["packages"]
        kept = replaced.get("specs") or {}
        specs_out = {**{name: specs_out.get(name, section) for name, section in kept.items()}, **specs_out}
    else:
        pins = {name: _pin(found[name]) for name in sorted(packages) if name in found}
    if not pins:
        raise PatchspecError(f"no installed version found under the root for {', '.join(sorted(packages))}",
                             file=str(root.path))
    data = {"release": release, "packages": pins, "specs": specs_out}
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


def _pin(item: installed.Installed):
    """A new profile's pin: the exact version, and the distribution when it is not the import name's own."""
    if item.distribution in (None, canonicalize_name(item.package)):
        return f"=={item.version}"
    return {"versions": f"=={item.version}", "distributions": [item.distribution]}


def _renamed_to(target, rows: list[driftmod.DriftRow]) -> driftmod.Candidate | None:
    """The candidate a missing target was renamed to, when every anchor of the target holds there."""
    anchored = sum(map(driftmod.has_pattern, target.transforms))
    best = next((c for r in rows for c in r.candidates), None)
    if best is None or not anchored or best.anchors < anchored:
        return None
    return best


def _plain(data):
    """YAML-loaded data (mappings that remember locations) as plain dicts and lists for dumping."""
    return json.loads(json.dumps(data))
