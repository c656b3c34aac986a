"""The probe: run by the root's own interpreter (``python -B -I probe.py``), never imported by patchspec.

It reads one JSON request (one line) on stdin and writes one JSON answer (one line) on stdout, then
waits for stdin to end: patchspec kills every process of the probe first (``processes.py``). It must run
on every Python from 3.9 on and import nothing of patchspec: only the standard library, the patched
modules and the snippet package. Requests (any subset, in this order):

- ``find``: top-level module names; answers which ``importlib.util.find_spec`` cannot find (nothing is
  imported: the names are top-level, so no parent package runs).
- ``compile``: byte code to write, ``{source, dfile, cfile, optimize, mode}``; compiled by this
  interpreter into ``cfile`` (outside the root) when ``cfile``'s tag is this interpreter's, else answered
  ``foreign``.
- ``modules``: ``{module, file, checks}``: import each module, then show each check live (see ``HOW``).

Anything the imports print goes to stderr; the answer alone goes to stdout.
"""
from __future__ import annotations

import ast
import builtins
import dis
import importlib
import importlib.util
import json
import os
import pkgutil
import py_compile
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from typing import Any, cast

MARKER = "# patchspec: "
Check = dict[str, Any]   # one check of the request (``HOW``), as JSON gives it
Row = dict[str, Any]     # what a check shows: ``live``, ``why``, maybe ``dead``


def main() -> None:
    _adopt_orphans()
    request = json.loads(sys.stdin.readline())
    request_fd = os.dup(0)  # not inherited: its end tells this probe patchspec is done with it
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # a module reading stdin reads nothing, as it did when the request was all of it
    os.close(null)
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # what imported modules print, even from C, goes to stderr
    root = os.path.realpath(request["root"])
    if root not in [os.path.realpath(p) for p in sys.path if p]:
        sys.path.insert(0, root)
    answer: dict[str, Any] = {"version": ".".join(map(str, sys.version_info[:3])),
                              "cache_tag": sys.implementation.cache_tag, "executable": sys.executable}
    if "find" in request:
        answer["missing"] = [name for name in request["find"] if not _findable(name)]
    if "compile" in request:
        answer["compiled"] = [_compile(item) for item in request["compile"]]
    if "modules" in request:
        answer["modules"], answer["checks"] = _prove(request["modules"], request["snippet_dir"],
                                                     request.get("snippet_module"))
    with os.fdopen(answer_fd, "w") as out:
        out.write(json.dumps(answer) + "\n")   # its end: a forked child may hold this pipe open
    # alive until patchspec has killed what the imports started: their orphans are in this tree
    with os.fdopen(request_fd, "rb") as rest:
        rest.read()


