"""The drift verb: ``compiler.drift`` on a root (or a release from PyPI), against the profile of a release.

Nothing here writes to a root; results are cached per file (``releases.drift_cache``).
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from patchspec.compiler.drift import USES, Drift, DriftRow, exit_code, report
from patchspec.errors import PatchspecError
from patchspec.install import installed
from patchspec.install.pristine import pristine_reader
from patchspec.install.root import Root
from patchspec.install.state import load_state
from patchspec.model import Spec, package_of
from patchspec.releases import cache, profiles
from patchspec.releases.drift_cache import cached_binding_rows, cached_file_drift, cached_obsolete_line
from patchspec.results import Record
from patchspec.spec import load_spec


@dataclass
class DriftResult:
    spec: Spec
    release: str
    note: str                       # how the release was chosen
    rows: list[DriftRow]   # every transform, and the snippet bindings that do not hold
    baseline: str | None = None
    bindings: list[DriftRow] = dataclasses.field(default_factory=list)  # every binding, for matrix

    @property
    def code(self) -> int:
        return exit_code(self.rows)

    def records(self) -> list[Record]:
        """One record per row, then the summary: the ``results`` of the JSON envelope."""
        return [DriftRecord(r) for r in self.rows] + [DriftSummary(self.spec.name, self.release, self.note,
                                                                   self.code)]


@dataclass(frozen=True)
class DriftRecord(Record):
    """One row of a drift report: its JSON keys are the row's fields (``DriftRow``, the drift cache's form)
    but the plan's own facts of it (``INTERNAL``: what the proof reads, not what drift says)."""

    TYPE: ClassVar[str] = "drift"
    INTERNAL: ClassVar[frozenset[str]] = frozenset({"edits", "own", "binding", "at"})
    row: DriftRow

    def to_json(self) -> dict:
        return {"type": self.TYPE, **{k: v for k, v in self.row.to_dict().items() if k not in self.INTERNAL}}

    @classmethod
    def json_fields(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(DriftRow) if f.name not in cls.INTERNAL]

    @classmethod
    def json_hints(cls) -> dict:
        return typing.get_type_hints(DriftRow)


@dataclass(frozen=True)
class DriftSummary(Record):
    """A drift report's last record: the release compared with, how it was chosen, the worst severity
    (0 none, 1 still applies, 2 broken)."""

    TYPE: ClassVar[str] = "drift-summary"
    spec: str
    release: str
    note: str
    severity: int


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
    read = pristine_reader(root, load_state(root))
    per_file, obsolete = (cached_file_drift, cached_obsolete_line) if use_cache else (None, None)
    rows = report(spec, read, root.has_package, profile.fingerprints(spec.name), _baseline_reader(baseline, profile),
                  per_file, obsolete, modules=root.modules)
    bound = cached_binding_rows(spec, read, root.has_package, use_cache)
    return DriftResult(spec, release, note, rows + [b for b in bound if b.severity], baseline, bound)


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
        raise PatchspecError(f"--baseline pypi: release {profile.release} pins no package to one release "
                             "(==X or ==X.*)",
                             file=profile.path)

    def read(rel: str) -> str | None:
        root = roots.get(package_of(rel))
        return root.read_text(rel) if root else None
    return read


def pypi_drift(spec_path: str, requirement: str, release: str = "auto", baseline: str | None = None,
               use_cache: bool = True) -> DriftResult:
    """``--pypi vllm==X``: that wheel's sources; targets of other packages come out ``not-checked``."""
    return drift(spec_path, str(cache.pypi_root(requirement)), release, baseline, use_cache)


MAX_RANGES = 8


def row_line(r: DriftRow, changes: bool = True) -> str:
    """One line a person reads: class, target, where, and what moved or what to look at; ``changes``
    adds the target's changed statement ranges (said once per target)."""
    if r.kind == USES:
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
    if r.detail and r.drift not in (Drift.UNCHANGED, Drift.CHANGED):
        parts.append(r.detail)
    return "; ".join(parts)
