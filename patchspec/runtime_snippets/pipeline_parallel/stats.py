# SPDX-License-Identifier: Apache-2.0
"""Transfer counters, logged every ``VLLM_HPU_PP_STATS_EVERY`` messages by
tensor-parallel rank 0."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["TransferStats"]


@dataclass
class TransferStats:
    messages: int = 0
    bytes: int = 0
    split_messages: int = 0
    send_s: float = 0.0  # in isend and in waiting for sends
    recv_s: float = 0.0  # in recv, all-gathers included
    gather_s: float = 0.0  # waiting for all-gathers, after the last round arrived
    # bytes copied into received tensors after they arrived: a whole payload's one copy
    # out of the host buffer; of a split payload, which is all-gathered in place, only
    # the uneven last round of a tensor
    recv_copied_bytes: int = 0

    def count(self, nbytes: int, split: bool) -> None:
        self.messages += 1
        self.bytes += nbytes
        self.split_messages += split

    def __str__(self) -> str:
        return " ".join(
            f"{f.name}={getattr(self, f.name):.6g}"
            if isinstance(getattr(self, f.name), float)
            else f"{f.name}={getattr(self, f.name)}"
            for f in fields(self)
        )