def _adopt_orphans() -> None:
    """Be the subreaper of what the imports start (Linux): a child whose parent exits, a daemon that
    forks twice, stays this probe's descendant, where patchspec finds it to kill it."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
    except (ImportError, OSError, AttributeError):
        pass


def _findable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _compile(item: dict[str, Any]) -> str:
    if item["tag"] != sys.implementation.cache_tag:
        return "foreign"
    mode = {"timestamp": py_compile.PycInvalidationMode.TIMESTAMP,
            "checked-hash": py_compile.PycInvalidationMode.CHECKED_HASH,
            "unchecked-hash": py_compile.PycInvalidationMode.UNCHECKED_HASH}[item["mode"]]
    try:
        py_compile.compile(item["source"], cfile=item["cfile"], dfile=item["dfile"], doraise=True,
                           optimize=item["optimize"], invalidation_mode=mode)
    except py_compile.PyCompileError as exc:
        return f"error: {exc.msg.strip().splitlines()[-1]}"
    return "compiled"


def _prove(modules: list[dict[str, Any]], snippet_dir: str,
           snippet_module: str | None) -> tuple[dict[str, Row], dict[str, Row]]:
    module_rows, rows = {}, {}
    for item in modules:
        name = item["module"]
        try:
            module = importlib.import_module(name)
        except BaseException as exc:  # a module may raise anything, SystemExit included
            if isinstance(exc, KeyboardInterrupt):
                raise
            module_rows[name] = _import_failure(exc, snippet_dir)
            continue
        module_rows[name] = {"status": "imported", "detail": getattr(module, "__file__", None) or ""}
        _import_public_submodules(name.split(".")[0])
        fresh = _fresh_code(item["file"])
        stale = _stale_bytecode(item["file"])
        instead = _imported_instead(module, item["file"])
        for check in item["checks"]:
            if stale or instead:
                rows[check["id"]] = instead or _not_live(stale)
                continue
            rows[check["id"]] = _show(module, check, fresh, snippet_dir)
            if not rows[check["id"]]["live"] and check["how"] in CALLED:
                rows[check["id"]] = _another_name(module, check, fresh, snippet_dir) or rows[check["id"]]
    if snippet_module:
        try:
            importlib.import_module(snippet_module)
            module_rows[snippet_module] = {"status": "imported", "detail": snippet_dir}
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            module_rows[snippet_module] = _import_failure(exc, snippet_dir)
    return module_rows, rows


COMPILED = (".so", ".pyd")


def _import_public_submodules(top: str) -> None:
    """The top package's public submodules, imported as its callers import them: a name they bind is one
    callers use, though the package's ``__init__`` may not import them (propcache's ``api``, served to
    ``propcache.X`` by a module ``__getattr__``). One that fails to import is no name anyone reaches."""
    package = sys.modules.get(top)
    for info in pkgutil.iter_modules(getattr(package, "__path__", None) or []):
        if not info.name.startswith("_") and f"{top}.{info.name}" not in sys.modules:
            try:
                importlib.import_module(f"{top}.{info.name}")
            except Exception:  # noqa: BLE001 - a module may raise anything on import; SystemExit is not caught
                continue


def _show(module: types.ModuleType, check: Check, fresh: list[types.CodeType], snippet_dir: str) -> Row:
    """One check's row, followed to the callers of a definition callers reach by its name."""
    try:
        row = HOW[check["how"]](module, check, fresh, snippet_dir)
        return _callers(module, check, row) if row["live"] and check["how"] in CALLED else row
    except Exception as exc:  # noqa: BLE001 - a live object may raise on attribute access
        return _not_live(f"reaching it raised {type(exc).__name__}: {exc}")


def _another_name(module: types.ModuleType, check: Check, fresh: list[types.CodeType], snippet_dir: str) -> Row | None:
    """The module rebinds the target's name (frozenlist's ``FrozenList = CFrozenList`` in an ``else:``)
    while another public name of it still holds the definition (``PyFrozenList``): live for the callers
    of that name, and said whom the callers of the target's own name reach."""
    top, _, rest = check["function"].partition(".")
    own = vars(module).get(top)
    for name, value in sorted(vars(module).items()):
        if name == top or name.startswith("_") or value is own or getattr(value, "__qualname__", None) != top:
            continue
        other = dict(check, function=name + ("." + rest if rest else ""), qualname=check["function"])
        row = _show(module, other, fresh, snippet_dir)
        if row["live"]:
            return dict(row, why=f"{row['why']}; callers of {module.__name__}.{top} reach {_whose(own)} instead, "
                                 "which the patch does not change", bypassed=_compiled(own))
    return None


def _imported_instead(module: types.ModuleType, path: str) -> Row | None:
    """Not live, and no source patch can be (``dead``), when Python imported the module from another file
    than the patched one: a compiled module beside the ``.py`` (an accelerator, mypyc, Cython) wins."""
    found = getattr(module, "__file__", None) or ""
    if not found or os.path.realpath(found) == os.path.realpath(path):
        return None
    if found.endswith(COMPILED):
        base = os.path.basename(path)
        why = (f"{module.__name__} is imported from {found}, a compiled module beside {base}: Python runs it, not "
               f"the source, so no patch of {base} reaches callers; target a module Python imports as source, or no "
               "source patch reaches this code")
    else:
        why = f"{module.__name__} is imported from {found}, not the patched {path}"
    return {"live": False, "why": why, "dead": True}


