# SPDX-License-Identifier: Apache-2.0
"""Pipeline parallelism over the host network: the hooks that patched vLLM and
vllm-gaudi files call.

Every name listed here is a hook a spec may name as ``_pp.<name>``. Each is inert at
pipeline size 1. Submodules import vLLM lazily: these hooks are imported while vLLM's
own modules are being imported.
"""

# --- async scheduling: drafts to the earlier stages (async_drafts.py) ---
from .async_drafts import (
    align_stage_outputs,
    receive_drafts,
    send_drafts,
    take_stage_drafts,
    tokens_after_drafts,
)

# --- stage-to-stage transfer (transfer.py) and the start-up handshake ---
from .async_scheduling import async_scheduling_off_for_pipeline

# --- the runners' persistent batches, one per microbatch (batches.py) ---
from .batches import batch_per_microbatch, remembers_arguments

# --- HPU runner, HPU graphs and worker start-up (runner.py, graphs.py, worker.py) ---
from .buckets import bound_buckets_to_microbatch

# --- vLLM's own pipeline path: the PP GroupCoordinator's tensor dicts ---
# (coordinator.py)
from .coordinator import (
    counted_worker_step,
    expect_tokens,
    routed_destroy,
    routed_irecv_tensor_dict,
    routed_isend_tensor_dict,
    sampled_unless_failed,
)

# --- speculative decoding: the draft on the last stage (drafts.py) ---
from .drafts import draft_on_last_stage, hpu_drafts_with_output
from .errors import (
    PipelineAbortError,
    PipelineDesyncError,
    PipelineHandshakeError,
    PipelinePeerError,
    PipelineTransferError,
)
from .graphs import intermediate_tensors_iter, stage_output, take_intermediate_tensors
from .handshake import handshake_at_start_up

# --- scheduler microbatches and per-stage loading (scheduler.py, loader.py) ---
from .loader import (
    mmap_checkpoint,
    owned_bytes,
    owned_files,
    owned_tensors,
    owned_weights_only,
    owns_weight,
    prefetch_share,
    prefetched_owned_spans,
    skip_unowned_layers,
)
from .partition import refuse_split_shared_state
from .runner import (
    aborts_next_stage,
    counted_step,
    handshake_after_warm_up,
    kv_cache_bytes_less_transfer,
    non_last_stage_output,
    sent_to_next_stage,
    skip_on_non_last_stage,
    stage_input,
)
from .scheduler import (
    admission_cap_reached,
    remember_held_requests,
    running_cap_reached,
)

# --- speculative decoding: the draft on the last stage only (speculative.py) ---
from .speculative import (
    drafts_here,
    drafts_ride_with_outputs,
    drafts_with_output,
    take_accepted_drafts,
    take_drafts_of_output,
)
from .startup import refuse_at_startup
from .transfer import SendHandle, StageTransfer
from .wakeup import woken_on_shutdown

# --- a draft model whole on the last stage (whole_draft_model.py) ---
from .whole_draft_model import whole_draft_model
from .worker import checked_world_without_hccl
