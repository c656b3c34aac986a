# SPDX-License-Identifier: Apache-2.0
"""The two ways a stage-to-stage transfer fails; both stop the pipeline instead of
running on."""

__all__ = ["PipelineDesyncError", "PipelinePeerError"]


class PipelineDesyncError(RuntimeError):
    """A message is not the one this stage expects (wrong magic, version, sequence,
    size, layout)."""


class PipelinePeerError(RuntimeError):
    """The peer stage is dead or silent: a send, receive or all-gather failed or
    outlived its timeout."""
