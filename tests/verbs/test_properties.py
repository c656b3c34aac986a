"""Property tests: the spec loader fails only with PatchspecError, and apply/unapply round trips hold on
generated sources of many shapes."""
from __future__ import annotations

import codecs
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchspec.compiler.source import split_lines
from patchspec.errors import PatchspecError
from patchspec.spec import load_spec_bytes
from patchspec.verbs import writing
from tests.verbs.test_apply import FIXTURES

DEMO = yaml.safe_load((FIXTURES / "demo.yaml").read_text())

# --- the loader -------------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)


def paths(data, prefix=()):
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from paths(value, prefix + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from paths(value, prefix + (index,))


ALL_PATHS = [p for p in paths(DEMO) if p]


def set_at(data, path, value):
    import copy
    data = copy.deepcopy(data)
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return data


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ALL_PATHS), values)
def test_loader_mutated_spec_loads_or_fails_cleanly(path, value):
    text = yaml.safe_dump(set_at(DEMO, path, value), sort_keys=False)
    try:
        spec = load_spec_bytes(text.encode(), "mutated.yaml")
    except PatchspecError as exc:
        assert exc.file == "mutated.yaml" and exc.line is not None, str(exc)
        assert "\n" not in str(exc)
    else:
        assert spec.name and spec.targets


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_loader_arbitrary_text_fails_cleanly(text):
    try:
        load_spec_bytes(text.encode(), "random.yaml")
    except PatchspecError as exc:
        assert exc.file == "random.yaml"
    else:
        raise AssertionError("random text loaded as a spec")


# --- generated sources ------------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "x", "self.y", "obj.attr"])
simple = st.one_of(
    st.builds(lambda n, v: f"{n} = {v}", names, st.integers(0, 9)),
    st.builds(lambda f, n: f"{f}({n})", st.sampled_from(["g", "h", "self.k"]), names),
    st.just("pass"),
)
comment = st.sampled_from(["", "  # note", "   #x"])
blank = st.sampled_from(["", "\n", "\n\n", "    # a comment line\n"])


@st.composite
def bodies(draw, indent="    ", depth=0):
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        lines.append(draw(blank))
        kind = draw(st.sampled_from(["simple", "simple", "loop", "if"] if depth < 2 else ["simple"]))
        if kind == "simple":
            lines.append(f"{indent}{draw(simple)}{draw(comment)}\n")
        else:
            header = "while a < b:" if kind == "loop" else "if x:"
            lines.append(f"{indent}{header}{draw(comment)}\n")
            lines.append(draw(bodies(indent + draw(st.sampled_from(["    ", "  ", "\t"])), depth + 1)))
    return "".join(lines)


@st.composite
def modules(draw):
    """A module whose live ``target`` may follow ``@overload`` stubs or an earlier definition, sit in an
    ``if``/``try`` block, have a one-line body; with form feeds, U+2028 in comments and either quote."""
    quote = draw(st.sampled_from(["'", '"']))
    call = f"marker_call(1, {quote}k{quote})"
    header = draw(st.sampled_from(["", '"""Doc."""\n', "import os\n", "from a import (b,\n    c)\n"]))
    header += "from typing import overload\n"
    header += draw(st.sampled_from(["", "\f\n", "# a \u2028 separated comment\n"]))
    before = draw(st.sampled_from(["", "@overload\ndef target(self, x: int) -> int: ...\n\n",
                                   "def target(self):\n    return 0\n\n"]))
    decorator = draw(st.sampled_from(["", "@decorate\n", "@decorate(1)\n@other\n"]))
    if draw(st.booleans()):
        func = f"{decorator}def target(self): {call}\n"
    else:
        func = f"{decorator}def target(self):{draw(comment)}\n{draw(bodies())}    {call}\n"
    block = draw(st.sampled_from(["", "if True:\n", "try:\n"]))
    if block:
        func = "".join("    " + line if line.strip() else line for line in (before + func).splitlines(True))
        func = block + func + ("except ImportError:\n    pass\n" if block == "try:\n" else "")
    else:
        func = before + func
    tail = draw(st.sampled_from(["", "\n\nX = 1\n", "\nclass C:\n    pass\n", "\f\nclass C: pass\n"]))
    return header + func + tail


SPEC_TEXT = """
spec: 1
name: prop
summary: generated
snippets: {package: demo_snips, alias: _p, path: %s}
targets:
  - id: t
    file: pkg/mod.py
    function: target
    transforms:
      - insert_before: {anchor: "marker_call(...)", code: "_p.stop(self, 1)"}
      - add_argument: {call: 'marker_call(1, "k")', keyword: extra, value: "_p.stop(self, 2)"}
      - wrap: {with: passthrough}
""" % (FIXTURES / "snips")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(modules(), st.booleans())
def test_round_trip_on_generated_sources(source, bom):
    compile(source, "mod.py", "exec")
    original = (codecs.BOM_UTF8 if bom else b"") + source.encode()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "spec.yaml").write_text(SPEC_TEXT)
        (tmp / "releases").mkdir()
        (tmp / "releases" / "r1.yaml").write_text("release: r1\npackages: {pkg: '>=0'}\n")
        root = tmp / "root"
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "mod.py").write_bytes(original)
        writing.apply(str(tmp / "spec.yaml"), "r1", str(root))
        data = (root / "pkg" / "mod.py").read_bytes()
        assert data.startswith(codecs.BOM_UTF8) == bom
        patched = data.decode("utf-8-sig")
        compile(patched, "mod.py", "exec")
        assert patched.count("# patchspec: prop") == 3
        quote = source.split("marker_call(1, ")[1][0]
        assert f"marker_call(1, {quote}k{quote}, extra=_p.stop(self, 2))" in patched
        live = patched.split("@_p.passthrough  # patchspec: prop\n")[1]
        assert live.lstrip().startswith("def target(self):")                 # on the live definition
        assert "def target" not in live.split("def target(self)", 1)[1]      # which is the last one
        if "def target(self): marker" not in source:
            # Outside the inserted lines, every line of the source is still there, in order.
            kept = [line for line in split_lines(patched) if "# patchspec: prop" not in line]
            assert "".join(kept).replace(", extra=_p.stop(self, 2)", "") == source
        assert writing.apply(str(tmp / "spec.yaml"), "r1", str(root)).changed is False
        writing.unapply(str(tmp / "spec.yaml"), str(root))
        assert (root / "pkg" / "mod.py").read_bytes() == original
        assert sorted(p.name for p in root.iterdir()) == ["pkg"]