def _callers(module: types.ModuleType, check: Check, shown: Row) -> Row:
    """What callers reach: a package above the module (its ``__init__``, as a program imports it), or
    another module of the package, that binds the target's name to compiled code of the package imported
    from elsewhere (an accelerator's C function, a compiled module's) runs that for its callers, and the
    patched source is a fallback that does not run: not live, and said whose it is. Another Python
    function a package above binds there is live code of its own: the patch stays live for the module's
    callers, and the row says whom the package's callers reach."""
    top = check["function"].split(".")[0]
    patched = vars(module).get(top)
    if patched is None:
        return shown
    reached, elsewhere, bypassed = [], [], False   # bypassed: callers of a package name run compiled code instead
    parts = module.__name__.split(".")
    above = [".".join(parts[:depth]) for depth in range(len(parts) - 1, 0, -1)]
    beside = sorted(n for n in list(sys.modules) if n.split(".")[0] == parts[0] and n not in above
                    and n != module.__name__)
    for name in above + beside:
        package = sys.modules.get(name)
        if package is None or top not in vars(package):
            continue
        public = f"{package.__name__}.{top}"
        other = vars(package)[top]
        if _reaches(other, patched):
            reached += [public] if name in above else []
            continue
        if not (callable(other) and not isinstance(other, types.ModuleType)) \
                or getattr(other, "__module__", package.__name__) == package.__name__:
            continue   # a definition of the package's own, or a value: no re-export of the target
        mine = f"{parts[-1]}.{check['function']}"
        ours = (getattr(other, "__module__", None) or "").split(".")[0] == parts[0]
        if not (ours and _compiled(other)):   # Python code of its own (a function, a partial), another package's
            elsewhere += [f"callers of {public} reach {_whose(other)} instead"] if name in above else []
            continue
        if not _public(module, top):   # the pure module is not what callers reach (markupsafe's _native)
            return {"live": False, "dead": True, "why": f"{public} is {_whose(other)}: a patch of {mine} does not run "
                    f"for callers of {public}; {_advice(other)}"}
        own = f"{module.__name__}.{top}"
        reached += [] if own in reached else [own]
        elsewhere += [f"callers of {public} reach {_whose(other)} instead: a patch of {mine} does not run for "
                      "them"]
        bypassed = True
    alias = None if reached else _fallback_alias(module, top, patched)
    alias = alias and (alias[0], alias[1], f"{alias[2]} is bound to {top}")
    alias = alias or (None if reached else _fallback_builder(module, patched))
    subclasses = [] if reached or not isinstance(patched, type) or "." not in check["function"] \
        else [f"{name} (a subclass)" for name in _public_subclasses(above, patched)]
    if alias:
        public, other, bound = alias
        mine = f"{parts[-1]}.{check['function']}"
        fallback = f"{public} is {_whose(other)}, and {bound} only in a fallback branch"
        if not _public(module, top) and not subclasses:
            return {"live": False, "dead": True, "why": f"{fallback}: a patch of {mine} does not run for callers of "
                    f"{public}; {_advice(other)}"}
        reached += [] if subclasses else [f"{module.__name__}.{top}"]   # simplejson.encoder.py_encode_basestring_ascii
        elsewhere.append(f"{fallback}: callers of {public} reach that instead, and a patch of {mine} does not run "
                         "for them")
        bypassed = True
    return _reached_by(shown, reached + subclasses, elsewhere, bypassed)


def _reached_by(shown: Row, reached: list[str], elsewhere: list[str], bypassed: bool) -> Row:
    """The row, saying whose callers reach the patched code and whose reach other code instead (``bypassed``:
    callers of a package name run compiled code instead)."""
    if reached:
        shown = dict(shown, why=f"{shown['why']}; callers of {', '.join(reached)} reach it")
    if elsewhere:
        shown = dict(shown, why=f"{shown['why']}; {'; '.join(elsewhere)}")
    return dict(shown, bypassed=True) if bypassed else shown


def _public_subclasses(packages: list[str], cls: type) -> list[str]:
    """The public names of ``packages`` bound to a subclass of ``cls``: a member of a class no public name
    binds runs for callers of those (pyrsistent's ``CheckedPVector`` over ``_pvector.PythonPVector``)."""
    found = []
    for name in packages:
        for attr, value in sorted(getattr(sys.modules.get(name), "__dict__", {}).items()):
            if attr.startswith("_") or not isinstance(value, type) or value is cls:
                continue
            try:
                if issubclass(value, cls):
                    found.append(f"{name}.{attr}")
            except Exception:  # noqa: BLE001 - a metaclass's __subclasscheck__ may raise: no evidence either way
                continue
    return found


