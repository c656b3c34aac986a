# SPDX-License-Identifier: Apache-2.0
"""IntermediateTensors through the HPU-graph-wrapped model adapter.

The graph wrapper hashes its arguments and only understands plain containers of tensors,
so the runner passes the previous stage's tensors as a dict and the adapter rebuilds the
IntermediateTensors inside; a non-last stage's outputs are cloned inside the captured
graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm.sequence import IntermediateTensors

__all__ = ["intermediate_tensors_iter", "stage_output", "take_intermediate_tensors"]

USES = {
    "vllm/sequence.py": ["IntermediateTensors(tensors)", "IntermediateTensors.tensors"],
}


def intermediate_tensors_iter(self: IntermediateTensors) -> Iterator[str]:
    """``IntermediateTensors.__iter__``, over its keys like a dict. Without it Python
    falls back to ``__getitem__(0)``, ``(1)``, ... which return None forever, and
    Habana's post-forward module hook, which iterates a module's outputs, never ends on
    a non-last stage."""
    return iter(self.tensors)


def take_intermediate_tensors(kwargs: dict[str, Any]) -> None:
    """Inside the adapter: the dict the runner passed (one leading dimension of tokens)
    becomes IntermediateTensors laid out like the model's input ids (flattened or not);
    without one (first stage, pipeline size 1) the keyword is dropped, so the model is
    called with exactly its original arguments."""
    tensors = kwargs.pop("intermediate_tensors", None)
    if tensors is None:
        return
    from vllm.sequence import IntermediateTensors

    shape = kwargs["input_ids"].shape
    kwargs["intermediate_tensors"] = IntermediateTensors(
        {key: value.view(*shape, *value.shape[1:]) for key, value in tensors.items()}
    )


def stage_output(hidden_states: Any) -> Any:
    """A non-last stage's outputs, cloned inside the captured graph: with tensor
    parallelism they come from in-place collectives whose buffers a replayed graph frees
    when its tensor cache is disabled. Anything else (a tensor, a tuple) passes
    untouched, without an import a compiled forward would trace."""
    tensors = getattr(hidden_states, "tensors", None)
    if tensors is None:
        return hidden_states
    return type(hidden_states)({key: value.clone() for key, value in tensors.items()})
