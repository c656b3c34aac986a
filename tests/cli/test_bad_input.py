"""Bad input: one clear line naming file, line and what is wrong; a non-zero exit; the root unchanged."""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from patchspec.cli import main
from patchspec.install.state import VERSION
from tests.verbs.test_apply import DEMO, FIXTURES, tree

GOOD = (FIXTURES / "demo.yaml").read_text()


@pytest.fixture
def root(vllm_release, copy_root):
    return copy_root(vllm_release("0.30.0"))


@pytest.fixture
def spec_dir(tmp_path):
    """A writable copy of the demo spec with its snippets and profiles."""
    dest = tmp_path / "spec"
    shutil.copytree(FIXTURES, dest)
    return dest


def run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


SPEC_ERRORS = [
    ("yaml-syntax", lambda t: t.replace("targets:", "targets: [", 1), r"demo\.yaml:\d+:\d+: YAML: "),
    ("schema-missing-key", lambda t: t.replace("summary: Core tests across two real files of vLLM.\n", ""),
     r"demo\.yaml:3:1: top level: 'summary' is a required property"),
    ("unknown-transform", lambda t: replace_once(t, "- wrap: {with: passthrough}", "- wrapp: {with: passthrough}"),
     r"demo\.yaml:18:9: targets/0/transforms/1: unknown key 'wrapp'; expected one of insert_before"),
    ("bad-anchor-python", lambda t: replace_once(t, 'code: "if _demo.stop(self, req_index): break"',
                                                  'code: "if _demo.stop(self, req_index: break"'),
     r"demo\.yaml:17:11: not valid Python \(code\)"),
    ("path-escapes", lambda t: replace_once(t, "file: vllm/sequence.py", "file: ../etc/sequence.py"),
     r"demo\.yaml:\d+:\d+: target file '../etc/sequence.py' must be a relative path inside the root"),
    ("absolute-path", lambda t: replace_once(t, "file: vllm/sequence.py", "file: /etc/sequence.py"),
     r"demo\.yaml:\d+:\d+: targets/1/file: '/etc/sequence.py' is an absolute path"),
    ("duplicate-id", lambda t: replace_once(t, "id: sequence-iter", "id: scheduler-loop"),
     r"demo\.yaml:\d+:\d+: target id 'scheduler-loop' is already used at line 8"),
    ("unknown-hook", lambda t: replace_once(t, "with: iter_keys", "with: iter_values"),
     r"demo\.yaml:\d+:\d+: sequence-iter transform 0 \(add_method\): _demo.iter_values is not exported"),
    ("hook-arguments", lambda t: replace_once(t, "_demo.stop(self, req_index)", "_demo.stop(self)"),
     r"demo\.yaml:\d+:\d+: scheduler-loop transform 0 \(loop_guard\): _demo.stop\(scheduler, req_index\): "
     r"missing a required argument: 'req_index'"),
    ("missing-function", lambda t: replace_once(t, "function: IntermediateTensors", "function: NoSuchClass"),
     r"demo\.yaml:23:9: demo sequence-iter#0 add_method in NoSuchClass: NoSuchClass is not defined in "
     r"vllm/sequence.py; .*\(see vllm/sequence.py\)"),
    ("missing-file", lambda t: replace_once(t, "file: vllm/sequence.py", "file: vllm/no_such.py"),
     r"demo\.yaml:23:9: demo sequence-iter#0 add_method in IntermediateTensors: file vllm/no_such.py does not"),
    ("metavariable-in-anchor", lambda t: replace_once(t, "request = self.running[req_index]",
                                                      "request = self.running[$INDEX]"),   # the bidict trial
     r"demo\.yaml:13:11: '.*': \$INDEX is a metavariable, which only replace and guard patterns take; an anchor "
     r"matches with `\.\.\.` .*request = self\.running\[\.\.\.\]"),
    ("missing-anchor", lambda t: replace_once(t, "request = self.running[req_index]", "request = self.waiting[0]"),
     r"demo\.yaml:13:11: demo scheduler-loop#0 loop_guard in Scheduler.schedule: .*missing; nothing was "
     r"written \(see vllm/v1/core/sched/scheduler.py:\d+\)"),
    ("ambiguous-anchor", lambda t: replace_once(
        t, "while req_index < len(self.running) and token_budget > 0:\n"
           "                request = self.running[req_index]\n                ...",
        "while ...: ..."),
     r"demo\.yaml:13:11: demo scheduler-loop#0 loop_guard in Scheduler.schedule: .*ambiguous \(lines \d+, \d+.*"
     r"\(see vllm/v1/core/sched/scheduler.py:\d+\)"),
]


