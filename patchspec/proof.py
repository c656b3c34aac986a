"""The run-time proof: every transform of an applied spec shown live in the root's own interpreter.

The compiler says where each transform landed; this module turns that into what the probe
(``probe.py``, run by the root's interpreter) must find on the object the live name leads to, each kind
by its ``Live`` check, and turns the probe's answer into one row per transform: ``live``, ``not-live``
(why), or ``static`` where the module cannot be imported on this machine for a reason outside the spec
(a device library missing): then the file is shown as apply wrote it and the transform's lines are in
the definition the static rules call live, and the row says the module could not be imported and why.
"""
from __future__ import annotations

import ast
import enum
import os
from dataclasses import dataclass, field
from typing import ClassVar, TypedDict

import libcst as cst

from patchspec.compiler import scope
from patchspec.compiler.edits import NodeEdit, Status
from patchspec.compiler.kind import Key, Live
from patchspec.compiler.plan import RUNTIME_PACKAGE, Plan, Resolved, edited_lines
from patchspec.compiler.source import SourceError, SourceFile
from patchspec.compiler.transforms import KINDS
from patchspec.install import interpreter
from patchspec.install.root import Root
from patchspec.install.state import State, sha256
from patchspec.model import Spec
from patchspec.results import Liveness, Record, Row


class Imported(enum.StrEnum):
    """How a patched module (or the snippet package) imported in the root's interpreter (``probe.py``)."""

    IMPORTED = "imported"
    NOT_IMPORTABLE = "not-importable"  # for a reason outside the spec (a device library missing)
    SPEC_ERROR = "spec-error"          # the spec's own code failed


@dataclass(frozen=True)
class ModuleImport(Record):
    """One module the proof imported: how, and the file it came from or why it failed."""

    TYPE: ClassVar[str] = "module"
    module: str
    status: Imported
    detail: str


@dataclass
class Proof:
    rows: list[Row]                        # one per transform of the spec's applied files
    modules: list[ModuleImport] = field(default_factory=list)
    interpreter: str = ""
    dead: list[Row] = field(default_factory=list)   # not live, and no source patch can be (compiled code runs)
    bypassed: list[Row] = field(default_factory=list)   # live, while callers of a package name run compiled code

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.status == Liveness.NOT_LIVE]


DEFAULT = "default"   # the probe's check of a parameter's default: the live function's __defaults__


class Check(TypedDict, total=False):
    """What the probe must show of one transform (``install/probe.py`` reads it by ``how``): where the live
    name is, and what its check compares there."""

    how: str                 # a ``Live`` value, or ``DEFAULT``
    file: str
    function: str
    names: list[str]         # module-name, binding: the names bound (at the owner's level)
    owner: str               # binding: the class or module that binds them ("" for the module)
    gone: list[str]          # binding: the names the new text no longer binds
    parameter: str           # default: the parameter and its new default's text
    value: str
    first_line: int          # the definition's first line (its first decorator's)
    dispatcher: str          # a singledispatch handler: the dispatcher whose registry calls it
    kept_as: str             # a definition whose own name a ``del`` removed: the name that keeps it
    name: str                # class-member: the member and whether it is a method
    method: bool
    lines: list[int]         # code-lines: the lines of the transform in the definition


