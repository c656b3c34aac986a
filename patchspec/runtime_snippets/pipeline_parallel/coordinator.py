# SPDX-License-Identifier: Apache-2.0
"""vLLM's own pipeline path through the stage transfer: the PP ``GroupCoordinator``'s
tensor dicts.

vLLM's worker (``Worker.execute_model``) sends a non-last stage's IntermediateTensors
with ``get_pp_group().isend_tensor_dict`` and receives them with ``irecv_tensor_dict``.
Stock, the metadata goes through ``send_object`` (pickle: whoever reaches the gloo port
makes the receiver unpickle), a dead peer blocks the receiver forever, and nothing
notices a pipeline out of step. On the PP coordinator (``parallel_state._PP``, more than
one stage) the wrapped methods use :class:`StageTransfer` instead:

- ``isend_tensor_dict`` copies the tensors into the transfer and returns its handle;
  vLLM waits for the returned handles a step later, as before (0.30 waits
  ``handles[1:]``, 0.26 all of them).
- ``irecv_tensor_dict`` posts the receive (gloo sends a message only once its receive
  is posted, so the tensors travel while the runner prepares the step) and returns an
  empty dict and one handle; vLLM waits for it when the runner first reads the tensors
  (``AsyncIntermediateTensors``), and the wait decodes them. ``expect_tokens``, called
  by the runner with the step's padded token count before that, is what the sender's
  count must equal.
- ``Worker.execute_model`` (wrapped with :func:`counted_worker_step`) is where every
  stage learns the step: a step with scheduled tokens is counted there on entry, before
  anything of it can fail, and it runs one forward per stage (index 0). An exception on
  a non-last stage sends an abort in place of the step's tensors, so the next stage
  stops at once with :class:`PipelineAbortError` (vLLM's executor hears only from the
  last stage; the stage that failed would go on with the next step).
- The stage's layers come from the worker's ``VllmConfig`` (``get_pp_indices``, as the
  model classes split them); the sender's last layer travels in every header. The
  handshake at start-up (``handshake.py``, on ``init_worker_distributed_environment``)
  has already compared both stages' builds and layer ranges.
- A stage that sends also watches its next stage's connection, one that receives its
  previous stage's (``StageWatch``): when that stage dies, this worker tells every
  rank, logs :class:`PipelinePeerError` and stops, so vLLM's executor, which hears only
  from the last stage, fails the engine at once (with ``wakeup.py``) instead of after
  ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``, and a headless node ends when the engine's
  node dies.
- Any rank's failure in a step reaches every rank of every stage (``notice.py``): the
  output rank raises it as the step's error, which vLLM reports, and no rank starts
  another step. ``Worker.sample_tokens`` (wrapped with :func:`sampled_unless_failed`)
  raises it too: vLLM 0.30's runner answers the sample of a failed step with an empty
  output, which the engine takes for a step that ran (it reads only ``None`` as a
  failed one) and its scheduler fails on with a ``KeyError``.

Other groups, pipeline size 1 and a residual scattered by sequence parallelism (the wire
carries whole token-major tensors only) take vLLM's own path.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.distributed as dist

from . import envs
from .errors import PipelineTransferError
from .handshake import stage_layers
from .notice import StageWatch, breakable, failure_notice
from .transfer import StageTransfer, in_step

__all__ = [
    "counted_worker_step",
    "expect_tokens",
    "routed_destroy",
    "routed_irecv_tensor_dict",
    "routed_isend_tensor_dict",
    "sampled_unless_failed",
]

class _Link:
    """A PP coordinator's transfer to and from its neighbour stages."""

    def __init__(self, group, vllm_config):
        from vllm.distributed.parallel_state import get_tp_group, get_world_group

        tp = get_tp_group()
        self.notice = failure_notice(
            get_world_group(), breakable(group) + breakable(tp)
        )
        device = torch.device(group.device)
        event = None if device.type == "cpu" else getattr(torch, device.type).Event
        layers = stage_layers(vllm_config, group.rank_in_group, group.world_size)
        self.transfer = StageTransfer(
            group,
            tp if tp.world_size > 1 else None,
            device=device,
            device_event=event,
            layers=None if layers is None else layers[:2],
            timeout_s=envs.VLLM_PP_TRANSFER_TIMEOUT_S,
            stats_every=envs.VLLM_PP_TRANSFER_STATS_EVERY,
            notice=self.notice,
        )
        self.next_stage = (group.rank_in_group + 1) % group.world_size
        self.prev_stage = (group.rank_in_group - 1) % group.world_size
        self.is_last = group.rank_in_group == group.world_size - 1
        self.watches: dict[int, StageWatch] = {}

    def watch(self, group, stage: int) -> None:
        if stage not in self.watches:
            self.watches[stage] = StageWatch(group, stage, self.notice)


