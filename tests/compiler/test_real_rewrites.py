"""Rewrites of issue 27 on the real releases they were seen on (fetched from PyPI into the cache as the
other tiers fetch them): each spec resolves, passes the lint and emits what it says, and what it refuses
is refused before anything is written."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from patchspec.compiler import plan as planner
from patchspec.releases.cache import pypi_root
from patchspec.spec import build_spec


def _spec(file: str, function: str, *transforms: dict):
    return build_spec({"spec": 1, "name": "fix", "summary": "t",
                       "targets": [{"id": "t", "file": file, "function": function, "transforms": list(transforms)}]},
                      "fix.yaml", "0" * 64)


def _emit(root: Path, spec) -> dict[str, str]:
    read = lambda rel: (root / rel).read_text() if (root / rel).is_file() else None
    plan = planner.resolve([spec], read, lambda pkg: (root / pkg).is_dir())
    assert not plan.errors, [r.detail for r in plan.errors]
    texts = planner.emit(plan, [spec])
    assert not plan.problems, plan.problems
    return texts


def test_click_8_2_1_a_keyword_beside_an_annotated_mapping_given_literal_keys():
    """click 8.2.1 ``Option.prompt_for_value`` builds ``prompt_kwargs: t.Any = {}`` and sets
    ``prompt_kwargs["show_default"]``: ``err`` cannot arrive twice (refused before)."""
    root = pypi_root("click==8.2.1")
    text = _emit(root, _spec("click/core.py", "Option.prompt_for_value",
                             {"add_argument": {"call": "prompt(...)", "keyword": "err", "value": "True"}}))
    compile(text["click/core.py"], "core.py", "exec")
    assert "            **prompt_kwargs,\n            err=True,\n        )\n" in text["click/core.py"]


@pytest.mark.parametrize("release", ["markupsafe==2.1.5", "markupsafe==3.0.2"])
def test_markupsafe_a_metavariable_argument_in_replace(release):
    """``Markup.unescape`` returns ``unescape(str(self))``: ``$S`` written back (refused before as the
    unbound ``__ps_one_S__0``)."""
    root = pypi_root(release)
    text = _emit(root, _spec("markupsafe/__init__.py", "Markup.unescape",
                             {"replace": {"pattern": "unescape(str($S))",
                                          "by": "unescape(str($S)).replace('\\x00', '')"}}))
    assert "return unescape(str(self)).replace('\\x00', '')  # patchspec: fix\n" in text["markupsafe/__init__.py"]


TORNADO_FIX = r'''spec: 1
name: tornado-cve-2024-52804
summary: tornado 6.4.2's fix, carried back - cookie unquoting in one regex pass, its old patterns gone.
targets:
  - id: octal-patt
    file: tornado/httputil.py
    function: _OctalPatt
    transforms:
      - replace:
          pattern: _OctalPatt = re.compile(...)
          by: |
            _unquote_sub = re.compile(r"\\(?:([0-3][0-7][0-7])|(.))").sub


            def _unquote_replace(m: re.Match) -> str:
                if m[1]:
                    return chr(int(m[1], 8))
                else:
                    return m[2]
  - id: quote-patt
    file: tornado/httputil.py
    function: _QuotePatt
    transforms:
      - remove: {statement: '_QuotePatt = re.compile(r"[\\].")'}
  - id: nulljoin
    file: tornado/httputil.py
    function: _nulljoin
    transforms:
      - remove: {statement: '_nulljoin = "".join'}
  - id: unquote-cookie
    file: tornado/httputil.py
    function: _unquote_cookie
    transforms:
      - replace:
          pattern: |
            while 0 <= i < n:
                ...
          by: |
            return _unquote_sub(_unquote_replace, s)
      - remove: {statement: "i = 0"}
      - remove: {statement: "n = len(s)"}
      - remove: {statement: "res = []"}
      - remove: {statement: "return _nulljoin(res)"}
'''


def test_tornado_cve_2024_52804_module_level_names_replaced_and_removed(tmp_path, capsys):
    """tornado 6.4.1 -> 6.4.2: `_OctalPatt`, `_QuotePatt` and `_nulljoin` replaced or removed at module level
    (refused before: "that binding is live, not a definition patchspec can patch"); applied in a venv with
    the proof, the live module has the new names only and unquotes cookies as 6.4.2 does."""
    from patchspec.cli import main
    from tests.verify_toy import make_venv

    python, site = make_venv(tmp_path / "venv")
    shutil.copytree(pypi_root("tornado==6.4.1"), site, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    (tmp_path / "fix" / "releases").mkdir(parents=True)
    (tmp_path / "fix" / "releases" / "any.yaml").write_text("release: any\npackages: {tornado: '>=6.4,<6.4.2'}\n")
    spec = tmp_path / "fix" / "tornado-cve-2024-52804.yaml"
    spec.write_text(TORNADO_FIX)
    code = main(["apply", str(spec), "--root", str(site)])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    text = (site / "tornado/httputil.py").read_text()
    assert "# patchspec: tornado-cve-2024-52804 (removed)\n" in text and "_OctalPatt" not in text
    seen = subprocess.run([str(python), "-c", "from tornado import httputil as h; print(sorted(n for n in "
                           "('_OctalPatt', '_QuotePatt', '_nulljoin', '_unquote_sub', '_unquote_replace') "
                           "if hasattr(h, n)), h.parse_cookie('a=\"\\\\101\\\\\"b\"'))"],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert seen.stdout.strip() == "['_unquote_replace', '_unquote_sub'] {'a': 'A\"b'}", seen.stderr
    capsys.readouterr()
    assert main(["verify", "tornado-cve-2024-52804", "--root", str(site)]) == 0
    said = capsys.readouterr().out
    assert "quote-patt#0 remove _QuotePatt in tornado/httputil.py (_QuotePatt gone in the live tornado.httputil" in said
    assert "(_unquote_replace, _unquote_sub bound in the live tornado.httputil" in said
    assert main(["unapply", "tornado-cve-2024-52804", "--root", str(site)]) == 0
    assert (site / "tornado/httputil.py").read_bytes() == \
        (pypi_root("tornado==6.4.1") / "tornado/httputil.py").read_bytes()


def test_record_drafts_the_removal_of_a_module_level_name_jinja2_cve_2024_34064(tmp_path, capsys):
    """jinja2 3.1.3 -> 3.1.4 removes ``_space_re`` (refused before: "_space_re is removed by the change: no
    transform removes a definition"): drafted as ``remove`` on the target naming it, proven, applied."""
    from patchspec.cli import main

    root = tmp_path / "site"
    shutil.copytree(pypi_root("jinja2==3.1.3"), root, ignore=shutil.ignore_patterns(".complete"))
    filters = "jinja2/filters.py"
    code = main(["record", "attr", "--root", str(root), "--from", "jinja2==3.1.4", "--dir", str(tmp_path / "fix"),
                 *(f"--target={filters}:{name}" for name in ("_space_re", "do_xmlattr", "_attr_key_re"))])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert f"{filters}:_space_re#0 remove: lines 251 -> -" in out.out
    targets = {t["function"]: t["transforms"] for t in yaml.safe_load((tmp_path / "fix" / "attr.yaml").read_text())
               ["targets"]}
    assert targets["_space_re"] == [{"remove": {"statement": '_space_re = re.compile(r"\\s", flags=re.ASCII)'}}]
    spec = str(tmp_path / "fix" / "attr.yaml")
    assert main(["apply", spec, "--root", str(root)]) == 0, capsys.readouterr()
    text = (root / filters).read_text()
    assert "_space_re" not in text and "# patchspec: attr (removed)\n" in text
    assert main(["check", spec, "--root", str(root)]) == 0


OLD_URLLIB3_FIX = '''spec: 1
name: urllib3-cve-2023-43804
summary: the Cookie header dropped on a redirect to another host, as an older spec wrote it.
targets:
  - id: default
    file: urllib3/util/retry.py
    function: Retry
    transforms:
      - add_attribute:
          name: DEFAULT_REMOVE_HEADERS_ON_REDIRECT
          value: 'frozenset(["Cookie", "Authorization"])'
          {acknowledge}
{init}'''
INIT_DEFAULT = '''  - id: init-default
    file: urllib3/util/retry.py
    function: Retry.__init__
    transforms:
      - set: {parameter: remove_headers_on_redirect, value: 'frozenset(["Cookie", "Authorization"])'}
'''


@pytest.mark.parametrize("release, init, rules", [
    pytest.param("urllib3==2.0.5", INIT_DEFAULT, "captured-default, existing-member", id="2.0.5"),
    pytest.param("urllib3==1.26.16", "", "existing-member", id="1.26.16"),
])
def test_an_older_urllib3_cve_spec_applies_with_the_rules_it_acknowledges(release, init, rules, tmp_path, capsys,
                                                                          copy_root):
    """urllib3 CVE-2023-43804 as written before the captured-default rule (an add_attribute of the constant,
    and on 2.x the __init__ default it captured set too): refused with the one line saying what to add, and
    with that line it applies and the probe sees the fix."""
    from patchspec.cli import main
    from tests.cve_probes import probe

    root = copy_root(pypi_root(release))
    (tmp_path / "fix" / "releases").mkdir(parents=True)
    (tmp_path / "fix" / "releases" / "any.yaml").write_text("release: any\npackages: {urllib3: '>=1.26'}\n")
    spec = tmp_path / "fix" / "urllib3-cve-2023-43804.yaml"
    spec.write_text(OLD_URLLIB3_FIX.format(acknowledge="", init=init))
    assert main(["check", str(spec), "--root", str(root)]) == 4
    refused = [line for line in capsys.readouterr().out.splitlines() if line.startswith("not-applicable:")]
    assert len(refused) == 1 and "default#0 add_attribute Retry" in refused[0]
    assert f"(a spec that means it says so: `acknowledge: [{rules}]` in this transform)" in refused[0]
    spec.write_text(OLD_URLLIB3_FIX.format(acknowledge=f"acknowledge: [{rules}]", init=init))
    code = main(["apply", str(spec), "--root", str(root)])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert probe("urllib3-cve-2023-43804", root)[0] == "FIXED"


H11_OVERLAP = '''spec: 1
name: h11-chunk-footer
summary: h11 0.16.0's chunk footer check, with one replace covering statements another replace targets.
targets:
  - id: chunked-call
    file: h11/_readers.py
    function: ChunkedReader.__call__
    transforms:
      - replace:
          pattern: |
            if self._bytes_to_discard > 0:
                data = buf.maybe_extract_at_most(self._bytes_to_discard)
                ...
          by: |
            if self._bytes_to_discard:
                data = buf.maybe_extract_at_most(len(self._bytes_to_discard))
                if data is None:
                    return None
                if data != self._bytes_to_discard[: len(data)]:
                    raise LocalProtocolError(
                        f"malformed chunk footer: {data!r} (expected {self._bytes_to_discard!r})"
                    )
                self._bytes_to_discard = self._bytes_to_discard[len(data) :]
                if self._bytes_to_discard:
                    return None
      - replace:
          pattern: self._bytes_to_discard -= len(data)
          by: self._bytes_to_discard = self._bytes_to_discard[len(data) :]
'''


def test_h11_0_15_0_overlapping_replaces_are_one_conflict_before_anything_is_written(tmp_path, capsys, copy_root):
    """Before: check said "applied" for every transform, the inner edit was not written, and the patched h11
    raised TypeError on any chunked body."""
    from patchspec.cli import main
    from tests.state.toy import tree

    root = copy_root(pypi_root("h11==0.15.0"))
    (tmp_path / "fix" / "releases").mkdir(parents=True)
    (tmp_path / "fix" / "releases" / "any.yaml").write_text("release: any\npackages: {h11: '>=0.14'}\n")
    spec = tmp_path / "fix" / "h11-chunk-footer.yaml"
    spec.write_text(H11_OVERLAP)
    before = tree(root)
    assert main(["apply", str(spec), "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "spec h11-chunk-footer: chunked-call#0 (replace, line 163) rewrites the code that chunked-call#1 " \
           "(replace, line 167) edits, so that edit would be lost" in err, err
    assert tree(root) == before