def _public(module: types.ModuleType, top: str) -> bool:
    """Callers reach ``module.top`` by public names: every part of its dotted name is public and the
    module is bound on its package (msgpack's ``msgpack.fallback.Packer``, beside the Cython
    ``msgpack.Packer``)."""
    parts = module.__name__.split(".")
    if any(p.startswith("_") for p in parts + [top]):
        return False
    return len(parts) == 1 or vars(sys.modules.get(".".join(parts[:-1]), types)).get(parts[-1]) is module


def _fallback_alias(module: types.ModuleType, top: str, patched: Any) -> tuple[str, Any, str] | None:
    """The module binds another name to the target only in a fallback branch (pyrsistent's ``pvector =
    python_pvector`` in ``except ImportError``, ``from pvectorc import pvector`` in ``try``): when that
    name is compiled code now and no package above reaches the target, callers of that name run the
    compiled code. ``(module.name, the compiled object, name)``, or None."""
    try:
        with open(module.__file__ or "", "rb") as handle:   # none: no file to read (OSError)
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError, TypeError):
        return None
    for name in _aliases(tree.body, top):
        other = vars(module).get(name)
        if other is None or _reaches(other, patched) or not _compiled(other):
            continue
        return f"{module.__name__}.{name}", other, name
    return None


def _fallback_builder(module: types.ModuleType, cls: Any) -> tuple[str, Any, str] | None:
    """A class no public name binds, built for callers by a function of the module that is bound under
    a public name only in a fallback branch (pyrsistent's ``python_pvector``, which builds
    ``PythonPVector``, while ``pvector`` is ``pvectorc.pvector``): ``_fallback_alias`` of that function,
    ``(module.name, the compiled object, how the name is bound)``, or None."""
    if not isinstance(cls, type) or issubclass(cls, BaseException):   # raised by such a function, not built
        return None
    for name, value in sorted(vars(module).items()):
        code = getattr(value, "__code__", None)
        if not isinstance(code, types.CodeType) or getattr(value, "__module__", None) != module.__name__ \
                or not any(_is_or_holds(vars(module).get(n), cls) for c in _codes(code) for n in c.co_names):
            continue
        alias = _fallback_alias(module, name, value)
        if alias:
            return alias[0], alias[1], f"{alias[2]} is bound to {name}, which builds {cls.__name__},"
    return None


def _is_or_holds(value: Any, cls: type) -> bool:
    """``value`` is ``cls``, or an instance of it (pyrsistent's ``_EMPTY_PVECTOR``). A class that refuses
    instance checks (a ``typing.Protocol`` that is not runtime-checkable: attrs' ``AttrsInstance``) holds
    nothing that can be told."""
    if value is cls:
        return True
    try:
        return isinstance(value, cls)
    except TypeError:
        return False


def _aliases(body: list[ast.stmt], top: str) -> list[str]:
    """Names a module-level ``NAME = top`` binds inside the module's ``if``/``try`` blocks, or ``NAME = c_x
    or top`` / ``NAME = c_x if c_x else top`` anywhere (stdlib json's ``scanstring``)."""
    found = []
    for stmt in body:
        if isinstance(stmt, ast.Assign) and top in _choices(stmt.value):
            found += [t.id for t in stmt.targets if isinstance(t, ast.Name) and t.id != top]
        for block in ("body", "orelse", "finalbody"):
            if isinstance(stmt, (ast.If, ast.Try)):
                found += _aliases(getattr(stmt, block, []), top)
        for handler in getattr(stmt, "handlers", []) if isinstance(stmt, ast.Try) else []:
            found += _aliases(handler.body, top)
    return found


def _choices(value: ast.expr | None) -> list[str]:
    """The names an expression may evaluate to: a name, either side of ``or``, either branch of ``if``."""
    if isinstance(value, ast.Name):
        return [value.id]
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or):
        return [name for part in value.values for name in _choices(part)]
    if isinstance(value, ast.IfExp):
        return _choices(value.body) + _choices(value.orelse)
    return []


def _compiled(obj: Any) -> bool:
    """A C function or a compiled module's function or class (an extension, mypyc, Cython: a Cython
    function carries a ``__code__`` of its own, so only a Python function is told apart)."""
    if isinstance(obj, types.BuiltinFunctionType):
        return True
    source = getattr(sys.modules.get(getattr(obj, "__module__", None) or ""), "__file__", None) or ""
    return source.endswith(COMPILED) and not isinstance(obj, types.FunctionType)


