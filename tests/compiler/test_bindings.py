"""Bindings, each on the real release named (from PyPI, cached): a
spec that applied but whose code never ran is refused in one line naming the binding that is live, and
correct specs that were refused now hold on every verb. Each test failed before that change."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.prepare import prepare
from patchspec.releases.cache import pypi_root
from patchspec.verbs import writing

SNIPS = '''
import functools

CALLS = []

USES = {}


def hook(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        CALLS.append(fn.__name__)
        return fn(*args, **kwargs)
    return inner


def note(*args):
    CALLS.append(args)


def attempt_counter():
    return [0]


def tick(counter):
    counter[0] += 1
    CALLS.append(counter[0])


def stream(self, *args, **kwargs):
    return iter(())
'''


def spec_dir(tmp: Path, package: str, targets: str, uses: str = "{}", name: str = "fix") -> str:
    """A spec beside its snippet package ``snips`` and a profile covering every release of ``package``."""
    (tmp / "snips").mkdir(parents=True, exist_ok=True)
    (tmp / "snips" / "__init__.py").write_text(SNIPS.replace("USES = {}", f"USES = {uses}"))
    (tmp / "releases").mkdir(exist_ok=True)
    (tmp / "releases" / "any.yaml").write_text(f"release: any\npackages: {{{package}: '>=0'}}\n")
    path = tmp / f"{name}.yaml"
    path.write_text(f"spec: 1\nname: {name}\nsummary: t\nsnippets: {{package: snips, alias: _s, path: .}}\n"
                    f"targets:\n{textwrap.dedent(targets)}")
    return str(path)


def verb(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def run(root: Path, code: str, stdin: str = "") -> str:
    done = subprocess.run([sys.executable, "-B", "-c", textwrap.dedent(code)], cwd=root, capture_output=True,
                          text=True, timeout=60, input=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


# --- 1, 3, 4, 7, 8. a patch that would not run: check answers 4 naming the binding that is live ---------

WAIT = ("not-live", "wait_for_socket is rebound at line 107 (`wait_for_socket = poll_wait_for_socket`, through "
        "`global` in wait_for_socket")
RETRY = "name: DEFAULT_REMOVE_HEADERS_ON_REDIRECT, value: 'frozenset([\"Cookie\", \"Authorization\"])'"


@pytest.mark.parametrize("file, function, transform, release, said", [
    pytest.param("util/wait.py", "wait_for_socket", "wrap: {with: hook}", "2.0.5", WAIT,
                 id="a function that rebinds itself, wrapped"),
    pytest.param("util/wait.py", "wait_for_socket",
                 "insert_before: {anchor: 'return wait_for_socket(sock, read, write, timeout)', code: '_s.note(sock)'}",
                 "2.0.5", WAIT, id="a function that rebinds itself, inserted into"),
    pytest.param("connection.py", "BaseSSLError", "add_method: {name: describe, with: stream}", "2.0.5",
                 ("try (line 32: `BaseSSLError = ssl.SSLError`)", "choose one with `branch:`"),
                 id="a class the try branch binds otherwise, defined only in the fallback"),
    pytest.param("util/retry.py", "Retry", f"add_attribute: {{{RETRY}}}", "2.0.5",
                 ("Retry's body reads DEFAULT_REMOVE_HEADERS_ON_REDIRECT at line 216 (a default argument of "
                  "__init__) before an added DEFAULT_REMOVE_HEADERS_ON_REDIRECT would run", "`set`"),
                 id="an attribute the class body captured, pointing to set"),
    pytest.param("util/retry.py", "Retry", f"add_attribute: {{{RETRY}}}", "1.26.16",
                 ("Retry already binds DEFAULT_REMOVE_HEADERS_ON_REDIRECT at line 238", "`set`"),
                 id="an attribute the class binds, pointing to set"),
    pytest.param("response.py", "HTTPResponse", "add_method: {name: stream, with: stream}", "2.0.5",
                 ("HTTPResponse already binds stream at line 914 (def stream): add_method would silently replace "
                  "it; change an existing binding with the rewrite kinds `set` (a value) or `replace` (a "
                  "definition)",),
                 id="add_method over the class's own method"),
    pytest.param("connectionpool.py", "HTTPConnectionPool._new_conn",
                 'add_argument: {call: "self.ConnectionCls(...)", keyword: blocksize, value: "65536"}', "2.0.5",
                 ("the call also passes **self.conn_kw, which may hold blocksize",
                  "self.conn_kw.setdefault('blocksize', ...)"),
                 id="a keyword beside a double-star mapping"),
])
def test_a_patch_that_would_not_run_is_refused_naming_what_is_live(tmp_path, capsys, file, function, transform,
                                                                    release, said):
    spec = spec_dir(tmp_path, "urllib3", f"""
      - id: target
        file: urllib3/{file}
        function: {function}
        transforms:
          - {transform}
    """)
    code, out = verb(capsys, "check", spec, "--root", str(pypi_root(f"urllib3=={release}")))
    assert code == 4, out
    assert all(part in out for part in said), out


# --- 2. a property with a setter ---------------------------------------------------------------------

def test_a_property_is_named_by_its_getter_and_its_setter(tmp_path, copy_root):
    root = copy_root(pypi_root("urllib3==2.0.5"))
    spec = spec_dir(tmp_path, "urllib3", """
      - id: host-get
        file: urllib3/connection.py
        function: HTTPConnection.host
        transforms:
          - wrap: {with: hook}
          - insert_before: {anchor: 'return self._dns_host.rstrip(".")', code: '_s.note("get")'}
      - id: host-set
        file: urllib3/connection.py
        function: HTTPConnection.host.setter
        transforms:
          - insert_before: {anchor: 'self._dns_host = value', code: '_s.note("set", value)'}
    """)
    writing.apply(spec, "auto", str(root))
    assert run(root, """
        from urllib3.connection import HTTPConnection
        from _patchspec_runtime.snips import CALLS
        conn = HTTPConnection("example.com.")
        CALLS.clear()
        host = conn.host
        conn.host = "other.org"
        print(host, CALLS)
    """) == "example.com ['host', ('get',), ('set', 'other.org')]"


@pytest.mark.parametrize("target, line, hook", [
    ("HTTPConnection.host", 169, "wrap_host"),            # `def host(self) -> str:` under @property
    ("HTTPConnection.host.setter", 188, "wrap_host_setter"),
])
def test_init_drafts_a_wrap_of_the_accessor_named(tmp_path, capsys, target, line, hook):
    root = pypi_root("urllib3==2.0.5")
    code, out = verb(capsys, "init", "host-hook", "--root", str(root), "--target",
                     f"urllib3/connection.py:{target}", "--dir", str(tmp_path))
    assert code == 0, out
    assert f"with: {hook}" in (tmp_path / "host-hook.yaml").read_text()
    prepared = prepare(str(tmp_path / "host-hook.yaml"), "auto", str(root))
    (row,) = prepared.plan.resolved
    assert row.ok and row.line == line


# --- 9. names bound by the spec's own add_import: every verb gives one verdict -----------------------

def _session(tmp_path: Path, imported: str, value: str) -> str:
    return spec_dir(tmp_path, "requests", f"""
      - id: session-import
        file: requests/sessions.py
        function: Session
        transforms:
          - add_import: {{import: "{imported}"}}
      - id: session
        file: requests/sessions.py
        function: Session
        transforms:
          - add_attribute: {{name: patched_extra, value: "{value}"}}
    """)


@pytest.mark.parametrize("release", ["2.25.1", "2.32.3"])
@pytest.mark.parametrize("imported, value", [
    ("import logging", "logging.getLogger('requests.patched')"),
    ("import threading", "threading.Lock()"),
])
def test_a_name_the_spec_imports_holds_on_every_verb(tmp_path, capsys, release, imported, value):
    root = str(pypi_root(f"requests=={release}"))
    spec = _session(tmp_path, imported, value)
    assert verb(capsys, "validate", spec, "--root", root)[0] == 0
    assert verb(capsys, "check", spec, "--root", root)[0] == 1
    assert verb(capsys, "compile", spec, "--root", root)[0] == 0
    code, out = verb(capsys, "profile", "new", f"requests-{release}", "--root", root, "--spec", spec)
    assert code == 0 and "wrote" in out, out


def test_a_misspelt_name_is_refused_by_every_verb(tmp_path, capsys):
    root = str(pypi_root("requests==2.32.3"))
    spec = _session(tmp_path, "import logging", "loging.getLogger('requests.patched')")
    for argv, expected in ((["validate", spec, "--root", root], 2), (["check", spec, "--root", root], 4),
                           (["compile", spec, "--root", root], 2),
                           (["profile", "new", "r2", "--root", root, "--spec", spec], 4)):
        code, out = verb(capsys, *argv)
        assert code == expected and "inserted code reads a name not bound before it: Session:" in out \
            and "loging (did you mean logging?)" in out, (argv, out)
    assert not (Path(spec).parent / "releases" / "r2.yaml").exists()


# --- 10. names bound by the spec's own earlier insert ------------------------------------------------

@pytest.mark.parametrize("release", ["8.0.4", "8.2.1"])
def test_a_name_an_earlier_insert_binds_holds_and_runs(tmp_path, copy_root, release):
    root = copy_root(pypi_root(f"click=={release}"))
    spec = spec_dir(tmp_path, "click", """
      - id: prompt
        file: click/termui.py
        function: prompt
        transforms:
          - insert_before: {anchor: "if value_proc is None: ...", code: "_attempts = _s.attempt_counter()"}
          - loop_guard: {loop: "while True:\\n    while True: ...\\n    ...", code: "_s.tick(_attempts)"}
    """)
    writing.apply(spec, "auto", str(root))
    assert run(root, """
        from click import termui
        from _patchspec_runtime.snips import CALLS
        print(termui.prompt("x"), CALLS)
    """, stdin="abc\n") == "x: abc [1]"


# --- 11. USES sees a class attribute set at module level ---------------------------------------------

def test_uses_sees_a_class_attribute_set_at_module_level(tmp_path, capsys):
    root = str(pypi_root("jinja2==3.1.2"))
    spec = spec_dir(tmp_path, "jinja2", """
      - id: from-string
        file: jinja2/environment.py
        function: Environment.from_string
        transforms:
          - wrap: {with: hook}
    """, uses='{"jinja2/environment.py": ["Environment.template_class", "Environment.from_string(s)"]}')
    code, out = verb(capsys, "check", spec, "--root", root)
    assert code == 1, out
    code, out = verb(capsys, "profile", "new", "jinja2-3.1.2", "--root", root, "--spec", spec)
    assert code == 0, out
