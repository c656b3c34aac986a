"""A toy package installed into a real venv (its own interpreter), and a spec of every transform kind over
it, whose snippet package prints what runs: what the run-time proof and the byte-code tests share."""
from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import venv
from pathlib import Path

MOD = '''import os


def marker(x):
    return x


class Session:
    greeting = "hi"

    def send(self, request):
        request = marker(request)
        return request


def fetch(items):
    out = []
    for item in items:
        out.append(item)
    return marker(out)


def call_with(x):
    return dict(a=x)
'''

SNIPPET = '''"""Hooks that say when they run."""
import functools


def seen(*args):
    print("HOOK", *args)


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        seen("wrap")
        return fn(*args, **kwargs)
    return wrapper


def describe(self):
    return "described"
'''

SPEC = '''spec: 1
name: vtoy
summary: Every kind over a toy package.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: send
    file: vpkg/mod.py
    function: Session.send
    transforms:
      - insert_before: {anchor: "request = marker(request)", code: "_v.seen('send')"}
  - id: session
    file: vpkg/mod.py
    function: Session
    transforms:
      - add_method: {name: describe, with: describe}
      - add_attribute: {name: patched, value: "True"}
  - id: fetch
    file: vpkg/mod.py
    function: fetch
    transforms:
      - loop_guard: {loop: "for item in items: ...", code: "_v.seen('loop')"}
      - wrap: {with: traced}
      - add_import: {import: "import json"}
  - id: call
    file: vpkg/mod.py
    function: call_with
    transforms:
      - add_argument: {call: "dict(...)", keyword: b, value: "2"}
'''

# What the patched module prints when each hook runs, and what the pristine one prints.
RUN = ("import vpkg.mod as m; m.Session().send(1); m.fetch([1]); print('ARG', m.call_with(0)); "
       "print('JSON', hasattr(m, 'json')); print('DESCRIBE', getattr(m.Session(), 'describe', lambda: None)())")
PATCHED_OUT = ["HOOK send", "HOOK wrap", "HOOK loop", "ARG {'a': 0, 'b': 2}", "JSON True", "DESCRIBE described"]
PRISTINE_OUT = ["ARG {'a': 0}", "JSON False", "DESCRIBE None"]


def make_venv(where: Path) -> tuple[Path, Path]:
    """``(python, site-packages)`` of a new venv (no pip: nothing is fetched)."""
    venv.create(where, with_pip=False, symlinks=True)
    python = where / "bin" / "python"
    tag = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return python, where / "lib" / tag / "site-packages"


def install(site: Path, files: dict[str, str], name: str = "vpkg", version: str = "1.0") -> None:
    """Lay out ``files`` and a dist-info as pip does."""
    dist = site / f"{name}-{version}.dist-info"
    dist.mkdir(parents=True)
    files = {**files, f"{dist.name}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n",
             f"{dist.name}/top_level.txt": f"{name}\n"}
    lines = []
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{rel},sha256={digest},{len(text.encode())}")
    (dist / "RECORD").write_text("\n".join(lines + [f"{dist.name}/RECORD,,"]) + "\n")


def write_spec(directory: Path, spec: str = SPEC, snippet: str = SNIPPET, package: str = "vpkg") -> str:
    (directory / "releases").mkdir(parents=True)
    (directory / "releases" / "r1.yaml").write_text(f"release: r1\npackages: {{{package}: '==1.0'}}\n")
    (directory / "snips" / "vsnips").mkdir(parents=True)
    (directory / "snips" / "vsnips" / "__init__.py").write_text(snippet)
    (directory / "vtoy.yaml").write_text(spec)
    return str(directory / "vtoy.yaml")


def toy_venv(tmp: Path, mod: str = MOD) -> tuple[Path, Path]:
    python, site = make_venv(tmp / "venv")
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": mod})
    return python, site


def run(python: Path, *flags: str, code: str = RUN) -> list[str]:
    """Run ``code`` in the venv as a program would: byte code read and written as Python does."""
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(python), *flags, "-c", code], capture_output=True, text=True, env=env,
                          cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
