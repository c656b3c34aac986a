# SPDX-License-Identifier: Apache-2.0
"""The corpus specs' hooks: counters the patched packages call, read back by ``reach.py`` in the same process.

``hit(key)`` is what an insert calls, ``counted`` is what a wrap decorates with (it counts under the wrapped
function's file and qualified name, which the driver knows from its own survey), ``dflt(key, value)`` is a
parameter's new default (the old value, counted when the ``def`` runs), ``ps_corpus_added`` the added method.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

HITS: dict[str, int] = {}


def hit(key: str) -> None:
    HITS[key] = HITS.get(key, 0) + 1


def wrap_key(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    return f"wrap:{getattr(code, 'co_filename', '?')}:{getattr(fn, '__qualname__', '?')}"


def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
    key = wrap_key(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        hit(key)
        return fn(*args, **kwargs)

    wrapper.__corpus_wrap__ = key  # type: ignore[attr-defined]
    return wrapper


def dflt(key: str, value: Any) -> Any:
    hit(key)
    return value


def added(self: Any) -> str:
    return "ps_corpus_added"
