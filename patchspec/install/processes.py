"""Every process a probe left: found in ``/proc``, stopped, then killed, whatever session it moved to.

Killing the probe's process group is not enough: code the probe imports may start a child in a session of
its own (``start_new_session=True``), which keeps the probe's pipes open and outlives it. Such a process
is still the probe's descendant (the probe is its children's subreaper, so an orphan stays in its tree),
or it holds one of the probe's pipes, or it kept the probe's session or group. Each round stops every
process found so (``SIGSTOP``: a stopped process forks no more) and looks again, until a round finds
nothing new; then all of them are killed at once. Without ``/proc`` only the probe's group is killed.
"""
from __future__ import annotations

import contextlib
import os
import selectors
import signal
import time

PROC = "/proc"
ROUNDS = 100   # each round stops what the last one found: a tree forking that fast is stopped in a few


def _table() -> dict[int, tuple[int, int, int]]:
    """``pid -> (ppid, process group, session)`` of every live process (zombies left out)."""
    table = {}
    for name in os.listdir(PROC):
        if not name.isdigit():
            continue
        try:
            with open(f"{PROC}/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()   # the command name may hold spaces and brackets
        if fields and fields[0] != b"Z":
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def _holders(pids: list[int], pipes: set[str]) -> set[int]:
    """The processes among ``pids`` holding one of ``pipes`` (``pipe:[inode]`` link texts) open."""
    found = set()
    for pid in pids:
        try:
            fds = os.listdir(f"{PROC}/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{PROC}/{pid}/fd/{fd}") in pipes:
                    found.add(pid)
                    break
            except OSError:
                continue
    return found


def members(leader: int, pipes: set[str]) -> set[int]:
    """The processes of the probe ``leader``: its descendants, those in its session or group, those
    holding one of its ``pipes``, and their descendants; never this process."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seeds = {leader} | {pid for pid, (_, group, session) in table.items() if leader in (group, session)}
    seeds |= _holders(list(table), pipes)
    found, todo = set(), list(seeds)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return {pid for pid in found if pid > 1 and pid != os.getpid()}


def kill_all(leader: int, pipes: set[str], wait: float = 5.0) -> set[int]:
    """Stop every process of the probe ``leader`` until no new one appears, kill them all, and wait up to
    ``wait`` seconds for them to be gone; the pids killed. Each is held by a pidfd once found, so a pid
    reused meanwhile is never signalled."""
    held: dict[int, int | None] = {}
    try:
        if os.path.isdir(PROC):
            for _ in range(ROUNDS):
                new = members(leader, pipes) - set(held)
                if not new:
                    break
                for pid in new:
                    held[pid] = _pidfd(pid)
                    _signal(pid, held[pid], signal.SIGSTOP)
            for pid, fd in held.items():
                _signal(pid, fd, signal.SIGKILL)
            _wait_gone([fd for fd in held.values() if fd is not None], time.monotonic() + wait)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)
    finally:
        for fd in held.values():
            if fd is not None:
                os.close(fd)
    return set(held)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):   # gone already, or a kernel before 5.3
        return None


def _signal(pid: int, pidfd: int | None, sig: int) -> None:
    try:
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(pidfds: list[int], deadline: float) -> None:
    """Until every process of ``pidfds`` has ended (a pidfd reads ready then) or ``deadline`` passes."""
    with selectors.DefaultSelector() as selector:
        for fd in pidfds:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map() and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                selector.unregister(key.fileobj)


def pipe_name(fd: int) -> str:
    """How ``/proc/PID/fd`` names the pipe ``fd`` is an end of."""
    return f"pipe:[{os.fstat(fd).st_ino}]"

