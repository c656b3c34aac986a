"""Drift on real vLLM releases (0.24.0, 0.26.0, 0.30.0, 0.33.0), asserted target by target.

The drift-probe spec (tests/drift/probe.yaml) anchors on upstream vLLM code chosen because it holds,
moves, vanishes, multiplies or is renamed between those releases; its profiles' fingerprints were
recorded by ``patchspec profile new`` on 0.26.0 and 0.30.0.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.compiler import drift
from patchspec.compiler.fingerprint import Change
from patchspec.errors import PatchspecError
from patchspec.model import Loc, ObsoleteWhen
from patchspec.releases import profiles, report
from patchspec.releases.new_profile import new_profile
from patchspec.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
PROBE_DIR = Path(__file__).resolve().parents[1] / "drift"
PROBE = str(PROBE_DIR / "probe.yaml")
FILES = ["vllm/v1/core/sched/scheduler.py", "vllm/model_executor/model_loader/weight_utils.py",
         "vllm/sequence.py"]
ALL = ["schedule#0", "schedule#1", "schedule#2", "schedule#3", "promote-blocked#0", "request-counts#0",
       "state-dict-weights#0", "tensors-iter#0"]

# Release → (profile compared with, class of every transform).
EXPECTED = {
    "0.24.0": ("v0.30.0", {"schedule#0": "changed", "schedule#1": "anchor-missing", "schedule#2": "changed",
                           "schedule#3": "changed", "promote-blocked#0": "changed",
                           "request-counts#0": "unchanged", "state-dict-weights#0": "unchanged",
                           "tensors-iter#0": "unchanged"}),
    "0.26.0": ("v0.26.0", dict.fromkeys(ALL, "unchanged")),
    "0.30.0": ("v0.30.0", dict.fromkeys(ALL, "unchanged")),
    "0.33.0": ("v0.30.0", {"schedule#0": "changed", "schedule#1": "changed", "schedule#2": "anchor-missing",
                           "schedule#3": "anchor-ambiguous", "promote-blocked#0": "target-missing",
                           "request-counts#0": "changed", "state-dict-weights#0": "unchanged",
                           "tensors-iter#0": "unchanged"}),
}
CODES = {"0.24.0": 2, "0.26.0": 0, "0.30.0": 0, "0.33.0": 2}


def small_root(dest: Path, release: Path, files=FILES) -> Path:
    """The spec's files and the dist-info of a cached release: a root cheap to copy and to hash."""
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release / rel, dest / rel)
    for dist in release.glob("*.dist-info"):
        shutil.copytree(dist, dest / dist.name)
    return dest


def by_key(rows) -> dict[str, drift.DriftRow]:
    return {f"{r.target}#{r.index}": r for r in rows}


@pytest.fixture(scope="module")
def probe_copy(tmp_path_factory):
    """The probe spec, its snippets and profiles in a directory the profile tests may write to."""
    dest = tmp_path_factory.mktemp("probe") / "drift"
    shutil.copytree(PROBE_DIR, dest)
    return dest


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_each_release_target_by_target(vllm_release, version):
    result = report.drift(PROBE, str(vllm_release(version)), use_cache=False)
    release, classes = EXPECTED[version]
    assert result.release == release
    assert {k: r.drift for k, r in by_key(result.rows).items()} == classes
    assert result.code == CODES[version]


def test_anchors_that_moved_and_held_against_a_baseline(vllm_release):
    """0.33.0 against 0.30.0: where every anchor went, which lines changed, the renamed target found."""
    result = report.drift(PROBE, str(vllm_release("0.33.0")), baseline=str(vllm_release("0.30.0")),
                                use_cache=False)
    rows = by_key(result.rows)
    assert (rows["schedule#0"].baseline_line, rows["schedule#0"].line) == (612, 795)
    assert (rows["schedule#1"].baseline_line, rows["schedule#1"].line) == (584, 722)
    assert rows["schedule#2"].baseline_line == 856 and rows["schedule#2"].line is None
    assert rows["schedule#3"].lines == [1232, 1267]
    assert rows["request-counts#0"].changes == [Change("replace", 2922, 2922)]
    assert rows["state-dict-weights#0"].changes == []
    assert (rows["state-dict-weights#0"].baseline_line, rows["state-dict-weights#0"].line) == (961, 1210)
    best = rows["promote-blocked#0"].candidates[0]
    assert (best.qualname, best.line, best.anchors) == ("Scheduler._handle_blocked_waiting_request", 3519, 1)
    assert best.similarity > 0.5


