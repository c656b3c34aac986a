"""Byte code in line with the sources apply and unapply write: every ``__pycache__`` file of a changed file.

A ``.pyc`` says in its header how Python checks it against its source (PEP 552): by the source's mtime
and size (``timestamp``), by the source's hash (``checked-hash``), or not at all (``unchecked-hash``, as
``compileall --invalidation-mode unchecked-hash`` writes it for distro packages and images: Python runs it
whatever the source says). A new text of the file therefore comes with new byte code for each of its
``.pyc`` files, written in the same journaled step: a hash-based one is compiled anew in its own mode and
optimisation level by the root's interpreter when the file's tag is that interpreter's, else (another
interpreter's, or no interpreter known to compile it) removed. A timestamp one names its source's mtime
and size, which the write changes, so Python compiles the new text at the next import: it is left as it
is, unless it could pass for the new text (the same size, an mtime of now), when it is removed. Python
then compiles the source at the next import. Apply keeps the bytes of every ``.pyc`` of a file it is the
first to patch beside that file's pristine copy (``.patchspec/pristine/`` +
the ``.pyc`` path), and unapply writes them back with the pristine text: the root is as it was, byte for
byte. A ``.pyc`` with no kept copy (one written after apply) is compiled anew or removed as above.
"""
from __future__ import annotations

import importlib.util
import re
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from patchspec.install import interpreter
from patchspec.install.root import Root
from patchspec.install.state import PRISTINE_DIR, pristine_path

MODES = {0: "timestamp", 1: "unchecked-hash", 3: "checked-hash"}
_NAME = re.compile(r"(?P<stem>[^.]+)\.(?P<tag>[^.]+)(?:\.opt-(?P<opt>[12]))?\.pyc")


def cached(root: Root, rel: str) -> list[str]:
    """The root-relative paths of every ``.pyc`` of source ``rel``: every tag, every optimisation level."""
    directory = root.path / rel
    directory = directory.parent / "__pycache__"
    if not rel.endswith(".py") or not directory.is_dir():
        return []
    stem = Path(rel).stem
    base = Path(rel).parent.as_posix()
    return [f"{base}/__pycache__/{p.name}".removeprefix("./") for p in sorted(directory.iterdir())
            if (m := _NAME.fullmatch(p.name)) and m["stem"] == stem and p.is_file()]


def keep(root: Root, rel: str) -> dict[str, bytes | None]:
    """The pristine copies of the ``.pyc`` files of ``rel``: their bytes at apply, kept under
    ``.patchspec/pristine/`` by their own path, for unapply to write back. A timestamp one apply leaves is
    kept too: by unapply's time it may be one Python wrote for the patched text, or one that could pass for
    the restored text (and is removed), while the kept one is the pristine text's own."""
    return {pristine_path(pyc): root.read_bytes(pyc) for pyc in cached(root, rel)}


def kept(root: Root, rel: str) -> dict[str, str]:
    """The kept pristine copies of ``rel``'s ``.pyc`` files: the ``.pyc`` path -> its copy's path."""
    return {copy.removeprefix(f"{PRISTINE_DIR}/"): copy for copy in cached(root, pristine_path(rel))}


def restored(root: Root, rel: str, pristine: bytes) -> dict[str, bytes | None]:
    """The writes that put back the ``.pyc`` files apply kept for ``rel`` (whose ``pristine`` text comes
    back) and drop their copies. A copy is written back only when it is byte code of that text as far as
    this process can tell (a timestamp one names its size; a hash-based one of this Python, its hash);
    else it is dropped and Python compiles the text at the next import."""
    writes: dict[str, bytes | None] = {}
    for pyc, copy in kept(root, rel).items():
        data = root.read_bytes(copy)
        writes[copy] = None
        how = mode(data)
        if data is not None and how == "timestamp":   # (a mode is read only from bytes)
            ok = int.from_bytes(data[12:16], "little") == len(pristine) & 0xFFFFFFFF
        elif data is not None and how is not None and data[:4] == importlib.util.MAGIC_NUMBER:
            ok = data[8:16] == importlib.util.source_hash(pristine)
        else:
            ok = how == "checked-hash"      # another Python's: the one that reads it checks it
        if ok:
            writes[pyc] = data
    return writes


def removed(root: Root, rel: str) -> dict[str, None]:
    """The byte code of a file that goes (a snippet file patchspec installed and imports cached)."""
    return dict.fromkeys(cached(root, rel))


def mode(data: bytes | None) -> str | None:
    """How a ``.pyc`` is checked against its source, from its header's flags."""
    if data is None or len(data) < 16:
        return None
    return MODES.get(int.from_bytes(data[4:8], "little"))


def _may_match(pyc: bytes, data: bytes | None, now: int) -> bool:
    """Whether a timestamp ``.pyc`` could pass for ``data`` written from now on: the same size, and an
    mtime no earlier than now (the new file's mtime is the second it is written, or later)."""
    mtime, size = int.from_bytes(pyc[8:12], "little"), int.from_bytes(pyc[12:16], "little")
    return data is not None and size == len(data) & 0xFFFFFFFF and mtime >= now


def rewrites(root: Root, sources: Mapping[str, bytes | None], python: interpreter.Interpreter | None,
             ) -> dict[str, bytes | None]:
    """The ``.pyc`` writes that go with writing ``sources`` (rel -> new bytes; ``None``: removed)."""
    writes: dict[str, bytes | None] = {}
    todo = []
    now = int(time.time())
    for rel, data in sources.items():
        for pyc in cached(root, rel):
            old = root.read_bytes(pyc)
            how = mode(old)
            if how == "timestamp" and old is not None and not _may_match(old, data, now):
                continue  # it names the old text's mtime and size: Python compiles the new text
            writes[pyc] = None
            if data is not None and python is not None and how in ("checked-hash", "unchecked-hash"):
                match = cast(re.Match[str], _NAME.fullmatch(Path(pyc).name))   # cached() lists only such names
                todo.append((rel, pyc, data, how, match["tag"], int(match["opt"] or 0)))
    if not todo or python is None:   # (todo is empty without an interpreter)
        return writes
    with tempfile.TemporaryDirectory(prefix="patchspec-pyc-") as tmp:
        items: list[dict[str, Any]] = []
        for number, (rel, _pyc, data, how, tag, opt) in enumerate(todo):
            source = Path(tmp, f"{number}.py")
            source.write_bytes(data)
            items.append({"source": str(source), "dfile": str(root.path / rel), "cfile": f"{tmp}/{number}.pyc",
                          "optimize": opt, "mode": how, "tag": tag})
        try:
            answer = interpreter.ask(python, root.path, {"compile": items}, 120.0)
        except interpreter.ProbeError:
            return writes  # none can be compiled: all are removed
        for (_, pyc, *_), item, result in zip(todo, items, answer["compiled"], strict=True):
            if result == "compiled":
                writes[pyc] = Path(item["cfile"]).read_bytes()
    return writes
