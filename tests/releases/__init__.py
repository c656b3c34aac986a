"""Per-release expectations (``table.py``) and the test that holds every shipped spec to them."""

# The releases the default run covers (every other one is opt-in, ``-m releases_all``): one that takes
# the fix, one that breaks it at scheduler-admission-cap.
DEFAULT_VLLM = ("0.26.0", "0.33.0")
