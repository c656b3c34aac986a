"""What each vLLM release from 0.24.0 on is expected to make of the shipped specs, written from reading
that release's sources (and the paired vllm-gaudi source), not from the tool's output.

One row per release on PyPI. ``gaudi`` is the vllm-gaudi git ref paired with it (the nearest source).
Per spec: ``profile`` is the release profile that must be picked by ``--release auto`` (None: the spec
is obsolete there or has no profile, and ``why`` says so), ``breaks`` maps each target that cannot hold
on that release to the reason read in its source (empty: every anchor and binding holds, so
``patchspec check`` exits 1 on the pristine root), and ``notes`` says what a profile override had to
change and why (empty when the spec's own form holds).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Outcome:
    profile: str | None
    breaks: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    why: str = ""


@dataclass(frozen=True)
class Release:
    vllm: str
    gaudi: str
    specs: dict[str, Outcome]


ROWS: list[Release] = [
    # 0.24.0
    # 0.25.0
    # 0.25.1
    # 0.26.0
    # 0.27.0
    # 0.27.1
    # 0.28.0
    # 0.29.0
    # 0.30.0
    # 0.31.0
    # 0.32.0
    # 0.33.0
]
