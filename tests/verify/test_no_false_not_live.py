"""No false "not live" (issue 27, items 2, 3, 7): code that runs is shown live, by what Python keeps of it
(a default in the live function's ``__defaults__``), by the class's code (a class whose ``__module__``
the package reassigns), by a property's accessor functions."""
from __future__ import annotations

from patchspec.cli import main
from tests.verify_toy import SNIPPET, install, make_venv, run, write_spec


def _verify(tmp_path, capsys, files: dict[str, str], spec: str) -> tuple[int, dict[str, str], object]:
    python, site = make_venv(tmp_path / "venv")
    install(site, files)
    path = write_spec(tmp_path / "spec", spec, SNIPPET)
    code = main(["apply", path, "--root", str(site)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert main(["verify", path, "--root", str(site)]) == 0
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("live: "):
            rows[line.split()[2]] = line
    return code, rows, python


SIGNATURE = '''LIMIT = object()
SLOW = 30


def request(
    method,
    url,
    timeout=5,
    retries=LIMIT,
    *,
    follow=False,
):
    return (method, url, timeout, retries is LIMIT, follow)
'''

DEFAULT_SPEC = '''spec: 1
name: vtoy
summary: New defaults in a signature laid out as black does.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: request
    file: vpkg/mod.py
    function: request
    transforms:
      - set: {parameter: timeout, value: "SLOW"}
      - set: {parameter: follow, value: "True"}
      - set: {parameter: retries, value: "None"}
'''


def test_a_default_in_a_multi_line_signature_is_shown_by_the_live_defaults(tmp_path, capsys):
    """Before: "line(s) 7 carry no code in the live vpkg.mod.request; the change was undone"."""
    _, rows, python = _verify(tmp_path, capsys, {"vpkg/__init__.py": "", "vpkg/mod.py": SIGNATURE}, DEFAULT_SPEC)
    assert "the live vpkg.mod.request's default of timeout is 30" in rows["request#0"]
    assert "the live vpkg.mod.request's default of follow is True" in rows["request#1"]
    assert "the live vpkg.mod.request's default of retries is None" in rows["request#2"]
    assert run(python, code="import vpkg.mod as m; print(m.request('GET', 'u'))") == ["('GET', 'u', 30, False, True)"]


MODELS = '''class Response:
    def __init__(self, status):
        self.status = status

    def ok(self):
        return self.status < 400
'''

EXPORTS = '''from ._models import Response

__all__ = ["Response"]
for _name in __all__:
    setattr(locals()[_name], "__module__", "vpkg")
'''

CLASS_SPEC = '''spec: 1
name: vtoy
summary: Members added to a class the package re-homes.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: response
    file: vpkg/_models.py
    function: Response
    transforms:
      - add_method: {name: describe, with: describe}
      - add_attribute: {name: patched, value: "True"}
'''


def test_a_class_whose_module_the_package_reassigns_is_found_by_its_code(tmp_path, capsys):
    """httpx's layout. Before: "the live vpkg._models.Response is vpkg.Response, defined elsewhere"."""
    files = {"vpkg/__init__.py": EXPORTS, "vpkg/_models.py": MODELS}
    _, rows, python = _verify(tmp_path, capsys, files, CLASS_SPEC)
    assert "vpkg._models.Response.describe on the live class; callers of vpkg.Response reach it" in rows["response#0"]
    assert "vpkg._models.Response.patched on the live class" in rows["response#1"]
    assert run(python, code="import vpkg; r = vpkg.Response(200); print(r.describe(), r.patched)") == [
        "described True"]


BOX = '''class Box:
    def __init__(self):
        self._v = 0

    def _get(self):
        return self._v

    def _set(self, v):
        self._v = v

    value = property(_get, _set)
'''

PROPERTY_SPEC = '''spec: 1
name: vtoy
summary: Hooks in the accessors of a property made by a call.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: get
    file: vpkg/mod.py
    function: Box.value
    transforms:
      - insert_before: {anchor: "return self._v", code: "_v.seen('get')"}
  - id: set
    file: vpkg/mod.py
    function: Box.value.setter
    transforms:
      - insert_before: {anchor: "self._v = v", code: "_v.seen('set')"}
'''


def test_a_property_made_by_a_call_is_named_as_the_property_and_its_functions_followed(tmp_path, capsys):
    """``value = property(_get, _set)``. Before: ``Box.value`` refused as "not a definition patchspec can
    patch", with no word of ``Box._get``."""
    _, rows, python = _verify(tmp_path, capsys, {"vpkg/__init__.py": "", "vpkg/mod.py": BOX}, PROPERTY_SPEC)
    assert "in the live code of vpkg.mod.Box.value" in rows["get#0"]
    assert "in the live code of vpkg.mod.Box.value.setter" in rows["set#0"]
    assert run(python, code="import vpkg.mod as m; b = m.Box(); b.value = 3; print(b.value)") == [
        "HOOK set", "HOOK get", "3"]


ERROR_SPEC = CLASS_SPEC.replace("function: Response", "function: Err").replace("_models.py", "_p.py")


def test_a_class_whose_module_is_reassigned_and_that_has_no_function_of_its_own_is_found(tmp_path, capsys):
    """tomli's ``TOMLDecodeError`` (docs/corpus.md class 2): an exception class with no function to find it
    by. Before: "the live vpkg._p.Err is vpkg.Err, defined elsewhere", and the change was undone."""
    files = {"vpkg/__init__.py": 'from ._p import Err\n\nErr.__module__ = "vpkg"\n',
             "vpkg/_p.py": "class Err(ValueError):\n    pass\n"}
    _, rows, python = _verify(tmp_path, capsys, files, ERROR_SPEC)
    assert "vpkg._p.Err.describe on the live class; callers of vpkg.Err reach it" in rows["response#0"]
    assert run(python, code="import vpkg; print(vpkg.Err('x').describe(), vpkg.Err.patched)") == ["described True"]


CURRY = '''import functools


class curry:
    def __init__(self, func):
        self._partial = functools.partial(func)
        self.__name__ = func.__name__

    @property
    def func(self):
        return self._partial.func

    def __call__(self, *args):
        return self._partial(*args)


@curry
def memoize(x):
    return x * 2
'''

CURRY_SPEC = '''spec: 1
name: vtoy
summary: A hook in a function a wrapper object holds as .func.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: memo
    file: vpkg/mod.py
    function: memoize
    transforms:
      - insert_before: {anchor: "return x * 2", code: "_v.seen('memo')"}
'''


def test_a_function_a_wrapper_object_keeps_as_func_is_followed(tmp_path, capsys):
    """toolz's ``curry`` (docs/corpus.md class 7) keeps the function as ``.func``, not ``__wrapped__``.
    Before: "the live memoize does not lead to the definition ... (through __wrapped__)", undone."""
    _, rows, python = _verify(tmp_path, capsys, {"vpkg/__init__.py": "", "vpkg/mod.py": CURRY}, CURRY_SPEC)
    assert "line(s) 20 in the live code of vpkg.mod.memoize" in rows["memo#0"], rows
    assert run(python, code="import vpkg.mod; print(vpkg.mod.memoize(2))") == ["HOOK memo", "4"]


PROTOCOL = '''from typing import Protocol


class Sized(Protocol):
    def size(self) -> int: ...


class Box:
    def size(self):
        return 3


BOX = Box()


def box():
    return BOX
'''

PROTOCOL_SPEC = '''spec: 1
name: vtoy
summary: A member added to a typing Protocol that is not runtime-checkable.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: sized
    file: vpkg/__init__.py
    function: Sized
    transforms:
      - add_method: {name: describe, with: describe}
'''


def test_a_member_added_to_a_protocol_that_is_not_runtime_checkable_is_live(tmp_path, capsys):
    """attrs' ``AttrsInstance`` (the corpus judging every transform it generates). Before: "reaching it raised
    TypeError: Instance and class checks can only be used with @runtime_checkable protocols", the change
    undone: the proof's subclass check of the package's public classes raised on the protocol."""
    _, rows, python = _verify(tmp_path, capsys, {"vpkg/__init__.py": PROTOCOL}, PROTOCOL_SPEC)
    assert "vpkg.Sized.describe on the live class" in rows["sized#0"], rows
    assert run(python, code="import vpkg; print(vpkg.Sized.describe(None))") == ["described"]


CAPTURED = '''class NodeType(type):
    def __call__(cls, *args):
        return super().__call__(*args)


def _failing_new(*args, **kwargs):
    raise TypeError("can't create custom node types")


NodeType.__new__ = staticmethod(_failing_new)
del _failing_new
'''

CAPTURED_SPEC = '''spec: 1
name: vtoy
summary: A function deleted after a class kept it (jinja2's nodes._failing_new).
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: failing
    file: vpkg/nodes.py
    function: _failing_new
    transforms:
      - insert_before: {anchor: 'raise TypeError("can''t create custom node types")', code: "_v.seen('failing')"}
      - wrap: {with: traced}
'''


def test_a_definition_deleted_after_a_class_kept_it_is_patched_where_callers_reach_it(tmp_path, capsys):
    """jinja2 ``nodes._failing_new`` (docs/corpus.md class 13): ``NodeType.__new__ = staticmethod(_failing_new)``
    then ``del _failing_new``. Before: "_failing_new is bound by `del _failing_new` at line 11 ...: that binding
    is live, not a definition patchspec can patch", refused."""
    files = {"vpkg/__init__.py": "", "vpkg/nodes.py": CAPTURED}
    _, rows, python = _verify(tmp_path, capsys, files, CAPTURED_SPEC)
    for row in ("failing#0", "failing#1"):
        assert "vpkg.nodes.NodeType.__new__" in rows[row], rows
    program = "import vpkg.nodes\ntry:\n    vpkg.nodes.NodeType('N', (), {})\nexcept TypeError as e:\n    print(e)"
    assert run(python, code=program) == ["HOOK wrap", "HOOK failing", "can't create custom node types"]
