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
- A stage that sends also watches its next stage's connection (``_Watch``): when that
  stage dies, this worker logs :class:`PipelinePeerError` and stops, so vLLM's executor,
  which hears only from the last stage, fails the engine at once (with ``wakeup.py``)
  instead of after ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``.

Other groups, pipeline size 1 and a residual scattered by sequence parallelism (the wire
carries whole token-major tensors only) take vLLM's own path.
"""

from __future__ import annotations

import functools
import threading
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from . import envs
from .errors import PipelinePeerError
from .handshake import stage_layers
from .stopping import stop_worker
from .transfer import StageTransfer, in_step

__all__ = [
    "counted_worker_step",
    "expect_tokens",
    "routed_destroy",
    "routed_irecv_tensor_dict",
    "routed_isend_tensor_dict",
]

# Never sent on: a receive posted on it ends only when the peer's connection does.
_WATCH_TAG = 0x5051
_WATCH_FOREVER = timedelta(days=30)


class _Watch:
    """A receive from the next stage that no message ever completes: it fails when that
    stage's connection closes, and then stops this worker (unless the group is being
    destroyed)."""

    def __init__(self, group, next_stage: int):
        self.closing = False
        self._next_stage = next_stage
        self._work = dist.irecv(
            torch.empty(1, dtype=torch.int64),
            group=group.cpu_group,
            group_src=next_stage,
            tag=_WATCH_TAG,
        )
        threading.Thread(
            target=self._run, daemon=True, name="PipelineStageWatch"
        ).start()

    def _run(self) -> None:
        try:
            self._work.wait(_WATCH_FOREVER)
        except RuntimeError as e:
            if not self.closing:
                stop_worker(
                    PipelinePeerError(
                        f"pipeline transfer: pipeline stage {self._next_stage} is gone "
                        f"(its connection closed): {e}"
                    )
                )


class _Link:
    """A PP coordinator's transfer to and from its neighbour stages."""

    def __init__(self, group, vllm_config):
        from vllm.distributed.parallel_state import get_tp_group

        tp = get_tp_group()
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
        )
        self.next_stage = (group.rank_in_group + 1) % group.world_size
        self.prev_stage = (group.rank_in_group - 1) % group.world_size
        self.is_last = group.rank_in_group == group.world_size - 1
        self.watch: _Watch | None = None

    def watch_next(self, group) -> None:
        if self.watch is None:
            self.watch = _Watch(group, self.next_stage)


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
        link.watch_next(self)
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
        if link is not None and link.watch is not None:
            link.watch.closing = True
        return fn(self)

    return destroy
