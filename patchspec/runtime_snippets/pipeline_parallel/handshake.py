# SPDX-License-Identifier: Apache-2.0
"""The stages' handshake at start-up: same build of the transfer, layers that meet.

Each node reads its own ``VLLM_PP_LAYER_PARTITION`` and runs its own copy of the fix, so
two nodes configured differently would run layers twice or skip them, or decode each
other's messages by different rules, with matching token counts and no error. Right
after the model-parallel groups exist (``init_worker_distributed_environment``, wrapped
with :func:`handshake_at_start_up`), every pipeline rank sends its neighbour stages one
small message and checks theirs: the wire version, a digest of this package's sources
(the build), the pipeline and tensor-parallel sizes, the message size limit, the number
of layers and the stage's layer range, which must start where the previous stage's
ends. Any difference refuses to start with :class:`PipelineHandshakeError` naming both
sides. The messages use a tag of their own, outside the transfer's sequence.
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
from .rendezvous import refusals_shared
from .wire import MAGIC, VERSION

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = [
    "build_id",
    "handshake",
    "handshake_at_start_up",
    "stage_layers",
    "start_up_settings",
]

logger = get_logger(__name__)

# What the start-up wrapper uses of the modules it wraps (see runner.py).
USES = {
    "vllm_gaudi/v1/worker/hpu_worker.py": ["get_pp_group()"],
    "vllm/v1/worker/gpu_worker.py": ["get_pp_group()"],
}

HANDSHAKE_TAG = 0x5052
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
_SETTINGS_BYTES = 8192
# vllm-gaudi's bucketing variables: VLLM_{PROMPT,DECODE}_{BS,SEQ,BLOCK,CTX}_BUCKET_*,
# the bucket file, contiguous PA and merged prefill
_BUCKETING = re.compile(
    r"VLLM_\w+_BUCKET_\w+|VLLM_BUCKETING_\w+|VLLM_CONTIGUOUS_PA|VLLM_MERGED_PREFILL"
    r"|VLLM_EXPONENTIAL_BUCKETING"
)
_DONE: set[int] = set()  # id of each pipeline cpu group already checked


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
    }
    for name, value in sorted(os.environ.items()):
        if _BUCKETING.fullmatch(name):
            settings[name] = value
    return settings


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
) -> None:
    """Exchange this stage's facts and ``settings`` (:func:`start_up_settings`) with the
    neighbour stages over ``pp_group`` (a vLLM ``GroupCoordinator`` or a torch group)
    and refuse what does not match; once per group."""
    group = as_group(pp_group)
    if group.world_size == 1 or id(group.cpu_group) in _DONE:
        return
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
            f"pipeline start-up: {len(encoded)} bytes of settings do not fit the "
            f"handshake's {_SETTINGS_BYTES}"
        )
    blob = torch.zeros(_SETTINGS_BYTES, dtype=torch.uint8)
    blob[: len(encoded)] = torch.frombuffer(bytearray(encoded), dtype=torch.uint8)
    peers = sorted({group.next_in_group, group.prev_in_group})
    timeout = timedelta(seconds=timeout_s)
    sends = [
        dist.isend(message, group=group.cpu_group, group_dst=peer, tag=tag)
        for peer in peers
        for message, tag in (
            (torch.from_numpy(out).view(torch.uint8), HANDSHAKE_TAG),
            (blob, HANDSHAKE_TAG + 1),
        )
    ]
    theirs = {}
    their_settings = {}
    try:
        for peer in peers:
            got = torch.zeros(_WORDS, dtype=torch.int64)
            got_blob = torch.zeros(_SETTINGS_BYTES, dtype=torch.uint8)
            for buffer, tag in (
                (got.view(torch.uint8), HANDSHAKE_TAG),
                (got_blob, HANDSHAKE_TAG + 1),
            ):
                dist.irecv(buffer, group=group.cpu_group, group_src=peer, tag=tag).wait(
                    timeout
                )
            theirs[peer] = dict(zip(_FIELDS, got.tolist()))
            their_settings[peer] = got_blob.numpy().tobytes().rstrip(b"\0")
        # before anything is refused: a send dropped unfinished may never arrive
        for work in sends:
            work.wait(timeout)
    except RuntimeError as e:
        missing = [p for p in peers if p not in theirs] or peers
        raise PipelineHandshakeError(
            f"pipeline start-up: no handshake with stage {missing[0]} (rank "
            f"{group.ranks[missing[0]]}) within {timeout_s:g} s: {e}"
        ) from e
    for peer, facts in theirs.items():
        _check(mine, facts, group.ranks[peer])
        _check_settings(
            mine["stage"],
            settings or {},
            facts,
            their_settings[peer],
            group.ranks[peer],
        )
    _DONE.add(id(group.cpu_group))
    logger.info(
        "pipeline stage %d of %d: handshake with stages %s passed (wire version %d, "
        "layers %d-%d of %d)",
        group.rank_in_group,
        group.world_size,
        peers,
        VERSION,
        start,
        end - 1,
        num_layers,
    )


def _check(mine: dict[str, int], theirs: dict[str, int], rank: int) -> None:
    stage = theirs["stage"]

    def refuse(what: str, fix: str) -> None:
        raise PipelineHandshakeError(
            f"pipeline start-up: stage {mine['stage']} and stage {stage} (rank {rank}) "
            f"differ: {what}; {fix}"
        )

    if theirs["magic"] != MAGIC or theirs["version"] != VERSION:
        refuse(
            f"wire version {VERSION} here, {theirs['version']} there",
            "apply the same build of the fix on every node",
        )
    if theirs["build"] != mine["build"]:
        refuse(
            f"build {mine['build']:x} here, {theirs['build']:x} there",
            "apply the same build of the fix on every node",
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
    stage: int, mine: dict[str, Any], facts: dict[str, int], blob: bytes, rank: int
) -> None:
    """After :func:`_check` (same build, so the same encoding): the first setting that
    differs, unset on one side included."""
    try:
        theirs = json.loads(blob or b"{}")
    except ValueError as e:
        raise PipelineHandshakeError(
            f"pipeline start-up: stage {facts['stage']} (rank {rank}) sent unreadable "
            f"settings: {e}"
        ) from e
    mine = json.loads(json.dumps(mine, sort_keys=True, default=str))
    for name in sorted(mine.keys() | theirs.keys()):
        here, there = mine.get(name, "unset"), theirs.get(name, "unset")
        if here != there:
            raise PipelineHandshakeError(
                f"pipeline start-up: stage {stage} and stage {facts['stage']} (rank "
                f"{rank}) differ: {name} {here} here, {there} there; give every node "
                f"the same {name}"
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
        return result

    return init_worker_distributed_environment
