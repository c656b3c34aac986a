"""The one error type the CLI turns into a one-line message and a non-zero exit."""
from __future__ import annotations


class PatchspecError(Exception):
    """A user-facing error: ``file:line:col: message`` where a location is known."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 col: int | None = None, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.exit_code = exit_code

    def __str__(self) -> str:
        where = [str(p) for p in (self.file, self.line, self.col) if p is not None]
        return ":".join(where) + f": {self.message}" if where else self.message
