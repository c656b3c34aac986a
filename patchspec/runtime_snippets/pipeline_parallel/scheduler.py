"""Microbatches for the stages of a pipeline (``Scheduler.schedule``, its RUNNING loop).

Without async scheduling the engine core keeps ``pp`` steps in flight, and a request whose step is in
flight has no token to schedule. Stock vLLM gives every running request to one step, so the next step
finds none and the stages take turns (6, 0, 6, 0, ... with six requests at size 2). Capping each step at
ceil(running / pp) running requests splits them into ``pp`` microbatches that follow each other through
the stages. ``--max-num-seqs`` still bounds the total.
"""
from __future__ import annotations


def running_cap(scheduler) -> int | None:
    """Running requests one step may schedule, or None for no cap (size 1, or async scheduling, whose
    AsyncScheduler already spaces a request's decodes ``pp`` steps apart)."""
    pp = scheduler.parallel_config.pipeline_parallel_size
    if pp == 1 or scheduler.scheduler_config.async_scheduling:
        return None
    return -(-len(scheduler.running) // pp)


def running_cap_reached(scheduler, scheduled_running_reqs: list) -> bool:
    """First statement of the RUNNING loop: stop once this step holds its microbatch."""
    cap = running_cap(scheduler)
    return cap is not None and len(scheduled_running_reqs) >= cap
