"""What each of the nine CVE fixes changes, observed in a fresh interpreter on a root: one probe per fix.

A probe is a Python program run with the root first on ``sys.path`` (the package's dependencies come from
the test venv); its last line is ``VULNERABLE`` or ``FIXED``, after lines that say what it saw. The HTTP
probes start their servers on 127.0.0.1 inside the probe's own process (ephemeral ports, threads that end
with it): the redirecting server and the one that echoes what reached it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SERVERS = '''
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    """/r answers with a redirect (status from the query) to the other server's /echo; /echo answers with
    the method, the headers and the body that reached it."""

    target = ""

    def _any(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/r"):
            self.send_response(int(self.path.split("=")[1]))
            self.send_header("Location", self.target + "/echo")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        out = json.dumps({"method": self.command, "headers": dict(self.headers), "body": body.decode()}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _any

    def log_message(self, *args):
        pass


def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


echo = serve(Echo)
Echo.target = f"http://127.0.0.1:{echo.server_port}"
origin = serve(Echo)   # another port: another origin, so the redirect crosses hosts
REDIRECT = f"http://127.0.0.1:{origin.server_port}/r"
'''

PROBES = {
    "requests-cve-2023-32681": '''
        import requests
        session = requests.Session()
        session.trust_env = False
        proxies = {"https": "http://user:secret@127.0.0.1:9", "http": "http://user:secret@127.0.0.1:9"}
        seen = {}
        for scheme in ("https", "http"):
            request = requests.Request("GET", f"{scheme}://127.0.0.1:9/next").prepare()
            session.rebuild_proxies(request, proxies)
            seen[scheme] = "Proxy-Authorization" in request.headers
        print("https tunnel gets Proxy-Authorization:", seen["https"], "plain http gets it:", seen["http"])
        assert seen["http"], "the fix must keep Proxy-Authorization for a plain-http proxy"
        print("VULNERABLE" if seen["https"] else "FIXED")
    ''',
    "urllib3-cve-2023-43804": SERVERS + '''
        import urllib3
        reply = urllib3.PoolManager().request("GET", REDIRECT + "=302", headers={"Cookie": "session=secret"})
        headers = json.loads(reply.data)["headers"]
        print("headers at the redirect's host:", sorted(headers))
        print("VULNERABLE" if "Cookie" in headers else "FIXED")
    ''',
    "urllib3-cve-2023-45803": SERVERS + '''
        import urllib3
        reply = urllib3.PoolManager().request("POST", REDIRECT + "=303", body=b"password=secret",
                                              headers={"Content-Type": "application/x-www-form-urlencoded"})
        seen = json.loads(reply.data)
        print("after 303:", seen["method"], repr(seen["body"]), "Content-Type" in seen["headers"])
        assert seen["method"] == "GET"
        print("VULNERABLE" if seen["body"] or "Content-Type" in seen["headers"] else "FIXED")
    ''',
    "urllib3-cve-2024-37891": SERVERS + '''
        import urllib3
        reply = urllib3.PoolManager().request("GET", REDIRECT + "=302",
                                              headers={"Proxy-Authorization": "Basic c2VjcmV0"})
        headers = json.loads(reply.data)["headers"]
        print("headers at the redirect's host:", sorted(headers))
        print("VULNERABLE" if "Proxy-Authorization" in headers else "FIXED")
    ''',
    "jinja2-cve-2024-22195": '''
        import jinja2
        template = jinja2.Environment(autoescape=True).from_string("<input{{ d|xmlattr }}>")
        assert template.render(d={"name": "q"}) == '<input name="q">'
        try:
            print(template.render(d={"onclick=alert(1) name": "q"}))
            print("VULNERABLE")
        except ValueError as exc:
            print("refused:", exc)
            print("FIXED")
    ''',
    "jinja2-cve-2024-34064": '''
        import jinja2
        template = jinja2.Environment(autoescape=True).from_string("<input{{ d|xmlattr }}>")
        assert template.render(d={"name": "q"}) == '<input name="q">'
        refused = []
        for key in ("a/onclick", "a>b", "onclick=x", "a b"):
            try:
                template.render(d={key: "q"})
            except ValueError as exc:
                refused.append(key)
        print("refused:", refused)
        print("FIXED" if len(refused) == 4 else "VULNERABLE")
    ''',
    "idna-cve-2024-3651": '''
        import idna
        from idna.core import valid_contextj
        # a joiner after a non-joining digit: 3.7 stops there (False); before, the scan went on to the
        # start of the label, which is what made crafted labels quadratic
        stops = valid_contextj("\\u0628\\u0661\\u200c\\u0628", 2) is False
        # a transparent mark between: skipped, the joiner is valid in both (needs the table's T entries)
        assert valid_contextj("\\u0628\\u064b\\u200c\\u0628", 2) is True
        assert idna.encode("example.com") == b"example.com"
        print("scan stops at a non-transparent neighbour:", stops)
        print("FIXED" if stops else "VULNERABLE")
    ''',
    "tqdm-cve-2024-34062": '''
        from tqdm.cli import cast
        value = cast('") + "EVALUATED" + ("', "str")
        assert cast("7", "int") == 7 and cast("x", "chr") == b"x"
        print("cast returned:", repr(value))
        print("VULNERABLE" if value == "EVALUATED" else "FIXED")
    ''',
    "sqlparse-cve-2024-4340": '''
        import sqlparse
        from sqlparse.exceptions import SQLParseError
        sql = "SELECT " + "(" * 1000 + "1" + ")" * 1000
        try:
            list(sqlparse.parse(sql)[0].flatten())
            print("parsed")
            print("FIXED")
        except SQLParseError as exc:
            print("SQLParseError:", exc)
            print("FIXED")
        except RecursionError:
            print("RecursionError escaped")
            print("VULNERABLE")
    ''',
}


def probe(fix: str, root: Path) -> tuple[str, str]:
    """(verdict, what the probe printed) for one fix on one root; bytecode is not written into the root."""
    text = PROBES[fix]
    head = SERVERS if text.startswith(SERVERS) else ""
    program = head + textwrap.dedent(text[len(head):])
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(root), "NO_PROXY": "*"}
    # the timeout bounds a hang, not a speed: sqlparse 0.4.2's pristine parse takes 9 s of CPU, past 120 s at load 17
    done = subprocess.run([sys.executable, "-c", program], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    return lines[-1], "\n".join(lines[:-1])
