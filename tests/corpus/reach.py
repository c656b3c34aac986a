"""Run by the corpus root's interpreter: ``python reach.py REQUEST.json OUT.json``; standard library only.

``survey``: import the package as a program does and walk what its top-level names reach (public names,
the public submodules bound on it, the classes they hold and every member of their bases in the package):
each Python definition with the attribute paths that lead to it, and each compiled object (a C, Cython or
mypyc function or class) with the module it lives in, which the driver pairs with its pure-Python twin.

``run``: run the package's smoke program (under coverage for the pristine run), then, for the patched run,
read the hooks' counters and check, through the public paths alone, whether what callers reach carries
each transform's change. Nothing here knows one package.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import os
import pkgutil
import sys
import traceback
import types

ADDED = "ps_corpus_added"
COMPILED_SUFFIXES = (".so", ".pyd")
MAX_PATHS = 4


def inside(path: str | None, pkgdir: str) -> bool:
    if not path:
        return False
    path = os.path.abspath(path)
    return path == pkgdir or path.startswith(pkgdir + os.sep)


def module_of(obj: object) -> str:
    """``__module__``, when it is a name (a proxy class's is a property: wrapt's ObjectProxy)."""
    name = getattr(obj, "__module__", None)
    return name if isinstance(name, str) else ""


def public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__") and len(name) > 4)


class Survey:
    def __init__(self, top: str, depth: int) -> None:
        self.module = importlib.import_module(top)
        file = os.path.abspath(self.module.__file__)
        self.pkgdir = os.path.dirname(file) if file.endswith("__init__.py") else file
        self.top = top
        self.depth = depth
        self.defs: dict[tuple, dict] = {}
        self.compiled: dict[tuple, dict] = {}
        self.seen: set[int] = set()

    def ours(self, obj: object) -> bool:
        name = module_of(obj)
        return name == self.top or name.startswith(self.top + ".")

    def walk(self, module: types.ModuleType, path: list[str], depth: int) -> None:
        names = getattr(module, "__all__", None)
        if not isinstance(names, (list, tuple)):
            names = [n for n in dir(module) if not n.startswith("_")]
        # the public submodules bound on it are names a program reaches too (``yaml.constructor``)
        names = list(names) + [n for n, v in list(vars(module).items()) if isinstance(v, types.ModuleType)
                               and not n.startswith("_") and n not in names]
        for name in names:
            try:
                obj = getattr(module, name)
            except Exception:  # noqa: BLE001 - a lazy attribute that fails is not reachable
                continue
            self.visit(obj, path + [name], depth)

    def visit(self, obj: object, path: list[str], depth: int) -> None:
        if isinstance(obj, types.ModuleType):
            if depth < self.depth and inside(getattr(obj, "__file__", None), self.pkgdir) and id(obj) not in self.seen:
                self.seen.add(id(obj))
                self.walk(obj, path, depth + 1)
        elif inspect.isclass(obj):
            if self.ours(obj):
                self.visit_class(obj, path)
        elif isinstance(obj, types.FunctionType):
            self.add_function(obj, path, None, None)
        elif callable(obj) and self.ours(obj) and not hasattr(obj, "__code__"):
            inner = chain(obj)[-1]   # a wrapper object of Python's (toolz's curry) holds a Python function
            if isinstance(inner, types.FunctionType):
                self.add_function(inner, path, None, None)
            else:
                self.add_compiled(obj, path, "function")

    def visit_class(self, cls: type, path: list[str]) -> None:
        module = sys.modules.get(module_of(cls))
        module_file = getattr(module, "__file__", None) or ""
        functions = [v for v in vars(cls).values() if isinstance(v, types.FunctionType)]
        if module_file.endswith(COMPILED_SUFFIXES) and not functions:
            self.add_compiled(cls, path, "class")
            return
        files = sorted({f.__code__.co_filename for f in functions if inside(f.__code__.co_filename, self.pkgdir)})
        self.add_def(("class", module_of(cls), cls.__qualname__), path,
                     {"kind": "class", "module": module_of(cls), "module_file": module_file,
                      "qualname": cls.__qualname__, "files": files,
                      # a TypedDict's body may hold annotations only: an added method is the spec's error
                      "skip": type(cls).__name__ == "_TypedDictMeta"})
        if id(cls) in self.seen:
            return
        self.seen.add(id(cls))
        for klass in cls.__mro__:
            if not self.ours(klass):
                continue
            for name, raw in list(vars(klass).items()):
                if not public(name) or _lookup(cls, name) is not raw:   # overridden: callers of cls reach another
                    continue
                member = path + [name]
                if isinstance(raw, (staticmethod, classmethod)):
                    raw = raw.__func__
                if isinstance(raw, types.FunctionType):
                    self.add_function(raw, member, None, f"{klass.__qualname__}.{name}")
                elif isinstance(raw, property):
                    for accessor, suffix in (("fget", ""), ("fset", ".setter")):
                        fn = getattr(raw, accessor)
                        if isinstance(fn, types.FunctionType):
                            self.add_function(fn, member, accessor, f"{klass.__qualname__}.{name}{suffix}")
                elif inspect.isclass(raw) and self.ours(raw):
                    self.visit_class(raw, member)

    def add_function(self, fn: types.FunctionType, path: list[str], accessor: str | None, named: str | None) -> None:
        inner = inspect.unwrap(fn)
        code = getattr(inner, "__code__", None)
        if code is None or not inside(code.co_filename, self.pkgdir) or "<" in inner.__qualname__:
            return
        target = named if accessor is not None else inner.__qualname__   # a property by its own name, as users write it
        key = ("function", code.co_filename, code.co_firstlineno, target)
        self.add_def(key, path, {"kind": "function", "file": code.co_filename, "firstlineno": code.co_firstlineno,
                                 "qualname": inner.__qualname__, "target": target, "accessor": accessor})

    def add_def(self, key: tuple, path: list[str], entry: dict) -> None:
        found = self.defs.setdefault(key, {**entry, "paths": []})
        if len(found["paths"]) < MAX_PATHS and path not in found["paths"]:
            found["paths"].append(path)

    def add_compiled(self, obj: object, path: list[str], kind: str) -> None:
        module = sys.modules.get(module_of(obj))
        key = (kind, module_of(obj), getattr(obj, "__qualname__", getattr(obj, "__name__", "")))
        found = self.compiled.setdefault(key, {
            "kind": kind, "module": key[1], "module_file": getattr(module, "__file__", None), "qualname": key[2],
            "members": sorted(n for n in vars(obj) if public(n)) if kind == "class" else [], "paths": []})
        if len(found["paths"]) < MAX_PATHS and path not in found["paths"]:
            found["paths"].append(path)


def _lookup(cls: type, name: str) -> object:
    try:
        return inspect.getattr_static(cls, name)
    except AttributeError:
        return None


def submodules(module: types.ModuleType) -> None:
    """Import the package's public submodules, as a program does (``from packaging import version``): a
    package whose ``__init__`` binds nothing reaches them only so. Test modules are not the package's API."""
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if not info.name.startswith(("_", "test")):
            with contextlib.suppress(Exception):  # a submodule that needs what is not installed is not reachable
                importlib.import_module(f"{module.__name__}.{info.name}")