def test_renamed_target_without_baseline_ranks_by_anchors_then_name(vllm_release):
    rows = by_key(report.drift(PROBE, str(vllm_release("0.33.0")), use_cache=False).rows)
    candidates = rows["promote-blocked#0"].candidates
    assert candidates[0].qualname == "Scheduler._handle_blocked_waiting_request"
    assert candidates[0].anchors == 1
    assert all(c.anchors == 0 for c in candidates[1:])


def test_obsolete_when_the_fix_is_upstream(vllm_release):
    """A condition found in 0.33.0 only: every row there is obsolete and keeps the class it had."""
    spec = load_spec(PROBE)
    spec = dataclasses.replace(spec, obsolete_when=(ObsoleteWhen(
        "vllm/v1/core/sched/scheduler.py", "Scheduler.get_request_counts", "len(self.kv_holding_waiting)",
        Loc(PROBE, 1, 1)),))

    def rows(version: str):
        root = vllm_release(version)
        return drift.report(spec, lambda rel: (root / rel).read_text(), lambda p: (root / p).is_dir(), {})

    old = rows("0.30.0")
    assert {r.drift for r in old} == {drift.Drift.UNRECORDED}
    new = rows("0.33.0")
    assert {r.drift for r in new} == {drift.Drift.OBSOLETE}
    assert by_key(new)["schedule#2"].under == drift.Drift.ANCHOR_MISSING
    assert "scheduler.py:2922" in new[0].detail
    assert drift.exit_code(new) == 2
    assert drift.exit_code([dataclasses.replace(r, under=drift.Drift.UNRECORDED) for r in new]) == 1


@pytest.mark.parametrize("contains, line", [
    ("len(self.kv_holding_waiting)", 2922),            # a call: its line
    ("return len(self.running), ...", 2922),           # a statement with a wildcard
    ("self.kv_holding_waiting", 2920),                 # another expression: the function's line
    ("len(self.skipped_waiting)", None),               # 0.30.0's form is gone
])
def test_obsolete_line(vllm_release, contains, line):
    text = (vllm_release("0.33.0") / "vllm/v1/core/sched/scheduler.py").read_text()
    cond = ObsoleteWhen("vllm/v1/core/sched/scheduler.py", "Scheduler.get_request_counts", contains,
                        Loc(PROBE, 1, 1))
    assert drift.obsolete_line(cond, text) == line
    assert drift.obsolete_line(dataclasses.replace(cond, function="Scheduler.gone"), text) is None


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def of_type(document: dict, kind: str) -> list[dict]:
    """The results of one type in a ``--json`` envelope."""
    return [r for r in document["results"] if r["type"] == kind]


def test_cli_drift_json_exit_codes_and_nothing_written(vllm_release, tmp_path, capsys, monkeypatch):
    root = small_root(tmp_path / "root", vllm_release("0.33.0"))
    monkeypatch.setenv("PATCHSPEC_CACHE", str(tmp_path / "cache"))  # cold, then warm from the cache
    before = tree_hash(root)
    for _ in range(2):
        assert main(["drift", PROBE, "--root", str(root), "--json"]) == 4
        document = json.loads(capsys.readouterr().out)
        assert {f"{r['target']}#{r['index']}": r["drift"] for r in of_type(document, "drift")} == \
            EXPECTED["0.33.0"][1]
    assert any((tmp_path / "cache" / "drift").iterdir())
    assert tree_hash(root) == before


