"""Behaviour checks of the nine CVE fixes, run in a fresh interpreter on a root: exit 0 fixed, 1 not.

Each reads only the package under the root (first on ``sys.path``); HTTP goes to a server on 127.0.0.1
that the script starts and stops itself.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REDIRECT_SERVER = '''
import http.server
import threading

seen = []


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(303)
        self.send_header("Location", "/next")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        length = int(self.headers.get("Content-Length") or 0)
        seen.append(self.rfile.read(length) if length else b"")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
'''

CHECKS = {
    # CVE-2023-32681: Proxy-Authorization is not added for an https destination.
    "requests": '''
import requests
request = requests.Request("GET", "https://example.invalid/").prepare()
requests.Session().rebuild_proxies(request, {"https": "http://user:secret@127.0.0.1:9"})
raise SystemExit(1 if "Proxy-Authorization" in request.headers else 0)
''',
    # CVE-2023-43804: Cookie is dropped on a cross-origin redirect by default (the class default and the
    # default argument that captured it).
    "urllib3-cookie": '''
from urllib3.util.retry import Retry
fixed = "Cookie" in Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT and "cookie" in Retry().remove_headers_on_redirect
raise SystemExit(0 if fixed else 1)
''',
    # CVE-2023-45803: a 303 redirect turned into GET drops the body.
    "urllib3-303": REDIRECT_SERVER + '''
import urllib3
try:
    urllib3.PoolManager().request("POST", f"http://127.0.0.1:{server.server_port}/", body=b"secret", timeout=5)
finally:
    server.shutdown()
raise SystemExit(0 if seen == [b""] else 1)
''',
    # CVE-2024-37891: Proxy-Authorization is dropped on a cross-origin redirect by default.
    "urllib3-proxy-auth": '''
from urllib3.util.retry import Retry
raise SystemExit(0 if "proxy-authorization" in Retry().remove_headers_on_redirect else 1)
''',
    # CVE-2024-22195: xmlattr refuses a key with a space.
    "jinja2-space": '''
import jinja2
try:
    jinja2.Environment().from_string("{{ d|xmlattr }}").render(d={"a onclick=x": 1})
except ValueError:
    raise SystemExit(0)
raise SystemExit(1)
''',
    # CVE-2024-34064: xmlattr refuses a key with / > or =.
    "jinja2-solidus": '''
import jinja2
try:
    jinja2.Environment().from_string("{{ d|xmlattr }}").render(d={"a/onclick": 1})
except ValueError:
    raise SystemExit(0)
raise SystemExit(1)
''',
    # CVE-2024-3651: a joiner's context stops at the first character that does not join.
    "idna": '''
import idna.core
raise SystemExit(1 if idna.core.valid_contextj("\\u0628a\\u200c\\u0628", 2) else 0)
''',
    # CVE-2024-34062: cast does not eval its input.
    "tqdm": '''
from tqdm.cli import cast
raise SystemExit(0 if cast('"+str(6*7)+"', "str") == '"+str(6*7)+"' else 1)
''',
    # CVE-2024-4340: a deeply nested statement raises SQLParseError, not RecursionError.
    "sqlparse": '''
import sys
import sqlparse
statement = sqlparse.parse("[" * 300 + "]" * 300)[0]
sys.setrecursionlimit(200)   # nested deeper than the limit, without the cost of parsing thousands of levels
try:
    list(statement.flatten())
except sqlparse.exceptions.SQLParseError:
    raise SystemExit(0)
except RecursionError:
    raise SystemExit(1)
raise SystemExit(1)
''',
}


def fixed(root: Path, check: str) -> bool:
    """Whether the package under ``root`` behaves as fixed; anything but a clean 0/1 is a failure."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", CHECKS[check]], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0
