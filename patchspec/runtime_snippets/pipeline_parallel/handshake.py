# SPDX-License-Identifier: Apache-2.0
"""The stages' handshakes at start-up and after warm-up: same build of the transfer,
layers that meet, every setting that must match.

Each node reads its own ``VLLM_PP_LAYER_PARTITION`` and runs its own copy of the fix, so
two nodes configured differently would run layers twice or skip them, or decode each
other's messages by different rules, with matching token counts and no error. Right
after the model-parallel groups exist (``init_worker_distributed_environment``, wrapped
with :func:`handshake_at_start_up`), every pipeline rank sends its neighbour stages one
small message and checks theirs: the wire version, a digest of this package's sources
(the build), the pipeline and tensor-parallel sizes, the message size limit, the number
of layers and the stage's layer range, which must start where the previous stage's
ends. Any difference refuses to start with :class:`PipelineHandshakeError` naming both
sides. The messages use tags of their own, outside the transfer's sequence.

After warm-up (``runner.handshake_after_warm_up``) the stages shake hands again over
what only then is known: the final bucket lists (each stage pads a step with its own
bucketing manager, so two lists that differ pad one batch to different shapes),
vllm-gaudi's own settings as its runtime configuration read them, the contents of a
bucket file, and the identity of the checkpoint each stage loaded (``weights.py``). A
stage returns from warm-up only once its neighbours have warmed up too; one whose
warm-up failed tells them, and they stop with its error instead of waiting.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist

from . import envs
from ._logging import get_logger
from .errors import PipelineHandshakeError
from .groups import as_group
from .readiness import serve_stage
from .rendezvous import refusals_shared
from .weights import checkpoint_identity, first_difference
from .wire import MAGIC, VERSION

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = [
    "build_id",
    "handshake",
    "handshake_at_start_up",
    "stage_layers",
    "start_up_settings",
    "warmed_up_settings",
]

logger = get_logger(__name__)

# What the start-up wrapper uses of the modules it wraps (see runner.py).
USES = {
    "vllm_gaudi/v1/worker/hpu_worker.py": ["get_pp_group()"],
    "vllm/v1/worker/gpu_worker.py": ["get_pp_group()"],
    "vllm_gaudi/extension/bucketing/common.py": [
        "HPUBucketingManager.prompt_buckets",
        "HPUBucketingManager.decode_buckets",
    ],
    "vllm_gaudi/extension/runtime.py": ["get_config()", "USER_FLAGS"],
}

HANDSHAKE_TAG = 0x5052
# each phase's two messages (facts, settings) have tags of their own
_TAGS = {"start-up": HANDSHAKE_TAG, "warm-up": HANDSHAKE_TAG + 2}
WEIGHTS = "model weights"  # compared on what both stages hold (weights.py)
FAILED = "failed"  # a stage whose warm-up failed sends only this
# what to set alike when a setting that is not itself a flag differs
_FIXES = {
    "prompt buckets": "bucketing settings and bucket file",
    "decode buckets": "bucketing settings and bucket file",
    WEIGHTS: "checkpoint (--model, --revision)",
}
_FIELDS = (
    "magic",
    "version",
    "build",
    "stage",
    "stages",
    "tp_size",
    "start",
    "end",
    "num_layers",
    "max_message_bytes",
)
_WORDS = 16
_SETTINGS_BYTES = 1 << 18  # a checkpoint's file list fits
# vllm-gaudi's bucketing variables: VLLM_{PROMPT,DECODE}_{BS,SEQ,BLOCK,CTX}_BUCKET_*,
# the bucket file, contiguous PA and merged prefill
_BUCKETING = re.compile(
    r"VLLM_\w+_BUCKET_\w+|VLLM_BUCKETING_\w+|VLLM_CONTIGUOUS_PA|VLLM_MERGED_PREFILL"
    r"|VLLM_EXPONENTIAL_BUCKETING"
)
_DONE: set[tuple[int, str]] = set()  # (id of a pipeline cpu group, phase) checked
_FAILURE_SENDS: list[Any] = []  # a failed stage's messages, alive until delivered


@functools.cache
def build_id() -> int:
    """A digest of this package's Python sources and of every file of the root that
    patchspec patched (as they are now, read from its state record): two nodes with
    different builds of the fix, or a spec applied on one of them only, differ here."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for path in sorted(here.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for name, data in _patched_files(here.parent.parent):
        h.update(name.encode() + b"\0" + data + b"\0")
    return int.from_bytes(h.digest()[:8], "little") >> 1


