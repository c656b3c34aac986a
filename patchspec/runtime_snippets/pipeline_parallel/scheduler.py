# SPDX-License-Identifier: Apache-2.0
"""Microbatches for the stages of a pipeline (``Scheduler.schedule``: its RUNNING and
WAITING loops).

Without async scheduling the engine core keeps ``pp`` steps in flight, and a request
whose step is in flight has no token to schedule. Stock vLLM gives every running request
to one step, so the next step finds none and the stages take turns (6, 0, 6, 0, ... with
six requests at size 2). Capping each step at ceil(requests / pp) splits them into
``pp`` microbatches that follow each other through the stages.

The cap holds for admission from WAITING too: otherwise the first step admits every
waiting request and the second finds them all in flight, a bubble while the pipeline
fills. ``--max-num-seqs`` (from vLLM 0.31, ``--max-num-active-seqs`` when set) still
bounds the total over all microbatches.

The waiting requests are counted with ``Scheduler.get_request_counts``: its second queue
is ``skipped_waiting`` up to vLLM 0.30 and ``kv_holding_waiting`` from 0.31 on.

Microbatches that take turns defeat ``prev_step_scheduled_req_ids``: a request is never
in the step just before its own, so its cached data carried its whole token list
(``all_token_ids``) on every step, for workers that hold it already.
``remember_held_requests`` keeps the requests the workers hold from step to step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.request import Request

__all__ = ["admission_cap_reached", "remember_held_requests", "running_cap_reached"]

USES = {
    "vllm/v1/core/sched/scheduler.py": [
        "Scheduler.get_request_counts()",
        "Scheduler.running",
        "Scheduler.prev_step_scheduled_req_ids",
        "Scheduler.max_num_running_reqs",
        "Scheduler.parallel_config",
        "Scheduler.scheduler_config",
    ],
}


def _microbatch(scheduler: Scheduler, requests: int) -> int | None:
    """Requests one step may schedule out of ``requests``, or None for no cap (size 1,
    or async scheduling, whose AsyncScheduler already spaces a request's steps ``pp``
    apart)."""
    pp = scheduler.parallel_config.pipeline_parallel_size
    if pp == 1 or scheduler.scheduler_config.async_scheduling:
        return None
    # From vLLM 0.31 RUNNING admits at most max_num_active_reqs
    # (--max-num-active-seqs, by default max_num_seqs): the most requests the
    # microbatches can hold between them.
    running_limit = getattr(
        scheduler, "max_num_active_reqs", scheduler.max_num_running_reqs
    )
    return -(-min(requests, running_limit) // pp)


def running_cap_reached(
    scheduler: Scheduler, scheduled_running_reqs: list[Request]
) -> bool:
    """First statement of the RUNNING loop: stop once this step holds its share of the
    running requests."""
    cap = _microbatch(scheduler, len(scheduler.running))
    return cap is not None and len(scheduled_running_reqs) >= cap


def admission_cap_reached(scheduler: Scheduler, *scheduled: list[Request]) -> bool:
    """First statement of the WAITING loop: stop admitting once this step
    (``scheduled``: its running, new and resumed requests so far) holds its share of
    every request the engine could run. Admission moves a request from waiting to
    running, so the share stays the same through the loop."""
    running, waiting = scheduler.get_request_counts()
    cap = _microbatch(scheduler, running + waiting)
    return cap is not None and sum(map(len, scheduled)) >= cap


def remember_held_requests(scheduler: Scheduler) -> None:
    """Right after ``schedule`` records this step's requests in
    ``prev_step_scheduled_req_ids`` (whose cached data next step carries no
    ``all_token_ids``): at pipeline size > 1 without async scheduling, add every running
    request scheduled since it was last admitted or resumed. The workers keep such a
    request's tokens (the scheduler sends each step's new ones) until it finishes or is
    preempted, and their runners read ``all_token_ids`` only under async scheduling;
    a finished or preempted request leaves ``running`` and so the set."""
    pp = scheduler.parallel_config.pipeline_parallel_size
    if pp == 1 or scheduler.scheduler_config.async_scheduling:
        return
    step = scheduler.prev_step_scheduled_req_ids
    held: set[str] = scheduler.__dict__.setdefault("_pp_held_req_ids", set())
    held.intersection_update(request.request_id for request in scheduler.running)
    held.update(step)
    step.update(held)
