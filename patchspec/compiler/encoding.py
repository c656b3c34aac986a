"""Source bytes ↔ text as Python reads them: a UTF-8 BOM or a ``coding`` cookie decides the encoding, and
the patched text is written back in that same encoding (with the BOM), so bytes outside the edits are
exactly the original's."""
from __future__ import annotations

import io
import tokenize


def detect(data: bytes) -> str:
    """The encoding Python would use for this source (``utf-8-sig`` when it starts with a BOM)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return "utf-8"
    return encoding


def decode(data: bytes) -> str:
    """The source's text, the BOM left out (``ast`` and libcst want text without it)."""
    return data.decode(detect(data))


def encode(text: str, like: bytes | None) -> bytes:
    """``text`` in the encoding of ``like`` (the file's current bytes), its BOM restored."""
    return text.encode(detect(like) if like is not None else "utf-8")  # utf-8-sig writes the BOM
