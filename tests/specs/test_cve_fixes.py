"""The nine CVE fixes of patchspec/specs/examples/cve/, each written with the rewrite kinds as its upstream
diff says, on real releases from PyPI: the probe (tests/cve_probes.py) says VULNERABLE on the pristine
release, apply and check succeed, the probe says FIXED on the patched root, unapply gives the release back
byte for byte. The vulnerable release of each fix runs by default; the older releases of its line (each
profile drafted with ``profile new``) with ``-m releases_all``. On the release that has the fix, drift
calls every rewrite of the spec obsolete."""
from __future__ import annotations

import pytest

from patchspec.compiler import drift
from patchspec.compiler.transforms import KINDS
from patchspec.releases.cache import pypi_root
from patchspec.spec import SHIPPED, load_spec
from patchspec.verbs import reading, writing
from tests.cve_probes import probe
from tests.verbs.test_apply import tree

CVE = SHIPPED / "examples" / "cve"
# fix: (the release upstream fixed it in, the vulnerable release before it, older releases of its line)
FIXES = {
    "requests-cve-2023-32681": ("requests==2.31.0", "requests==2.30.0", ["requests==2.29.0", "requests==2.28.2"]),
    "urllib3-cve-2023-43804": ("urllib3==2.0.6", "urllib3==2.0.5",
                               ["urllib3==2.0.4", "urllib3==1.26.16", "urllib3==1.26.15"]),
    "urllib3-cve-2023-45803": ("urllib3==2.0.7", "urllib3==2.0.6", ["urllib3==2.0.5", "urllib3==2.0.4"]),
    "urllib3-cve-2024-37891": ("urllib3==2.2.2", "urllib3==2.2.1", ["urllib3==2.2.0", "urllib3==2.1.0"]),
    "jinja2-cve-2024-22195": ("jinja2==3.1.3", "jinja2==3.1.2", ["jinja2==3.1.1", "jinja2==3.1.0"]),
    "jinja2-cve-2024-34064": ("jinja2==3.1.4", "jinja2==3.1.3", []),
    "idna-cve-2024-3651": ("idna==3.7", "idna==3.6", ["idna==3.5", "idna==3.4"]),
    "tqdm-cve-2024-34062": ("tqdm==4.66.3", "tqdm==4.66.2", ["tqdm==4.66.1", "tqdm==4.66.0"]),
    "sqlparse-cve-2024-4340": ("sqlparse==0.5.0", "sqlparse==0.4.4", ["sqlparse==0.4.3", "sqlparse==0.4.2"]),
}
CASES = [pytest.param(fix, vulnerable, id=f"{fix}-on-{vulnerable.replace('==', '-')}",
                      marks=pytest.mark.releases_all(default=True)) for fix, (_f, vulnerable, _o) in FIXES.items()]
CASES += [pytest.param(fix, older, id=f"{fix}-on-{older.replace('==', '-')}", marks=pytest.mark.releases_all)
          for fix, (_f, _v, olders) in FIXES.items() for older in olders]


def _profile(requirement: str) -> str:
    return requirement.replace("==", "-")


@pytest.mark.parametrize("fix,release", CASES)
def test_the_fix_carried_to_a_vulnerable_release(fix, release, copy_root):
    spec = str(CVE / f"{fix}.yaml")
    root = copy_root(pypi_root(release))
    before = tree(root)
    assert probe(fix, root)[0] == "VULNERABLE"
    assert reading.check(spec, _profile(release), str(root)).code == 1
    writing.apply(spec, _profile(release), str(root))
    assert reading.check(spec, _profile(release), str(root)).code == 0
    verdict, seen = probe(fix, root)
    assert verdict == "FIXED", seen
    writing.unapply(fix, str(root))
    assert tree(root) == before


def _rewrites(spec) -> int:
    """The transforms that write something in upstream's place (a removed statement that is gone is
    anchor-missing: drift cannot tell removed from changed)."""
    return sum(KINDS[t.kind].rewrites and t.kind != "remove" for target in spec.targets for t in target.transforms)


@pytest.mark.parametrize("fix", [f for f in FIXES if f not in (
    "jinja2-cve-2024-34064",      # 3.1.4 renamed the name it sets (_space_re is _attr_key_re): target-missing
    "urllib3-cve-2023-45803")])   # inserts only: no rewrite to find there
def test_the_release_with_the_fix_is_obsolete_for_every_rewrite(fix):
    spec = load_spec(CVE / f"{fix}.yaml")
    root = pypi_root(FIXES[fix][0])
    rows = drift.report(spec, lambda rel: (root / rel).read_text() if (root / rel).is_file() else None,
                        lambda package: (root / package).exists() or (root / f"{package}.py").exists(), {})
    obsolete = [r for r in rows if r.drift == drift.Drift.OBSOLETE]
    assert len(obsolete) == _rewrites(spec) > 0, [(r.target, r.kind, r.drift, r.detail) for r in rows]
    assert all(KINDS[r.kind].rewrites for r in obsolete)


def test_two_fixes_that_set_one_name_differently_are_refused_naming_both():
    from patchspec.compiler import plan as planner
    from patchspec.compiler.plan import ConflictError

    specs = [load_spec(CVE / f"{fix}.yaml") for fix in ("urllib3-cve-2023-43804", "urllib3-cve-2024-37891")]
    root = pypi_root("urllib3==2.0.5")
    plan = planner.resolve(specs, lambda rel: (root / rel).read_text(), lambda package: True)
    assert not plan.errors
    with pytest.raises(ConflictError, match=r"urllib3-cve-2023-43804 .*urllib3-cve-2024-37891|"
                                            r"urllib3-cve-2024-37891 .*urllib3-cve-2023-43804"):
        planner.emit(plan, specs)


def test_apply_on_the_release_with_the_fix_says_the_fix_is_upstream(copy_root):
    from patchspec.errors import PatchspecError

    root = copy_root(pypi_root("requests==2.31.0"))
    before = tree(root)
    with pytest.raises(PatchspecError, match="already holds every change of requests-cve-2023-32681.*upstream"):
        writing.apply(str(CVE / "requests-cve-2023-32681.yaml"), "requests-2.30.0", str(root))
    assert tree(root) == before


@pytest.mark.parametrize("verb", ["check", "validate", "compile", "diff"])
def test_every_verb_on_the_release_with_the_fix_says_what_apply_says(copy_root, capsys, verb):
    from patchspec.cli import main

    root = copy_root(pypi_root("requests==2.31.0"))
    before = tree(root)
    said = {}
    for name in ("apply", verb):
        code = main([name, str(CVE / "requests-cve-2023-32681.yaml"), "--release", "requests-2.30.0",
                     "--root", str(root)])
        out = capsys.readouterr()
        said[name] = (code, out.out + out.err)
    assert said[verb] == said["apply"]
    code, line = said["apply"]
    assert code == 2 and "already holds every change of requests-cve-2023-32681" in line, line
    assert line.rstrip().endswith("the fix is upstream") and len(line.strip().splitlines()) == 1, line
    assert tree(root) == before
