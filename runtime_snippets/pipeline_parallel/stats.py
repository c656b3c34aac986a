"""Transfer counters, logged every ``VLLM_HPU_PP_STATS_EVERY`` messages by tensor-parallel rank 0."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, fields


@dataclass
class TransferStats:
    messages: int = 0
    bytes: int = 0
    split_messages: int = 0
    send_s: float = 0.0
    recv_s: float = 0.0
    gather_s: float = 0.0

    @contextmanager
    def timing(self, field: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, field, getattr(self, field) + time.perf_counter() - start)

    def count(self, nbytes: int, split: bool) -> None:
        self.messages += 1
        self.bytes += nbytes
        self.split_messages += split

    def __str__(self) -> str:
        return " ".join(f"{f.name}={getattr(self, f.name):.6g}" if isinstance(getattr(self, f.name), float)
                        else f"{f.name}={getattr(self, f.name)}" for f in fields(self))
