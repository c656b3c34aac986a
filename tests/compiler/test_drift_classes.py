"""Every drift class from a few lines of source: ``compiler.drift`` is pure over texts."""
from __future__ import annotations

import pytest

from patchspec.compiler import drift
from patchspec.compiler.edits import Status
from patchspec.spec import load_spec_bytes

SPEC = load_spec_bytes(b"""
spec: 1
name: tiny
summary: drift classes on a tiny module
snippets: {package: hooks, alias: _h}
obsolete_when:
  - {file: pkg/mod.py, function: Engine.step, contains: "self.upstream_fix(...)"}
targets:
  - id: step
    file: pkg/mod.py
    function: Engine.step
    transforms:
      - insert_before: {anchor: "out = self.run(batch)", code: "_h.before(self)"}
      - loop_guard: {loop: "for item in batch: ...", code: "_h.guard(item)"}
  - id: other
    file: other/mod.py
    function: f
    transforms:
      - wrap: {with: w}
""", "tiny.yaml")

SOURCE = '''
class Engine:
    def step(self, batch):
        """One step."""
        for item in batch:
            item.prepare()
        out = self.run(batch)
        return out
'''


def rows(text: str | None, fingerprints=None, baseline: str | None = None) -> dict[str, drift.DriftRow]:
    files = {"pkg/mod.py": text}
    found = drift.report(SPEC, files.get, lambda package: package == "pkg", fingerprints or {},
                         (lambda rel: baseline) if baseline else None)
    return {f"{r.target}#{r.index}": r for r in found}


@pytest.fixture(scope="module")
def recorded() -> dict[str, str]:
    return {"step": rows(SOURCE)["step#0"].fingerprint}


def classes(found) -> list[str]:
    return [found["step#0"].drift, found["step#1"].drift]


def test_unrecorded_then_unchanged(recorded):
    assert classes(rows(SOURCE)) == ["unrecorded", "unrecorded"]
    found = rows(SOURCE.replace("        out =", "\n        # comment\n        out ="), recorded)
    assert classes(found) == ["unchanged", "unchanged"]
    assert found["other#0"].drift == "not-checked"
    assert drift.exit_code(list(found.values())) == 0


def test_changed_with_ranges_from_the_baseline(recorded):
    found = rows(SOURCE.replace("item.prepare()", "item.prepare(fast=True)"), recorded, baseline=SOURCE)
    assert classes(found) == ["changed", "changed"]
    assert found["step#0"].changes == [drift.fingerprint.Change("replace", 6, 6)]
    assert drift.exit_code(list(found.values())) == 1


@pytest.mark.parametrize("old, new, expected", [
    ("out = self.run(batch)", "out = self.run(batch, 1)", ["anchor-missing", "unchanged"]),
    ("        return out", "        out = self.run(batch)\n        return out", ["anchor-ambiguous", "changed"]),
    ("for item in batch:", "while batch:", ["unchanged", "anchor-missing"]),
    ("def step(", "def advance(", ["target-missing", "target-missing"]),
])
def test_broken(recorded, old, new, expected):
    found = rows(SOURCE.replace(old, new), recorded)
    assert classes(found) == [c.replace("unchanged", "changed") for c in expected]
    assert drift.exit_code(list(found.values())) == 2


def test_renamed_target_candidates(recorded):
    found = rows(SOURCE.replace("def step(", "def advance("), recorded, baseline=SOURCE)
    best = found["step#0"].candidates[0]
    # every anchor holds there; 4 of its 5 statements are the baseline's (all but the header)
    assert (best.qualname, best.line, best.anchors, best.similarity) == ("Engine.advance", 3, 2, 0.8)


def test_missing_file_and_obsolete(recorded):
    assert classes(rows(None, recorded)) == ["target-missing", "target-missing"]
    fixed = SOURCE.replace("        return out", "        self.upstream_fix(out)\n        return out")
    found = rows(fixed, recorded)
    assert classes(found) == ["obsolete", "obsolete"]
    assert found["step#0"].under == "changed"
    assert found["step#0"].detail == "fix is upstream: pkg/mod.py:8: Engine.step contains 'self.upstream_fix(...)'"
    assert found["other#0"].drift == "not-checked"


def test_unparsable_source_is_broken(recorded):
    found = rows(SOURCE + "\ndef broken(:\n", recorded)
    assert classes(found) == ["unparsable", "unparsable"]
    assert "pkg/mod.py:10: not valid Python" in found["step#0"].detail
    assert drift.exit_code(list(found.values())) == 2


def test_a_drift_class_is_one_of_the_enum_and_carries_its_severity():
    """Drift classes were strings and severity ``SEVERITY.get(x, 2)``: a mistyped class counted as broken."""
    assert {d: d.severity for d in drift.Drift if d.severity < 2} == {
        drift.Drift.UNCHANGED: 0, drift.Drift.NOT_CHECKED: 0, drift.Drift.BOUND: 0, drift.Drift.CHANGED: 1,
        drift.Drift.UNRECORDED: 1}
    with pytest.raises(ValueError):
        drift.Drift("changd")
    assert set(drift.FROM_STATUS) == set(Status) - {Status.OK, Status.SKIPPED}   # every failure has its class
