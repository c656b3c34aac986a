"""Build a spec in memory and run the compiler on one source text."""
from __future__ import annotations

from patchspec.compiler import plan
from patchspec.spec import build_spec

FILE = "pkg/mod.py"


def make_spec(targets: list[dict], name: str = "demo", alias: str = "_s") -> object:
    data = {"spec": 1, "name": name, "summary": "test", "snippets": {"package": "snips", "alias": alias},
            "releases": ["r1"], "targets": targets}
    return build_spec(data, "spec.yaml", "0" * 64)


def target(function: str, *transforms: dict, file: str = FILE, id: str = "t") -> dict:
    return {"id": id, "file": file, "function": function, "transforms": list(transforms)}


def resolve(source: str, *specs, files: dict[str, str] | None = None) -> plan.Plan:
    files = files or {FILE: source}
    return plan.resolve(specs, files.get, lambda pkg: True)


def patch(source: str, *specs) -> str:
    resolved = resolve(source, *specs)
    assert not resolved.errors, [r.detail for r in resolved.errors]
    return plan.emit(resolved, specs)[FILE]
