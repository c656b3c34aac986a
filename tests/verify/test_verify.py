"""``patchspec verify`` and the proof as apply's last step: every transform shown live in the root's own
interpreter, on a toy package installed into a real venv (tests/verify_toy.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from patchspec.cli import main
from patchspec.install.root import Root
from patchspec.install.state import STATE_FILE, ProofState, load_state
from patchspec.verbs import writing
from tests.state.toy import tree
from tests.verify_toy import MOD, PATCHED_OUT, SNIPPET, install, run, toy_venv, write_spec

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads(resources.files("patchspec").joinpath("schema/output.schema.json").read_text())
PY39 = Path("/root/.pyenv/versions/3.9.18/bin/python3.9")


@pytest.fixture
def applied(tmp_path):
    """``(python, site, spec)``: the toy venv with the every-kind spec applied (and proven)."""
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(site)]) == 0
    return python, site, spec


def test_verify_shows_every_kind_live_on_the_live_object(applied, capsys):
    python, site, spec = applied
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    rows = {(r["target"], r["index"]): r for r in doc["results"] if r["type"] == "transform"}
    assert {k: r["status"] for k, r in rows.items()} == {
        ("send", 0): "live", ("session", 0): "live", ("session", 1): "live", ("fetch", 0): "live",
        ("fetch", 1): "live", ("fetch", 2): "live", ("call", 0): "live"}
    assert "in the live code of vpkg.mod.Session.send" in rows[("send", 0)]["detail"]
    assert "is traced.<locals>.wrapper (" in rows[("fetch", 1)]["detail"]
    assert "_patchspec_runtime/vsnips/__init__.py:10), wrapping the patched function" in rows[("fetch", 1)]["detail"]
    assert rows[("fetch", 2)]["detail"] == "json bound in the live module vpkg.mod"
    modules = {r["module"]: r["status"] for r in doc["results"] if r["type"] == "module"}
    assert modules == {"vpkg.mod": "imported", "_patchspec_runtime.vsnips": "imported"}
    assert run(python) == PATCHED_OUT   # what the proof says live does run


def test_verify_leaves_the_root_byte_identical(applied):
    python, site, spec = applied
    before = tree(site)
    assert main(["verify", spec, "--root", str(site)]) == 0
    assert tree(site) == before and not list(site.rglob("__pycache__"))


def test_apply_records_the_proof_and_status_says_nothing_unverified(applied, capsys):
    python, site, spec = applied
    assert load_state(Root.open(site)).specs["vtoy"].proof == ProofState.LIVE
    capsys.readouterr()
    assert main(["status", "--root", str(site)]) == 0
    assert "unverified" not in capsys.readouterr().out


def test_a_function_rebound_where_no_static_rule_sees_is_not_live_and_apply_undoes(tmp_path, capsys):
    """The live name ``call_with`` is another function by the time the import ends: apply's proof says
    so in one line, exit 2, and the root is as before."""
    python, site = toy_venv(tmp_path, MOD + "\nglobals().update(call_with=lambda x: dict(a=x))\n")
    spec = write_spec(tmp_path / "spec")
    before = tree(site)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "not live: vtoy call#0 add_argument call_with in vpkg/mod.py: the live call_with starts at line 34, " \
           "the patched definition at line 31" in err and "the change was undone" in err
    assert tree(site) == before
    assert main(["apply", spec, "--root", str(site), "--no-verify"]) == 0   # the way past it, said
    assert "unverified: --no-verify" in capsys.readouterr().out
    assert load_state(Root.open(site)).specs["vtoy"].proof == ProofState.SKIPPED
    assert main(["verify", spec, "--root", str(site)]) == 4
    assert "not-live: vtoy call#0" in capsys.readouterr().out


def test_a_module_that_cannot_be_imported_here_is_said_and_shown_statically(tmp_path, capsys):
    """A module wanting a device library the machine lacks: not importable, with the reason; its
    transforms fall back to the static proof, named so, never to silence."""
    mod = "import habana_frameworks.torch\n" + MOD
    python, site = toy_venv(tmp_path, mod)
    spec = write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert "not-importable: vpkg.mod (ModuleNotFoundError: No module named 'habana_frameworks'" in out
    assert "verified: 0 live, 7 shown statically, 0 not live" in out
    assert main(["verify", spec, "--root", str(site), "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out)["results"] if r["type"] == "transform"]
    assert {r["status"] for r in rows} == {"static"}
    assert all("module vpkg.mod not importable here: ModuleNotFoundError: No module named "
               "'habana_frameworks'" in r["detail"] and "shown statically" in r["detail"] for r in rows)
    assert load_state(Root.open(site)).specs["vtoy"].proof == ProofState.STATIC


def test_an_import_that_fails_in_the_spec_own_code_is_not_live(tmp_path, capsys):
    """The snippet package raising at import is the spec's fault, not the machine's: not live."""
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec", snippet=SNIPPET + "raise RuntimeError('snippet broke')\n")
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err
    assert "failed in the spec's code: RuntimeError: snippet broke" in err and "the change was undone" in err


def test_the_status_advice_for_a_plain_directory_is_a_command_that_proves_it(tmp_path, capsys):
    """A ``pip install --target`` root applied without ``--python``: the command status advises names the
    interpreter it needs, so running it as written (PYTHON filled in) proves the spec, not refuses it."""
    root = tmp_path / "tree"
    install(root, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(root)]) == 0
    capsys.readouterr()
    assert main(["status", "--root", str(root)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "unverified:" in x]
    advised = line.split("`")[1].split()
    assert advised[:2] == ["patchspec", "verify"] and "PYTHON" in advised, line
    assert main([sys.executable if word == "PYTHON" else word for word in advised[1:]]) == 0
    assert "7 live, 0 shown statically, 0 not live" in capsys.readouterr().out


@pytest.mark.skipif(not PY39.exists(), reason=f"no Python 3.9 at {PY39}")
def test_verify_a_plain_directory_with_python_3_9(tmp_path, capsys):
    """A plain directory names no interpreter: verify says so in one line, and ``--python`` runs the
    probe on the oldest supported Python."""
    root = tmp_path / "tree"
    install(root, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(root)]) == 0
    assert "unverified: no interpreter is known to run the root" in capsys.readouterr().out
    assert main(["status", "--root", str(root)]) == 0
    assert "unverified: no interpreter was known to run the root at apply" in capsys.readouterr().out
    assert main(["verify", spec, "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "name it with --python" in err
    assert main(["verify", spec, "--root", str(root), "--python", str(PY39)]) == 0
    out = capsys.readouterr().out
    assert "7 live, 0 shown statically, 0 not live" in out and "(3.9.18, --python)" in out
    assert not list(root.rglob("__pycache__"))


def test_a_kill_during_the_proof_leaves_the_spec_applied_and_unverified(tmp_path, capsys):
    """apply is killed while the root's interpreter imports the patched module (held on a FIFO): the
    spec stays applied, status says unverified (exit 1), and the next apply proves and records it."""
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    python, site = toy_venv(tmp_path, f"open({str(fifo)!r}).read()\n" + MOD)
    spec = write_spec(tmp_path / "spec")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-m", "patchspec", "apply", spec, "--root", str(site)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(fifo, "w"):       # opens once the probe, after the commit, imports the module
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert main(["status", "--root", str(site)]) == 1
    assert "unverified: apply stopped before its run-time proof ended" in capsys.readouterr().out
    assert "# patchspec: vtoy" in (site / "vpkg/mod.py").read_text()
    fifo.unlink()
    fifo.write_text("")  # the module's open() no longer waits
    assert main(["apply", spec, "--root", str(site)]) == 0
    assert "verified: 7 live" in capsys.readouterr().out
    assert load_state(Root.open(site)).specs["vtoy"].proof == ProofState.LIVE


def test_a_version_1_state_record_is_read(tmp_path):
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec")
    writing.apply(spec, "auto", str(site))
    state = site / STATE_FILE
    data = json.loads(state.read_text())
    data["version"] = 1
    for rec in data["specs"].values():
        del rec["proof"]
    state.write_text(json.dumps(data))
    assert load_state(Root.open(site)).specs["vtoy"].proof is None
    writing.unapply("vtoy", str(site))
    assert not (site / ".patchspec").exists()


REWRITE_MOD = '''LIMIT = 1


class Config:
    MODE = "old"

    def __init__(self, level=LIMIT):
        self.level = level


def risky(x):
    if x:
        x = x + 1
    value = x * 2
    unsafe(x)
    return value


def unsafe(x):
    return x
'''

REWRITE_SPEC = '''spec: 1
name: vtoy
summary: The rewrite kinds over a toy package.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: limit
    file: vpkg/mod.py
    function: LIMIT
    transforms:
      - set: {value: "2"}
  - id: mode
    file: vpkg/mod.py
    function: Config.MODE
    transforms:
      - set: {value: '"new"'}
  - id: init
    file: vpkg/mod.py
    function: Config.__init__
    transforms:
      - set: {parameter: level, value: "3"}
  - id: extra
    file: vpkg/mod.py
    function: unsafe
    transforms:
      - add_statement: {code: "EXTRA = 5"}
  - id: risky
    file: vpkg/mod.py
    function: risky
    transforms:
      - replace: {pattern: "$X * 2", by: "$X * 4"}
      - remove: {statement: "unsafe(x)"}
      - guard:
          statements: |
            if x:
                ...
          by: |
            try:
                $$$BODY
            except TypeError:
                pass
'''


def test_the_rewrite_kinds_are_shown_live(tmp_path, capsys):
    """replace, remove and guard by their code in the live function; set by the live binding (a module
    or class name) or the live function (a default); add_statement by the names it binds."""
    python, site = toy_venv(tmp_path, REWRITE_MOD)
    spec = write_spec(tmp_path / "spec", spec=REWRITE_SPEC)
    assert main(["apply", spec, "--root", str(site)]) == 0
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site), "--json"]) == 0
    rows = {(r["target"], r["index"]): r for r in json.loads(capsys.readouterr().out)["results"]
            if r["type"] == "transform"}
    assert {k: r["status"] for k, r in rows.items()} == {
        ("limit", 0): "live", ("mode", 0): "live", ("init", 0): "live", ("risky", 0): "live",
        ("risky", 1): "live", ("risky", 2): "live", ("extra", 0): "live"}
    assert rows[("mode", 0)]["detail"] == "MODE bound in the live vpkg.mod.Config by the module's patched text"
    assert rows[("risky", 1)]["detail"] == "the live code of vpkg.mod.risky is the patched text"
    assert rows[("extra", 0)]["detail"] == "EXTRA bound in the live vpkg.mod by the module's patched text"
    code = "import vpkg.mod as m; print(m.LIMIT, m.Config.MODE, m.Config().level, m.risky(1), m.EXTRA)"
    assert run(python, code=code) == ["2 new 3 8 5"]


def test_vllm_gaudi_is_not_importable_without_gaudi_software_and_shown_statically(
        vllm_release, gaudi_release, copy_root, capsys):
    """vLLM 0.30.0 with vllm-gaudi main, as the shipped spec's profile pins them, run by this machine's
    interpreter: every vLLM transform live, every vllm_gaudi one shown statically, with the reason."""
    root = copy_root(vllm_release("0.30.0"), gaudi_release("main"))
    assert main(["apply", "pipeline-parallel", "--root", str(root), "--release", "v0.30.0"]) == 0
    capsys.readouterr()
    assert main(["verify", "pipeline-parallel", "--root", str(root), "--python", sys.executable, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = [r for r in doc["results"] if r["type"] == "transform"]
    gaudi = [r for r in rows if r["file"].startswith("vllm_gaudi/")]
    assert gaudi and {r["status"] for r in gaudi} == {"static"}
    assert all("not importable here: ModuleNotFoundError: No module named 'habana_frameworks'" in r["detail"]
               for r in gaudi)
    assert {r["status"] for r in rows if r["file"].startswith("vllm/")} == {"live"}
    modules = {r["module"]: r for r in doc["results"] if r["type"] == "module"}
    assert {m for m, r in modules.items() if r["status"] == "not-importable"} == \
        {m for m in modules if m.startswith("vllm_gaudi.")}


PROPERTY_MOD = '''def marker(x):
    return x


class Conn:
    @property
    def host(self):
        return marker(self._host)

    @host.setter
    def host(self, value):
        self._host = marker(value)
'''

PROPERTY_SPEC = '''spec: 1
name: vtoy
summary: A property's getter and setter.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: get
    file: vpkg/mod.py
    function: Conn.host
    transforms:
      - insert_before: {anchor: "return marker(self._host)", code: "_v.seen('get')"}
  - id: set
    file: vpkg/mod.py
    function: Conn.host.setter
    transforms:
      - insert_before: {anchor: "self._host = marker(value)", code: "_v.seen('set')"}
      - wrap: {with: traced}
'''


def test_a_property_getter_and_setter_are_reached_through_the_live_property(tmp_path, capsys):
    python, site = toy_venv(tmp_path, PROPERTY_MOD)
    spec = write_spec(tmp_path / "spec", spec=PROPERTY_SPEC)
    assert main(["apply", spec, "--root", str(site)]) == 0
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert "live: vtoy get#0 insert_before Conn.host in vpkg/mod.py (line(s) 9 in the live code of " \
           "vpkg.mod.Conn.host)" in out
    assert "live: vtoy set#0 insert_before Conn.host.setter in vpkg/mod.py (line(s) 15 in the live code of " \
           "vpkg.mod.Conn.host.setter)" in out
    assert "live: vtoy set#1 wrap Conn.host.setter in vpkg/mod.py (the live vpkg.mod.Conn.host.setter is " \
           "traced.<locals>.wrapper (" in out
    code = "import vpkg.mod as m; c = m.Conn(); c.host = 'x'; print(c.host)"
    assert run(python, code=code) == ["HOOK wrap", "HOOK set", "HOOK get", "x"]


def test_a_probe_that_hangs_is_killed_at_the_timeout_and_said(tmp_path, capsys):
    """A module whose import never ends (it waits on a FIFO no one writes): verify stops the probe at
    --timeout and says so in one line; apply with the proof would undo, so this one applied without."""
    fifo = tmp_path / "never"
    os.mkfifo(fifo)
    python, site = toy_venv(tmp_path, f"open({str(fifo)!r}).read()\n" + MOD)
    spec = write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(site), "--no-verify"]) == 0
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site), "--timeout", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "the run-time proof did not run: " in err and \
        "did not finish within 0.5s" in err
    held = subprocess.run(["pgrep", "-f", str(site)], capture_output=True, text=True).stdout.split()
    assert held == []   # the probe's whole process group is gone
