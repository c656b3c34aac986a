# SPDX-License-Identifier: Apache-2.0
"""How a stage-to-stage transfer fails; every kind stops the pipeline instead of running
on."""

__all__ = [
    "PipelineAbortError",
    "PipelineDesyncError",
    "PipelineHandshakeError",
    "PipelinePeerError",
    "PipelineTransferError",
]


class PipelineTransferError(RuntimeError):
    """Any of the errors below: after one, the transfer refuses every later call."""


class PipelineDesyncError(PipelineTransferError):
    """A message is not the one this stage expects (wrong magic, version, sequence,
    step, forward, layer, size, layout)."""


class PipelinePeerError(PipelineTransferError):
    """The peer stage is dead or silent: a send, receive or all-gather failed or
    outlived its timeout."""


class PipelineAbortError(PipelineTransferError):
    """The previous stage failed in a step and said so on the wire, instead of the
    step's tensors."""


class PipelineHandshakeError(PipelineTransferError):
    """At start-up, the neighbour stage runs another build of the transfer or a
    partition of the layers that does not meet this stage's."""
