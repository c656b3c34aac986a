# SPDX-License-Identifier: Apache-2.0
"""A cheap identity of the checkpoint a stage loaded, for the warm-up handshake.

Two nodes pointed at different checkpoints of one architecture (a fine-tune against
its base, two revisions) load, run and exchange hidden states of the same shapes: the
output is wrong and nothing fails. Hashing the weights would read every byte of both
checkpoints; this reads, per weights file, its size, its safetensors header (tensor
names, dtypes, shapes and offsets) and ``SAMPLES`` blocks of ``SAMPLE_BYTES`` spread
over its data, which tells apart checkpoints that differ anywhere but in a few
unsampled bytes, for a few reads per file. The checkpoint's index
(``*.safetensors.index.json``) is hashed whole.

Each stage reads only its own layers' files (``loader.py``), and a node may hold only
those, so what is compared is the index and every file both nodes hold: a file only
one node has is no difference, a file both have with other bytes is.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

__all__ = ["checkpoint_identity", "first_difference"]

SAMPLES = 8
SAMPLE_BYTES = 4096
_HEADER_MAX = 100 << 20  # safetensors' own limit on a header
_PATTERNS = ("*.safetensors", "*.bin", "*.pt")


def checkpoint_identity(model_config: Any) -> dict[str, Any] | None:
    """``{"index": digest or None, "files": {name: digest}}`` of the checkpoint
    ``model_config.model`` names (a directory, or a Hugging Face repository already in
    the local cache); None when there is none to read (dummy weights, a repository
    not downloaded)."""
    if getattr(model_config, "load_format", None) == "dummy":
        return None
    directory = _directory(model_config)
    if directory is None:
        return None
    files: dict[str, str] = {}
    for pattern in _PATTERNS:
        for path in sorted(directory.glob(pattern)):
            files[path.name] = _file_digest(path)
        if files:
            break  # as vLLM's loader: the first format present is the one read
    indexes = sorted(directory.glob("*.index.json"))
    index = None
    if indexes:
        h = hashlib.sha256()
        for path in indexes:
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        index = h.hexdigest()[:16]
    if not files and index is None:
        return None
    return {"index": index, "files": files}


def first_difference(mine: Any, theirs: Any) -> tuple[str, str, str] | None:
    """``(what, here, there)`` of the first difference between two identities that
    both nodes could read (else None): the index, then a file both hold."""
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return None
    index = mine.get("index"), theirs.get("index")
    if None not in index and index[0] != index[1]:
        return "checkpoint index", index[0], index[1]
    ours, others = mine.get("files") or {}, theirs.get("files") or {}
    for name in sorted(ours.keys() & others.keys()):
        if ours[name] != others[name]:
            return f"weights file {name}", ours[name], others[name]
    return None


def _directory(model_config: Any) -> Path | None:
    model = getattr(model_config, "model", None)
    if not isinstance(model, str):
        return None
    if os.path.isdir(model):
        return Path(model)
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(
            model,
            revision=getattr(model_config, "revision", None),
            local_files_only=True,
        )
    except Exception:  # not in the local cache, or no hub client: nothing to read
        return None
    return Path(local)


def _file_digest(path: Path) -> str:
    """Size, safetensors header and sampled blocks of one weights file."""
    h = hashlib.sha256()
    size = path.stat().st_size
    h.update(size.to_bytes(8, "little"))
    with path.open("rb") as f:
        start = 0
        if path.suffix == ".safetensors" and size >= 8:
            length = int.from_bytes(f.read(8), "little")
            if length <= min(_HEADER_MAX, size - 8):
                h.update(f.read(length))
                start = 8 + length
        span = size - start
        for i in range(SAMPLES if span > 0 else 0):
            f.seek(start + span * i // SAMPLES)
            h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()[:16]
