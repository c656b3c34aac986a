"""The example spec for a library that is not vLLM (specs/examples/requests-audit.yaml), end to end on
three requests releases from PyPI: apply, import the patched package in a fresh interpreter, send a
request through a Session (to a local adapter: no network), unapply byte for byte."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from patchspec.releases.cache import pypi_root
from patchspec.spec import SHIPPED
from patchspec.verbs import reading, writing
from tests.verbs.test_apply import tree

SPEC = str(SHIPPED / "examples" / "requests-audit.yaml")
SEND = """
    import requests
    from requests.adapters import BaseAdapter
    from requests.models import Response
    from _patchspec_runtime.requests_audit import LENGTHS, SENT


    class Local(BaseAdapter):
        def send(self, request, **kwargs):
            response = Response()
            response.status_code, response._content, response.request, response.url = 201, b"ok", request, request.url
            return response

        def close(self):
            pass


    session = requests.Session()
    session.mount("http://", Local())
    response = session.post("http://example.invalid/upload", data=b"hello")
    print(requests.__version__, response.status_code, response.elapsed_ms() >= 0.0,
          [(s["method"], s["status"]) for s in SENT], LENGTHS)
"""


@pytest.mark.parametrize("version", ["2.28.2", "2.31.0", "2.32.3"])
def test_requests_audit_end_to_end(version, copy_root):
    root = copy_root(pypi_root(f"requests=={version}"))
    release = "requests-" + version.rsplit(".", 1)[0]
    before = tree(root)
    assert reading.check(SPEC, release, str(root)).code == 1
    writing.apply(SPEC, release, str(root))
    assert reading.check(SPEC, release, str(root)).code == 0
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SEND)], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [version, "201", "True", "[('POST',", "201)]",
                                   "[('http://example.invalid/upload',", "5)]"]
    writing.unapply("requests-audit", str(root))
    assert tree(root) == before
