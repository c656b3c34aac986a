"""Spec files: YAML text → schema-checked data → the frozen ``Spec`` model.

Every error names the spec file, the line and column of the offending node, and what was expected.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import keyword
import re
from importlib import resources
from pathlib import Path

import jsonschema

from patchspec import yamlloc
from patchspec.compiler import bounds, pattern
from patchspec.compiler.kind import ACKNOWLEDGE, Key
from patchspec.compiler.transforms import KINDS, transform_schema
from patchspec.errors import PatchspecError, warn
from patchspec.model import Loc, ObsoleteWhen, Spec, Target, Transform


def schema_text(name: str) -> str:
    return resources.files("patchspec").joinpath(f"schema/{name}.schema.json").read_text()


@functools.cache
def schema(name: str = "spec") -> dict:
    """A shipped schema; the spec schema's transforms are the registry's (a test keeps the file in step)."""
    loaded = json.loads(schema_text(name))
    if name == "spec":
        loaded["$defs"]["transform"] = transform_schema()
    return loaded


def schema_errors(data, file: str, name: str = "spec") -> None:
    """Raise the first schema violation (the deepest, most specific one) at its YAML location."""
    validator = jsonschema.Draft202012Validator(schema(name))
    errors = sorted(validator.iter_errors(data), key=lambda e: (-len(e.absolute_path), str(e.path)))
    if not errors:
        return
    error = jsonschema.exceptions.best_match(errors)
    line, col = yamlloc.locate(data, list(error.absolute_path))
    where = "/".join(str(p) for p in error.absolute_path) or "top level"
    raise PatchspecError(f"{where}: {_explain(error)}", file=file, line=line, col=col)


def _explain(error: jsonschema.ValidationError) -> str:
    # an enum's value is its list of names, a pattern's instance the string it did not match
    expected, instance = error.validator_value, error.instance
    if "propertyNames" in error.schema_path and error.validator == "enum" and isinstance(expected, list):
        return f"unknown key {instance!r}; expected one of {', '.join(expected)}"
    if error.validator == "pattern" and list(error.absolute_path)[-1:] == ["file"] and isinstance(instance, str):
        if instance.startswith("/"):
            return (f"{instance!r} is an absolute path; a target file is a path relative to the root, as "
                    "the package installs it (pkg/module.py)")
        return f"{instance!r} is not a Python file (a path relative to the root ending in .py)"
    if error.validator == "additionalProperties":
        return error.message.replace("were unexpected", "are not allowed").replace(
            "was unexpected", "is not allowed")
    return error.message


SHIPPED = Path(__file__).resolve().parent / "specs"


def locate(name_or_path: str) -> str:
    """A spec file's path: the path given, or for a bare name (``pipeline-parallel``) the spec shipped with
    patchspec under that name."""
    if not Path(name_or_path).exists() and "/" not in name_or_path and not name_or_path.endswith((".yaml", ".yml")):
        shipped = SHIPPED / f"{name_or_path}.yaml"
        if shipped.is_file():
            return str(shipped)
        known = ", ".join(sorted(p.stem for p in SHIPPED.glob("*.yaml")))
        raise PatchspecError(f"no spec file {name_or_path!r}, and no shipped spec of that name (shipped: {known})")
    return name_or_path


def load_spec(path: str | Path) -> Spec:
    """The spec file at ``path``; what it holds of an older format is said once, as a warning."""
    path = Path(path)
    file = str(path)
    spec = load_spec_bytes(yamlloc.read(path, "spec"), file)
    for message in spec.deprecations:
        warn(message)
    return spec


def spec_name(spec_name_or_path: str) -> str:
    """The name of an applied spec given by its name or by its file."""
    if spec_name_or_path.endswith((".yaml", ".yml")) or "/" in spec_name_or_path:
        return load_spec(spec_name_or_path).name
    return spec_name_or_path


def spec_text(raw: bytes, where: str, what: str = "spec") -> str:
    """The spec's (or a profile's) text: UTF-8, or refused at the line:col of the first byte that is not (a
    replacement character would otherwise slip into the code it inserts)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        col = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise PatchspecError(f"{what} is not UTF-8 text (byte {raw[exc.start]:#04x}); nothing was written",
                             file=where, line=line, col=col) from None


@functools.lru_cache(maxsize=256)
def load_spec_bytes(raw: bytes, file: str) -> Spec:
    """The spec in ``raw``; read once per text (a verb meets one spec several times: the file, the state
    record's copy), and the frozen result is shared."""
    data = yamlloc.load(spec_text(raw, file), file)
    if not isinstance(data, dict):
        raise PatchspecError("a spec is a YAML mapping", file=file, line=1, col=1)
    deprecations = []
    for key, change in DEPRECATED_KEYS.items():
        if key in data:
            line, col = yamlloc.locate(data, [key])
            deprecations.append(f"{file}:{line}:{col}: warning: {key}: {change}")
            del data[key]
    newer(data, file)
    schema_errors(data, file)
    spec = build_spec(data, file, hashlib.sha256(raw).hexdigest())
    return dataclasses.replace(spec, deprecations=tuple(deprecations)) if deprecations else spec


