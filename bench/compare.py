"""patchspec against the ways people carry a fix today, on one fix and one upgrade of requests.

The fix: in ``Session.send``, one call before ``adapter = self.get_adapter(url=request.url)``. It is made on
requests 2.25.1, then carried to 2.32.3 (where that statement moved 48 lines down), and to a 2.32.3 whose
anchor statement was edited (``get_adapter(request.url)``), as an upstream refactor would. Each tool:

- ``patch -p1`` with the diff made on 2.25.1 (what git diff + patch, quilt and patch-package do);
- a LibCST codemod that inserts the call before the matching statement (whole-file parse);
- patchspec: ``profile new`` for the new release from the old profile, then ``apply``;
- import-time monkeypatching (``Session.send = wrapped(Session.send)``): nothing to re-apply, nothing reported.

For each, the seconds to re-apply after the upgrade (median of ``--repeat`` runs, each command a fresh
process) and what it says when the anchor moved and when it changed. Last line: ``key=value`` figures.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from patchspec.releases.cache import pypi_root

OLD, NEW = "2.25.1", "2.32.3"
ANCHOR = "adapter = self.get_adapter(url=request.url)"
SPEC = textwrap.dedent("""\
    spec: 1
    name: send-hook
    summary: A call before Session.send picks its adapter.
    snippets: {package: send_hook, alias: _send_hook}
    targets:
      - id: session-send
        file: requests/sessions.py
        function: Session.send
        transforms:
          - insert_before: {anchor: "adapter = self.get_adapter(url=request.url)", code: "_send_hook.seen(request)"}
    """)
CODEMOD = textwrap.dedent('''\
    import sys
    import libcst as cst
    import libcst.matchers as m

    ANCHOR = m.SimpleStatementLine(body=[m.Assign(value=m.Call(func=m.Attribute(attr=m.Name("get_adapter"))))])

    class Insert(cst.CSTTransformer):
        def leave_IndentedBlock(self, original, updated):
            body = []
            for stmt in updated.body:
                if m.matches(stmt, ANCHOR) and "url=" in cst.Module([]).code_for_node(stmt):
                    body.append(cst.parse_statement("_send_hook.seen(request)"))
                body.append(stmt)
            return updated.with_changes(body=body)

    path = sys.argv[1]
    with open(path) as f:
        module = cst.parse_module(f.read())
    with open(path, "w") as f:
        f.write(module.visit(Insert()).code)
    ''')


def patchspec(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchspec", *argv], capture_output=True, text=True, cwd=cwd)


def timed(run) -> tuple[float, object]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def root_of(version: str, scratch: Path, name: str, edit: bool = False) -> Path:
    root = scratch / name
    shutil.copytree(pypi_root(f"requests=={version}"), root, ignore=shutil.ignore_patterns(".complete"))
    if edit:
        path = root / "requests" / "sessions.py"
        path.write_text(path.read_text().replace(ANCHOR, "adapter = self.get_adapter(request.url)"))
    return root


def one_run(scratch: Path, work: Path, diff: Path, case: str) -> dict[str, tuple[float, str]]:
    edit = case == "changed"
    out = {}
    root = root_of(NEW, scratch, f"patch-{case}", edit)
    seconds, done = timed(lambda: subprocess.run(["patch", "-p1", "-i", str(diff)], cwd=root,
                                                 capture_output=True, text=True))
    said = [line for line in done.stdout.splitlines() if "FAILED" in line or "offset" in line or "fuzz" in line]
    verdict = "rejected" if done.returncode else ("applied-with-offset" if said else "applied")
    out["patch"] = (seconds, f"{verdict}: {'; '.join(said)}")
    root = root_of(NEW, scratch, f"codemod-{case}", edit)
    target = root / "requests" / "sessions.py"
    before = target.read_text()
    seconds, done = timed(lambda: subprocess.run([sys.executable, str(work / "codemod.py"), str(target)],
                                                 capture_output=True, text=True))
    changed = target.read_text() != before
    out["codemod"] = (seconds, "inserted" if changed else "silent-no-op: the file was rewritten unchanged")
    root = root_of(NEW, scratch, f"patchspec-{case}", edit)
    release = f"requests-{NEW}"
    (work / "releases" / f"{release}.yaml").unlink(missing_ok=True)
    seconds, drafted = timed(lambda: patchspec("profile", "new", release, "--root", str(root), "--spec",
                                               "send-hook.yaml", "--from", f"requests-{OLD}", cwd=work))
    if drafted.returncode == 0:
        more, applied = timed(lambda: patchspec("apply", "send-hook.yaml", "--root", str(root), cwd=work))
        seconds += more
        verdict = "applied" if applied.returncode == 0 else f"refused: {applied.stderr.strip()}"
    else:
        verdict = "needs-a-human: " + drafted.stdout.strip().splitlines()[0]
    out["patchspec"] = (seconds, verdict)
    out["monkeypatch"] = (0.0, "silent: a wrapper of send cannot reach inside it, and a copied send goes stale "
                               "without a word")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="patchspec-compare-") as tmp:
        tmp = Path(tmp)
        work = tmp / "fix"
        (work / "runtime_snippets" / "send_hook").mkdir(parents=True)
        (work / "runtime_snippets" / "send_hook" / "__init__.py").write_text("def seen(request):\n    pass\n")
        (work / "send-hook.yaml").write_text(SPEC)
        (work / "releases").mkdir()
        (work / "codemod.py").write_text(CODEMOD)
        old = root_of(OLD, tmp, "old")
        assert patchspec("profile", "new", f"requests-{OLD}", "--root", str(old), "--spec", "send-hook.yaml",
                         cwd=work).returncode == 0
        diff = tmp / "fix.diff"
        made = patchspec("diff", "send-hook.yaml", "--root", str(old), cwd=work)
        assert made.returncode == 0, made.stderr
        diff.write_text(made.stdout)
        figures: dict[str, str] = {}
        for case in ("moved", "changed"):
            runs = []
            for i in range(args.repeat):
                scratch = tmp / f"{case}-{i}"
                scratch.mkdir()
                runs.append(one_run(scratch, work, diff, case))
                shutil.rmtree(scratch)
            for tool in runs[0]:
                median = statistics.median(r[tool][0] for r in runs)
                print(f"{case:8} {tool:12} {median:7.3f} s  {runs[0][tool][1]}")
                figures[f"{tool}_{case}_s"] = f"{median:.3f}"
                figures[f"{tool}_{case}"] = runs[0][tool][1].split(":")[0]
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
