"""Pipeline stages of the fixture HPU runner in real processes, talking over gloo on 127.0.0.1.

The parent plays vLLM's engine core: it schedules each step, hands the same scheduler output to every
stage (``execute_model`` then ``sample_tokens``), takes the sampled tokens from the last stage and
returns them to the other stages with the next step, as vLLM's scheduler does under pipeline parallelism.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import queue
import socket
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

TIMEOUT_S = 60.0  # one step, or one transfer
START_S = 600.0  # spawning and importing, on a machine that may be busy with other work


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tp2_rank(root: str, rank: int, port: int):
    """In a spawned rank of a pipeline 2 x tensor parallel 2 world: ``root`` importable, vLLM's world over gloo
    on 127.0.0.1, and the configuration its stages read. Returns vLLM's ``parallel_state`` and ``config``
    modules and that configuration."""
    sys.path.insert(0, root)
    parallel_state = importlib.import_module("vllm.distributed.parallel_state")
    config_module = importlib.import_module("vllm.config")
    parallel_state.init_distributed_environment(4, rank, f"tcp://127.0.0.1:{port}", rank, backend="gloo")
    config = types.SimpleNamespace(
        parallel_config=types.SimpleNamespace(pipeline_parallel_size=2, tensor_parallel_size=2,
                                              data_parallel_size=1, world_size=4),
        scheduler_config=types.SimpleNamespace(async_scheduling=False),
        device_config=types.SimpleNamespace(device="cpu"))
    return parallel_state, config_module, config


def run_world(world: int, rank_main, *args) -> dict:
    """Rank -> what ``rank_main(*args, rank, port, results, done)`` put on ``results`` as ``(rank, value)``,
    for ``world`` spawned ranks; a value that is a string is a rank's traceback and fails the caller. The
    ranks stay until every one has answered (``done``: a rank gone early is a dead stage to its peers), and
    are stopped on every path."""
    ctx = mp.get_context("spawn")
    results, done, port = ctx.Queue(), ctx.Event(), free_port()
    procs = [ctx.Process(target=rank_main, args=(*args, r, port, results, done), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    got = {}
    try:
        while len(got) < world:
            rank, value = results.get(timeout=START_S)
            assert not isinstance(value, str), value
            got[rank] = value
    except queue.Empty:
        raise TimeoutError(f"ranks {sorted(set(range(world)) - set(got))} did not finish: {got}") from None
    finally:
        done.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    return got


def load_sequence(root):
    """The root's ``vllm/sequence.py`` as a module of its own: the fixture needs nothing else of vLLM,
    whose package import costs seconds per process and can happen only once per process."""
    spec = importlib.util.spec_from_file_location("vllm.sequence", Path(root) / "vllm" / "sequence.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def import_root(root) -> None:
    """Make a root's modules importable in this (child) process."""
    sys.path.insert(0, str(root))
    sys.modules["vllm.sequence"] = load_sequence(root)


@dataclass
class StageReport:
    """What one stage did in one step."""
    output: object
    calls: list
    forwards: list
    messages: int  # transfer messages so far, sent or received
    rows: list  # the persistent-batch rows added and removed: ("add" or "remove", request)
    drafts: dict | None = None  # the drafts the step's output carries for the engine, per request


def _drafts_of(output) -> dict | None:
    drafts = getattr(output, "pp_draft_token_ids", None)
    return None if drafts is None else dict(zip(drafts.req_ids, drafts.draft_token_ids, strict=True))


def _portable(output):
    """What the parent can unpickle without vLLM: the fixture's sampled tokens, or the name of vLLM's
    empty output (what upstream's non-last ranks return without KV-connector results)."""
    if output is None or isinstance(output, dict):
        return None if output is None else dict(output)
    empty = sys.modules["vllm.v1.outputs"].EMPTY_MODEL_RUNNER_OUTPUT
    return "EMPTY_MODEL_RUNNER_OUTPUT" if output is empty else repr(output)


class _Lines(logging.Handler):
    """The snippets' log lines (``vllm.patchspec.*``) of one stage process, in order."""

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _stage_main(root, rank, pp, port, inbox, outbox, options):
    logged = _Lines()
    try:
        os.environ.update(options.get("env", {}))
        import_root(root)
        runner_module = importlib.import_module("vllm_gaudi.v1.worker.hpu_model_runner")
        parallel = runner_module.ParallelConfig(pipeline_parallel_size=pp, pp_rank=rank)
        speculative = options.get("speculative")  # the keywords of a speculative config, if any
        config = runner_module.VllmConfig(parallel_config=parallel, speculative_config=speculative and
                                          types.SimpleNamespace(**speculative))
        runner = runner_module.HPUModelRunner(config, flatten_input=options.get("flatten", False))
        runner.dp_padding = options.get("dp_padding", False)
        runner.use_merged_prefill = rank in options.get("merged_prefill_on", ())
        transfer = None
        if pp > 1:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=pp,
                                    timeout=timedelta(seconds=START_S))
            snippets = importlib.import_module("_patchspec_runtime.pipeline_parallel.runner")
            transfer = snippets.StageTransfer(dist.group.WORLD, timeout_s=options.get("timeout_s", TIMEOUT_S / 2))
            snippets.STAGES[runner] = snippets.Stage(rank == 0, rank == pp - 1, transfer)
            if rank < pp - 1:  # a non-last stage returns vLLM's output type: import it now, not in a step
                importlib.import_module("vllm.v1.outputs")
        if rank in options.get("warmup_fails_on", ()):
            _fail_in_warmup(runner)
        logging.getLogger("vllm.patchspec").addHandler(logged)  # after vLLM's logging set-up
        outbox.put((rank, "ready", None))
        while (msg := inbox.get()) is not None:
            kind, payload = msg
            if kind == "warmup":
                runner.warmup_model()
                output = None
            elif kind == "load":  # what the stage drafts with once its model is loaded
                runner.load_model()
                output = {"draft": getattr(getattr(runner, "drafter", None), "model", None)}
            else:
                runner.execute_model(runner_module.SchedulerOutput(**payload))
                output = runner.sample_tokens(None)
            report = StageReport(_portable(output), runner.calls[:], runner.forwards[:],
                                 transfer.stats.messages if transfer else 0, runner.rows[:], _drafts_of(output))
            runner.calls.clear()
            runner.forwards.clear()
            runner.rows.clear()
            outbox.put((rank, kind, report))
    except BaseException:
        outbox.put((rank, "error", traceback.format_exc() + "log:\n" + "\n".join(logged.lines)))
        while inbox.get() is not None:  # alive until stopped: what it sent its neighbours still arrives
            outbox.put((rank, "error", "stopped by an earlier error"))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _fail_in_warmup(runner) -> None:
    """The stage's model raises in its first forward, the warm-up's, as a graph capture out of device memory
    does."""

    def failing(*args, **kwargs):
        raise MemoryError("out of device memory in graph capture (test)")

    runner.get_model().forward = failing


