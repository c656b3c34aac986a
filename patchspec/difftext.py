"""Unified diffs with root-relative ``a/`` and ``b/`` paths, as ``patch -p1`` and ``git apply`` read them."""
from __future__ import annotations

import difflib

NO_NEWLINE = "\\ No newline at end of file\n"


def unified(rel: str, old: str | None, new: str | None) -> str:
    old_lines = (old or "").splitlines(keepends=True)
    new_lines = (new or "").splitlines(keepends=True)
    if old_lines == new_lines and old is not None:
        return ""
    header = f"diff --git a/{rel} b/{rel}\n"
    if old is None:
        header += "new file mode 100644\n"
    if new is None:
        header += "deleted file mode 100644\n"
    out = [header]
    a = f"a/{rel}" if old is not None else "/dev/null"
    b = f"b/{rel}" if new is not None else "/dev/null"
    for line in difflib.unified_diff(old_lines, new_lines, a, b, n=3):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n").rstrip() + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_NEWLINE)
    return "".join(out)