def _reaches(obj: Any, target: Any) -> bool:
    """``obj`` is ``target``, or leads to it through ``__wrapped__``, a closure (a wrapper without
    ``functools.wraps``) or a ``functools.partial``."""
    for step in _chain(obj):
        if step is target or getattr(step, "func", None) is target:
            return True
        for cell in getattr(step, "__closure__", None) or ():
            try:
                if cell.cell_contents is target:
                    return True
            except ValueError:   # an empty cell
                continue
    return False


def _whose(obj: Any) -> str:
    """``pkg.mod.name (built-in)``, ``(compiled: FILE)`` or ``(FILE:LINE)``; an object of no name (a
    ``functools.partial``, an instance) as its repr."""
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(qualname, str):
        return repr(obj)[:100]
    name = f"{getattr(obj, '__module__', '?')}.{qualname}"
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):
        return f"{name} ({code.co_filename}:{code.co_firstlineno})"
    source = getattr(sys.modules.get(getattr(obj, "__module__", None) or ""), "__file__", None) or ""
    if source.endswith(COMPILED):
        return f"{name} (compiled: {source})"
    if source.endswith(".py"):   # a Python class: code of its own, no C
        return f"{name} ({source})"
    return f"{name} (built-in)"


def _advice(obj: Any) -> str:
    source = getattr(sys.modules.get(getattr(obj, "__module__", None) or ""), "__file__", None) or ""
    if source.endswith(".py"):   # a Python module's compiled helper (a Cython function, say)
        return f"target what {obj.__module__} binds it to in {source}, or no source patch reaches it"
    return "it is compiled code: no source patch reaches it"


def _import_failure(exc: BaseException, snippet_dir: str) -> Row:
    """Whose fault: the spec's when the failing code is the snippet package's or a line the spec inserted
    (it carries the marker), else the machine's (a missing device library, a module wanting hardware)."""
    where = traceback.extract_tb(exc.__traceback__)
    blame = "outside"
    place = ""
    for frame in where:
        line = frame.line or ""
        if os.path.realpath(frame.filename).startswith(snippet_dir) or MARKER in line:
            blame, place = "spec", f" at {frame.filename}:{frame.lineno}"
    if not place and where:
        place = f" at {where[-1].filename}:{where[-1].lineno}"
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return {"status": "spec-error" if blame == "spec" else "not-importable", "detail": text + place}


def _fresh_code(path: str) -> list[types.CodeType]:
    """Every code object of the file's text as it is now: what the live code must equal."""
    try:
        with open(path, "rb") as handle:
            top = compile(handle.read(), path, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError):
        return []
    return list(_codes(top))


def _stale_bytecode(path: str) -> str | None:
    """Why the module ran byte code of another text, or None: Python checks a timestamp or checked-hash
    ``.pyc`` against the source itself, but runs an unchecked-hash one whatever the source says."""
    try:
        cached = importlib.util.cache_from_source(path)
        with open(cached, "rb") as handle:
            header = handle.read(16)
        with open(path, "rb") as handle:
            source = handle.read()
    except (OSError, NotImplementedError, ValueError):
        return None
    if len(header) == 16 and int.from_bytes(header[4:8], "little") == 1 \
            and header[8:16] != importlib.util.source_hash(source):
        return f"the module ran stale byte code: {cached} (unchecked-hash) was compiled from another text"
    return None


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _lines(code: types.CodeType) -> set[int]:
    return {line for c in _codes(code) for _, line in dis.findlinestarts(c) if line is not None}


def _not_live(why: str | None) -> Row:
    return {"live": False, "why": why}


def _live(how: str) -> Row:
    return {"live": True, "why": how}