def _link(
    group,
    peer: int | None,
    sending: bool,
    all_gather_tensors: dict | None,
    vllm_config=None,
) -> _Link | None:
    """The group's link when this call is stage-to-stage traffic of the PP group, else
    None. ``vllm_config``: the worker's, for the stage's layers (else vLLM's current
    one)."""
    from vllm.distributed import parallel_state

    if (
        group is None
        or group is not parallel_state._PP
        or group.world_size == 1
        or not dist.is_initialized()
    ):
        return None
    if all_gather_tensors and not all(all_gather_tensors.values()):
        # sequence parallelism scatters the residual: not token-major, vLLM's path
        return None
    link = group.__dict__.get("_patchspec_link")
    if link is None:
        if vllm_config is None:
            from vllm.config import get_current_vllm_config_or_none

            vllm_config = get_current_vllm_config_or_none()
        link = group._patchspec_link = _Link(group, vllm_config)
    if peer is not None and peer != (link.next_stage if sending else link.prev_stage):
        return None
    return link


def counted_worker_step(fn):
    """For ``wrap`` on vLLM's ``Worker.execute_model``: at pipeline size > 1 a step
    with scheduled tokens is counted on entry, on every stage; an exception on a
    non-last stage aborts the next stage's step."""

    @functools.wraps(fn)
    def execute_model(self, scheduler_output, *args, **kwargs):
        from vllm.distributed import parallel_state

        link = _link(parallel_state._PP, None, True, None, self.vllm_config)
        if link is None:
            return fn(self, scheduler_output, *args, **kwargs)
        starts = scheduler_output.total_num_scheduled_tokens > 0
        # a step without tokens runs no forward: the next stage posts no receive
        return in_step(
            link.transfer,
            starts,
            starts and not link.is_last,
            lambda: fn(self, scheduler_output, *args, **kwargs),
        )

    return execute_model


def sampled_unless_failed(fn):
    """For ``wrap`` on vLLM's ``Worker.sample_tokens``: at pipeline size > 1, after
    any rank's failure (heard, or this rank's own) raise it instead of sampling, so the
    engine reports it. vLLM's executor carries only an exception's message from the
    output rank to the engine: the message starts with the error's name."""

    @functools.wraps(fn)
    def sample_tokens(self, *args, **kwargs):
        from vllm.distributed import parallel_state

        link = _link(parallel_state._PP, None, True, None, self.vllm_config)
        if link is not None:
            try:
                link.notice.refuse()
                link.transfer.refuse_after_failure()
            except PipelineTransferError as e:
                raise type(e)(f"{type(e).__name__}: {e}") from None
        return fn(self, *args, **kwargs)

    return sample_tokens


def routed_isend_tensor_dict(fn):
    """For ``wrap`` on ``GroupCoordinator.isend_tensor_dict``."""

    @functools.wraps(fn)
    def isend_tensor_dict(
        self,
        tensor_dict: dict[str, Any],
        dst: int | None = None,
        all_gather_group=None,
        all_gather_tensors: dict[str, bool] | None = None,
    ):
        link = _link(self, dst, True, all_gather_tensors)
        if link is None:
            return fn(self, tensor_dict, dst, all_gather_group, all_gather_tensors)
        link.watch(self, link.next_stage)
        num_tokens = next(iter(tensor_dict.values())).shape[0]
        handle = link.transfer.isend(dict(tensor_dict), num_tokens)
        # vLLM 0.30 waits handles[1:] (the tensor sends) and reaps handles[0] (the
        # metadata) itself; one message carries both here, and waiting twice is
        # harmless.
        return [handle, handle]

    return isend_tensor_dict


class _PendingRecv:
    """The handle ``irecv_tensor_dict`` returns: waiting receives the message into
    ``tensors``."""

    def __init__(self, link: _Link, tensors: dict[str, torch.Tensor]):
        self._link = link
        self._tensors = tensors
        self._done = False
        self.expected_tokens: int | None = None

    def wait(self) -> None:
        if not self._done:
            self._done = True
            self._tensors.update(self._link.transfer.recv(self.expected_tokens))

    def is_completed(self) -> bool:
        return self._done


def routed_irecv_tensor_dict(fn):
    """For ``wrap`` on ``GroupCoordinator.irecv_tensor_dict``."""

    @functools.wraps(fn)
    def irecv_tensor_dict(
        self,
        src: int | None = None,
        all_gather_group=None,
        all_gather_tensors: dict[str, bool] | None = None,
    ):
        link = _link(self, src, False, all_gather_tensors)
        if link is None:
            return fn(self, src, all_gather_group, all_gather_tensors)
        link.watch(self, link.prev_stage)
        link.transfer.post_recv()  # the message may come while the runner prepares
        tensors: dict[str, torch.Tensor] = {}
        return tensors, [_PendingRecv(link, tensors)], []

    return irecv_tensor_dict


def expect_tokens(intermediate_tensors, num_tokens: int) -> None:
    """Where the runner knows the step's padded token count, before it reads the
    received tensors: the previous stage must have sent exactly that many."""
    for handle in getattr(intermediate_tensors, "_comm_handles", None) or ():
        if isinstance(handle, _PendingRecv):
            handle.expected_tokens = num_tokens


def routed_destroy(fn):
    """For ``wrap`` on ``GroupCoordinator.destroy``: the watched connection closes now
    on purpose."""

    @functools.wraps(fn)
    def destroy(self):
        link = self.__dict__.get("_patchspec_link")
        if link is not None:
            link.notice.closing = True
            for watch in link.watches.values():
                watch.closing = True
        return fn(self)

    return destroy
