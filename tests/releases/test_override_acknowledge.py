"""A release profile's override can acknowledge a rule for that release alone (issue 27: every refusal
of a correct-looking spec has a way through): a call that passes ``**opts`` on one release only, where
the spec knows ``opts`` never holds the keyword it adds."""
from __future__ import annotations

from patchspec.cli import main
from tests.state.toy import tree
from tests.verify_toy import install, make_venv, run, write_spec

MOD = '''def g(*args, **kwargs):
    return sorted(kwargs)


def f(opts):
    return g(1, **opts)
'''

SPEC = '''spec: 1
name: vtoy
summary: Pass err=True to g.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: call
    file: vpkg/mod.py
    function: f
    transforms:
      - add_argument: {call: "g(...)", keyword: err, value: "True"}
'''

PROFILE = "release: r1\npackages: {vpkg: '==1.0'}\nspecs:\n  vtoy:\n    overrides:\n      call:\n" \
          "        transforms:\n          '0': {acknowledge: %s}\n"


def _setup(tmp_path, acknowledge: str | None):
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec", SPEC)
    if acknowledge is not None:
        (tmp_path / "spec" / "releases" / "r1.yaml").write_text(PROFILE % acknowledge)
    return python, site, spec


def test_a_profile_override_acknowledges_a_rule_for_its_release(tmp_path, capsys):
    """Before: "override of call transform 0 (add_argument): unknown key(s) acknowledge"."""
    python, site, spec = _setup(tmp_path, "[mapping-keyword]")
    assert main(["check", spec, "--root", str(site)]) == 1, capsys.readouterr().err   # pending: not applied yet
    assert "would-apply: vtoy call#0 add_argument f in vpkg/mod.py:6" in capsys.readouterr().out
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    assert run(python, code="import vpkg.mod as m; print(m.f({'a': 1}))") == ["['a', 'err']"]


def test_without_the_override_the_rule_refuses_and_names_the_key(tmp_path, capsys):
    python, site, spec = _setup(tmp_path, None)
    before = tree(site)
    assert main(["apply", spec, "--root", str(site)]) == 2
    assert "`acknowledge: [mapping-keyword]`" in capsys.readouterr().err
    assert tree(site) == before


def test_an_override_acknowledging_no_rule_of_its_kind_is_one_line(tmp_path, capsys):
    python, site, spec = _setup(tmp_path, "[captured-default]")
    before = tree(site)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.endswith("r1.yaml: override of call transform 0 (add_argument): acknowledge takes a list of "
                        "mapping-keyword, not ['captured-default']"), err
    assert tree(site) == before