def survey(request: dict) -> dict:
    found = Survey(request["top"], request.get("depth", 1))
    submodules(found.module)
    found.walk(found.module, [], 0)
    return {"pkgdir": found.pkgdir, "defs": list(found.defs.values()), "compiled": list(found.compiled.values())}


def resolve(top: types.ModuleType, path: list[str], accessor: str | None) -> object:
    obj: object = top
    for name in path[:-1]:
        obj = getattr(obj, name)
    raw = inspect.getattr_static(obj, path[-1]) if path else obj
    if isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    if isinstance(raw, property):
        raw = getattr(raw, accessor or "fget")
    return raw


def chain(obj: object) -> list[object]:
    """``obj`` and what it wraps: through ``__wrapped__``, or the ``func`` a wrapper object keeps
    (``functools.partial``, toolz's ``curry``)."""
    found = []
    while obj is not None and len(found) < 50 and all(obj is not o for o in found):
        found.append(obj)
        try:
            step = getattr(obj, "__wrapped__", None)
            if step is None and not isinstance(obj, (type, types.FunctionType, types.ModuleType)):
                step = getattr(obj, "func", None)
        except Exception:  # noqa: BLE001 - a proxy's attribute may raise anything
            step = None
        obj = step if callable(step) else None
    return found


def carries(top: types.ModuleType, check: dict, hits: dict[str, int], root: str) -> bool:
    """Whether the object some public path leads to carries the transform's change."""
    for path in check["paths"]:
        try:
            obj = resolve(top, path, check.get("accessor"))
        except Exception:  # noqa: BLE001 - a path that no longer resolves carries nothing
            continue
        kind = check["kind"]
        if kind == "add_method":
            if inspect.isclass(obj) and any(k.__qualname__ == check["qualname"] and ADDED in vars(k)
                                            for k in obj.__mro__):
                return True
            continue
        links = chain(obj)
        if kind == "wrap":
            if any(getattr(o, "__corpus_wrap__", None) == check["wrap_key"] for o in links):
                return True
            continue
        codes = [getattr(o, "__code__", None) for o in links]
        if kind == "insert_before" and any(c is not None and check["key"] in c.co_consts for c in codes):
            return True
        if kind == "set" and hits.get(check["key"]) and any(
                c is not None and os.path.abspath(c.co_filename) == os.path.join(root, check["file"])
                and c.co_name == check["qualname"].rsplit(".", 1)[-1] for c in codes):
            return True
    return False


def run(request: dict) -> dict:
    root = request["root"]
    cov = None
    if request.get("coverage"):
        sys.path.append(request["coverage"])
        import coverage
        cov = coverage.Coverage(data_file=None, include=[os.path.join(request["pkgdir"], "*")])
        cov.start()
    out = io.StringIO()
    error = None
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(request["program"], "<smoke>", "exec"), {"__name__": "__main__"})
    except BaseException as exc:  # noqa: BLE001 - the program's failure is a finding, not the runner's
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    lines: dict[str, list[int]] = {}
    if cov is not None:
        cov.stop()
        data = cov.get_data()
        lines = {os.path.relpath(f, root): sorted(data.lines(f) or []) for f in data.measured_files()}
    top = importlib.import_module(request["top"])
    submodules(top)   # the paths the survey found go through them (a default is counted when its def runs)
    hooks = sys.modules.get("_patchspec_runtime.corpus_hooks")
    hits = dict(getattr(hooks, "HITS", {}))
    carried = {c["id"]: carries(top, c, hits, root) for c in request.get("checks", [])}
    return {"stdout": out.getvalue(), "error": error, "lines": lines, "hits": hits, "carried": carried}


def main() -> None:
    with open(sys.argv[1]) as f:
        request = json.load(f)
    sys.path.insert(0, request["root"])
    answer = survey(request) if request["mode"] == "survey" else run(request)
    with open(sys.argv[2], "w") as f:
        json.dump(answer, f)


if __name__ == "__main__":
    main()
