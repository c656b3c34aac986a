"""The root's own Python: finding it, and asking it things through ``probe.py`` in a subprocess.

A site-packages directory names its interpreter: ``PREFIX/lib/pythonX.Y/site-packages`` belongs to
``PREFIX/bin/pythonX.Y`` (a venv, whose ``pyvenv.cfg`` sits in ``PREFIX``; a conda or pyenv prefix; a
``/usr/local`` install). A plain directory (a source tree, an unpacked wheel) names none: ``--python``
says which one runs it. The probe runs with ``-B`` (no byte code is written, the root stays byte for byte
as it was) and ``-I`` (neither the working directory nor ``PYTHONPATH`` nor the user's site-packages
leaks in), in its own session; every process it started is killed when it answers or overruns its
timeout (``processes.py``).
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Self, cast

from patchspec.errors import PatchspecError
from patchspec.install import processes

PROBE = Path(__file__).with_name("probe.py")
TIMEOUT = 300.0   # importing vLLM takes seconds; on a loaded machine, tens of them
GRACE = 5.0       # for the last of stderr once every process of the probe is killed
ERR_TAIL = 65536  # of what the imports print to stderr, the end is kept: only its last line is shown


@dataclass(frozen=True)
class Interpreter:
    path: Path
    how: str          # how it was found, for messages


class ProbeError(PatchspecError):
    """The probe did not answer: it timed out, crashed or could not start (one line why)."""


KEPT = "kept from --python at apply"


def find(root: Path, given: str | None = None, kept: str | None = None) -> Interpreter | None:
    """The interpreter that runs ``root``: ``given`` (``--python``: a path, or a command found on
    ``PATH``), else ``kept`` (the one a ``--python`` named at apply, from the state record), else the one
    its path names, else ``None``."""
    if given:
        path = Path(given if os.sep in given else shutil.which(given) or given)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise PatchspecError(f"--python {given}: not an executable file"
                                 + ("" if os.sep in given else " nor a command on PATH"))
        return Interpreter(path.absolute(), "--python")
    if kept and Path(kept).is_file() and os.access(kept, os.X_OK):
        return Interpreter(Path(kept), KEPT)
    match = re.fullmatch(r"python(\d+\.\d+)t?", root.parent.name) if root.name == "site-packages" else None
    if match is None or root.parent.parent.name not in ("lib", "lib64"):
        return None
    prefix = root.parent.parent.parent
    for name in (f"python{match.group(1)}", "python3", "python"):
        candidate = prefix / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            how = "its venv" if (prefix / "pyvenv.cfg").is_file() else f"its prefix {prefix}"
            return Interpreter(candidate, how)
    return None


@dataclass(frozen=True)
class Finder:
    """``names -> the top-level modules among them that cannot be found``: by the root's interpreter,
    else (a root no interpreter is known to run) by the one running patchspec, with the root first."""

    python: Interpreter | None
    root: Path

    @property
    def where(self) -> str:
        """What a refusal says of where the names were looked for."""
        return ("its interpreter" if self.python is not None else
                "the interpreter running patchspec (no interpreter is known to run the root: --python names it)")

    def __call__(self, names: list[str]) -> list[str]:
        if self.python is not None:
            try:
                missing: list[str] = ask(self.python, self.root, {"find": names}, 60.0)["missing"]
                return missing
            except ProbeError as exc:
                raise PatchspecError(f"cannot ask the root's interpreter which modules it has: {exc}") from None
        sys.path.insert(0, str(self.root))
        try:
            return [n for n in names if importlib.util.find_spec(n) is None]
        finally:
            sys.path.remove(str(self.root))


def finder(python: Interpreter | None, root: Path) -> Finder:
    return Finder(python, root)


def ask(interpreter: Interpreter, root: Path, request: dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
    """Run the probe with ``request`` (plus the root) and return its answer. Whether it answers, fails or
    overruns ``timeout``, every process it started is killed before this returns (``processes``), and
    no read waits past the deadline: a child holding the pipes open cannot keep the verb waiting."""
    argv = [str(interpreter.path), "-B", "-I", str(PROBE)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=env, cwd=str(root), start_new_session=True)
    except OSError as exc:
        raise ProbeError(f"cannot run {interpreter.path}: {exc.strerror}") from None
    stdin, stdout, stderr = _pipes(process)
    pipes = {processes.pipe_name(f.fileno()) for f in (stdin, stdout, stderr)}
    streams: dict[IO[bytes], bytearray] = {stdout: bytearray(), stderr: _Tail()}
    payload = (json.dumps({**request, "root": str(root)}) + "\n").encode()
    try:
        answered = _exchange(stdin, stdout, payload, streams, time.monotonic() + timeout)
    finally:
        processes.kill_all(process.pid, pipes)
        _drain(streams, time.monotonic() + GRACE)
        for stream in (stdin, stdout, stderr):
            stream.close()
        process.wait()
    if not answered:
        raise ProbeError(f"{interpreter.path} did not finish within {timeout:g}s")
    out, err = bytes(streams[stdout]), bytes(streams[stderr])
    try:
        answer: dict[str, Any] = json.loads(out.decode())
        return answer
    except ValueError:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {process.returncode}"]
        raise ProbeError(f"{interpreter.path} did not answer ({tail[0]})") from None


def _pipes(process: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes], IO[bytes]]:
    """The probe's stdin, stdout and stderr (``ask`` opens all three as pipes)."""
    return cast(IO[bytes], process.stdin), cast(IO[bytes], process.stdout), cast(IO[bytes], process.stderr)