def test_cli_drift_pypi(vllm_release, capsys):
    assert main(["drift", PROBE, "--pypi", "vllm==0.30.0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("unchanged: schedule#0 loop_guard Scheduler.schedule at "
                             "vllm/v1/core/sched/scheduler.py:612")
    assert out[-1].endswith("8 unchanged; exit 0")


def test_cli_drift_exit_1_when_every_anchor_still_holds(vllm_release, capsys):
    """0.24.0 against the v0.26.0 profile (its override holds there): changed but applies."""
    assert main(["drift", PROBE, "--pypi", "vllm==0.24.0", "--release", "v0.26.0", "--no-cache"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].endswith(
        "5 changed, 3 unchanged; exit 1; --baseline DIR (or pypi) shows what changed, where anchors moved, and "
        "ranks renamed targets")


def test_cli_matrix(vllm_release, capsys):
    roots = [str(vllm_release(v)) for v in sorted(EXPECTED)]
    columns = [a for r in roots[:-1] for a in ("--root", r)] + ["--pypi", "vllm==0.33.0"]  # roots, then wheels
    assert main(["matrix", PROBE, *columns, "--json"]) == 4
    document = json.loads(capsys.readouterr().out)
    assert [c["release"] for c in of_type(document, "matrix-column")] == [EXPECTED[v][0] for v in sorted(EXPECTED)]
    for row in of_type(document, "matrix-row"):
        key = f"{row['target']}#{row['index']}"
        assert row["cells"] == [EXPECTED[v][1][key] for v in sorted(EXPECTED)]
    main(["matrix", PROBE, *columns, "--markdown"])
    table = capsys.readouterr().out.splitlines()
    assert table[0] == ("| target | transform | vllm-0.24.0 (v0.30.0) | vllm-0.26.0 (v0.26.0) | "
                        "vllm-0.30.0 (v0.30.0) | vllm-0.33.0 (v0.30.0) |")
    assert table[2] == "| schedule | 0 loop_guard | changed | unchanged | unchanged | changed |"
    assert len(table) == 2 + len(ALL)


def test_profile_new_records_what_the_committed_profiles_hold(vllm_release, probe_copy):
    """Regenerating v0.26.0 carries its override (still matching) and gives the same fingerprints."""
    committed = (PROBE_DIR / "releases" / "v0.26.0.yaml").read_text()
    draft = new_profile("v0.26.0", str(vllm_release("0.26.0")), [str(probe_copy / "probe.yaml")],
                                     old="v0.26.0", force=True)
    assert draft.needs == []
    assert draft.text.split("\n", 1)[1] == committed.split("\n", 1)[1]  # but the schema's relative path


def test_profile_new_for_a_new_release(vllm_release, probe_copy, capsys):
    """0.24.0 from v0.30.0: the spec's own anchors fail there, so nothing is written; from v0.26.0 the
    override holds and the draft pins vllm 0.24.0."""
    spec = str(probe_copy / "probe.yaml")
    path = probe_copy / "releases" / "v0.24.0.yaml"
    assert main(["profile", "new", "v0.24.0", "--root", str(vllm_release("0.24.0")), "--from", "v0.30.0",
                 "--spec", spec]) == 4
    out = capsys.readouterr().out
    assert "needs a human: drift-probe: anchor-missing: schedule#1 insert_after" in out
    assert not path.exists()
    assert main(["profile", "new", "v0.24.0", "--root", str(vllm_release("0.24.0")), "--from", "v0.26.0",
                 "--spec", spec]) == 0
    profile = profiles.load_profile(probe_copy / "releases", "v0.24.0")
    assert str(profile.packages["vllm"].versions) == "==0.24.0"
    assert profile.specs["drift-probe"]["overrides"] == {"schedule": {"transforms": {"1": {
        "anchor": "token_budget = self.max_num_scheduled_tokens"}}}}
    rows = by_key(drift.report(load_spec(spec), lambda rel: (vllm_release("0.24.0") / rel).read_text(),
                               lambda p: True, {}))
    assert profile.fingerprints("drift-probe")["request-counts"] == rows["request-counts#0"].fingerprint
    assert "v0.24.0" in profiles.supported_releases(probe_copy / "releases", load_spec(spec))
    assert main(["profile", "new", "v0.24.0", "--root", str(vllm_release("0.24.0")), "--spec", spec]) == 2


def test_profile_new_lists_renamed_targets_with_candidates(vllm_release, probe_copy, capsys):
    assert main(["profile", "new", "v0.33.0", "--root", str(vllm_release("0.33.0")), "--from", "v0.30.0",
                 "--spec", str(probe_copy / "probe.yaml"), "--json"]) == 4
    document = json.loads(capsys.readouterr().out)
    assert not of_type(document, "file")
    needs = [r["detail"] for r in of_type(document, "needs-human")]
    assert [n.split(":")[1].strip() for n in needs] == [
        "anchor-missing", "anchor-ambiguous", "target-missing", "promote-blocked"]
    assert "Scheduler._handle_blocked_waiting_request (line 3519" in needs[2]
    assert needs[3].endswith(
        "override it: promote-blocked: {function: Scheduler._handle_blocked_waiting_request}")


GAUDI_PROBE = str(PROBE_DIR / "gaudi" / "probe.yaml")
GAUDI_EXPECTED = {
    "v0.24.0": {"sample-tokens#0": "unchanged", "warmup-validation#0": "anchor-missing",
                "merge-prefill#0": "unchanged", "mm-limit-options#0": "target-missing"},
    "v0.26.0": {"sample-tokens#0": "unchanged", "warmup-validation#0": "unchanged",
                "merge-prefill#0": "unchanged", "mm-limit-options#0": "unchanged"},
    "main": {"sample-tokens#0": "unchanged", "warmup-validation#0": "changed", "merge-prefill#0": "changed",
             "mm-limit-options#0": "unchanged"},
}


@pytest.mark.gaudi
@pytest.mark.parametrize("tag", sorted(GAUDI_EXPECTED))
def test_vllm_gaudi_releases_target_by_target(gaudi_release, tag):
    """vllm-gaudi v0.24.0, v0.26.0 and main against the v0.26.0 profile, with v0.26.0 as baseline."""
    result = report.drift(GAUDI_PROBE, str(gaudi_release(tag)), "v0.26.0",
                                baseline=str(gaudi_release("v0.26.0")), use_cache=False)
    rows = by_key(result.rows)
    assert {k: r.drift for k, r in rows.items()} == GAUDI_EXPECTED[tag]
    assert result.code == {"v0.24.0": 2, "v0.26.0": 0, "main": 1}[tag]
    sample = rows["sample-tokens#0"]
    assert sample.baseline_line == 4358
    assert sample.line == {"v0.24.0": 4294, "v0.26.0": 4358}.get(tag, sample.line)
    if tag == "main":
        merge = rows["merge-prefill#0"]  # a new two-line early return after the signature and comments
        assert merge.changes == [Change("insert", merge.line + 13, merge.line + 14)]
    if tag == "v0.24.0":
        assert rows["mm-limit-options#0"].candidates == []  # nothing like it there: it is new in v0.26.0


def test_drift_on_an_applied_root_reads_the_pristine_sources(vllm_release, tmp_path):
    from patchspec.verbs import writing

    root = small_root(tmp_path / "root", vllm_release("0.30.0"))
    assert writing.apply(PROBE, "auto", str(root)).changed
    assert "# patchspec: drift-probe" in (root / FILES[0]).read_text()
    result = report.drift(PROBE, str(root), use_cache=False)
    assert {r.drift for r in result.rows} == {"unchanged"}


def test_profile_new_replacing_a_profile_keeps_pins_and_other_specs(vllm_release, tmp_path):
    shutil.copytree(PROBE_DIR, tmp_path / "drift")
    path = tmp_path / "drift" / "releases" / "v0.30.0.yaml"
    path.write_text('release: v0.30.0\npackages:\n  vllm: ">=0.30.0,<0.31"\nspecs:\n'
                    "  other-spec:\n    fingerprints: {x: 0123456789abcdef}\n"
                    "  drift-probe:\n    fingerprints: {schedule: stale}\n")
    with pytest.raises(PatchspecError, match="holds a section of drift-probe already; --force replaces it"):
        new_profile("v0.30.0", str(vllm_release("0.30.0")), [str(tmp_path / "drift" / "probe.yaml")])
    new_profile("v0.30.0", str(vllm_release("0.30.0")), [str(tmp_path / "drift" / "probe.yaml")],
                             old="v0.30.0", force=True)
    profile = profiles.load_profile(path.parent, "v0.30.0")
    assert "vllm: '>=0.30.0,<0.31'" in profile.text  # the pin as written, not re-ordered
    assert list(profile.specs) == ["other-spec", "drift-probe"]
    assert profile.fingerprints("other-spec") == {"x": "0123456789abcdef"}
    assert profile.fingerprints("drift-probe")["schedule"] == "51a7f035ea554513"



def test_profile_new_from_a_profile_that_does_not_cover_the_spec(vllm_release, tmp_path):
    """Adding a spec to a release's profile: ``--from`` that very profile has no section to carry over,
    so the spec's own form is drafted (the refusal named this command as its own remedy)."""
    shutil.copytree(PROBE_DIR, tmp_path / "drift")
    path = tmp_path / "drift" / "releases" / "v0.30.0.yaml"
    path.write_text('release: v0.30.0\npackages:\n  vllm: "==0.30.*"\nspecs:\n'
                    "  other-spec:\n    fingerprints: {x: 0123456789abcdef}\n")
    draft = new_profile("v0.30.0", str(vllm_release("0.30.0")), [str(tmp_path / "drift" / "probe.yaml")],
                                     old="v0.30.0", force=True)
    assert draft.needs == []
    profile = profiles.load_profile(path.parent, "v0.30.0")
    assert list(profile.specs) == ["other-spec", "drift-probe"]
    assert "overrides" not in profile.specs["drift-probe"]
    assert profile.fingerprints("drift-probe")["schedule"] == "51a7f035ea554513"

REAL_SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "pipeline-parallel.yaml")
# The real spec's vLLM targets on other releases, against the v0.30.0 profile: these still apply.
REAL_EXPECTED = {
    "0.24.0": {"intermediate-tensors-iter#0": "unchanged", "scheduler-running-cap#0": "changed",
               "loader-skip-unowned-layers#0": "changed", "config-refuse-split-shared-state#0": "changed"},
    "0.33.0": {"intermediate-tensors-iter#0": "unchanged", "scheduler-running-cap#0": "changed",
               "loader-skip-unowned-layers#0": "unchanged", "config-refuse-split-shared-state#0": "changed"},
}


@pytest.mark.parametrize("version", ["0.26.0", "0.30.0", "0.33.0"])
def test_real_spec_is_unchanged_on_its_profiled_vllm_releases(vllm_release, version):
    """Every vLLM target of specs/pipeline-parallel.yaml has its fingerprint recorded and matches it (on
    0.33.0 with its profile's override of the admission cap)."""
    result = report.drift(REAL_SPEC, str(vllm_release(version)), use_cache=False)
    assert result.release == f"v{version}"
    for row in result.rows:
        assert row.drift == ("unchanged" if row.file.startswith("vllm/") else "not-checked"), row
    assert result.code == 0


@pytest.mark.parametrize("version", sorted(REAL_EXPECTED))
def test_real_spec_on_other_vllm_releases(vllm_release, version):
    rows = by_key(report.drift(REAL_SPEC, str(vllm_release(version)), "v0.30.0", use_cache=False).rows)
    assert {k: rows[k].drift for k in REAL_EXPECTED[version]} == REAL_EXPECTED[version]


@pytest.mark.gaudi
@pytest.mark.parametrize("version, tag, changed", [
    ("0.24.0", "v0.24.0", {"hpu-runner-microbatch-buckets", "hpu-worker-transfer-memory", "hpu-input-batch-arguments"}),
    ("0.26.0", "v0.26.0", set()),
    ("0.30.0", "main", {"hpu-runner-microbatch-buckets"}),
])
def test_real_spec_hpu_targets_on_vllm_gaudi(vllm_release, gaudi_release, version, tag, changed):
    """Against v0.26.0's fingerprints the vllm-gaudi targets hold on v0.24.0 and main, and only
    ``HPUModelRunner.warmup_model`` changed between them (upstream reworked its warm-up steps; the bucket
    bound goes after ``generate_decode_buckets()`` in each), and from v0.24.0 to v0.26.0
    ``HPUWorker.determine_available_memory`` (hybrid models' KV share reduced after the anchor) and
    ``InputBatch.__init__`` (its block table given a block count per group; the wrap only remembers the
    arguments): every other function the fix patches did not."""
    roots = {"vllm": vllm_release(version), "vllm_gaudi": gaudi_release(tag)}

    def read(rel: str):
        path = roots[rel.split("/", 1)[0]] / rel
        return path.read_text() if path.is_file() else None

    spec = load_spec(REAL_SPEC)
    profile = profiles.load_profile(profiles.releases_dir(REAL_SPEC), "v0.26.0")
    rows = drift.report(profiles.for_release(spec, profile), read, lambda p: p in roots,
                        profile.fingerprints(spec.name))
    gaudi = [r for r in rows if r.file.startswith("vllm_gaudi/")]
    assert gaudi and {r.target for r in gaudi if r.drift != "unchanged"} == changed
    assert {r.drift for r in gaudi if r.target in changed} <= {"changed"}


def test_an_unwritable_cache_still_gives_the_report(vllm_release, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "drift").write_text("a file where the cache directory should be")  # root ignores modes
    root = small_root(tmp_path / "root", vllm_release("0.30.0"))
    monkeypatch.setenv("PATCHSPEC_CACHE", str(cache))
    assert report.drift(PROBE, str(root)).code == 0


def test_baseline_pypi_is_the_profiled_release_from_pypi(vllm_release, capsys):
    explicit = report.drift(PROBE, str(vllm_release("0.33.0")), baseline=str(vllm_release("0.30.0")),
                                  use_cache=False)
    pinned = report.drift(PROBE, str(vllm_release("0.33.0")), baseline="pypi", use_cache=False)
    assert [r.to_dict() for r in pinned.rows] == [r.to_dict() for r in explicit.rows]
    assert main(["drift", PROBE, "--pypi", "vllm==0.24.0", "--release", "v0.26.0", "--baseline", "pypi",
                 "--no-cache"]) == 1
    assert "moved from line 471" in capsys.readouterr().out.splitlines()[0]


def test_compile_prints_the_plan_then_the_drift_report(vllm_release, capsys):
    assert main(["compile", PROBE, "--root", str(vllm_release("0.30.0"))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("would apply: drift-probe schedule#0 loop_guard Scheduler.schedule at ")
    assert out[len(ALL)].startswith("unchanged: schedule#0 loop_guard")
    assert out[-1].endswith("8 unchanged; exit 0")
    assert main(["compile", PROBE, "--root", str(vllm_release("0.30.0")), "--json"]) == 0
    assert of_type(json.loads(capsys.readouterr().out), "drift-summary")[0]["severity"] == 0


def test_baseline_pypi_reads_a_release_line_pin_as_its_first_release(vllm_release):
    """The shipped profiles pin a release line (``vllm: ==0.30.*``): the baseline is the wheel the
    profile was drafted on, 0.30.0, not a failed download of ``vllm==0.30.*``."""
    spec = str(REPO / "specs" / "pipeline-parallel.yaml")
    pinned = report.drift(spec, str(vllm_release("0.33.0")), "v0.30.0", baseline="pypi", use_cache=False)
    explicit = report.drift(spec, str(vllm_release("0.33.0")), "v0.30.0",
                                  baseline=str(vllm_release("0.30.0")), use_cache=False)
    assert [r.to_dict() for r in pinned.rows] == [r.to_dict() for r in explicit.rows]
    assert any(r.baseline_line for r in pinned.rows)


def test_baseline_pypi_leaves_out_a_pin_checked_at_a_source_ref(vllm_release):
    """v0.26.0 pins vllm-gaudi ``==0.26.0`` at ``ref: v0.26.0``, which is no wheel on the index: the
    baseline is the vllm wheel alone, not a failed download of vllm-gaudi."""
    spec = str(REPO / "specs" / "pipeline-parallel.yaml")
    pinned = report.drift(spec, str(vllm_release("0.24.0")), "v0.26.0", baseline="pypi", use_cache=False)
    explicit = report.drift(spec, str(vllm_release("0.24.0")), "v0.26.0",
                                  baseline=str(vllm_release("0.26.0")), use_cache=False)
    assert [r.to_dict() for r in pinned.rows] == [r.to_dict() for r in explicit.rows]
