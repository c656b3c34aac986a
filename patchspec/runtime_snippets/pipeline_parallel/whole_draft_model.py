# SPDX-License-Identifier: Apache-2.0
"""A draft model (``speculative_config`` method ``draft_model``) is a whole model on
the last pipeline stage.

vLLM builds the draft model with the target's model classes, and those ask the pipeline
group which layers this stage holds and whether it is the first or the last stage
(``make_layers``, ``LlamaModel.forward``). At pipeline size 2 the last stage then built
the second half of the draft's layers, with no embedding, and its first draft forward
failed an assertion waiting for intermediate tensors that never come. The draft runs on
the last stage alone, so while the proposer builds and runs it, the pipeline group it
reads is a one-stage view of the real one (``one_stage``): the whole draft model, its
own embedding and head, no stage-to-stage traffic. Its weights are read whole as well:
the loader reads every tensor when a draft model is configured (``loader.py``).
Inert at pipeline size 1 and for drafters that are not a draft model (EAGLE and MTP
heads take the last stage's hidden states and hold no pipeline split of their own).
Hooks import vLLM lazily: they are imported while vLLM's own modules are.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["whole_draft_model"]

USES = {
    "vllm/distributed/parallel_state.py": [
        "_PP",
        "GroupCoordinator.world_size",
        "GroupCoordinator.rank",
    ],
    "vllm/v1/spec_decode/llm_base_proposer.py": [
        "SpecDecodeBaseProposer.speculative_config",
        "SpecDecodeBaseProposer.vllm_config",
    ],
    "vllm/config/speculative.py": ["SpeculativeConfig.uses_draft_model()"],
}


class _OneStage:
    """The pipeline group as a model built and run on one stage alone sees it."""

    world_size = 1
    rank_in_group = 0
    is_first_rank = True
    is_last_rank = True

    def __init__(self, group: Any) -> None:
        self._group = group
        self.ranks = [group.rank]
        self.first_rank = self.last_rank = group.rank

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group, name)


@contextlib.contextmanager
def one_stage() -> Iterator[None]:
    """Within: ``get_pp_group()`` is a one-stage view of the pipeline group."""
    from vllm.distributed import parallel_state

    group = parallel_state._PP
    parallel_state._PP = _OneStage(group)
    try:
        yield
    finally:
        parallel_state._PP = group


def whole_draft_model(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For ``wrap`` on the proposer's methods that build or run its model: a draft
    model at pipeline size > 1 is built and run as one stage."""

    @functools.wraps(fn)
    def run(proposer: Any, *args: Any, **kwargs: Any) -> Any:
        if (
            proposer.vllm_config.parallel_config.pipeline_parallel_size == 1
            or not proposer.speculative_config.uses_draft_model()
        ):
            return fn(proposer, *args, **kwargs)
        with one_stage():
            return fn(proposer, *args, **kwargs)

    return run
