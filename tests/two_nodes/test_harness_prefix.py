"""The tier's namespace prefix comes from PATCHSPEC_NODES_PREFIX, so two runs at once never remove each
other's nodes (``remove_stale`` ends whatever carries this run's prefix). Needs no root: it checks the names
the harness would create and claim."""
from __future__ import annotations

import importlib

import pytest
import two_nodes_harness as t

LISTING = "psi14n0 (id: 3)\npsi14n1 (id: 4)\nh30b0 (id: 5)\nh30b1\npsi14nb0 (id: 7)\n"


def test_default_prefix_is_unchanged():
    assert t.prefix({}) == "psi14n"


def test_prefix_from_the_environment_names_every_namespace_and_link(monkeypatch):
    monkeypatch.setenv("PATCHSPEC_NODES_PREFIX", "h30b")
    try:
        fresh = importlib.reload(t)
        assert [(n.netns, n.ifname) for n in fresh.NODES] == [("h30b0", "h30b0v"), ("h30b1", "h30b1v")]
        assert fresh.ours(LISTING) == ["h30b0", "h30b1"]
    finally:
        monkeypatch.delenv("PATCHSPEC_NODES_PREFIX")
        importlib.reload(t)


def test_stale_removal_claims_only_this_prefix_s_nodes():
    """``psi14n`` leaves ``psi14nb0`` (a run whose prefix is ``psi14nb``) and ``h30b*`` alone."""
    assert t.ours(LISTING, "psi14n") == ["psi14n0", "psi14n1"]
    assert t.ours(LISTING, "psi14nb") == ["psi14nb0"]


@pytest.mark.parametrize("bad", ["", "Psi", "9ab", "a-b", "abcdefghijklmn"])
def test_a_prefix_no_veth_name_can_carry_is_refused(bad):
    with pytest.raises(ValueError, match="PATCHSPEC_NODES_PREFIX"):
        t.prefix({"PATCHSPEC_NODES_PREFIX": bad})
