"""The cyclic garbage collector held off while the compiler builds trees.

Resolving and emitting allocate hundreds of thousands of small objects (libcst and ``ast`` nodes) that
live until the verb ends and hold no reference cycles; each of the collector's full passes walks all of
them again, about a fifth of an apply. Memory is freed by reference counting as before; cycles wait
until the compiler returns, when the collector runs as usual.
"""
from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def paused(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with the cyclic collector off while it runs (left as it was when it is off already)."""
    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()
    return run