class Pipeline:
    """``pp`` stage processes over the root's (patched) fixture runner; use as a context manager."""

    def __init__(self, root, pp: int, **options):
        self.pp = pp
        ctx = mp.get_context("spawn")
        self._outbox = ctx.Queue()
        self._inboxes = [ctx.Queue() for _ in range(pp)]
        port = free_port()
        self._procs = [ctx.Process(target=_stage_main, args=(str(root), r, pp, port, self._inboxes[r],
                                                             self._outbox, options), daemon=True)
                       for r in range(pp)]
        for p in self._procs:
            p.start()
        self._collect(range(pp), "ready", START_S)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for inbox in self._inboxes:
            inbox.put(None)
        for p in self._procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()

    def run(self, kind: str, payload=None, ranks=None) -> dict[int, StageReport]:
        ranks = list(range(self.pp)) if ranks is None else ranks
        for r in ranks:
            self._inboxes[r].put((kind, payload))
        return self._collect(ranks, kind)

    def _collect(self, ranks, kind, timeout_s=TIMEOUT_S) -> dict:
        got, deadline = {}, time.monotonic() + timeout_s
        while len(got) < len(ranks):
            try:
                rank, what, value = self._outbox.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"stages {sorted(set(ranks) - set(got))} did not finish {kind}") from None
            if what == "error":
                raise RuntimeError(f"stage {rank} failed:\n{value}")
            got[rank] = value
        return got


@dataclass
class Step:
    """One scheduled step and what each stage reported."""
    num_prompts: int  # requests still in their prompt this step
    num_decodes: int
    reports: dict = field(default_factory=dict)
    payload: dict = field(default_factory=dict)  # the scheduler output the stages got


def generate(pipeline: Pipeline, prompts: dict, arrivals: dict | None = None, chunk: int = 3,
             max_tokens: int = 4, microbatches: int = 1) -> list[Step]:
    """Greedy generation of ``max_tokens`` per prompt with chunked prefill; request ``r`` joins at step
    ``arrivals[r]``. With ``microbatches`` m, as under the scheduler's cap, step k runs only the requests
    that joined at a step k' with k' = k mod m (finished requests are retired at any step)."""
    arrivals = arrivals or {}
    waiting, running, steps = dict(prompts), {}, []
    unsent: dict = {}  # tokens sampled since a request's last step, for the stages that do not sample
    turns: dict = {}
    while waiting or running:
        step = len(steps)
        new = {r: p for r, p in waiting.items() if arrivals.get(r, 0) <= step}
        finished = {r for r, (_, out) in running.items() if len(out) >= max_tokens}
        for r in new:
            del waiting[r]
            running[r] = [0, []]
            turns[r] = step % microbatches
        scheduled, computed = {}, {}
        for r, (done, out) in running.items():
            if r in finished or turns[r] != step % microbatches:
                continue
            prompt_len = len(prompts[r])
            scheduled[r] = min(chunk, prompt_len - done) if done < prompt_len else prompt_len + len(out) - done
            if r not in new:
                computed[r] = done
        payload = dict(num_scheduled_tokens=scheduled, new_reqs={r: list(prompts[r]) for r in new},
                       num_computed_tokens=computed, finished_req_ids=finished,
                       new_token_ids={r: unsent.pop(r) for r in computed if r in unsent})
        record = Step(sum(running[r][0] < len(prompts[r]) for r in scheduled),
                      sum(running[r][0] >= len(prompts[r]) for r in scheduled))
        record.payload = payload
        record.reports = pipeline.run("step", payload)
        steps.append(record)
        for r in finished:
            del running[r]
        sampled = record.reports[pipeline.pp - 1].output or {}
        for r, n in scheduled.items():
            running[r][0] += n
        for r, tokens in sampled.items():
            running[r][1].extend(tokens)
            unsent.setdefault(r, []).extend(tokens)
    return steps


def outputs_of(steps: list[Step], last_rank: int) -> dict:
    """Every token the last stage sampled, per request."""
    tokens: dict = {}
    for step in steps:
        for r, t in (step.reports[last_rank].output or {}).items():
            tokens.setdefault(r, []).extend(t)
    return tokens

