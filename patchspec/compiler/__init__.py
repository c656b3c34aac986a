"""The libcst compiler: resolves a spec's anchors on one release's sources and emits the patched text.

It knows nothing of vLLM; every fact about the code it patches comes from the spec.
"""
