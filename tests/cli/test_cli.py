"""The command line as Python users expect it: one exit-code table, one JSON envelope, help for every
option, no accepted-and-ignored flags, one-line errors (a traceback only with --debug)."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from importlib import resources

import jsonschema
import pytest

from patchspec import cli
from patchspec.cli import main
from patchspec.install.state import STATE_FILE
from patchspec.verbs import reading, writing
from tests.verbs.test_apply import DEMO, FIXTURES, tree

SCHEMA = json.loads(resources.files("patchspec").joinpath("schema/output.schema.json").read_text())


@pytest.fixture
def root(vllm_release, copy_root):
    return copy_root(vllm_release("0.30.0"))


def run_json(capsys, *argv) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, SCHEMA)
    assert document["exit"] == code
    return code, document


def test_every_verb_prints_the_envelope(capsys, root, tmp_path):
    release = ["--release", "v0.30.0", "--root", str(root)]
    code, doc = run_json(capsys, "check", DEMO, *release)
    assert code == 1 and {r["status"] for r in doc["results"]} == {"would-apply"}
    before_apply = [(r["target"], r["index"]) for r in doc["results"]]
    assert run_json(capsys, "validate", DEMO)[0] == 0
    code, doc = run_json(capsys, "compile", DEMO, *release, "-o", str(tmp_path / "out"))
    assert code == 0 and {r["type"] for r in doc["results"]} >= {"transform", "file", "drift", "drift-summary"}
    code, doc = run_json(capsys, "diff", DEMO, *release)
    assert code == 0 and any(r["path"] == "vllm/sequence.py" for r in doc["results"])
    code, doc = run_json(capsys, "apply", DEMO, *release)
    assert code == 0 and [r["action"] for r in doc["results"]] == ["patched", "patched"]
    code, doc = run_json(capsys, "check", DEMO, *release)
    assert code == 0 and {r["status"] for r in doc["results"]} == {"applied"}
    assert [(r["target"], r["index"]) for r in doc["results"]] == before_apply  # the same unit after apply
    code, doc = run_json(capsys, "drift", DEMO, "--root", str(root))  # the demo profile records no fingerprints
    assert code == 1 and {r["drift"] for r in doc["results"][:-1]} == {"unrecorded"}
    assert doc["results"][-1]["type"] == "drift-summary"
    code, doc = run_json(capsys, "matrix", DEMO, "--root", str(root), "--no-cache")
    assert code == 1 and doc["results"][0]["type"] == "matrix-column"
    code, doc = run_json(capsys, "status", "--root", str(root))
    assert code == 0 and {r.get("status") for r in doc["results"] if "path" in r} == {"as-written"}
    code, doc = run_json(capsys, "recover", "--root", str(root))
    assert code == 0 and doc["results"] == [{"type": "note", "detail": "nothing to recover"}]
    code, doc = run_json(capsys, "unapply", DEMO, "--root", str(root))
    assert code == 0 and [r["action"] for r in doc["results"]] == ["restored", "restored"]
    assert run_json(capsys, "apply", DEMO, *release)[0] == 0
    code, doc = run_json(capsys, "forget", "demo", "--root", str(root))
    assert code == 0 and {r["action"] for r in doc["results"] if r["path"].startswith("vllm/")} == \
        {"left as it is; record dropped"}
    code, doc = run_json(capsys, "apply", DEMO, "--release", "v0.99.0", "--root", str(root))
    assert code == 2 and doc["results"] == [] and doc["error"]["locations"][0]["file"].endswith("releases")



def test_status_of_a_record_written_before_the_proof_meets_the_output_schema(capsys, toy):
    """A version 1 state record (before the proof existed) reads as one whose proof never ran: its spec's
    ``proof`` is null in status --json, which the output schema takes (it asked for a ProofState value)."""
    root, spec = toy
    writing.apply(spec, "auto", str(root), verify=False)
    data = json.loads((root / STATE_FILE).read_text())
    data["version"] = 1
    for rec in data["specs"].values():
        del rec["proof"], rec["python"]
    (root / STATE_FILE).write_text(json.dumps(data))
    code, doc = run_json(capsys, "status", "--root", str(root))
    assert code == 0 and [r["proof"] for r in doc["results"] if "proof" in r] == [None]

def test_error_envelope_names_the_spec_position(capsys, root, tmp_path):
    spec = tmp_path / "spec"
    shutil.copytree(FIXTURES, spec)
    text = (spec / "demo.yaml").read_text().replace("targets:", "targets: [", 1)
    (spec / "demo.yaml").write_text(text)
    code, doc = run_json(capsys, "check", str(spec / "demo.yaml"), "--root", str(root))
    assert code == 2
    (where,) = doc["error"]["locations"]
    assert where["file"].endswith("demo.yaml") and where["line"] and where["col"]


def test_version_and_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("patchspec ")
    for argv in (["apply"], ["no-such-verb"], ["unapply", DEMO, "--root", ".", "--only", "vllm"],
                 ["apply", DEMO, "--root", ".", "--lock-timeout", "nan"],
                 ["apply", DEMO, "--root", ".", "--lock-timeout", "-1"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 64, argv
        assert "error:" in capsys.readouterr().err


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from ((f"{name} {where}", a) for where, a in _actions(sub))
        else:
            yield "", action


def test_every_option_has_help():
    missing = [f"{where}{'/'.join(a.option_strings) or a.dest}" for where, a in _actions(cli.build_parser())
               if not a.help]
    assert missing == []


def test_a_bug_is_one_line_and_exit_3_unless_debug(capsys, root, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(reading, "check", broken)
    assert main(["check", DEMO, "--root", str(root)]) == 3
    err = capsys.readouterr().err
    assert err == "patchspec: internal error: RuntimeError: a bug; --debug shows where\n"
    assert main(["check", DEMO, "--root", str(root), "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_interrupt_exits_130(capsys, root, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(reading, "check", interrupted)
    assert main(["check", DEMO, "--root", str(root)]) == 130
    assert capsys.readouterr().err == "patchspec: interrupted\n"


@pytest.mark.parametrize("breakage, where", [
    (lambda d: (d / "__init__.py").write_text("def stop(scheduler, req_index:\n"), "__init__.py:1"),
    (lambda d: (d / "uses.py").write_text("USES = {'vllm/sequence.py': 'IntermediateTensors'}\n"), "uses.py:1"),
    (lambda d: (d / "uses.py").write_text("USES = {'vllm/sequence.py': ['Intermediate(']}\n"), "uses.py:1"),
], ids=["syntax-error", "uses-not-a-list", "uses-entry-not-python"])
def test_a_broken_snippet_package_is_a_user_error(capsys, root, tmp_path, breakage, where):
    spec = tmp_path / "spec"
    shutil.copytree(FIXTURES, spec)
    breakage(spec / "snips" / "demo_snips")
    before = tree(root)
    code = main(["apply", str(spec / "demo.yaml"), "--release", "v0.30.0", "--root", str(root)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"demo_snips/{where}" in err, err
    assert tree(root) == before


def test_compile_output_that_cannot_be_written(capsys, root):
    code = main(["compile", DEMO, "--release", "v0.30.0", "--root", str(root), "-o", "/proc/patchspec-out"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("patchspec: /proc/patchspec-out/") and err.count("\n") == 1


def test_shipped_spec_by_name(capsys):
    assert main(["validate", "pipeline-parallel"]) == 0
    assert capsys.readouterr().out.startswith("valid: pipeline-parallel: ")
    assert main(["validate", "no-such-spec"]) == 2
    err = capsys.readouterr().err
    assert ("shipped: cpu-async-scheduling, cpu-ngram-gpu, cpu-pipeline-eager, cpu-speculative, pipeline-parallel, "
            "pipeline-transfer") in err


def test_console_entry_point_runs_bare():
    done = subprocess.run([sys.executable, "-m", "patchspec", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("patchspec ")