def _reach(module: types.ModuleType, qualname: str) -> tuple[Any, str]:
    """The object the live name leads to: a module or class attribute (its own, not inherited), a
    property's getter (``C.p``) or setter/deleter (``C.p.setter``), a staticmethod's or classmethod's
    function; a function nested in another is reached as its code object inside the outer one."""
    obj: Any = module
    path = module.__name__
    for part in qualname.split("."):
        if isinstance(obj, property) and part in ("getter", "setter", "deleter"):
            obj = {"getter": obj.fget, "setter": obj.fset, "deleter": obj.fdel}[part]
            if obj is None:
                raise LookupError(f"the live property {path} has no {part}")
        elif isinstance(obj, (types.FunctionType, types.CodeType)):
            code = obj if isinstance(obj, types.CodeType) else _original(obj).__code__
            inner = [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == part]
            if not inner:
                raise LookupError(f"the live {path} defines no {part}")
            obj = inner[-1]
        else:
            namespace = vars(obj)
            if part not in namespace:
                raise LookupError(f"the live {path} has no {part} of its own")
            obj = namespace[part]
        path = f"{path}.{part}"
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    return obj, path


def _target(module: types.ModuleType, check: Check, fresh: list[types.CodeType]) -> tuple[Any, str]:
    """The live object of a check: by its name (``_reach``) or the name that keeps it after a ``del`` of its
    own (``kept_as``), or for a singledispatch handler (``_``
    defined several times) the function its dispatcher's registry holds for the patched definition."""
    if "dispatcher" not in check:
        return _reach(module, check.get("kept_as") or check["function"])
    dispatcher, path = _reach(module, check["dispatcher"])
    registry = getattr(dispatcher, "registry", None) or getattr(getattr(dispatcher, "dispatcher", None),
                                                                "registry", None)
    if registry is None:
        raise LookupError(f"the live {path} is no singledispatch function")
    for kind, handler in registry.items():
        if any(_patched_code(c, check, fresh)[0] is not None for c in _chain(handler)):
            return handler, f"{path}.registry[{getattr(kind, '__qualname__', kind)}]"
    raise LookupError(f"no handler in the live {path}.registry is the patched definition (line {check['first_line']})")


def _original(fn: Any) -> Any:
    """The innermost function of a ``__wrapped__`` chain."""
    seen = 0
    while hasattr(fn, "__wrapped__") and seen < 100:
        fn, seen = fn.__wrapped__, seen + 1
    return fn


def _chain(obj: Any) -> list[Any]:
    """``obj`` and what it wraps: through ``__wrapped__``, or the ``func`` a wrapper object keeps
    (``functools.partial``, toolz's ``curry``; a class's own ``func`` is a member, not what it wraps)."""
    out = [obj]
    while len(out) < 100:
        step = getattr(out[-1], "__wrapped__", None)
        if step is None and not isinstance(out[-1], (type, types.FunctionType, types.ModuleType)):
            step = getattr(out[-1], "func", None)
        if step is None or not callable(step) or any(step is seen for seen in out):
            return out
        out.append(step)
    return out


