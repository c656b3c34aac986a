# SPDX-License-Identifier: Apache-2.0
"""One view of a process group, whether vLLM's ``GroupCoordinator`` (production) or a
torch one (tests).

The transfer needs a group's gloo (CPU) group for stage-to-stage messages, its device
group for the tensor-parallel all-gather (HCCL on Gaudi; the same gloo group on CPU),
and the caller's place in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

__all__ = ["GroupView", "as_group"]


@dataclass(frozen=True)
class GroupView:
    cpu_group: dist.ProcessGroup
    device_group: dist.ProcessGroup
    ranks: tuple[int, ...]  # global ranks, for messages
    rank_in_group: int

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def next_in_group(self) -> int:
        return (self.rank_in_group + 1) % self.world_size

    @property
    def prev_in_group(self) -> int:
        return (self.rank_in_group - 1) % self.world_size


def as_group(group: Any) -> GroupView:
    """Adapt a vLLM ``GroupCoordinator`` (it has ``cpu_group``) or a
    ``torch.distributed`` group."""
    if hasattr(group, "cpu_group"):
        return GroupView(
            group.cpu_group, group.device_group, tuple(group.ranks), group.rank_in_group
        )
    return GroupView(
        group, group, tuple(dist.get_process_group_ranks(group)), dist.get_rank(group)
    )