def newer(data: dict, file: str) -> None:
    """Refuse a spec of a format newer than this patchspec reads, saying so (docs/formats.md)."""
    current = schema()["properties"]["spec"]["const"]
    found = data.get("spec")
    if isinstance(found, int) and not isinstance(found, bool) and found > current:
        line, col = yamlloc.locate(data, ["spec"])
        raise PatchspecError(f"spec format {found} is newer than this patchspec reads ({current}); upgrade "
                             "patchspec", file=file, line=line, col=col)


# Keys that an earlier spec of the same format (``spec: 1``) had, read with a one-line warning naming the
# change (docs/formats.md): a spec written then keeps working.
DEPRECATED_KEYS = {
    "releases": "is deprecated and ignored: a spec supports the release profiles beside it (releases/*.yaml) that "
                "have a section for it, since patchspec 0.1's profiles; delete this key",
}


def build_spec(data, file: str, sha256: str) -> Spec:
    def loc(container, key) -> Loc:
        line, col = yamlloc.locate(container, [key])
        return Loc(file, line, col)

    targets = []
    seen: dict[str, Loc] = {}
    for t_index, raw_target in enumerate(data["targets"]):
        target_loc = loc(data["targets"], t_index)
        if raw_target["id"] in seen:
            raise PatchspecError(f"target id {raw_target['id']!r} is already used at line "
                                 f"{seen[raw_target['id']].line}", file=file, line=target_loc.line,
                                 col=target_loc.col)
        seen[raw_target["id"]] = target_loc
        _check_path(raw_target["file"], loc(raw_target, "file"))
        transforms = []
        for index, item in enumerate(raw_target["transforms"]):
            (kind, params), = item.items()
            param_locs = {key: loc(params, key) for key in params}
            params = dict(params)
            acknowledged = frozenset(params.pop(ACKNOWLEDGE, ()))
            transform = Transform(kind, params, index, loc(raw_target["transforms"], index), param_locs,
                                  acknowledged)
            check_transform_syntax(transform)
            transforms.append(transform)
        targets.append(Target(raw_target["id"], raw_target["file"], raw_target["function"],
                              tuple(transforms), target_loc, raw_target.get("branch")))
    obsolete = []
    for index, cond in enumerate(data.get("obsolete_when", [])):
        cond_loc = loc(data["obsolete_when"], index)
        _check_pattern(cond["contains"], "statement_or_expression", loc(cond, "contains"))
        obsolete.append(ObsoleteWhen(cond["file"], cond["function"], cond["contains"], cond_loc))
    snips = data.get("snippets") or {}   # none: a spec whose transforms call no hooks (rewrites)
    if keyword.iskeyword(snips.get("alias", "")):
        where = loc(snips, "alias")
        raise PatchspecError(f"snippets alias {snips['alias']!r} is a Python keyword, not a name code can "
                             "import the snippet package as", file=file, line=where.line, col=where.col)
    return Spec(name=data["name"], summary=data["summary"], snippet_package=snips.get("package"),
                alias=snips.get("alias"), targets=tuple(targets),
                obsolete_when=tuple(obsolete), path=file, sha256=sha256,
                snippet_dir=snips.get("path"), order=data.get("order", 0),
                snippets_loc=loc(data, "snippets") if snips else None)


def check_transform_syntax(transform: Transform) -> None:
    """Every pattern and code string of a transform must be Python of the expected form."""
    kind = KINDS[transform.kind]
    forms = {**kind.pattern_keys, **kind.code_keys}
    for key, value in transform.params.items():
        too_big = isinstance(value, str) and bounds.refusal(value)   # before any parser reads it
        if too_big:
            where = transform.at(key)
            raise PatchspecError(f"{key}: {too_big}", file=where.file, line=where.line, col=where.col)
        if kind.keys.get(key) in (Key.REWRITE_PATTERN, Key.STATEMENTS_PATTERN) and pattern.only_metavariable(value):
            where, name = transform.at(key), value.strip()
            every = ("every run of statements of the target, so it names no one place; write a statement it "
                     "should match beside it") if name.startswith("$$$") else (
                     f"every expression of the target, so it names no one place; write what it should match "
                     f"around it (`{name}.close()`, `return {name}`)")
            raise PatchspecError(f"{key}: {name!r} is only a metavariable: it matches {every}", file=where.file,
                                 line=where.line, col=where.col)
        if key in forms:
            _check_pattern(value, forms[key], transform.at(key))
        elif kind.keys.get(key) in (Key.IDENTIFIER, Key.HOOK) and isinstance(value, str) and keyword.iskeyword(value):
            where = transform.at(key)
            raise PatchspecError(f"{key}: {value!r} is a Python keyword, not a name", file=where.file,
                                 line=where.line, col=where.col)


def _check_pattern(text: str, form: str, where: Loc) -> None:
    try:
        pattern.parse(text, form)
    except pattern.PatternError as exc:
        named = re.search(r"\$+[A-Z_][A-Z0-9_]*", text) if form in ("statement", "expression") else None
        message = (f"{text!r}: {named.group()} is a metavariable, which only replace and guard patterns take; "
                   "an anchor matches with `...` (any expression, or any run of arguments or statements): "
                   f"{text.replace(named.group(), '...')!r}") if named else str(exc)
        raise PatchspecError(message, file=where.file, line=where.line, col=where.col) from None


def _check_path(rel: str, where: Loc) -> None:
    parts = rel.split("/")
    if rel.startswith("/") or ".." in parts or "\\" in rel:
        raise PatchspecError(f"target file {rel!r} must be a relative path inside the root",
                             file=where.file, line=where.line, col=where.col)
