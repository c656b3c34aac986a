"""Drift results cached per file under the patchspec cache directory, keyed by the hashes of the file's text
(and its baseline's), the targets in it, the recorded fingerprints and the compiler's own code, so a warm run
reads and hashes files and parses none."""
from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

from patchspec import compiler, snippets
from patchspec.compiler import bindings, snippet_api
from patchspec.compiler.drift import DriftRow, binding_rows, file_drift, obsolete_line
from patchspec.model import Spec
from patchspec.releases import cache


@functools.cache
def _code_version() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(compiler.__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def cached_file_drift(spec: Spec, path: str, text: str | None, baseline: str | None, present: bool,
                      fingerprints: dict[str, str]) -> list[DriftRow]:
    """``compiler.drift.file_drift`` remembered under the cache directory, keyed by what it depends on: the
    rows name where each transform is in the spec file, so a copied or edited spec is a different key."""
    targets = [t for t in spec.targets if t.file == path]
    key = {"spec": [spec.name, spec.alias], "path": path, "present": present,
           "targets": [[t.id, t.function, [[x.kind, x.params, str(x.loc), sorted((k, str(v)) for k, v in
                                                                               x.param_locs.items())]
                                           for x in t.transforms]] for t in targets],
           "fingerprints": {t.id: fingerprints.get(t.id) for t in targets},
           "text": _sha(text), "baseline": _sha(baseline)}
    rows = _cached(key, lambda: [r.to_dict() for r in
                                 file_drift(spec, path, text, baseline, present, fingerprints)])
    return [DriftRow.from_dict(d) for d in rows]


def cached_obsolete_line(cond, text: str | None) -> int | None:
    key = {"obsolete": [cond.file, cond.function, cond.contains], "text": _sha(text)}
    return _cached(key, lambda: obsolete_line(cond, text))


def _cached(key: dict, compute):
    """``compute()`` (JSON data), stored under the cache directory by the hash of ``key`` and the code."""
    digest = hashlib.sha256(json.dumps({**key, "code": _code_version()}, sort_keys=True).encode()).hexdigest()
    entry = cache.cache_dir() / "drift" / f"{digest}.json"
    try:
        return json.loads(entry.read_text())["value"]
    except (OSError, ValueError, KeyError):
        pass
    value = compute()
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as handle:
            json.dump({"value": value}, handle)
        os.replace(tmp, entry)
    except OSError:
        pass  # a read-only cache only costs the next run its speed
    return value


def cached_binding_rows(spec: Spec, read, has_package, use_cache: bool = True) -> list[DriftRow]:
    """The snippets' ``USES`` checked on the release (``compiler.drift.binding_rows``), cached per file."""
    added = bindings.spec_binds(spec)

    def check_file(rel: str, entries: list[str]):
        text = read(rel)
        own = added.get(rel, set())

        def compute():
            return bindings.check(entries, None if text is None else ast.parse(text, rel), own)
        key = {"uses": rel, "entries": entries, "text": _sha(text), "added": sorted(own)}
        return _cached(key, compute) if use_cache else compute()
    uses = snippets.read_package(snippet_api.declared_uses, spec)
    return binding_rows(spec, uses, check_file, has_package)
