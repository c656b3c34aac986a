"""The run-time proof's timeout holds whatever the snippet starts (issue 28 item 4): a child in a session
of its own that keeps the probe's pipes open, or a daemon that forks twice and closes them, is killed with
the probe, and the verb returns with its error instead of waiting on the pipes."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.state.toy import tree
from tests.verify_toy import SNIPPET, toy_venv, write_spec

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD = 120   # seconds: only so that a regression fails instead of hanging the run

# Each starts a `sleep` that never ends by itself and writes its pid to PIDFILE; the process it leaves is in
# none of the probe's groups or sessions.
STARTS = {
    "new_session_holding_the_pipes": '''
import subprocess
_child = subprocess.Popen(["sleep", "infinity"], start_new_session=True)
open(PIDFILE, "w").write(str(_child.pid))
''',
    "double_forked_daemon_pipes_closed": '''
import os
import subprocess
if os.fork() == 0:
    os.setsid()
    _child = subprocess.Popen(["sleep", "infinity"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    open(PIDFILE, "w").write(str(_child.pid))
    os._exit(0)
os.wait()
''',
}


def _alive(pid: int) -> bool:
    """Whether ``pid`` is still our ``sleep`` and not dead (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:].split()[0] != b"Z" and cmdline.startswith(b"sleep\0")


def _apply(site: Path, spec: str, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "patchspec", "apply", spec, "--root", str(site), *flags],
                          capture_output=True, text=True, env=env, timeout=HANG_GUARD)


@pytest.fixture
def pidfile(tmp_path):
    path = tmp_path / "sleep.pid"
    yield path
    if path.exists() and _alive(int(path.read_text())):   # a failed run must not leave it behind
        os.kill(int(path.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("start", sorted(STARTS))
def test_a_snippet_that_hangs_after_starting_a_detached_child_is_stopped_with_it(tmp_path, pidfile, start):
    """The import never ends (it waits on a FIFO no one writes): apply stops the probe at --timeout, every
    process it started goes with it, the change is undone, and apply says why in one line."""
    fifo = tmp_path / "never"
    os.mkfifo(fifo)
    python, site = toy_venv(tmp_path)
    snippet = f"PIDFILE = {str(pidfile)!r}\n" + STARTS[start] + f"open({str(fifo)!r}).read()\n" + SNIPPET
    spec = write_spec(tmp_path / "spec", snippet=snippet)
    before = tree(site)
    done = _apply(site, spec, "--timeout", "3")
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "did not finish within 3s" in done.stderr \
        and "the change was undone" in done.stderr
    assert pidfile.exists() and not _alive(int(pidfile.read_text()))
    assert tree(site) == before


@pytest.mark.parametrize("start", sorted(STARTS))
def test_a_snippet_that_leaves_a_detached_child_is_proven_and_the_child_killed(tmp_path, pidfile, start):
    """The import ends, leaving the child running: the proof answers (the default timeout of 300 s is never
    reached), and the child does not outlive it."""
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec", snippet=f"PIDFILE = {str(pidfile)!r}\n" + STARTS[start] + SNIPPET)
    done = _apply(site, spec)
    assert done.returncode == 0, done.stderr
    assert pidfile.exists() and not _alive(int(pidfile.read_text()))


def test_an_interpreter_that_hangs_before_reading_its_request_is_stopped_at_the_timeout(tmp_path):
    """A ``.pth`` file of the root blocks the interpreter at start-up, before the probe reads its request,
    and the request is larger than a pipe holds: the write of it must not outlast the timeout either."""
    fifo = tmp_path / "never"
    os.mkfifo(fifo)
    python, site = toy_venv(tmp_path)
    # it reads a little of the request first: the pipe then has room for less than one more write
    (site / "hang.pth").write_text(f"import os; os.read(0, 5000); open({str(fifo)!r}).read()\n")
    code = ("import sys; from pathlib import Path; from patchspec.install import interpreter as i\n"
            "try:\n"
            f"    i.ask(i.Interpreter(Path({str(python)!r}), 'test'), Path({str(site)!r}),"
            " {'find': ['m' * 100] * 5000}, 3)\n"
            "except i.ProbeError as exc:\n"
            "    print(exc)\n")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_GUARD,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(tmp_path))
    finally:   # a probe a failed run left blocked on the FIFO reads its end and goes
        with contextlib.suppress(OSError):   # no reader left: the probe is gone
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert done.returncode == 0 and done.stdout.strip().endswith("did not finish within 3s"), done.stderr