def _patched_files(root: Path) -> list[tuple[str, bytes]]:
    """The patched files patchspec's state record in ``root`` names, inside ``root``
    only (the record is read as untrusted); none without a record."""
    try:
        files = json.loads((root / ".patchspec" / "state.json").read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    out = []
    for name in sorted(files) if isinstance(files, dict) else ():
        path = (root / name).resolve()
        if path.is_relative_to(root.resolve()) and path.is_file():
            out.append((name, path.read_bytes()))
    return out


def start_up_settings(vllm_config: Any) -> dict[str, Any]:
    """What must be the same on every stage besides the layers, by the name an operator
    sets it with: the scheduler's limits and block size (each stage pads a step with its
    own bucketing), dtype, quantization, the model's configuration, the timeouts the
    stages wait on each other with, the world-check choice and every bucketing variable
    set on this node."""
    from vllm import envs as vllm_envs

    # read as stage_layers reads the config: a setting a configuration lacks is None
    model = getattr(vllm_config, "model_config", None)
    scheduler = getattr(vllm_config, "scheduler_config", None)
    cache = getattr(vllm_config, "cache_config", None)
    hf_config = getattr(model, "hf_config", None)
    settings: dict[str, Any] = {
        "--max-num-seqs": getattr(scheduler, "max_num_seqs", None),
        "--max-num-batched-tokens": getattr(scheduler, "max_num_batched_tokens", None),
        "--max-model-len": getattr(model, "max_model_len", None),
        "--block-size": getattr(cache, "block_size", None),
        "--dtype": str(getattr(model, "dtype", None)),
        "--quantization": getattr(model, "quantization", None),
        "model config.json": None
        if hf_config is None
        else hashlib.sha256(hf_config.to_json_string().encode()).hexdigest()[:16],
        "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": (
            vllm_envs.VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS
        ),
        "VLLM_HPU_PP_TIMEOUT_S": envs.VLLM_HPU_PP_TIMEOUT_S,
        "VLLM_PP_TRANSFER_TIMEOUT_S": envs.VLLM_PP_TRANSFER_TIMEOUT_S,
        "VLLM_HPU_PP_HCCL_WORLD_CHECK": envs.VLLM_HPU_PP_HCCL_WORLD_CHECK,
        # the stages' batches keep one row order only when all choose them alike
        "VLLM_PP_BATCH_PER_MICROBATCH": envs.VLLM_PP_BATCH_PER_MICROBATCH,
    }
    for name, value in sorted(os.environ.items()):
        if _BUCKETING.fullmatch(name):
            settings[name] = value
    return settings


def warmed_up_settings(manager: Any, vllm_config: Any) -> dict[str, Any]:
    """What must be the same on every stage once warm-up is done: the final prompt and
    decode bucket lists of the runner's bucketing ``manager`` (count and digest),
    vllm-gaudi's user settings as its runtime configuration read them, the bucket
    file's contents and the checkpoint's identity."""
    settings: dict[str, Any] = {}
    for name in ("prompt buckets", "decode buckets"):
        listed = getattr(manager, name.replace(" ", "_"), None) or []
        buckets = [list(b) for b in listed]
        digest = hashlib.sha256(json.dumps(buckets).encode()).hexdigest()[:16]
        settings[name] = f"{len(buckets)} buckets, digest {digest}"
    settings.update(_gaudi_settings())
    bucket_file = os.environ.get("VLLM_BUCKETING_FROM_FILE")
    if bucket_file:
        try:
            data = Path(bucket_file).read_bytes()
            contents = hashlib.sha256(data).hexdigest()[:16]
        except OSError as e:
            contents = f"unreadable ({e.strerror})"
        settings["VLLM_BUCKETING_FROM_FILE contents"] = contents
    model = getattr(vllm_config, "model_config", None)
    settings[WEIGHTS] = checkpoint_identity(model) if model is not None else None
    return settings


def _gaudi_settings() -> dict[str, Any]:
    """vllm-gaudi's user settings (bucketing, sliding window, FusedSDPA slicing, ...)
    by their variable names, as its runtime configuration holds them; none without
    vllm-gaudi."""
    try:
        from vllm_gaudi.extension import runtime
    except ImportError:
        return {}
    config = runtime.get_config()  # made once per process; it lists the user flags
    names = list(getattr(runtime, "USER_FLAGS", None) or ())
    values = config.get_all(names) if names else {}
    return {name: values.get(name) for name in names}


def stage_layers(vllm_config: Any, rank: int, size: int) -> tuple[int, int, int] | None:
    """``(start, end, num_layers)`` of pipeline stage ``rank``'s decoder layers, as the
    model classes split them (``get_pp_indices``, which reads
    ``VLLM_PP_LAYER_PARTITION``); None when the configuration names no layer count."""
    model_config = getattr(vllm_config, "model_config", None)
    text_config = getattr(model_config, "hf_text_config", None)
    num_layers = getattr(text_config, "num_hidden_layers", None)
    if not isinstance(num_layers, int):
        return None
    from vllm.distributed.utils import get_pp_indices

    start, end = get_pp_indices(num_layers, rank, size)
    return start, end, num_layers


def handshake(
    pp_group: Any,
    tp_size: int,
    layers: tuple[int, int, int] | None,
    timeout_s: float,
    settings: dict[str, Any] | None = None,
    phase: str = "start-up",
    failure: str | None = None,
) -> None:
    """Exchange this stage's facts and ``settings`` (:func:`start_up_settings`,
    :func:`warmed_up_settings`) with the neighbour stages over ``pp_group`` (a vLLM
    ``GroupCoordinator`` or a torch group) and refuse what does not match; once per
    group and ``phase``. ``failure``: this stage's phase failed for that reason; the
    neighbours are told, without waiting for them, and stop with it."""
    group = as_group(pp_group)
    if group.world_size == 1 or (id(group.cpu_group), phase) in _DONE:
        return
    if failure is not None:
        settings = {FAILED: failure}
    start, end, num_layers = layers if layers is not None else (-1, -1, -1)
    mine = dict(
        magic=MAGIC,
        version=VERSION,
        build=build_id(),
        stage=group.rank_in_group,
        stages=group.world_size,
        tp_size=tp_size,
        start=start,
        end=end,
        num_layers=num_layers,
        max_message_bytes=envs.VLLM_HPU_PP_MAX_MESSAGE_BYTES,
    )
    out = np.zeros(_WORDS, dtype=np.int64)
    out[: len(_FIELDS)] = [mine[f] for f in _FIELDS]
    encoded = json.dumps(settings or {}, sort_keys=True, default=str).encode()
    if len(encoded) > _SETTINGS_BYTES:
        raise PipelineHandshakeError(
            f"pipeline {phase}: {len(encoded)} bytes of settings do not fit the "
            f"handshake's {_SETTINGS_BYTES}"
        )
    tag = _TAGS[phase]
    blob = torch.zeros(_SETTINGS_BYTES, dtype=torch.uint8)
    blob[: len(encoded)] = torch.frombuffer(bytearray(encoded), dtype=torch.uint8)
    peers = sorted({group.next_in_group, group.prev_in_group})
    timeout = timedelta(seconds=timeout_s)
    sends = [
        dist.isend(message, group=group.cpu_group, group_dst=peer, tag=each)
        for peer in peers
        for message, each in (
            (torch.from_numpy(out).view(torch.uint8), tag),
            (blob, tag + 1),
        )
    ]
    if failure is not None:
        _FAILURE_SENDS.extend(sends)
        return
    theirs: dict[int, dict[str, int]] = {}
    their_settings: dict[int, bytes] = {}
    failed = None
    try:
        for peer in peers:
            got = torch.zeros(_WORDS, dtype=torch.int64)
            got_blob = torch.zeros(_SETTINGS_BYTES, dtype=torch.uint8)
            for buffer, each in ((got.view(torch.uint8), tag), (got_blob, tag + 1)):
                dist.irecv(
                    buffer, group=group.cpu_group, group_src=peer, tag=each
                ).wait(timeout)
            # the fields are the first of the message's words
            theirs[peer] = dict(zip(_FIELDS, got.tolist(), strict=False))
            their_settings[peer] = got_blob.numpy().tobytes().rstrip(b"\0")
            failed = _failure(
                phase, theirs[peer], their_settings[peer], group.ranks[peer]
            )
            if failed is not None:
                break
        # before anything is refused: a send dropped unfinished may never arrive
        for work in sends if failed is None else ():
            work.wait(timeout)
    except RuntimeError as e:
        missing = [p for p in peers if p not in theirs] or peers
        raise PipelineHandshakeError(
            f"pipeline {phase}: no handshake with stage {missing[0]} (rank "
            f"{group.ranks[missing[0]]}) within {timeout_s:g} s: {e}"
        ) from e
    if failed is not None:
        _FAILURE_SENDS.extend(sends)  # the failed stage never receives them
        raise failed
    for peer, facts in theirs.items():
        _check(phase, mine, facts, group.ranks[peer])
        _check_settings(
            phase,
            mine["stage"],
            settings or {},
            facts,
            their_settings[peer],
            group.ranks[peer],
        )
    _DONE.add((id(group.cpu_group), phase))
    logger.info(
        "pipeline stage %d of %d: %s handshake with stages %s passed (wire version "
        "%d, layers %d-%d of %d)",
        group.rank_in_group,
        group.world_size,
        phase,
        peers,
        VERSION,
        start,
        end - 1,
        num_layers,
    )


def _failure(
    phase: str, facts: dict[str, int], blob: bytes, rank: int
) -> PipelineHandshakeError | None:
    """The error to stop with when the neighbour says its phase failed."""
    if b'"' + FAILED.encode() + b'"' not in blob:
        return None
    try:
        reason = json.loads(blob)[FAILED]
    except (ValueError, KeyError, TypeError):
        return None
    return PipelineHandshakeError(
        f"pipeline {phase}: stage {facts['stage']} (rank {rank}) failed its {phase}: "
        f"{reason}"
    )


def _check(
    phase: str, mine: dict[str, int], theirs: dict[str, int], rank: int
) -> None:
    stage = theirs["stage"]

    def refuse(what: str, fix: str) -> None:
        raise PipelineHandshakeError(
            f"pipeline {phase}: stage {mine['stage']} and stage {stage} (rank {rank}) "
            f"differ: {what}; {fix}"
        )

    if theirs["magic"] != MAGIC or theirs["version"] != VERSION:
        refuse(
            f"wire version {VERSION} here, {theirs['version']} there",
            "apply the same build of the fix on every node",
        )
    if theirs["build"] != mine["build"]:
        refuse(
            f"build {mine['build']:x} here, {theirs['build']:x} there (the snippet "
            "package or a file patchspec patched)",
            "apply the same specs with the same patchspec on every node "
            "(patchspec status on each lists what is applied)",
        )
    for name, variable in (
        ("stages", "--pipeline-parallel-size"),
        ("tp_size", "--tensor-parallel-size"),
        ("max_message_bytes", "VLLM_HPU_PP_MAX_MESSAGE_BYTES"),
        ("num_layers", "model"),
    ):
        if theirs[name] != mine[name]:
            refuse(
                f"{name} {mine[name]} here, {theirs[name]} there",
                f"give every node the same {variable}",
            )
    if mine["start"] < 0 or theirs["start"] < 0:
        return  # no layer count configured on either side (checked equal above)
    before, after = (theirs, mine) if stage == mine["stage"] - 1 else (mine, theirs)
    if after["stage"] == before["stage"] + 1 and before["end"] != after["start"]:
        refuse(
            f"stage {before['stage']} runs layers {before['start']}-"
            f"{before['end'] - 1}, stage {after['stage']} starts at layer "
            f"{after['start']}",
            "set the same VLLM_PP_LAYER_PARTITION on every node",
        )


def _check_settings(
    phase: str,
    stage: int,
    mine: dict[str, Any],
    facts: dict[str, int],
    blob: bytes,
    rank: int,
) -> None:
    """After :func:`_check` (same build, so the same encoding): the first setting that
    differs, unset on one side included (variables sort before the settings that
    follow from them, so the cause is named first); the checkpoints on what both
    hold."""
    try:
        theirs = json.loads(blob or b"{}")
    except ValueError as e:
        raise PipelineHandshakeError(
            f"pipeline {phase}: stage {facts['stage']} (rank {rank}) sent unreadable "
            f"settings: {e}"
        ) from e
    mine = json.loads(json.dumps(mine, sort_keys=True, default=str))
    for name in sorted(mine.keys() | theirs.keys()):
        here, there = mine.get(name, "unset"), theirs.get(name, "unset")
        if name == WEIGHTS:
            found = first_difference(here, there)
            if found is None:
                continue
            what, here, there = found
            name = f"{WEIGHTS} ({what})"
        if here != there:
            fix = _FIXES.get(name.split(" (")[0], name)
            raise PipelineHandshakeError(
                f"pipeline {phase}: stage {stage} and stage {facts['stage']} (rank "
                f"{rank}) differ: {name} {here} here, {there} there; give every node "
                f"the same {fix}"
            )


def handshake_at_start_up(fn):
    """For ``wrap`` on ``init_worker_distributed_environment(vllm_config, rank,
    distributed_init_method, ...)`` (vLLM's worker and vllm-gaudi's, whose modules
    import ``get_pp_group``): at pipeline size > 1, check this node's layer partition
    before the rendezvous, and once the groups exist shake hands with the neighbour
    stages; a refusal anywhere in it reaches every rank (``rendezvous.py``)."""

    @functools.wraps(fn)
    def init_worker_distributed_environment(
        vllm_config: VllmConfig,
        rank: int,
        distributed_init_method: str | None = None,
        *args,
        **kwargs,
    ):
        parallel_config = vllm_config.parallel_config
        stages = parallel_config.pipeline_parallel_size
        if stages == 1:
            return fn(vllm_config, rank, distributed_init_method, *args, **kwargs)
        timeout_s = envs.VLLM_HPU_PP_TIMEOUT_S
        with refusals_shared(
            distributed_init_method,
            rank,
            parallel_config.world_size,
            envs.VLLM_PP_START_UP_TIMEOUT_S,
            {"VLLM_HPU_PP_HCCL_WORLD_CHECK": envs.VLLM_HPU_PP_HCCL_WORLD_CHECK},
        ):
            # VLLM_PP_LAYER_PARTITION as the model classes read it (a bad one raises)
            stage_layers(vllm_config, 0, stages)
            result = fn(vllm_config, rank, distributed_init_method, *args, **kwargs)
            # the wrapped module's own accessor (both modules import vLLM's)
            pp = fn.__globals__["get_pp_group"]()
            handshake(
                pp,
                parallel_config.tensor_parallel_size,
                stage_layers(vllm_config, pp.rank_in_group, pp.world_size),
                timeout_s,
                start_up_settings(vllm_config),
            )
        if rank % parallel_config.tensor_parallel_size == 0:
            # the HPU runner is ready after its warm-up handshake (runner.py)
            device = vllm_config.device_config
            kind = getattr(device, "device_type", getattr(device, "device", ""))
            on_hpu = kind == "hpu"
            serve_stage(pp.rank_in_group, pp.world_size, ready=not on_hpu)
        return result

    return init_worker_distributed_environment