def module_name(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def prove(root: Root, spec: Spec, plan: Plan, state: State, python: interpreter.Interpreter,
          timeout: float = interpreter.TIMEOUT) -> Proof:
    """Ask ``python`` to import every module the spec patched and show each transform live there."""
    rows = [r for r in plan.resolved if r.status != Status.SKIPPED and r.file in state.specs[spec.name].files]
    texts = {rel: root.read_text(rel) for rel in {r.file for r in rows}}
    checks: dict[int, Check] = {}
    static: dict[int, str | None] = {}
    written = edited_lines(plan, spec, {rel: text for rel, text in texts.items() if text is not None})
    for number, r in enumerate(rows):
        static[number], checks[number] = _expect(spec, r, texts[r.file], state, root, written.get(id(r)))
    modules: dict[str, dict] = {}
    for number, r in enumerate(rows):
        if static[number] is None:
            entry = modules.setdefault(r.file, {"module": module_name(r.file), "file": str(root.path / r.file),
                                                "checks": []})
            entry["checks"].append({"id": str(number), **checks[number]})
    package = spec.snippet_package   # None: a spec of rewrites only
    snippet_dir = os.path.realpath(root.path / RUNTIME_PACKAGE / (package or "")) + os.sep
    answer = interpreter.ask(python, root.path, {
        "modules": list(modules.values()), "snippet_dir": snippet_dir,
        "snippet_module": package and f"{RUNTIME_PACKAGE}.{package}"}, timeout)
    imported = answer["modules"]
    out, dead, bypassed = [], [], []
    for number, r in enumerate(rows):
        if static[number] is not None:
            out.append(Row(r, Liveness.NOT_LIVE, static[number]))
            continue
        module = imported.get(module_name(r.file), {})
        shown = answer["checks"].get(str(number))
        if module.get("status") == Imported.NOT_IMPORTABLE:
            out.append(Row(r, Liveness.STATIC, (
                f"module {module_name(r.file)} not importable here: {module['detail']}; shown statically: "
                f"{r.file} is as apply wrote it and the transform's lines are in the live definition")))
        elif shown is None:
            out.append(Row(r, Liveness.NOT_LIVE, (
                f"importing {module_name(r.file)} failed in the spec's code: {module.get('detail', '?')}")))
        else:
            out.append(Row(r, Liveness.LIVE if shown["live"] else Liveness.NOT_LIVE, shown["why"]))
            if shown.get("dead"):
                dead.append(out[-1])
            if shown["live"] and shown.get("bypassed"):
                bypassed.append(out[-1])
    module_rows = [ModuleImport(name, Imported(info["status"]), info["detail"]) for name, info in imported.items()]
    return Proof(out, module_rows, f"{python.path} ({answer['version']}, {python.how})", dead, bypassed)


def _expect(spec: Spec, r: Resolved, text: str | None, state: State,
            root: Root, written: set[int] | None = None) -> tuple[str | None, Check]:
    """What the probe must show for ``r`` (its check), or why the file alone already shows it is not.
    ``written``: the lines of the file its own edits wrote, where its lines are looked for when known."""
    kind = KINDS[r.kind]
    record = state.files.get(r.file)
    if text is None or record is None or sha256(root.read_bytes(r.file)) != record.patched_sha256:
        return f"{r.file} is not as apply wrote it (edited or replaced since)", {}
    check: Check = {"how": kind.live.value, "file": str(root.path / r.file), "function": r.function}
    if kind.live is Live.MODULE_NAME:
        code = next(v for k, v in _params(spec, r).items() if kind.keys[k] is Key.CODE)
        return None, {**check, "names": bound_names(code)}
    live = kind.live
    params = _params(spec, r)
    if r.binding:   # the target's own assignment replaced or removed: what its new text binds at that level
        owner = r.function.rpartition(".")[0]
        here = kind.binds(params).here
        bound = scope.module_names(ast.parse(text)) if not owner else None   # what the patched module binds
        gone = sorted(kind.binds(params).unbinds - here - bound) if bound is not None else []
        return None, {**check, "how": Live.BINDING.value, "owner": owner, "names": sorted(here), "gone": gone}
    if live is Live.BINDING and "parameter" in params:  # evaluated where the def runs: the live defaults show it
        check.update({"how": DEFAULT, "parameter": params["parameter"], "value": params["value"]})
    elif live is Live.BINDING and "name" in params:
        live = Live.CODE_LINES   # an assignment inside a function: the function's code shows it
        check["how"] = live.value
    elif live is Live.BINDING:  # the names it binds at the target's level, else the target's own name
        owner, _, name = r.function.rpartition(".")
        names = sorted(kind.binds(_params(spec, r)).module) or [name]
        return None, {**check, "owner": owner, "names": names}
    try:
        located = SourceFile(r.file, text).locate(r.function, _branch(spec, r))
    except SourceError as exc:
        return str(exc), {}
    if located is None:
        return f"{r.function} is not defined in {r.file} as patched", {}
    node = located.node
    if located.kept_as is not None:
        check["kept_as"] = located.kept_as
    first = check["first_line"] = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    registered = scope.registered_type(node)
    if registered:   # a singledispatch handler: what dispatch calls is in its dispatcher's registry
        owner = r.function.rpartition(".")[0]
        check["dispatcher"] = f"{owner}.{registered[0]}" if owner else registered[0]
    if kind.live is Live.CLASS_MEMBER:
        name = next(v for k, v in _params(spec, r).items() if kind.keys[k] is Key.IDENTIFIER)
        return None, {**check, "name": name, "method": kind.hook is not None}
    if live is Live.CODE_LINES:
        lines = text.splitlines()[first - 1:node.end_lineno]
        found = []
        for needle in _needles(r):
            at = [first + i for i, line in enumerate(lines) if needle in line and (not written or first + i in written)]
            if not at:
                return f"{needle!r} is not in {r.function} in {r.file} as patched", {}
            found += at
        check["lines"] = sorted(set(found))
    return None, check


def _params(spec: Spec, r: Resolved) -> dict[str, str]:
    target = next(t for t in spec.targets if t.id == r.target)
    return next(x for x in target.transforms if x.index == r.index).params


def _branch(spec: Spec, r: Resolved) -> str | None:
    return next(t for t in spec.targets if t.id == r.target).branch


def _needles(r: Resolved) -> list[str]:
    """The text each of the transform's edits put on a line of the patched file (its first line), where
    that line has code: a removed statement leaves a marker comment or a ``pass``, shown by the live code
    being the patched text alone."""
    out = []
    for edit in r.edits:
        if isinstance(edit, NodeEdit) and isinstance(edit.new, cst.CSTNode) and not isinstance(edit.new, cst.Comment):
            code = cst.Module(body=[]).code_for_node(edit.new).strip().splitlines()
            needle = code[0].strip().rstrip(",") if code else ""
            if needle.split("#")[0].strip() not in ("", "pass"):   # a comment or a pass may compile to nothing
                out.append(needle)
    return out


def bound_names(code: str) -> list[str]:
    """The module-level names an import statement binds."""
    stmt = ast.parse(code.strip()).body[0]
    if isinstance(stmt, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        return [a.asname or a.name for a in stmt.names if a.name != "*"]
    return []
