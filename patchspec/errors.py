"""The exit codes of every verb and the one error type the CLI turns into a one-line message.

| code | meaning |
| --- | --- |
| 0 | success; check: applied; drift: no drift |
| 1 | check: not applied, would apply cleanly; drift/matrix: drift that still applies |
| 2 | user error: bad input, a refusal (apply: a transform found not live, the change undone); nothing written |
| 3 | internal error (a bug): one line, ``--debug`` shows the traceback |
| 4 | check/drift/matrix: the spec does not hold here (an anchor or binding needs a human); verify: not live |
| 64 | command-line usage error (unknown verb or option, missing argument) |
| 130 | interrupted (Ctrl-C, SIGTERM); a writing verb rolled back first |
| 141 | stdout was closed by its reader (``patchspec status | head -0``): ended quietly, as ``git`` does |
"""
from __future__ import annotations

import contextlib
import contextvars
import enum
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field


class Exit(enum.IntEnum):
    OK = 0
    PENDING = 1
    USER = 2
    INTERNAL = 3
    BROKEN = 4
    USAGE = 64
    INTERRUPTED = 130
    PIPE = 141


def severity_exit(severity: int) -> Exit:
    """A drift severity (0 none, 1 still applies, 2 broken) as the verb's exit code."""
    return (Exit.OK, Exit.PENDING, Exit.BROKEN)[severity]


@dataclass(frozen=True)
class Location:
    """A place an error points at: a spec's line and column, or a source file's line."""

    file: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        return ":".join(str(p) for p in (self.file, self.line, self.col) if p is not None)

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "col": self.col}


# What a terminal acts on rather than shows (C0 and C1 controls but the tab, DEL, the bidirectional
# overrides and isolates) and what it cannot encode (a lone surrogate, from a path's undecodable bytes).
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                          "\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` as a person reads it on a terminal: each control character as its Python escape (``\\x1b``,
    ``\\n``), so a path or a name from a spec, a root or the command line cannot move the cursor, set the
    window title or break the one line. Every line the CLI prints passes here; ``--json`` needs it not."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


@dataclass
class Run:
    """What one command keeps while it runs (``run``): the warnings it has printed, each said once."""

    warned: set[str] = field(default_factory=set)


_RUN: contextvars.ContextVar[Run] = contextvars.ContextVar("patchspec_run")


@contextlib.contextmanager
def run() -> Iterator[Run]:
    """The context of one command (``cli.main``): a command run inside it (``demo``'s steps) has its own."""
    token = _RUN.set(Run())
    try:
        yield _RUN.get()
    finally:
        _RUN.reset(token)


def warn(message: str) -> None:
    """One line on stderr, ``patchspec: file:line:col: warning: ...``, once per command (``run``); outside a
    command (patchspec used as a library) every time."""
    current = _RUN.get(None)
    if current is None or message not in current.warned:
        if current is not None:
            current.warned.add(message)
        print(f"patchspec: {printable(message)}", file=sys.stderr)


class PatchspecError(Exception):
    """A user-facing error: ``file:line:col: message`` where a location is known.

    ``file``/``line``/``col`` give the first location; ``also`` adds more (a spec position and a source
    position both fit), shown after the message.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 col: int | None = None, also: tuple[Location, ...] = (), exit_code: int = Exit.USER) -> None:
        super().__init__(message)
        self.message = message
        self.locations: tuple[Location, ...] = ((Location(file, line, col),) if file is not None else ()) + tuple(also)
        self.exit_code = exit_code

    @property
    def file(self) -> str | None:
        return self.locations[0].file if self.locations else None

    @property
    def line(self) -> int | None:
        return self.locations[0].line if self.locations else None

    def __str__(self) -> str:
        if not self.locations:
            return self.message
        first, *rest = self.locations
        more = f" (see {', '.join(map(str, rest))})" if rest else ""
        return f"{first}: {self.message}{more}"

    def to_json(self) -> dict:
        return {"message": self.message, "locations": [loc.to_json() for loc in self.locations]}