@pytest.mark.parametrize("name, mutate, expected", SPEC_ERRORS, ids=[e[0] for e in SPEC_ERRORS])
@pytest.mark.parametrize("verb", ["apply", "compile"])
def test_bad_spec(capsys, root, spec_dir, name, mutate, expected, verb):
    spec = spec_dir / "demo.yaml"
    spec.write_text(mutate(GOOD))
    before = tree(root)
    code, err = run(capsys, verb, str(spec), "--release", "v0.30.0", "--root", str(root))
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert re.search(expected, err), err
    assert tree(root) == before


def test_unknown_release(capsys, root):
    before = tree(root)
    code, err = run(capsys, "apply", DEMO, "--release", "v9.9.9", "--root", str(root))
    assert code == 2
    assert "unknown release 'v9.9.9'; known releases: v0.26.0, v0.30.0" in err
    assert tree(root) == before


def test_release_auto_without_match_names_the_nearest_and_the_command(capsys, vllm_release, copy_root):
    root = copy_root(vllm_release("0.24.0"))
    code, err = run(capsys, "check", DEMO, "--root", str(root))
    assert code == 2
    assert (f"no release profile of demo matches the root (vllm 0.24.0); the nearest is v0.26.0; draft one: "
            f"patchspec profile new v0.24.0 --root {root} --spec {DEMO} --from v0.26.0") in err


def test_read_only_root(capsys, root):
    before = tree(root)
    os.chmod(root, 0o555)
    try:
        code, err = run(capsys, "apply", DEMO, "--release", "v0.30.0", "--root", str(root))
    finally:
        os.chmod(root, 0o755)
    assert code == 2 and "read-only" in err and str(root) in err
    assert tree(root) == before


def test_symlink_out_of_root(capsys, root, tmp_path):
    outside = tmp_path / "outside"
    shutil.copytree(root / "vllm" / "v1", outside)
    shutil.rmtree(root / "vllm" / "v1")
    (root / "vllm" / "v1").symlink_to(outside)
    before = tree(outside)
    code, err = run(capsys, "apply", DEMO, "--release", "v0.30.0", "--root", str(root))
    assert code == 2 and "resolves outside the root" in err
    assert tree(outside) == before


def test_state_record_that_does_not_match(capsys, root):
    assert main(["apply", DEMO, "--release", "v0.30.0", "--root", str(root)]) == 0
    # a format it reads, not as written
    (root / ".patchspec/state.json").write_text(json.dumps({"version": VERSION, "specs": 7}))
    before = tree(root)
    code, err = run(capsys, "unapply", DEMO, "--root", str(root))
    assert code == 2 and "state record is not one patchspec wrote" in err
    assert tree(root) == before


def test_missing_pristine_copy(capsys, root):
    assert main(["apply", DEMO, "--release", "v0.30.0", "--root", str(root)]) == 0
    (root / ".patchspec/pristine/vllm/sequence.py").unlink()
    spec2 = FIXTURES / "demo.yaml"
    assert main(["unapply", str(spec2), "--root", str(root)]) != 0
    assert "vllm/sequence.py" in capsys.readouterr().err
