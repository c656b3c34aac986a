"""Per-step host cost of vLLM's real scheduler in steady decode, for ``bench/host_cost.py``; prints one JSON document.

Run as ``python host_cost_run.py MODEL_DIR CASES_JSON`` with a release root (patched or not) first on ``sys.path``.
A case is ``{"pp": N, "requests": R, "context": C}``: R requests of C prompt tokens, fed like the engine core's
batch queue (``pp`` steps in flight) until every prompt is in, then ``DECODE_STEPS`` decode steps timed one by one,
with every request decoding (each asks for enough tokens to outlast the others' prompts): ``schedule()``, the
pickling of its output (what the executor's message queue does to send it to every worker), its size and the
requests it schedules (all of them at size 1, half at size 2). ``resent`` counts the token ids of cached requests'
``all_token_ids`` (whole lists sent again); ``readded`` the token ids a runner that keeps only the step's requests
in its persistent batch (vLLM's ``_update_states`` rule: unscheduled rows removed, returning ones added back whole)
writes again that step.
"""
from __future__ import annotations

import json
import pickle
import statistics
import sys
import time
from collections import deque

from scheduler_run import build, sampled
from vllm.v1.outputs import ModelRunnerOutput

DECODE_STEPS = 12


def run(model_dir: str, pp: int, requests: int, context: int) -> dict:
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    batched = max(1024, min(65536, context))
    # Every request still decoding when the last prompt is in: the first ones start decoding while the others
    # prefill (one token a step at most), then the timed steps take two tokens each at pipeline size 2.
    new_tokens = -(-requests * context // batched) + 2 * DECODE_STEPS + 4
    scheduler = build(model_dir, pp, False, requests, None, [[context, new_tokens]] * requests,
                      batched=batched, block=128)
    prompt = [1 + i % 200 for i in range(context)]  # small ints: one object each, shared by every list
    for i in range(requests):
        scheduler.add_request(Request(f"r{i}", prompt, SamplingParams(max_tokens=new_tokens, ignore_eos=True), None))
    lengths = {f"r{i}": context for i in range(requests)}  # tokens so far, prompt and output
    computed = dict.fromkeys(lengths, 0)
    queue: deque = deque()
    held: set[str] = set()  # the runner's persistent batch under vLLM's rule
    timed: list[dict] = []
    while len(timed) < DECODE_STEPS and (scheduler.has_requests() or queue):
        if scheduler.has_requests() and len(queue) < pp:
            start = time.perf_counter()
            out = scheduler.schedule()
            schedule_s = time.perf_counter() - start
            start = time.perf_counter()
            wire = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
            pickle_s = time.perf_counter() - start
            ids = set(out.num_scheduled_tokens)
            readded = sum(lengths[r] for r in ids - held if r not in {n.req_id for n in out.scheduled_new_reqs})
            held = ids
            prompts_in = all(r.num_computed_tokens >= context for r in scheduler.requests.values())
            decoding = prompts_in and all(n == 1 for n in out.num_scheduled_tokens.values())
            if decoding and ids:
                timed.append({"schedule_s": schedule_s, "pickle_s": pickle_s, "bytes": len(wire), "readded": readded,
                              "resent": sum(map(len, out.scheduled_cached_reqs.all_token_ids.values())),
                              "scheduled": len(ids)})
            queue.appendleft(out)
            if len(queue) < pp:
                continue
        out = queue.pop()
        ids = list(out.num_scheduled_tokens)
        for r, n in out.num_scheduled_tokens.items():
            computed[r] += n
        # a step samples for a request whose every token is now computed (not for a prompt's partial chunk)
        new = [[sampled(r, lengths[r])] if computed[r] >= lengths[r] else [] for r in ids]
        result = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                   sampled_token_ids=new)
        scheduler.update_from_output(out, result)
        for r, tokens in zip(ids, new, strict=True):
            lengths[r] += len(tokens)
    median = {key: statistics.median(step[key] for step in timed) for key in timed[0]}
    return {"pp": pp, "requests": requests, "context": context, "steps": len(timed), **median}


def main() -> None:
    model_dir, cases = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps([run(model_dir, c["pp"], c["requests"], c["context"]) for c in cases]))


if __name__ == "__main__":
    main()
