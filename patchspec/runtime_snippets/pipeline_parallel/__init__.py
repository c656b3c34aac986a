# SPDX-License-Identifier: Apache-2.0
"""Pipeline parallelism over the host network: the hooks that patched vLLM and
vllm-gaudi files call.

Every name listed here is a hook a spec may name as ``_pp.<name>``. Each is inert at
pipeline size 1. Submodules import vLLM lazily: these hooks are imported while vLLM's
own modules are being imported.
"""

# --- stage-to-stage transfer (transfer.py) and the start-up handshake ---
from .errors import (
    PipelineAbortError,
    PipelineDesyncError,
    PipelineHandshakeError,
    PipelinePeerError,
    PipelineTransferError,
)
from .transfer import SendHandle, StageTransfer
from .handshake import handshake_at_start_up

# --- vLLM's own pipeline path: the PP GroupCoordinator's tensor dicts ---
# (coordinator.py)
from .coordinator import (
    counted_worker_step,
    expect_tokens,
    routed_destroy,
    routed_irecv_tensor_dict,
    routed_isend_tensor_dict,
)
from .wakeup import woken_on_shutdown

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
from .async_scheduling import async_scheduling_off_for_pipeline
from .startup import refuse_at_startup
from .scheduler import (
    admission_cap_reached,
    remember_held_requests,
    running_cap_reached,
)

# --- HPU runner, HPU graphs and worker start-up (runner.py, graphs.py, worker.py) ---
from .buckets import bound_buckets_to_microbatch
from .graphs import intermediate_tensors_iter, stage_output, take_intermediate_tensors
from .runner import (
    aborts_next_stage,
    counted_step,
    kv_cache_bytes_less_transfer,
    non_last_stage_output,
    sent_to_next_stage,
    skip_on_non_last_stage,
    stage_input,
)
from .worker import checked_world_without_hccl
