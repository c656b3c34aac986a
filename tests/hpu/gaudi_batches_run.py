"""vllm-gaudi's own persistent batch fed by vLLM's real scheduler at pipeline size 2; prints one JSON document.

``python gaudi_batches_run.py MODEL_DIR PP [DRAFTS]`` with a root holding vLLM and vllm-gaudi, both patched by the
pipeline-parallel spec, first on ``sys.path`` (and tests/vllm for its scheduler driver). What runs is
vllm-gaudi's: ``InputBatch`` from ``hpu_input_batch.py`` (its patched constructor) and the patched
``HPUModelRunner._update_states`` (``gaudi_runner.py``). Two such runners, stage 0 and the last stage, take
every scheduler output of the patched scheduler (the microbatch cap, ``pp`` steps in flight as the engine's
batch queue keeps them).

Per step and stage: the rows added and removed (counted on ``InputBatch``, the test's hook), whether the
step is steady (admits, retires and resumes nothing, and every request ran before), whether the batch the
runner then holds is exactly the step's requests, and whether stage 0's rows and its record of each request
(``requests``: prompt and output tokens) hold the request's tokens, and how many tokens the scheduler counted
computed that the stage's record lacked before the step (``behind``: the drafts the last stage accepted). With
``DRAFTS`` (K > 0) the scheduler has an n-gram config of K tokens; the "last stage" accepts a number of each
step's drafts derived from the request and proposes K new ones, handed to the scheduler after the step's
output (scheduler_run.py).
"""
from __future__ import annotations

import json
import sys
from collections import deque

from gaudi_runner import InputBatch, Runner
from scheduler_run import build, hand_drafts, sampled
from vllm.sampling_params import SamplingParams
from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
from vllm.v1.request import Request

REQUESTS, PROMPT, MAX_TOKENS, MAX_SEQS, MAX_LEN = 8, 40, 16, 8, 256
ROWS: list[str] = []  # "add" / "remove" per row, this step


def _counted(name: str) -> None:
    method = getattr(InputBatch, name)

    def counted(self, *args, **kwargs):
        ROWS.append(name)
        return method(self, *args, **kwargs)
    setattr(InputBatch, name, counted)


def run(model_dir: str, pp: int, drafts: int) -> list:
    _counted("add_request")
    _counted("remove_request")
    scheduler = build(model_dir, pp, False, MAX_SEQS, None, [[PROMPT, MAX_TOKENS]] * REQUESTS, drafts=drafts)
    for i in range(REQUESTS):
        prompt = [1 + (7 * i + j) % 300 for j in range(PROMPT)]
        scheduler.add_request(Request(f"r{i}", prompt, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True), None))
    # stage 0 and the last stage
    runners = [Runner(pp, rank, MAX_SEQS, MAX_LEN, scheduler.vllm_config.speculative_config) for rank in range(2)]
    seen: set[str] = set()
    steps, queue = [], deque()
    while scheduler.has_requests() or queue:
        if scheduler.has_requests() and len(queue) < pp:
            out = scheduler.schedule()
            ids = set(out.num_scheduled_tokens)
            step = {"steady": bool(ids) and ids <= seen and not out.scheduled_new_reqs and not out.finished_req_ids
                    and not out.scheduled_cached_reqs.resumed_req_ids, "stages": []}
            seen |= ids
            for runner in runners:
                ROWS.clear()
                # tokens the scheduler counts computed that this stage's record lacks (accepted drafts)
                cached = out.scheduled_cached_reqs
                held = {r: len(q.prompt_token_ids) + len(q.output_token_ids) for r, q in runner.requests.items()}
                computed = zip(cached.req_ids, cached.num_computed_tokens, strict=True)
                behind = sum(max(0, c - held[r]) for r, c in computed if r in held)
                runner._update_states(out)
                batch = runner.input_batch
                # each request's tokens up to those the step runs, its drafts left out
                known = {r: scheduler.requests[r].all_token_ids[:n + out.num_scheduled_tokens[r] - len(
                    out.scheduled_spec_decode_tokens.get(r, ()))] for r in ids
                    for n in [runner.requests[r].num_computed_tokens]}
                tokens_ok = all(batch.token_ids_cpu[batch.req_id_to_index[r], :len(known[r])].tolist() == known[r]
                                for r in ids)
                state_ok = all(runner.requests[r].prompt_token_ids + runner.requests[r].output_token_ids == known[r]
                               for r in ids)
                step["stages"].append({"added": ROWS.count("add_request"), "removed": ROWS.count("remove_request"),
                                       "holds_the_step": set(batch.req_id_to_index) == ids, "tokens_ok": tokens_ok,
                                       "state_ok": state_ok, "behind": behind})
            steps.append(step)
            queue.appendleft(out)
            if len(queue) < pp:
                continue
        out = queue.pop()
        ids = list(out.num_scheduled_tokens)
        new = []
        for r in ids:
            request = scheduler.requests[r]
            done = request.num_computed_tokens >= request.num_prompt_tokens
            ran = len(out.scheduled_spec_decode_tokens.get(r, ()))
            accepted = sampled(r, request.num_tokens) % (ran + 1)
            new.append([sampled(r, request.num_tokens + j) for j in range(accepted + 1)] if done else [])
        result = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                   sampled_token_ids=new)
        scheduler.update_from_output(out, result)
        if drafts:
            live = [r for r in ids if r in scheduler.requests]  # not finished
            proposed = [[sampled(r, scheduler.requests[r].num_tokens + j) for j in range(drafts)] for r in live]
            hand_drafts(scheduler, result, DraftTokenIds(live, proposed))
    return steps


def main() -> None:
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)))


if __name__ == "__main__":
    main()
