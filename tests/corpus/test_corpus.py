"""The corpus tier: each package of packages.toml patched everywhere its top-level names reach
(harness.py), judged against what its smoke program runs. Opt-in (``-m corpus``: every package); the
default run takes the packages marked ``slice``. A class of failure listed under ``[open]`` in
packages.toml (found, and carried by an open issue) is tolerated; any other fails the test."""
from __future__ import annotations

import pytest

from tests.corpus import harness


@pytest.mark.parametrize("pkg", [pytest.param(p, id=p.key, marks=pytest.mark.corpus(default=p.slice))
                                 for p in harness.packages()])
def test_every_reachable_definition_patched_as_callers_see_it(pkg, tmp_path):
    tally = harness.Run(pkg, tmp_path / pkg.key, log=lambda line: None).run()
    found = "\n".join(harness.report([tally], tally))
    assert tally.failures(tuple(harness.open_classes())) == {}, found
    # the oracle saw something: transforms applied, and hooks that fired in the patched program
    assert tally.applied > 0 and tally.fired > 0, found
