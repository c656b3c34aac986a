"""Timing a verb as a fresh ``patchspec`` process runs it, for the benchmarks of bench/."""
from __future__ import annotations

import time

from patchspec import spec
from patchspec.compiler import pattern, snippet_api
from patchspec.releases import profiles

# The per-process caches of texts a verb reads (spec, profiles, patterns, snippet files): a second verb
# in one process would find them filled, as no command a user types does.
CACHES = (pattern.parse, pattern.compile_pattern, spec.load_spec_bytes, profiles.load_profile_text,
          snippet_api.parse_source)


def cold(verb) -> tuple[float, float]:
    """(wall, CPU) seconds of ``verb`` with the per-process caches emptied first (the profile index in the
    cache directory is kept: it is kept across processes too)."""
    for cached in CACHES:
        cached.cache_clear()
    wall, cpu = time.perf_counter(), time.process_time()
    verb()
    return time.perf_counter() - wall, time.process_time() - cpu
