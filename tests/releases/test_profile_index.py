"""The index of profile pins in the cache directory: ``--release auto`` reads each profile's pins from it by
the profile's text, so an edited profile is read again and a broken one is refused as before."""
from __future__ import annotations

import json

import pytest

from patchspec.errors import PatchspecError
from patchspec.releases import profiles


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHSPEC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_an_edited_profile_is_read_again_not_served_from_the_index(tmp_path, cache):
    releases = tmp_path / "releases"
    releases.mkdir()
    (releases / "r1.yaml").write_text("release: r1\npackages: {pkg: '==1.0'}\n")
    assert str(profiles.all_pins(releases)["r1"].packages["pkg"].versions) == "==1.0"
    assert len(json.loads((cache / profiles.INDEX_FILE).read_text())["entries"]) == 1

    (releases / "r1.yaml").write_text("release: r1\npackages: {pkg: '==2.0'}\n")
    assert str(profiles.all_pins(releases)["r1"].packages["pkg"].versions) == "==2.0"


def test_a_broken_profile_beside_indexed_ones_is_still_refused(tmp_path, cache):
    releases = tmp_path / "releases"
    releases.mkdir()
    (releases / "r1.yaml").write_text("release: r1\npackages: {pkg: '==1.0'}\n")
    profiles.all_pins(releases)
    (releases / "r2.yaml").write_text("release: r2\npackages: {pkg: 'not a specifier'}\n")
    with pytest.raises(PatchspecError, match="is not a version specifier"):
        profiles.all_pins(releases)


def test_an_index_of_another_format_or_unreadable_is_ignored(tmp_path, cache):
    releases = tmp_path / "releases"
    releases.mkdir()
    (releases / "r1.yaml").write_text("release: r1\nspecs: {toy: {}}\npackages: {pkg: '>=1,<2'}\n")
    cache.mkdir()
    (cache / profiles.INDEX_FILE).write_text("{not json")
    pins = profiles.all_pins(releases)["r1"]
    assert pins.covers("toy") and not pins.covers("other")
    index = json.loads((cache / profiles.INDEX_FILE).read_text())
    index["schema"] = "another"
    (cache / profiles.INDEX_FILE).write_text(json.dumps(index))
    assert profiles.all_pins(releases)["r1"] == pins