def _exchange(stdin: IO[bytes], stdout: IO[bytes], payload: bytes, streams: dict[IO[bytes], bytearray],
              deadline: float) -> bool:
    """Write the request and read until the answer ends (its one line is complete, or the probe died);
    ``False`` when ``deadline`` passes first."""
    os.set_blocking(stdin.fileno(), False)   # a probe that never reads cannot hold the write past the deadline
    with selectors.DefaultSelector() as selector:
        selector.register(stdin, selectors.EVENT_WRITE)
        for stream in streams:
            selector.register(stream, selectors.EVENT_READ)
        sent = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in selector.select(left):
                if key.fileobj is stdin:
                    try:
                        sent += os.write(stdin.fileno(), payload[sent:sent + 65536])
                    except BlockingIOError:   # the pipe took less than select promised: wait again
                        pass
                    except BrokenPipeError:
                        sent = len(payload)
                    if sent == len(payload):
                        selector.unregister(stdin)   # kept open: the probe waits for its end
                    continue
                stream = cast(IO[bytes], key.fileobj)   # registered above: the streams
                chunk = os.read(stream.fileno(), 65536)
                streams[stream] += chunk
                if stream is stdout and (not chunk or b"\n" in chunk):
                    return True
                if not chunk:
                    selector.unregister(key.fileobj)


class _Tail(bytearray):
    """The last bytes of a stream only: an import may print gigabytes to stderr, and only its last line
    is shown."""

    # bytes only, as bytearray's own += (typeshed's bytearray narrows MutableSequence's Iterable[int] so too,
    # and its __add__ returns a plain bytearray where this keeps the tail)
    def __iadd__(self, chunk: bytes) -> Self:  # type: ignore[override, misc]
        super().__iadd__(chunk)
        if len(self) > 2 * ERR_TAIL:
            del self[:-ERR_TAIL]
        return self


def _drain(streams: dict[IO[bytes], bytearray], deadline: float) -> None:
    """Read what is left in ``streams`` until each ends or ``deadline`` passes."""
    with selectors.DefaultSelector() as selector:
        for stream in streams:
            if not stream.closed:
                selector.register(stream, selectors.EVENT_READ)
        while selector.get_map() and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                stream = cast(IO[bytes], key.fileobj)   # registered above: the streams
                chunk = os.read(stream.fileno(), 65536)
                streams[stream] += chunk
                if not chunk:
                    selector.unregister(stream)