def _patched_code(candidate: Any, check: Check,
                  fresh: list[types.CodeType]) -> tuple[types.CodeType | None, str | None]:
    """The code of ``candidate`` when it is the patched definition: from the patched file, at the
    definition's line, equal to the file's text compiled now (not older byte code)."""
    code = candidate if isinstance(candidate, types.CodeType) else getattr(candidate, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None, None
    if os.path.realpath(code.co_filename) != os.path.realpath(check["file"]):
        return None, None
    if code.co_firstlineno != check["first_line"]:
        return None, (f"the live {check['function']} starts at line {code.co_firstlineno}, the patched definition "
                      f"at line {check['first_line']}")
    if not any(code == other for other in fresh):
        return None, f"the live code of {check['function']} is not the file's text (stale byte code in __pycache__?)"
    return code, None


def _find_patched(obj: Any, check: Check,
                  fresh: list[types.CodeType]) -> tuple[int | None, types.CodeType | None, str | None]:
    problem = None
    for index, candidate in enumerate(_chain(obj)):
        code, why = _patched_code(candidate, check, fresh)
        if code is not None:
            return index, code, None
        problem = problem or why
    return None, None, problem or (f"the live {check['function']} does not lead to the definition in {check['file']} "
                                   "(through __wrapped__)")


def show_code_lines(module: types.ModuleType, check: Check, fresh: list[types.CodeType], snippet_dir: str) -> Row:
    """An insert, a loop guard, an added argument: its lines have code in the live function's code."""
    obj, path = _target(module, check, fresh)
    _, code, problem = _find_patched(obj, check, fresh)
    if code is None:
        return _not_live(problem)
    have = _lines(code)
    missing = [n for n in check["lines"] if n not in have]
    if missing:
        return _not_live(f"line(s) {', '.join(map(str, missing))} carry no code in the live {path}")
    if not check["lines"]:  # a removal: nothing of it is left to have code
        return _live(f"the live code of {path} is the patched text")
    return _live(f"line(s) {', '.join(map(str, check['lines']))} in the live code of {path}")


def show_default(module: types.ModuleType, check: Check, fresh: list[types.CodeType], snippet_dir: str) -> Row:
    """``set`` of a parameter's default: the default is evaluated where the ``def`` runs, so no line of the
    function's own code carries it; the live function (the patched definition) has it in ``__defaults__``
    or ``__kwdefaults__``: equal to the spec's literal, the object its dotted name reads, or (any other
    expression) there, computed by the module's patched text."""
    obj, path = _target(module, check, fresh)
    index, code, problem = _find_patched(obj, check, fresh)
    if code is None:
        return _not_live(problem)
    function = _chain(obj)[cast(int, index)]   # found with the code
    name = check["parameter"]
    if isinstance(function, types.CodeType):  # a nested function: its defaults are made when the outer runs
        return _live(f"the live code of {path} is the patched text (its default of {name} is evaluated by the "
                     "enclosing function)")
    positional = code.co_varnames[:code.co_argcount]
    defaults = function.__defaults__ or ()
    if name in positional and positional.index(name) >= len(positional) - len(defaults):
        value = defaults[positional.index(name) - (len(positional) - len(defaults))]
    elif name in (function.__kwdefaults__ or {}):
        value = function.__kwdefaults__[name]
    else:
        return _not_live(f"the live {path} has no default for {name}")
    want, how = _expected(check["value"], function)
    if how is None:
        return _live(f"the live {path}'s default of {name} is {_short(value)}, computed by the module's patched "
                     "text")
    if not how(value, want):
        return _not_live(f"the live {path}'s default of {name} is {_short(value)}, not {check['value']}")
    return _live(f"the live {path}'s default of {name} is {_short(value)}")


def _expected(text: str, function: Any) -> tuple[Any, Callable[[Any, Any], bool] | None]:
    """What the default must be, and how to compare: a literal by equality, a dotted name by identity
    with what it reads in the function's globals; any other expression: (None, None), not compared."""
    try:
        return ast.literal_eval(text.strip()), lambda a, b: type(a) is type(b) and a == b
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    parts = text.strip().split(".")
    if not all(p.isidentifier() for p in parts):
        return None, None
    namespace = {**vars(builtins), **function.__globals__}
    if parts[0] not in namespace:
        return None, None
    obj = namespace[parts[0]]
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj, lambda a, b: a is b


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def show_wrapped(module: types.ModuleType, check: Check, fresh: list[types.CodeType], snippet_dir: str) -> Row:
    """A wrap: the live object's ``__wrapped__`` chain reaches the patched function, through a wrapper of
    the snippet package unless the hook returned the function itself (a hook may choose to be inert)."""
    obj, path = _target(module, check, fresh)
    index, code, problem = _find_patched(obj, check, fresh)
    if code is None:
        return _not_live(problem)
    wrappers = [c for c in _chain(obj)[:index] if _from_snippets(c, snippet_dir)]
    if not wrappers:  # the hook ran at import (the module's text is the patched one) and chose not to wrap
        return _live(f"the live {path} is the patched definition itself: the hook returned it unwrapped")
    return _live(f"the live {path} is {_describe(wrappers[-1])}, wrapping the patched function")


def show_class_member(module: types.ModuleType, check: Check, fresh: list[types.CodeType], snippet_dir: str) -> Row:
    """``add_method``/``add_attribute``: the live class (reached by its name) is the patched class and
    has the member; a method is the snippet's function."""
    cls, path = _target(module, check, fresh)
    if not isinstance(cls, type):
        return _not_live(f"the live {path} is {cls!r}, not a class")
    if not _defined_here(cls, module, check):
        return _not_live(f"the live {path} is {cls.__module__}.{cls.__qualname__}, defined elsewhere")
    name = check["name"]
    if name not in vars(cls):
        return _not_live(f"the live class {path} has no {name}")
    value = vars(cls)[name]
    if check.get("method"):
        function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if not _from_snippets(function, snippet_dir):
            return _not_live(f"{path}.{name} is {_describe(function)}, not the snippet's")
    return _live(f"{path}.{name} on the live class")


def show_module_name(module: types.ModuleType, check: Check, fresh: list[types.CodeType], snippet_dir: str) -> Row:
    """``add_import``: each name it binds is in the live module's namespace."""
    missing = [n for n in check["names"] if n not in vars(module)]
    if missing:
        return _not_live(f"the live module {module.__name__} does not bind {', '.join(missing)}")
    return _live(f"{', '.join(check['names'])} bound in the live module {module.__name__}")


def show_binding(module: types.ModuleType, check: Check, fresh: list[types.CodeType], snippet_dir: str) -> Row:
    """``set`` of a module- or class-level name, ``add_statement``: the live module (or the class, the
    patched one) binds each name, and the module ran the file's text (no stale byte code, checked on
    import)."""
    owner = check["owner"]
    holder, path = _reach(module, owner) if owner else (module, module.__name__)
    if owner and (not isinstance(holder, type) or not _defined_here(holder, module, dict(check, function=owner))):
        return _not_live(f"the live {path} is {holder!r}, not the class patched")
    missing = [n for n in check["names"] if n not in vars(holder)]
    if missing:
        return _not_live(f"the live {path} does not bind {', '.join(missing)}")
    kept = [n for n in check.get("gone", []) if n in vars(holder)]
    if kept:
        return _not_live(f"the live {path} still binds {', '.join(kept)}, which the patched text removes")
    said = [f"{', '.join(check['names'])} bound"] if check["names"] else []
    said += [f"{', '.join(check['gone'])} gone"] if check.get("gone") else []
    if not said:
        return _live(f"the live {path} ran the module's patched text")
    return _live(f"{'; '.join(said)} in the live {path} by the module's patched text")


def _defined_here(cls: type, module: types.ModuleType, check: Check) -> bool:
    """``cls`` is the class the patched file defines at ``check["function"]``: its qualified name, and its
    module's name, or (a package may reassign ``__module__``: httpx sets ``"httpx"``) a function of its own
    namespace whose code is the patched file's."""
    if cls.__qualname__ != check.get("qualname", check["function"]):
        return False
    if cls.__module__ == module.__name__:
        return True
    for value in vars(cls).values():
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        code = getattr(_original(function), "__code__", None) if callable(function) else None
        if isinstance(code, types.CodeType) and os.path.realpath(code.co_filename) == os.path.realpath(check["file"]):
            return True
    return not _module_defines(cls.__module__, cls.__qualname__)


def _module_defines(name: str, qualname: str) -> bool:
    """The module ``cls.__module__`` names has a ``class`` statement at ``qualname`` in its source. When it
    has none (tomli's ``TOMLDecodeError.__module__ = "tomli"``, a class with no function of its own), the
    name was reassigned, and the class the patched module binds at its own qualified name is its own;
    a module of no source to read (compiled, or none) may define it: elsewhere."""
    path = getattr(sys.modules.get(name), "__file__", None) or ""
    try:
        with open(path, "rb") as handle:
            body = ast.parse(handle.read()).body
    except (OSError, SyntaxError, ValueError):
        return True
    for part in qualname.split("."):
        found = [s for s in body if isinstance(s, ast.ClassDef) and s.name == part]
        if not found:
            return False
        body = found[-1].body
    return True


HOW = {"code_lines": show_code_lines, "binding": show_binding, "wrapped": show_wrapped, "default": show_default,
       "class_member": show_class_member,
       "module_name": show_module_name}
CALLED = ("code_lines", "wrapped", "class_member", "default")   # checks of a definition callers reach by its name


def _from_snippets(obj: Any, snippet_dir: str) -> bool:
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):
        return os.path.realpath(code.co_filename).startswith(snippet_dir)
    source = getattr(sys.modules.get(type(obj).__module__), "__file__", None) or ""
    return os.path.realpath(source).startswith(snippet_dir)


def _describe(obj: Any) -> str:
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):
        return f"{getattr(code, 'co_qualname', code.co_name)} ({code.co_filename}:{code.co_firstlineno})"
    return repr(obj)[:120]


if __name__ == "__main__":
    main()
