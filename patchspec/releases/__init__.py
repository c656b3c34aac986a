"""Releases: the profiles beside a spec, the cache of releases fetched from PyPI or git, drift against a
release, the matrix of several, and drafting a new profile."""
